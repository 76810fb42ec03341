"""The engine: fact cache, parallel extraction, crashes, suppressions, baselines, the library API."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from conftest import make_installed, make_tree, make_wheel
from marker_rules import CRASH, INFO, WARN, marker_rules, only_cu0  # noqa: F401 - fixture

import cuaudit
import cuaudit.inputs
from cuaudit import audit, engine, extraction, workers
from cuaudit import facts as facts_registry
from cuaudit import rules as rules_registry
from cuaudit.baseline import read_baseline, write_baseline
from cuaudit.config import Config, ConfigError
from cuaudit.store import FactStore, default_cache_dir


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Count the test extractor's calls (a file, so worker processes count too)."""
    path = tmp_path / "calls.log"
    monkeypatch.setenv("CUAUDIT_TEST_CALLS", str(path))

    def read() -> list[tuple[int, str]]:
        if not path.exists():
            return []
        return [(int(pid), member) for pid, member in (line.split(" ", 1) for line in path.read_text().splitlines())]

    read.reset = lambda: path.unlink(missing_ok=True)  # type: ignore[attr-defined]
    return read


#: facts per Python member in these tests: the marker's and the format check's (the
#: marker rules are CU0xx codes, so selecting them runs the format check too)
PER_MEMBER = 2


def summary(report) -> list[tuple]:
    return [(f.code, f.location.artifact.path, f.location.member, f.location.line, str(f.severity), f.message)
            for f in report.findings]


# -- the fact cache -------------------------------------------------------------------------------


def test_second_run_takes_facts_from_the_cache(tmp_path, marker_rules, calls):
    tree = make_tree(tmp_path / "t", {f"m{i}.py": f"x = {i}  # {WARN}\n" for i in range(5)})
    conf = only_cu0(cache_dir=str(tmp_path / "cache"), jobs=1)
    first = audit([str(tree)], config=conf)
    assert first.stats["facts_extracted"] == 5 * PER_MEMBER and first.stats["facts_cached"] == 0
    assert len(calls()) == 5
    assert (tmp_path / "cache" / "facts.sqlite3").exists()
    second = audit([str(tree)], config=conf)
    assert second.stats["facts_extracted"] == 0 and second.stats["facts_cached"] == 5 * PER_MEMBER
    assert len(calls()) == 5  # the extractor was not called again
    assert summary(second) == summary(first)


def test_cache_is_keyed_by_content_and_extractor_version(tmp_path, marker_rules, calls, monkeypatch):
    tree = make_tree(tmp_path / "t", {"a.py": f"# {WARN}\n", "b.py": "b = 1\n"})
    conf = only_cu0(cache_dir=str(tmp_path / "cache"), jobs=1)
    audit([str(tree)], config=conf)
    (tree / "b.py").write_text(f"b = 2  # {WARN}\n")  # new size: a new content key
    report = audit([str(tree)], config=conf)
    # b.py changed: both its facts are extracted again, a.py's come from the cache
    assert report.stats["facts_extracted"] == PER_MEMBER and report.stats["facts_cached"] == PER_MEMBER
    assert [m for _, m in calls()] == ["a.py", "b.py", "b.py"]
    assert len(report.findings) == 2
    monkeypatch.setattr(facts_registry.get("test-marker"), "version", 2)
    again = audit([str(tree)], config=conf)  # a new marker version: only the marker's facts are redone
    assert again.stats["facts_extracted"] == 2 and again.stats["facts_cached"] == 2
    assert [m for _, m in calls()] == ["a.py", "b.py", "b.py", "a.py", "b.py"]


@pytest.mark.parametrize("jobs", [1, 2])
def test_facts_parsed_under_another_grammar_are_never_an_answer(tmp_path, monkeypatch, jobs):
    """A source's facts depend on the grammar cuaudit's own interpreter parses with: one cache shared
    by cuaudit under 3.12 and 3.11 answered the 3.11 run with 3.12's verdict on ``f"{d["a"]}"`` (no
    CU006, where a fresh 3.11 run reports it).  Simulated here: a first audit under another grammar
    tag whose parser takes every source; the audit under this interpreter's own tag parses again and
    finds the error, and each grammar's facts stay cached beside the other's."""
    import cuaudit.store as store
    from cuaudit.formats import python as python_format

    dist = make_installed(tmp_path / "site", "pkg", {"pkg/__init__.py": "from . import mod\n", "pkg/mod.py": "x = (\n"})
    conf = Config(cache_dir=str(tmp_path / "cache"), jobs=jobs)
    own = store.GRAMMAR
    newer = python_format.parse_python_text("x = 1\n")

    def set_grammar(tag: str) -> None:
        monkeypatch.setattr(store, "GRAMMAR", tag)
        monkeypatch.setattr(extraction, "GRAMMAR", tag)
        # another interpreter has its own snapshots (their slot names sys.version): only the facts are shared
        if (tmp_path / "cache" / "facts.sqlite3").exists():
            db = sqlite3.connect(tmp_path / "cache" / "facts.sqlite3")
            db.execute("DELETE FROM facts WHERE key LIKE 'snapshot:%'")
            db.commit()
            db.close()

    set_grammar("cpython-9.99")
    with monkeypatch.context() as m:
        m.setattr(python_format, "parse_python_text", lambda text, path="<source>": newer)
        m.setattr(python_format, "compiles", lambda text, path="<source>": True)
        other = audit([dist], config=conf)
    assert "CU006" not in {f.code for f in other.findings}  # what that grammar says
    set_grammar(own)
    here = audit([dist], config=conf)
    assert [(f.code, f.location.member) for f in here.findings if f.code == "CU006"] == [("CU006", "pkg/mod.py")]
    assert here.stats["facts_cached"] == 0
    # both stay: each interpreter's next run reads its own facts
    again = audit([dist], config=conf)
    assert again.stats["facts_extracted"] == 0 and {f.code for f in again.findings} == {f.code for f in here.findings}
    set_grammar("cpython-9.99")
    back = audit([dist], config=conf)
    assert back.stats["facts_extracted"] == 0 and "CU006" not in {f.code for f in back.findings}
    assert back.stats["facts_by_content"] == 0  # from its own bundle, not row by row


def test_input_problems_are_cached_too(tmp_path, marker_rules, calls):
    whl = make_wheel(tmp_path, "latin", "1.0", {"latin/a.py": b"x = '\xff'\n"})
    conf = only_cu0(cache_dir=str(tmp_path / "cache"), jobs=1)
    first = audit([str(whl)], config=conf)
    second = audit([str(whl)], config=conf)
    assert [f.code for f in first.findings] == ["CU006"] and summary(second) == summary(first)
    assert second.stats["facts_cached"] == PER_MEMBER and second.stats["facts_extracted"] == 0
    assert len(calls()) == 1


def test_internal_errors_are_not_cached(tmp_path, marker_rules, calls):
    tree = make_tree(tmp_path / "t", {"boom.py": f"# {CRASH}\n"})
    conf = only_cu0(cache_dir=str(tmp_path / "cache"), jobs=1)
    assert [f.code for f in audit([str(tree)], config=conf).findings] == ["CU011"]
    assert [f.code for f in audit([str(tree)], config=conf).findings] == ["CU011"]
    assert len(calls()) == 2


def test_no_cache_reads_and_writes_nothing(tmp_path, marker_rules, calls):
    tree = make_tree(tmp_path / "t", {"a.py": f"# {WARN}\n"})
    cache = tmp_path / "cache"
    for _ in range(2):
        report = audit([str(tree)], config=only_cu0(cache=False, cache_dir=str(cache), jobs=1))
        assert report.stats["facts_cached"] == 0 and report.stats["facts_extracted"] == PER_MEMBER
    assert not cache.exists() and len(calls()) == 2


def test_no_cache_flag(tmp_path, marker_rules, calls, cli):
    tree = make_tree(tmp_path / "t", {"a.py": f"# {WARN}\n"})
    cache = tmp_path / "cache"
    cli("check", str(tree), "--isolated", "--no-cache", "--cache-dir", str(cache))
    assert not cache.exists()
    cli("check", str(tree), "--isolated", "--cache-dir", str(cache))
    assert (cache / "facts.sqlite3").exists()


@pytest.mark.parametrize("garbage", [b"this is not a database" * 100, b"SQLite format 3\x00" + b"\xff" * 4000, b""],
                         ids=["text", "sqlite-header-then-garbage", "empty"])
def test_corrupt_cache_file_does_not_break_the_audit(tmp_path, marker_rules, garbage):
    tree = make_tree(tmp_path / "t", {"a.py": f"# {WARN}\n"})
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "facts.sqlite3").write_bytes(garbage)
    conf = only_cu0(cache_dir=str(cache), jobs=1)
    report = audit([str(tree)], config=conf)
    assert [f.code for f in report.findings] == ["CU098"]
    # the cache was started again and works from now on
    assert audit([str(tree)], config=conf).stats["facts_cached"] == PER_MEMBER


def test_stale_pickles_are_misses(tmp_path):
    store = FactStore(str(tmp_path))
    store.put_many([("k1", {"a": 1})])
    store.close()
    db = sqlite3.connect(tmp_path / "facts.sqlite3")
    db.execute("UPDATE facts SET value = ?", (b"\x80\x05garbage",))
    db.commit()
    db.close()
    store = FactStore(str(tmp_path))
    assert store.get_many(["k1"]) == {} and store.misses == 1


def test_cache_lives_in_the_user_cache_dir(monkeypatch, tmp_path):
    from platformdirs import user_cache_dir

    monkeypatch.delenv("CUAUDIT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == user_cache_dir("cuaudit", appauthor=False) == str(tmp_path / "xdg" / "cuaudit")
    monkeypatch.setenv("CUAUDIT_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir() == str(tmp_path / "mine")


# -- parallel extraction ---------------------------------------------------------------------------


@pytest.fixture
def two_trees(tmp_path: Path) -> list[str]:
    out = []
    for t in ("one", "two"):
        files = {f"pkg/m{i:02d}.py": f"v = {i}  # {WARN if i % 3 else INFO}\n" for i in range(30)}
        out.append(str(make_tree(tmp_path / t, files)))
    return out


def test_a_small_input_is_extracted_in_process_whatever_the_jobs(tmp_path, marker_rules, calls):
    """Starting workers costs more than a few members' work (a small wheel's check is start-up bound)."""
    files = {f"pkg/m{i:02d}.py": f"v = {i}  # {WARN}\n" for i in range(10)}
    whl = make_wheel(tmp_path, "small", "1.0", files)
    report = audit([str(whl)], config=only_cu0(cache=False, jobs=2))
    assert {pid for pid, _ in calls()} == {os.getpid()} and len(report.findings) == 10


def test_parallel_extraction_gives_the_same_report_as_serial(two_trees, marker_rules, calls):
    serial = audit(two_trees, config=only_cu0(cache=False, jobs=1))
    assert {pid for pid, _ in calls()} == {os.getpid()}
    calls.reset()
    parallel = audit(two_trees, config=only_cu0(cache=False, jobs=2))
    pids = {pid for pid, _ in calls()}
    assert pids and os.getpid() not in pids, "extraction did not run in worker processes"
    assert summary(parallel) == summary(serial)
    assert len(serial.findings) == 60 and parallel.stats["facts_extracted"] == 60 * PER_MEMBER


def test_a_crashing_extractor_is_cu011_for_that_file_only(two_trees, marker_rules, tmp_path):
    Path(two_trees[0], "pkg", "m05.py").write_text(f"# {CRASH}\n")
    for jobs in (1, 2):
        report = audit(two_trees, config=only_cu0(cache=False, jobs=jobs))
        crashed = [f for f in report.findings if f.code == "CU011"]
        assert [(f.location.artifact.path, f.location.member) for f in crashed] == [(two_trees[0], "pkg/m05.py")]
        assert "RuntimeError: test extractor crashed on purpose" in crashed[0].message
        assert crashed[0].evidence["extractor"] == "test-marker"
        assert len([f for f in report.findings if f.code in ("CU097", "CU098")]) == 59


def test_a_crashing_rule_is_cu011_and_other_rules_still_report(tmp_path, marker_rules, monkeypatch):
    tree = make_tree(tmp_path / "t", {"a.py": f"# {WARN}\n# {INFO}\n"})

    def broken(self, ctx):
        raise KeyError("bug in a rule")

    monkeypatch.setattr(rules_registry.get("CU097"), "check", broken)
    report = audit([str(tree)], config=only_cu0(cache=False))
    assert sorted(f.code for f in report.findings) == ["CU011", "CU098"]
    [f] = [f for f in report.findings if f.code == "CU011"]
    assert "rule CU097 failed" in f.message and f.evidence["rule"] == "CU097"


def test_a_crashed_rule_shows_even_when_the_selection_leaves_cu011_out(tmp_path, marker_rules, monkeypatch):
    tree = make_tree(tmp_path / "t", {"a.py": f"# {WARN}\n"})

    def broken(self, ctx):
        raise KeyError("bug in a rule")

    monkeypatch.setattr(rules_registry.get("CU097"), "check", broken)
    # only the crashed rule selected: "no findings" would be a lie
    report = audit([str(tree)], config=Config(select=("CU097",), cache=False))
    assert [(f.code, f.evidence["rule"]) for f in report.findings] == [("CU011", "CU097")]
    # an ignore that names it is the one way to hide it
    report = audit([str(tree)], config=Config(select=("CU097",), ignore=("CU011",), cache=False))
    assert report.findings == []


def test_a_dying_worker_is_redone_in_process(two_trees, marker_rules, monkeypatch, calls):
    from marker_rules import DIE

    Path(two_trees[1], "pkg", "m07.py").write_text(f"v = 7  # {WARN} {DIE}\n")
    monkeypatch.setenv("CUAUDIT_TEST_PARENT", str(os.getpid()))
    report = audit(two_trees, config=only_cu0(cache=False, jobs=2))
    workers = {pid for pid, member in calls() if member == "pkg/m07.py"} - {os.getpid()}
    assert workers, "the file was never read in a worker"
    assert len(report.findings) == 60 and {f.code for f in report.findings} == {"CU097", "CU098"}
    assert report.stats["facts_extracted"] == 60 * PER_MEMBER


# -- inline suppressions --------------------------------------------------------------------------------


def test_inline_suppressions(tmp_path, marker_rules):
    tree = make_tree(tmp_path / "t", {"a.py": "\n".join([
        f"a = 1  # {WARN}  # cuaudit: ignore[CU098]",
        f"b = 2  # {WARN}  # cuaudit: ignore[CU097]",
        f"c = 3  # {WARN} {INFO}  # cuaudit: ignore",
        f"d = 4  # {WARN}  # cuaudit: ignore[cu09]",
        f"e = 5  # {WARN}  # cuaudit: ignored (not a suppression)",
        f"f = 6  # {WARN}",
    ]) + "\n"})
    report = audit([str(tree)], config=only_cu0(cache=False))
    assert [(f.code, f.location.line) for f in report.findings] == [("CU098", 2), ("CU098", 5), ("CU098", 6)]
    assert report.suppressed == 4


def test_inline_suppression_inside_a_wheel_and_sdist(tmp_path, marker_rules):
    import tarfile

    text = f"x = 1  # {WARN}  # cuaudit: ignore[CU098]\ny = 2  # {WARN}\n"
    whl = make_wheel(tmp_path, "w", "1.0", {"w/a.py": text})
    tree = make_tree(tmp_path / "w-1.0", {"w/a.py": text})
    sdist = tmp_path / "w-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        tf.add(tree, arcname="w-1.0")
    for path in (whl, sdist):
        report = audit([str(path)], config=only_cu0(cache=False))
        assert [(f.location.member, f.location.line) for f in report.findings] == [("w/a.py", 2)]
        assert report.suppressed == 1


# -- baselines -----------------------------------------------------------------------------------------------


def _release(tmp_path: Path, version: str, extra: str = "") -> Path:
    d = tmp_path / version
    d.mkdir()
    return make_wheel(d, "demo-pkg", version, {
        "demo_pkg/__init__.py": f"x = 1  # {WARN}\n{extra}",
        f"demo_pkg-{version}.data/purelib/demo_extra.py": f"y = 1  # {WARN}\n",
    })


def test_baseline_fingerprints_survive_a_new_version(tmp_path, marker_rules):
    old = audit([str(_release(tmp_path, "1.0"))], config=only_cu0(cache=False))
    assert len(old.findings) == 2
    baseline = tmp_path / "baseline.json"
    assert write_baseline(str(baseline), old.findings) == 2
    data = json.loads(baseline.read_text())
    assert data["version"] == 1 and {e["code"] for e in data["findings"]} == {"CU098"}
    new = audit([str(_release(tmp_path, "2.0", extra=f"z = 3  # {WARN}\n"))],
                config=only_cu0(cache=False, baseline=str(baseline)))
    assert [(f.location.member, f.location.line) for f in new.findings] == [("demo_pkg/__init__.py", 2)]
    assert new.baselined == 2


def test_baseline_cli_round_trip(tmp_path, marker_rules, cli):
    whl = _release(tmp_path, "1.0")
    baseline = tmp_path / "b.json"
    rc, out, err = cli("check", str(whl), "--isolated", "--no-cache", "--write-baseline", str(baseline))
    assert rc == 0 and "wrote 2 findings" in err and baseline.exists()
    rc, out, err = cli("check", str(whl), "--isolated", "--no-cache", "--baseline", str(baseline))
    assert rc == 0 and "2 in baseline" in out
    rc, _, err = cli("check", str(whl), "--isolated", "--no-cache", "--baseline", str(tmp_path / "none.json"))
    assert rc == 2 and "cannot read baseline" in err
    (tmp_path / "bad.json").write_text("{not json")
    rc, _, err = cli("check", str(whl), "--isolated", "--no-cache", "--baseline", str(tmp_path / "bad.json"))
    assert rc == 2 and "not a cuaudit baseline" in err


def test_read_baseline_rejects_other_versions(tmp_path):
    p = tmp_path / "b.json"
    p.write_text(json.dumps({"version": 99, "findings": []}))
    with pytest.raises(ConfigError, match="baseline version 99"):
        read_baseline(str(p))


def test_fingerprint_ignores_versions_and_vendored_hashes():
    from cuaudit.model import ArtifactKind, ArtifactRef, Finding, Location, Severity

    def finding(name: str, version: str, member: str) -> Finding:
        ref = ArtifactRef(ArtifactKind.WHEEL, f"/d/{name}-{version}.whl", name, version)
        return Finding("CU201", Severity.ERROR, f"msg {version}", Location(ref, member), key=member)

    a = finding("torch_linear", "1.0", "torch_linear-1.0.dist-info/METADATA")
    b = finding("torch-linear", "2.0", "torch_linear-2.0.dist-info/METADATA")
    assert a.fingerprint() == b.fingerprint()
    c = finding("cupy", "13.0", "cupy.libs/libgomp-a34b3233.so.1")
    d = finding("cupy", "13.1", "cupy.libs/libgomp-0f1e2d3c.so.1")
    assert c.fingerprint() == d.fingerprint()
    assert finding("cupy", "1", "cupy/a.so").fingerprint() != finding("cupy", "1", "cupy/b.so").fingerprint()


@pytest.mark.parametrize("path", [
    "Foo_Bar-1.0.dist-info/RECORD", "x-2.data/scripts/y", "old-0.1.egg-info/PKG-INFO", "z-1-py3.egg-info",
    "lib/libgomp-a34b3233.so.1", "a/libx-0123abcd.so", "lib/liby-0123abcd.dylib", "bin/z-0123abcd.dll",
    "pkg/mod.py", "pkg/info.txt", "pkg/_ext.cpython-311-x86_64-linux-gnu.so", "",
])
def test_stable_member_skips_the_patterns_only_where_neither_can_match(path):
    """The cheap test before the two patterns (a report fingerprints thousands of members) never
    keeps them from a path they change: the same as applying both to every path."""
    from cuaudit.model import _META_DIR, _VENDORED_HASH, _stable_member, canonical_name

    both = _VENDORED_HASH.sub("", _META_DIR.sub(lambda m: f"{m.group(1)}{canonical_name(m.group(2))}.{m.group(3)}", path))
    assert _stable_member(path) == both
    if "-" in path and not path.endswith(".py") and path and "info.txt" not in path and "cpython" not in path:
        assert both != path  # each of these is one the patterns change


# -- the library API ---------------------------------------------------------------------------------------------


def test_library_api_returns_the_report_the_cli_renders(tmp_path, marker_rules, cli):
    tree = make_tree(tmp_path / "t", {"a.py": f"# {WARN}\n# {INFO}\n"})
    report = cuaudit.audit([tree], config=only_cu0(cache=False))  # a PathLike works too
    assert isinstance(report, engine.Report) and report.exit_code() == 1
    rc, out, _ = cli("check", str(tree), "--isolated", "--no-cache", "-f", "json")
    rendered = json.loads(out)["findings"]
    assert rc == report.exit_code()
    assert [(f["code"], f["location"]["member"], f["location"]["line"]) for f in rendered] == [
        (f.code, f.location.member, f.location.line) for f in report.findings
    ]


def test_cli_calls_the_library_api(monkeypatch, cli, tmp_path):
    seen = {}
    real = engine.audit

    def spy(paths, **kw):
        seen["paths"], seen["command"] = list(paths), kw.get("command")
        return real(paths, **kw)

    monkeypatch.setattr(engine, "audit", spy)
    cli("check", str(tmp_path), "--isolated", "--no-cache")
    assert seen == {"paths": [str(tmp_path)], "command": "check"}


def test_identical_members_at_different_paths_keep_their_own_facts(tmp_path, marker_rules):
    # Same bytes, same CRC and sizes, different paths: a fact that records its
    # path must not be shared between them through the cache.
    same = f"x = 1  # {WARN}\n"
    whl = make_wheel(tmp_path, "twins", "1.0", {"twins/a/__init__.py": same, "twins/b/__init__.py": same})
    conf = only_cu0(cache_dir=str(tmp_path / "cache"), jobs=1)
    for _ in range(2):
        ex = extraction.Extraction(conf, None)
        [art] = cuaudit.inputs.resolve([str(whl)])
        ex.run([art], lambda m: ("test-marker",) if m.path.endswith(".py") else ())
        got = {path: fact.path for (_, path, _), fact in ex.facts.items()}
        assert got == {"twins/a/__init__.py": "twins/a/__init__.py", "twins/b/__init__.py": "twins/b/__init__.py"}
        ex.store.close()
    assert ex.cached == 2  # both facts served from the cache (one bundle read for the wheel)


class _Unpicklable:
    """A fact an extractor should not return (it does not pickle); the audit survives it."""

    warn = ((1, 1),)
    info = ()
    path = ""

    def __reduce__(self):
        raise TypeError("this fact does not pickle")


def test_a_fact_that_does_not_pickle_is_used_but_not_cached(two_trees, marker_rules, monkeypatch, tmp_path):
    monkeypatch.setattr(facts_registry.get("test-marker"), "extract", lambda self, reader: _Unpicklable())
    for jobs in (1, 2):  # in workers the result cannot travel back: the chunk is redone in process
        conf = only_cu0(cache_dir=str(tmp_path / f"cache{jobs}"), jobs=jobs)
        report = audit(two_trees, config=conf)
        # the two trees hold the same files: the second one's format facts may be found by the
        # first one's bytes (workers._ByContent), the marker's never (they do not pickle)
        assert len(report.findings) == 60
        # (a chunk whose results cannot travel back from a worker is redone here: what the worker
        # stored by content is then found, the format facts of both trees)
        assert report.stats["facts_cached"] == report.stats["facts_by_content"]
        # a second run takes the format check's facts from the cache, never the marker's
        again = audit(two_trees, config=conf)
        assert len(again.findings) == 60
        assert again.stats["facts_cached"] == 60 and again.stats["facts_extracted"] == 60


def test_facts_cached_counts_every_member_served(tmp_path, marker_rules):
    # the same file at the same path in two releases: one cache entry, two members
    files = {"same/a.py": f"# {WARN}\n"}
    d1, d2 = tmp_path / "1", tmp_path / "2"
    d1.mkdir(), d2.mkdir()
    wheels = [str(make_wheel(d1, "same", "1.0", files)), str(make_wheel(d2, "same", "2.0", files))]
    conf = only_cu0(cache_dir=str(tmp_path / "cache"), jobs=1)
    first = audit(wheels, config=conf)
    second = audit(wheels, config=conf)
    assert first.stats["facts_extracted"] + first.stats["facts_cached"] == 2 * PER_MEMBER
    assert second.stats["facts_cached"] == 2 * PER_MEMBER and second.stats["facts_extracted"] == 0


def _open_zips_in_child(queue) -> None:
    from cuaudit.inputs import wheel

    queue.put(len(wheel._OPEN_ZIPS))


def test_forked_workers_never_share_the_parents_zip_handles(tmp_path):
    # A shared file offset between processes makes concurrent reads return
    # each other's bytes: children must open their own.
    import multiprocessing

    from cuaudit.inputs import wheel

    whl = make_wheel(tmp_path, "fd", "1.0", {"fd/a.py": "a = 1\n"})
    [art] = cuaudit.inputs.resolve([str(whl)])
    assert art.members and wheel._OPEN_ZIPS
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_open_zips_in_child, args=(queue,))
    child.start()
    child.join(30)
    assert queue.get(timeout=5) == 0


def test_big_sdist_in_parallel_matches_serial(tmp_path, marker_rules, calls):
    import tarfile

    tree = make_tree(tmp_path / "big-1.0", {f"pkg/m{i:03d}.py": f"v = {i}  # {WARN}\n" for i in range(150)})
    sdist = tmp_path / "big-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        tf.add(tree, arcname="big-1.0")
    serial = audit([str(sdist)], config=only_cu0(cache=False, jobs=1))
    parallel = audit([str(sdist)], config=only_cu0(cache=False, jobs=2))
    assert len(serial.findings) == 150 and summary(parallel) == summary(serial)
    assert len({pid for pid, _ in calls()}) >= 2


def test_unreadable_member_is_not_cached(tmp_path, marker_rules, monkeypatch):
    # a permission error goes away with chmod, which does not change the content key
    tree = make_tree(tmp_path / "t", {"a.py": f"# {WARN}\n"})
    conf = only_cu0(cache_dir=str(tmp_path / "cache"), jobs=1)
    from cuaudit.inputs.tree import TreeArtifact

    real = TreeArtifact.open_member

    def denied(self, path):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(TreeArtifact, "open_member", denied)
    assert [f.code for f in audit([str(tree)], config=conf).findings] == ["CU001"]
    monkeypatch.setattr(TreeArtifact, "open_member", real)
    assert [f.code for f in audit([str(tree)], config=conf).findings] == ["CU098"]


def test_one_input_problem_per_member_and_code_across_extractors(tmp_path, marker_rules, monkeypatch):
    # a second parser of the same broken file: one CU007, the one with the position
    # (the format check's: it is the one place that reports a TOML error)
    from cuaudit.facts import Extractor, InputError

    class SecondParser(Extractor):
        name = "a-test-second-parser"

        def applies(self, member):
            return member.path == "pyproject.toml"

        def extract(self, reader):
            raise InputError("CU007", f"{reader.path}: not valid TOML (second parser)")

    monkeypatch.setattr(rules_registry.get("CU007"), "needs", ("a-test-second-parser", "pyproject"))
    try:
        tree = make_tree(tmp_path / "t", {"pyproject.toml": "[project\n"})
        report = audit([str(tree)], config=only_cu0(cache=False))
        [f] = report.findings
        assert (f.code, f.location.line, f.evidence["extractor"]) == ("CU007", 1, "format")
    finally:
        facts_registry._REGISTRY.pop("a-test-second-parser", None)


def test_a_cached_artifact_is_one_bundle_read_and_a_changed_member_falls_back_to_members(tmp_path, marker_rules):
    files = {f"pkg/m{i}.py": f"x = {i}  # {WARN}\n" for i in range(5)}
    whl = make_tree(tmp_path / "bundled", files)  # a tree: its files keep their own keys when one changes
    conf = only_cu0(cache_dir=str(tmp_path / "cache"), jobs=1)

    def run(path):
        ex = extraction.Extraction(conf, None)
        [art] = cuaudit.inputs.resolve([str(path)])
        ex.run([art], lambda m: ("test-marker",) if m.path.endswith(".py") else ())
        ex.store.close()
        return ex

    first = run(whl)
    assert first.extracted == 5 and first.cached == 0
    reads = []
    get_many = FactStore.get_many
    FactStore.get_many = lambda self, keys: reads.append(len(list(keys := list(keys)))) or get_many(self, keys)
    try:
        second = run(whl)
    finally:
        FactStore.get_many = get_many
    # one bundle, then the five rows it names by content (extraction.ByContent), in one read
    assert second.extracted == 0 and second.cached == 5 and second.store.hits == 6 and [n for n in reads if n] == [1, 5]
    (whl / "pkg" / "m0.py").unlink()
    changed = make_tree(whl, {"pkg/m0.py": f"x = 99  # {WARN}\n"})
    third = run(changed)
    # the bundle key changed with m0's content: m0 is extracted, the other four come from their own entries
    assert third.extracted == 1 and third.cached == 4
    # a wheel's members are keyed by the archive file too (CRC-32 can be forged), so another file
    # of the same members shares nothing by identity: it finds their facts by content instead
    # (SHA-256 of path and bytes, workers._ByContent), here the tree's first files
    whl = make_wheel(tmp_path, "bundled", "1.0", files)
    wheel = run(whl)
    assert wheel.extracted == 0 and wheel.cached == wheel.by_content == 5
    (tmp_path / "copy").mkdir()
    again = make_wheel(tmp_path / "copy", "bundled", "1.0", files)
    assert run(again).by_content == 5 and run(whl).cached == 5 and run(whl).by_content == 0  # its own bundle
    # bytes of the same paths and sizes but other content share nothing
    (tmp_path / "other").mkdir()
    other = make_wheel(tmp_path / "other", "bundled", "1.0", {p: t.replace("x = ", "y = ") for p, t in files.items()})
    assert run(other).extracted == 5


def test_an_archive_member_read_by_several_extractors_is_inflated_once(tmp_path):
    whl = make_wheel(tmp_path, "shared", "1.0", {"shared/__init__.py": "import os\nx = os.path.join('a', 'b')\n"})
    [art] = cuaudit.inputs.resolve([str(whl)])
    member = art.member("shared/__init__.py")
    opened = []
    real = art.open_member

    def counting(path):
        opened.append(path)
        return real(path)

    art.open_member = counting
    results = workers.extract_group(art, [(member, ("python_source", "module_imports"))])
    assert [(name, ok) for _path, name, ok, _v in results] == [("python_source", True), ("module_imports", True)]
    assert opened == ["shared/__init__.py"]  # once, for both
    # one extractor alone streams the member itself (nothing to share)
    opened.clear()
    workers.extract_group(art, [(member, ("python_source",))])
    assert opened == ["shared/__init__.py"]


def test_a_fact_cache_written_before_the_engine_was_split_still_loads():
    # bundles and rows pickled before 593075c name these classes cuaudit.engine.*: a pickle that no
    # longer loads is a miss, and every fact of every artifact was extracted again
    import pickle

    from cuaudit.extraction import ByContent
    from cuaudit.workers import CachedFailure, Pickled

    bundle = {"k1": ByContent("row"), "k2": Pickled(pickle.dumps({"x": 1})),
              "k3": CachedFailure("CU005", "bad", (("offset", 4),))}
    data = pickle.dumps(bundle, protocol=2)
    for module in ("cuaudit.extraction", "cuaudit.workers"):
        assert f"c{module}\n".encode() in data
        data = data.replace(f"c{module}\n".encode(), b"ccuaudit.engine\n")
    assert b"ccuaudit.engine\nByContent\n" in data and b"ccuaudit.engine\nPickled\n" in data
    old = pickle.loads(data)
    assert type(old["k1"]) is ByContent and type(old["k2"]) is Pickled and type(old["k3"]) is CachedFailure
    assert old == bundle
