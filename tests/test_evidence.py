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
