"""Evidence-only inputs (standard library, system libraries, --with) and the probe entry point."""

from __future__ import annotations

import os

import pytest
from conftest import make_tree, make_wheel

from cuaudit.config import Config
from cuaudit.engine import audit
from cuaudit.model import ProbeRecord

#: `import xml` does not bind xml.dom: the model reads the standard library to know it
TRAP = {"pkg/__init__.py": "import xml\n", "pkg/use.py": "import xml\nxml.dom.minidom.parseString('<a/>')\n"}


def test_the_standard_library_is_evidence_read_on_demand_and_cached(tmp_path):
    tree = make_tree(tmp_path / "t", TRAP)
    config = Config(select=("CU1",), cache=True, cache_dir=str(tmp_path / "cache"), jobs=1)
    cold = audit([str(tree)], config=config)
    assert cold.stats["evidence_facts_extracted"] > 0 and cold.stats["evidence_facts_cached"] == 0
    # read on demand: a few modules of the ~2 000 files of the standard library
    assert cold.stats["evidence_facts_extracted"] < 200
    warm = audit([str(tree)], config=config)
    assert warm.stats["evidence_facts_extracted"] == 0
    assert warm.stats["evidence_facts_cached"] == cold.stats["evidence_facts_extracted"]
    assert [(f.code, f.message) for f in warm.findings] == [(f.code, f.message) for f in cold.findings]
    # listed apart, never as audited, and no finding is on it
    assert [r.name for r in cold.evidence] == ["stdlib"]
    assert [r.path for r in cold.artifacts] == [str(tree)]
    assert all(f.location.artifact.path == str(tree) for f in cold.findings)


def test_the_standard_library_stays_cached_without_the_fact_cache_until_the_interpreter_changes(tmp_path, monkeypatch):
    """--no-cache re-reads the audited input, not the machine's standard library."""
    from cuaudit import extraction

    tree = make_tree(tmp_path / "t", TRAP)
    monkeypatch.setenv("CUAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    config = Config(select=("CU1",), cache=False, jobs=1)
    cold = audit([str(tree)], config=config)
    assert cold.stats["evidence_facts_extracted"] > 0 and cold.stats["evidence_facts_cached"] == 0
    again = audit([str(tree)], config=config)
    assert again.stats["evidence_facts_extracted"] == 0
    assert again.stats["evidence_facts_cached"] == cold.stats["evidence_facts_extracted"]
    assert again.stats["facts_cached"] == 0 and again.stats["facts_extracted"] == cold.stats["facts_extracted"]
    assert [(f.code, f.message) for f in again.findings] == [(f.code, f.message) for f in cold.findings]
    # another interpreter parses the standard library again
    monkeypatch.setattr(extraction, "_running_interpreter", lambda: ("3.99.0 (other)", "/elsewhere/python"))
    other = audit([str(tree)], config=config)
    assert other.stats["evidence_facts_cached"] == 0
    assert other.stats["evidence_facts_extracted"] == cold.stats["evidence_facts_extracted"]


def test_with_wheels_are_evidence_not_audited(tmp_path):
    audited = make_wheel(tmp_path, "app", "1.0", {"app/__init__.py": "def (:\n"})
    (tmp_path / "w").mkdir()
    extra = make_wheel(tmp_path / "w", "extra", "1.0", {"extra/__init__.py": "def (:\n"})
    report = audit([str(audited)], config=Config(cache=False, jobs=1, options={"linkage": {"with": [str(extra)]}}))
    assert [r.path for r in report.artifacts] == [str(audited)]
    # the broken module of the audited wheel is reported; the --with wheel's is not
    assert {f.location.artifact.path for f in report.findings} == {str(audited)}
    assert any(f.code == "CU006" for f in report.findings)


def test_system_libraries_are_read_as_evidence_facts():
    """The loader model opens no file: ld.so.cache and the libraries found come as facts of the system evidence."""
    from cuaudit.analysis.loader import Resolver
    from cuaudit.facts.evidence import Evidence, extract_uncached
    from cuaudit.inputs.evidence import SystemFiles

    if not os.path.isfile("/etc/ld.so.cache"):
        pytest.skip("this machine has no /etc/ld.so.cache")
    asked: list[tuple[str, str]] = []

    def provider(artifact, member, extractor):
        asked.append((member.path, extractor))
        return extract_uncached(artifact, member, extractor)

    resolver = Resolver([], lambda a, m: None, environ={}, system=Evidence(SystemFiles(), provider))
    sonames = resolver.system_sonames()
    assert asked == [("/etc/ld.so.cache", "ld_so_cache")]
    if "libc.so.6" not in sonames:
        pytest.skip("no libc.so.6 in ld.so.cache")
    where = sonames["libc.so.6"][0]
    facts = resolver.facts_of(type("R", (), {"found": True, "key": None, "fs_path": where})())
    assert facts is not None and "malloc" in facts.exports
    assert asked[-1] == (where, "elf")


def test_probes_are_off_unless_asked_and_recorded_when_run(tmp_path):
    from cuaudit.context import RuleContext
    from cuaudit.probe import Prober

    records: list[ProbeRecord] = []
    off = RuleContext(Config(), [], {}, None, records, probe=Prober(Config(), records))
    assert off.probe("gpu") is None and records == []
    on_config = Config(probe=True, probe_timeout=30)
    on = RuleContext(on_config, [], {}, None, records, probe=Prober(on_config, records))
    result = on.probe("gpu")
    assert isinstance(result, list)
    assert [r.what for r in records] == ["local GPU compute capability (CU6xx targets)"]


#: a tree whose code walks attribute chains from many standard-library modules: CU104 reads the
#: closures of each, some two hundred modules of the standard library
MANY_STDLIB = {
    "pkg/__init__.py": "",
    "pkg/use.py": (
        "import json, argparse, logging, subprocess, tempfile, shutil, email, http, xml, urllib, concurrent\n"
        "def f():\n"
        "    xml.dom.minidom.parseString('<a/>')\n"
        "    concurrent.futures.ThreadPoolExecutor\n"
        "    email.message.Message\n"
        "    http.client.HTTPConnection\n"
        "    urllib.request.urlopen\n"
        "    logging.handlers.RotatingFileHandler\n"
        "    json.decoder.JSONDecoder\n"
        "    return argparse, subprocess, tempfile, shutil\n"
    ),
}


def test_standard_library_closures_are_extracted_by_the_workers_with_the_same_findings(tmp_path, monkeypatch):
    """The standard-library modules an import closure reads are parsed in the worker pool, a level
    at a time (``ModuleUniverse.prefetch_stdlib``), not one by one in the parent; nothing else changes."""
    from cuaudit.extraction import Extraction

    tree = make_tree(tmp_path / "t", MANY_STDLIB)
    parent, on_demand = os.getpid(), Extraction.on_demand
    in_parent: list[str] = []

    def counting(self, artifact, member, name):
        before = self.evidence_extracted
        try:
            return on_demand(self, artifact, member, name)
        finally:
            if self.evidence_extracted > before and os.getpid() == parent:  # extracted there and then
                in_parent.append(member.path)

    monkeypatch.setattr(Extraction, "on_demand", counting)
    reports = {}
    for jobs in (1, 2):
        in_parent.clear()
        config = Config(select=("CU1",), cache=True, cache_dir=str(tmp_path / f"cache{jobs}"), jobs=jobs)
        reports[jobs] = (audit([str(tree)], config=config), list(in_parent))
    (alone, alone_read), (pooled, pooled_read) = reports[1], reports[2]
    assert len(alone_read) > 40  # one by one in the parent: the closures of xml, http, email, ...
    assert len(pooled_read) <= len(alone_read) / 5  # a few reached otherwise (not through a closure)
    # the same findings (CU104 on the chains that no import binds), and every fact read is counted once
    assert {f.code for f in alone.findings} >= {"CU104"}
    assert [(f.code, f.message, f.location) for f in pooled.findings] == [(f.code, f.message, f.location) for f in alone.findings]
    assert pooled.stats["evidence_facts_cached"] == 0
    # the walk predicted what the closures read, and no more
    assert pooled.stats["evidence_facts_extracted"] == alone.stats["evidence_facts_extracted"]


def test_no_standard_library_walk_for_chains_that_stay_outside_it(tmp_path):
    """Files that import the standard library but never reach one of its submodules through an
    attribute chain need none of its closures: the walk extracts nothing of it ahead."""
    quiet = {"pkg/__init__.py": "", "pkg/use.py": MANY_STDLIB["pkg/use.py"].replace("    xml.dom.minidom", "    xml")
             .replace("concurrent.futures.", "concurrent.").replace("email.message.", "email.")
             .replace("http.client.", "http.").replace("urllib.request.", "urllib.")
             .replace("logging.handlers.", "logging.").replace("json.decoder.", "json.")}
    tree = make_tree(tmp_path / "t", quiet)
    counts = [audit([str(tree)], config=Config(select=("CU1",), cache=True, cache_dir=str(tmp_path / f"c{jobs}"), jobs=jobs))
              .stats["evidence_facts_extracted"] for jobs in (1, 2)]
    assert counts[0] == counts[1] < 10


def test_evidence_prefetched_is_what_on_demand_would_have_read(tmp_path):
    """``Extraction.prefetch_evidence`` puts into the input's bundle what ``on_demand`` would have
    extracted (values and lasting failures alike), counted once; with one job it sends nothing."""
    from cuaudit.extraction import Extraction
    from cuaudit.inputs.evidence import StdlibFolder

    folder = make_tree(tmp_path / "lib", {f"m{i}.py": f"import os\nX{i} = {i}\n" for i in range(12)})
    (folder / "bad.py").write_bytes(b"x = '\xff\xfe'\n")  # not UTF-8: a lasting failure (CU006), cached as one
    names = [f"m{i}.py" for i in range(12)] + ["bad.py"]

    def run(jobs: int, ahead: bool):
        ex = Extraction(Config(cache=False, cache_dir=str(tmp_path / f"c{jobs}{ahead}"), jobs=jobs), None, keep_workers=True)
        art = StdlibFolder(str(folder), "3.x")
        try:
            if ahead:
                ex.prefetch_evidence(art, [(art.member(n), "python_source") for n in names])
            sent = ex.evidence_extracted
            values = [ex.on_demand(art, art.member(n), "python_source") for n in names]
        finally:
            ex.stop_workers()
        return sent, values, (ex.evidence_extracted, ex.evidence_cached)

    sent, pooled, counts = run(2, True)
    assert sent == len(names) and counts == (len(names), 0)
    assert run(1, True)[0] == 0  # nothing to send it to: on_demand extracts as before
    _sent, alone, alone_counts = run(2, False)
    assert alone_counts == counts
    assert pooled == alone and pooled[-1] is None and pooled[0].bound_names() >= {"X0", "os"}


def test_the_standard_library_walk_asks_for_what_the_closure_reads():
    """``prefetch_stdlib`` predicts, level by level, the modules whose facts ``closure`` reads: the
    same set a universe without the walk reads for the same closures."""
    from cuaudit.analysis.module_tree import ModuleUniverse
    from cuaudit.facts.evidence import Evidence, extract_uncached
    from cuaudit.inputs.evidence import stdlib_folder

    roots = ["xml.dom.minidom", "json", "concurrent.futures"]

    def universe(prefetcher=None) -> tuple[ModuleUniverse, list[str]]:
        read: list[str] = []

        def provider(artifact, member, extractor):
            read.append(member.path)
            return extract_uncached(artifact, member, extractor)

        return ModuleUniverse(Evidence(stdlib_folder(), provider, prefetcher)), read

    asked: list[list[str]] = []
    walked, _ = universe(lambda art, wanted: asked.append([m.path for m, _ in wanted]))
    walked.prefetch_stdlib(roots)
    predicted = {p for level in asked for p in level}
    assert len(asked) >= 3 and {"xml/dom/minidom.py", "json/__init__.py", "xml/__init__.py"} <= predicted
    # what the closures read with no walk before them, in a universe of their own
    plain, read = universe()
    closure = frozenset().union(*(plain.closure([r]) for r in roots))
    assert {"xml.dom.minicompat", "json.decoder", "re", "concurrent.futures._base"} <= closure
    assert set(read) == predicted
    # and the walk's universe answers alike
    assert frozenset().union(*(walked.closure([r]) for r in roots)) == closure
