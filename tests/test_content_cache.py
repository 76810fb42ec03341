"""Facts found by content (``workers._ByContent``): the cache serves a member's facts to any member of
the same path and bytes - a new virtual environment of the same packages, a wheel built again, a
copied tree - and never a fact that rests on more than those bytes."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import make_installed, make_wheel

import cuaudit.formats.python as python_format
from cuaudit import audit
from cuaudit.config import Config
from cuaudit.inputs.environment import InstalledDistribution

#: a package with a submodule trap (CU101), an eager import chain and a file that does not parse (CU006)
PACKAGE = {
    "pkg/__init__.py": "from . import core\nfrom .core import VALUE\n",
    "pkg/core.py": "import os\nVALUE = os.path.join('a', 'b')\n",
    "pkg/plot.py": "import numpy as np\n\ndef show(x):\n    return np.float32(x) + 1\n",
    "pkg/broken.py": "def (:\n",
    **{f"pkg/sub/m{i}.py": f"from pkg import core\nX{i} = core.VALUE * {i}\n" for i in range(30)},
    "pkg/sub/__init__.py": "",
}


def _findings(report, root: Path) -> list[tuple]:
    return sorted((f.code, f.location.member, f.location.line, f.message.replace(str(root), "<root>"))
                  for f in report.findings)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths parsed, or checked without a tree (``compiles``), as Python in this process (audits
    with one job extract here)."""
    seen: list[str] = []
    real, check = python_format.parse_python_text, python_format.compiles

    def counting(text: str, path: str = "<source>"):
        seen.append(path)
        return real(text, path)

    def counting_check(text: str, path: str = "<source>"):
        seen.append(path)
        return check(text, path)

    monkeypatch.setattr(python_format, "parse_python_text", counting)
    monkeypatch.setattr(python_format, "compiles", counting_check)
    return seen


def _copy(site: Path, to: Path) -> InstalledDistribution:
    """The distribution ``pkg`` 1.0 of ``site`` copied to ``to``: new inodes and ctimes, so every key
    of identity differs (as in a new virtual environment of the same packages)."""
    shutil.copytree(site, to)
    return InstalledDistribution(None, "pkg", "1.0", str(to / "pkg-1.0.dist-info"))


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_copied_environment_finds_every_fact_by_content(tmp_path, parses, jobs):
    site = tmp_path / "one"
    dist = make_installed(site, "pkg", PACKAGE)
    conf = Config(cache_dir=str(tmp_path / "cache"), jobs=jobs)
    first = audit([dist], config=conf, command="explain")
    assert first.stats["facts_by_content"] == 0
    assert {"CU101", "CU006"} <= {f.code for f in first.findings}
    copy = _copy(site, tmp_path / "two")
    parses.clear()
    second = audit([copy], config=conf, command="explain")
    assert _findings(second, tmp_path / "two") == _findings(first, site)
    # every Python fact came by content (the format check's too: no __pycache__ here, so it parsed)
    assert second.stats["facts_by_content"] >= len([p for p in PACKAGE if p.endswith(".py")])
    assert second.stats["facts_cached"] >= second.stats["facts_by_content"]
    if jobs == 1:
        assert parses == []  # nothing parsed again
    # the copy's own keys were written: a third run finds its facts by identity
    third = audit([copy], config=conf, command="explain")
    assert third.stats["facts_by_content"] == 0 and third.stats["facts_extracted"] == 0
    assert _findings(third, tmp_path / "two") == _findings(first, site)


def test_without_a_cache_nothing_is_found_by_content(tmp_path):
    site = tmp_path / "one"
    dist = make_installed(site, "pkg", PACKAGE)
    conf = Config(cache=False, jobs=1)
    audit([dist], config=conf, command="explain")
    again = audit([_copy(site, tmp_path / "two")], config=conf, command="explain")
    assert again.stats["facts_by_content"] == 0 and again.stats["facts_cached"] == 0


def _lying_bytecode(source: Path) -> None:
    """A timestamp ``__pycache__`` header that validates against ``source`` (mtime and size), whatever it holds."""
    st = source.stat()
    head = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little") \
        + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    cache = source.parent / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / f"{source.stem}.{sys.implementation.cache_tag}.pyc").write_bytes(head)


def test_a_fact_that_rests_on_a_file_beside_the_member_is_never_found_by_content(tmp_path):
    # the format check trusts a valid __pycache__ header instead of parsing: that answer is the
    # header's, not the bytes', so a copy without it must be parsed (and its CU006 reported)
    files = {"pkg/__init__.py": "", "pkg/broken.py": "def (:\n"}
    site = tmp_path / "one"
    dist = make_installed(site, "pkg", files)
    _lying_bytecode(site / "pkg" / "broken.py")
    conf = Config(cache_dir=str(tmp_path / "cache"), jobs=1, select=("CU0",))
    trusted = audit([dist], config=conf, command="explain")
    assert "CU006" not in {f.code for f in trusted.findings}  # what the header says
    copy = make_installed(tmp_path / "two", "pkg", files)  # the same bytes, without the header
    assert not (tmp_path / "two" / "pkg" / "__pycache__").exists()
    parsed = audit([copy], config=conf, command="explain")
    assert [(f.code, f.location.member) for f in parsed.findings if f.code == "CU006"] == [("CU006", "pkg/broken.py")]


def test_a_wheel_built_again_reuses_the_facts_of_its_unchanged_members(tmp_path, parses):
    files = {**PACKAGE, "pkg/_native.py": "import ctypes\n"}
    (tmp_path / "a").mkdir()
    one = make_wheel(tmp_path / "a", "pkg", "1.0", files)
    conf = Config(cache_dir=str(tmp_path / "cache"), jobs=1)
    first = audit([str(one)], config=conf)
    # built again: another archive file (its members' keys of identity differ), one module changed
    changed = {**files, "pkg/core.py": "import os\nVALUE = os.path.join('a', 'c')\n"}
    (tmp_path / "b").mkdir()
    two = make_wheel(tmp_path / "b", "pkg", "1.0", changed)
    parses.clear()
    second = audit([str(two)], config=conf)
    assert parses == ["pkg/core.py"]  # the changed module only; the other 34 sources by content
    assert second.stats["facts_by_content"] > 0
    assert {f.code for f in second.findings} == {f.code for f in first.findings}
    # the member that does not parse is reported from its cached failure, at its line
    broken = [(f.code, f.location.member, f.location.line) for f in second.findings if f.location.member == "pkg/broken.py"]
    assert broken == [(f.code, f.location.member, f.location.line) for f in first.findings if f.location.member == "pkg/broken.py"]
    assert broken and broken[0][0] == "CU006"


def test_the_same_path_with_other_bytes_shares_nothing(tmp_path, parses):
    conf = Config(cache_dir=str(tmp_path / "cache"), jobs=1)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    audit([str(make_wheel(tmp_path / "a", "pkg", "1.0", {"pkg/__init__.py": "X = 1\n"}))], config=conf)
    parses.clear()
    other = audit([str(make_wheel(tmp_path / "b", "pkg", "1.0", {"pkg/__init__.py": "Y = 1\n"}))], config=conf)
    assert parses == ["pkg/__init__.py"]  # (its dist-info files, the same bytes, come by content)
    # and the same bytes at another path share nothing either (a fact holds its module's name)
    parses.clear()
    (tmp_path / "c").mkdir()
    moved = audit([str(make_wheel(tmp_path / "c", "pkg", "1.0", {"pkg/other.py": "X = 1\n", "pkg/__init__.py": "Y = 1\n"}))],
                  config=conf)
    assert parses == ["pkg/other.py"] and moved.stats["facts_by_content"] > 0


def test_a_stored_value_that_no_longer_loads_is_extracted_again(tmp_path, parses):
    import sqlite3

    conf = Config(cache_dir=str(tmp_path / "cache"), jobs=1)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    files = {"pkg/__init__.py": "from . import core\n", "pkg/core.py": "X = 1\n", "pkg/plot.py": "Y = 2\n"}
    first = audit([str(make_wheel(tmp_path / "a", "pkg", "1.0", files))], config=conf)
    db = sqlite3.connect(os.path.join(conf.cache_dir, "facts.sqlite3"))
    spoiled = db.execute("UPDATE facts SET value = x'00' WHERE key LIKE '%:sha256:%'").rowcount
    db.commit()
    db.close()
    assert spoiled > 0
    parses.clear()
    second = audit([str(make_wheel(tmp_path / "b", "pkg", "1.0", files))], config=conf)
    assert second.stats["facts_by_content"] == 0 and sorted(parses) == sorted(files)
    assert [(f.code, f.location.member) for f in second.findings] == [(f.code, f.location.member) for f in first.findings]


def _rows(cache: str) -> dict[str, object]:
    import pickle
    import sqlite3

    db = sqlite3.connect(os.path.join(cache, "facts.sqlite3"))
    try:
        return {k: pickle.loads(v) for k, v in db.execute("SELECT key, value FROM facts")}
    finally:
        db.close()


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_fact_stored_by_content_is_stored_once(tmp_path, jobs):
    # the bundles that serve the next audit of the same files name the rows by content instead of
    # holding their values a second time: up front (a wheel's facts, in its bundle) and on demand
    # (an environment's Python facts, in its open bundle), each in a cache of its own
    from cuaudit.extraction import ByContent

    files = {**PACKAGE, "pkg/lib.py": "import ctypes\nlib = ctypes.CDLL('libfoo.so')\n"}
    inputs = {"wheel": ([str(make_wheel(tmp_path, "pkg", "1.0", files))], "check", "bundle:"),
              "env": ([make_installed(tmp_path / "site", "pkg", files)], "explain", "facts:")}
    for name, (paths, command, kind) in inputs.items():
        conf = Config(cache_dir=str(tmp_path / f"cache-{name}"), jobs=jobs)
        first = audit(paths, config=conf, command=command)
        rows = _rows(conf.cache_dir)
        by_content = {k for k in rows if ":sha256:" in k}
        named = {k: [v for v in b.values() if type(v) is ByContent] for k, b in rows.items()
                 if k.startswith(("bundle:", "facts:")) and isinstance(b, dict)}
        # the Python facts: in the bundle of their kind (up front, or on demand)
        assert sum(len(v) for k, v in named.items() if k.startswith(kind)) >= len([p for p in files if p.endswith(".py")]), name
        # every row by content is named by a bundle, in place of a value of its own, and every
        # name is a row that is there
        assert {v for vs in named.values() for v in vs} == by_content, name
        # the next audit reads them through the bundles: nothing extracted, the same findings
        again = audit(paths, config=conf, command=command)
        assert again.stats["facts_extracted"] == 0, name
        assert _findings(again, tmp_path) == _findings(first, tmp_path), name


def test_a_bundle_whose_rows_are_gone_extracts_them_again(tmp_path, parses):
    # pruning (cache-max-size) may drop a row a bundle names: a miss, never a wrong or missing fact
    import sqlite3

    conf = Config(cache_dir=str(tmp_path / "cache"), jobs=1)
    wheel = str(make_wheel(tmp_path, "pkg", "1.0", PACKAGE))
    first = audit([wheel], config=conf, command="explain")
    db = sqlite3.connect(os.path.join(conf.cache_dir, "facts.sqlite3"))
    dropped = db.execute("DELETE FROM facts WHERE key LIKE '%:sha256:%' AND key LIKE '%pkg/core.py%'").rowcount \
        or db.execute("DELETE FROM facts WHERE key IN (SELECT key FROM facts WHERE key LIKE '%:sha256:%' LIMIT 3)").rowcount
    db.commit()
    db.close()
    assert dropped > 0
    parses.clear()
    second = audit([wheel], config=conf, command="explain")
    assert 0 < second.stats["facts_extracted"] and second.stats["facts_cached"] > 0 and parses
    assert _findings(second, tmp_path) == _findings(first, tmp_path)


@pytest.mark.parametrize("jobs", [1, 2])
def test_facts_found_by_content_are_named_not_stored_again(tmp_path, jobs):
    # a new venv of the same packages (what CI makes on every run) finds its facts by content: its
    # bundles name those rows, and neither the rows nor the values are written again (they were
    # held by value in the new bundles, and each CI run grew the cache by a whole copy)
    from cuaudit.extraction import ByContent

    site = tmp_path / "one"
    conf = Config(cache_dir=str(tmp_path / "cache"), jobs=jobs)
    first = audit([make_installed(site, "pkg", PACKAGE)], config=conf, command="explain")
    before = _rows(conf.cache_dir)
    copy = _copy(site, tmp_path / "two")
    second = audit([copy], config=conf, command="explain")
    reused = second.stats["facts_by_content"]
    assert reused >= len([p for p in PACKAGE if p.endswith(".py")])
    after = _rows(conf.cache_dir)
    assert {k for k in after if ":sha256:" in k} == {k for k in before if ":sha256:" in k}
    new = {k: v for k, v in after.items() if k not in before}
    bundles = {k: b for k, b in new.items() if k.startswith(("bundle:", "facts:")) and isinstance(b, dict)}
    named = [v for b in bundles.values() for v in b.values() if type(v) is ByContent]
    held = [k for b in bundles.values() for k, v in b.items() if type(v) is not ByContent]
    # (the finishing step's suppressions fact, found by content too, is not in the audit's counts)
    assert len(named) >= reused and set(named) <= set(before) and not held, held
    # no fact found by content is in a row of its own either: what else is new is not a Python fact
    assert not [k for k in new if k not in bundles and ":python_source:" in k], sorted(new)
    # and the copy is served through those names: nothing extracted, the same findings
    third = audit([copy], config=conf, command="explain")
    assert third.stats["facts_extracted"] == 0 and third.stats["facts_by_content"] == 0
    assert _findings(third, tmp_path / "two") == _findings(first, site)


def test_facts_kept_by_content_are_written_a_slice_at_a_time_in_order_and_none_lost(tmp_path):
    # a walk writes them while no chunk is back, a slice at a time (extraction.Extraction.walk); the
    # rest is written when the audit ends (Extraction.flush)
    from cuaudit.extraction import Extraction
    from cuaudit.workers import Pickled

    ex = Extraction(Config(cache_dir=str(tmp_path / "cache"), jobs=1), None)
    rows = [(f"1:test:fact:1:sha256:{i:02d}", Pickled(repr(i).encode())) for i in range(5)]
    ex._loose = list(rows)
    ex._write_loose(2)
    assert ex._loose == rows[2:]  # the first two written, the rest kept in order
    assert set(ex.store.get_many([k for k, _ in rows])) == {k for k, _ in rows[:2]}
    ex._write_loose(10)  # more than there are: all of them
    assert ex._loose == []
    ex._loose = [(f"1:test:fact:1:sha256:{i:02d}", Pickled(b"x")) for i in range(5, 8)]
    ex.close()  # the end of an audit writes what is left
    assert len(ex.store.get_many([f"1:test:fact:1:sha256:{i:02d}" for i in range(8)])) == 8


def test_the_parent_keeps_one_connection_by_content_and_none_crosses_a_fork(tmp_path, monkeypatch):
    """What the parent extracts itself, one member or level at a time (on demand, a forked family's
    child), looks its members up by content through one kept connection, not one opened per call;
    it is closed before any worker forks (``Extraction.close_stores``) and when the audit ends."""
    import cuaudit.workers as workers_module
    from cuaudit.extraction import Extraction
    from cuaudit.store import FactStore

    dist = make_installed(tmp_path / "site", "pkg", PACKAGE)
    made: list[FactStore] = []
    real_init = FactStore.__init__

    def counting_init(self, *args, **kwargs):
        made.append(self)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(FactStore, "__init__", counting_init)
    calls: list[bool] = []
    real_group = workers_module.extract_group

    def group(*args, **kwargs):
        if (args[2] if len(args) > 2 else kwargs.get("cas")) is not None:  # those that look up by content
            calls.append(kwargs.get("keep_cas", False))
        return real_group(*args, **kwargs)

    monkeypatch.setattr(workers_module, "extract_group", group)
    audit([dist], config=Config(cache_dir=str(tmp_path / "cache"), jobs=1), command="explain")
    assert len(calls) >= 3 and all(calls)  # extracted here, a few members at a time, all keeping it
    by_content = [s for s in made if s.path and s.path.startswith(str(tmp_path / "cache"))]
    # the audit's own stores (cache, evidence, snapshot), and one connection by content for all the
    # calls (one per call before: 3 + 6 here)
    assert len(by_content) <= 4 < 3 + len(calls)
    assert workers_module._CONTENT_STORE is None  # closed with the audit

    # and however the audit ends
    from cuaudit.rule_run import RuleRun

    def failing_finish(self):
        assert workers_module._CONTENT_STORE is not None  # kept until then
        raise RuntimeError("the audit ends here")

    with monkeypatch.context() as m:
        m.setattr(RuleRun, "finish", failing_finish)
        with pytest.raises(RuntimeError):
            audit([_copy(tmp_path / "site", tmp_path / "three")], config=Config(cache_dir=str(tmp_path / "c3"), jobs=1),
                  command="explain")
    assert workers_module._CONTENT_STORE is None

    # before a worker forks, the parent's kept connection is closed
    workers_module._content_store(str(tmp_path / "cache"), True).get_many(["x"])
    kept = workers_module._CONTENT_STORE[2]
    assert kept._db is not None
    seen_at_submit: list[object] = []
    real_submitter = Extraction._submitter

    def submitter(self, *args, **kwargs):
        seen_at_submit.append(workers_module._CONTENT_STORE)
        return real_submitter(self, *args, **kwargs)

    monkeypatch.setattr(Extraction, "_submitter", submitter)
    # a package whose import closure is wide enough for the workers
    wide = {"wide/__init__.py": "from . import sub\n",
            "wide/sub/__init__.py": "".join(f"from . import m{i}\n" for i in range(80)),
            **{f"wide/sub/m{i}.py": f"import os\nX = os.sep * {i}\n" for i in range(80)}}
    other = make_installed(tmp_path / "site2", "wide", wide)
    audit([other], config=Config(cache_dir=str(tmp_path / "cache2"), jobs=2), command="explain")
    assert seen_at_submit and all(s is None for s in seen_at_submit)
    assert kept._db is None


def test_a_connection_inherited_from_the_parent_is_never_closed_by_the_child(tmp_path, monkeypatch):
    """A forked process that finds its parent's kept connection (another process id) neither closes
    nor frees it (freeing closes it): closing is the parent's."""
    import cuaudit.workers as workers_module
    from cuaudit.store import FactStore

    parents = FactStore(str(tmp_path / "cache"))
    parents.get_many(["x"])
    monkeypatch.setattr(workers_module, "_INHERITED", [])
    monkeypatch.setattr(workers_module, "_CONTENT_STORE", (os.getpid() + 1, str(tmp_path / "cache"), parents))
    own = workers_module._content_store(str(tmp_path / "cache"), True)  # this process opens its own
    assert own is not parents and parents._db is not None
    assert workers_module._INHERITED == [(os.getpid() + 1, str(tmp_path / "cache"), parents)]
    workers_module.close_content_store()
    assert own._db is None and parents._db is not None
    parents.close()
