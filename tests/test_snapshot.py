"""The environment snapshot (``snapshot.py``): an unchanged ``env`` audit reuses its findings,
and any change it depends on makes the audit run again, with the findings a cold run gives.

Each test builds a virtual environment (``python -m venv --without-pip``) and lays
distributions into its site dir by hand (dist-info with a RECORD), then compares the
reused report with an audit that uses no cache at all.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_tree
from marker_rules import marker_rules  # noqa: F401 - fixture

from cuaudit import audit, snapshot
from cuaudit.config import Config
from cuaudit.inputs.evidence import StdlibFolder
from cuaudit.report import json_report


def _json(report) -> str:
    """The report without what depends on the clock or on what the cache held."""
    import json

    data = json.loads(json_report.render(report))
    data.pop("stats", None)
    return json.dumps(data, sort_keys=True)


def _dist(site: Path, name: str, files: dict[str, str]) -> None:
    meta = f"{name}-1.0.dist-info"
    record = [*files, f"{meta}/METADATA", f"{meta}/RECORD"]
    make_tree(site, {**files, f"{meta}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
                     f"{meta}/RECORD": "".join(f"{p},,\n" for p in record)})


#: `import trap` does not bind trap.sub (CU101); `import fine` binds its submodule
TRAP = {"trap/__init__.py": "X = 1\n", "trap/sub.py": "Y = 2\n"}
FINE = {"fine/__init__.py": "from . import part\n", "fine/part.py": "Z = 3\n"}


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.delenv("PYTHONPATH", raising=False)  # the environment, not this checkout
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True, capture_output=True)
    [site] = list((tmp_path / "venv").glob("lib/python3*/site-packages"))
    _dist(site, "trap", TRAP)
    _dist(site, "fine", FINE)
    config = Config(select=("CU1",), cache=True, cache_dir=str(tmp_path / "cache"), jobs=1)
    return {"python": str(tmp_path / "venv" / "bin" / "python"), "site": site, "config": config}


def _env_audit(env: dict, config: Config | None = None):
    return audit([], env=env["python"], config=config or env["config"], command="env")


def _uncached(env: dict, config: Config | None = None):
    import dataclasses

    return audit([], env=env["python"], config=dataclasses.replace(config or env["config"], cache=False), command="env")


def test_an_unchanged_environment_reuses_its_findings(env):
    cold = _env_audit(env)
    warm = _env_audit(env)
    assert not cold.stats["snapshot_reused"] and warm.stats["snapshot_reused"]
    assert any(f.code == "CU101" and "trap.sub" in f.message for f in cold.findings)
    assert _json(warm) == _json(cold) == _json(_uncached(env))
    # what a cached run reports having read: every fact, none extracted again
    assert warm.stats["facts_extracted"] == 0
    assert warm.stats["facts_cached"] == cold.stats["facts_extracted"] + cold.stats["facts_cached"]
    assert [r.name for r in warm.evidence] == [r.name for r in cold.evidence] == ["stdlib"]


def test_a_changed_file_runs_the_audit_again(env):
    _env_audit(env)
    init = env["site"] / "trap" / "__init__.py"
    init.write_text("from . import sub\n")  # now binds trap.sub: the finding goes
    os.utime(init, ns=(1, 1))  # a new size and mtime alike: the content key is the stat
    again = _env_audit(env)
    assert not again.stats["snapshot_reused"]
    assert not any(f.code == "CU101" and "trap.sub" in f.message for f in again.findings)
    assert _json(again) == _json(_uncached(env))
    assert _env_audit(env).stats["snapshot_reused"]


def test_touching_a_file_runs_the_audit_again(env):
    _env_audit(env)
    st = os.stat(env["site"] / "fine" / "part.py")
    os.utime(env["site"] / "fine" / "part.py", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    again = _env_audit(env)
    assert not again.stats["snapshot_reused"] and _json(again) == _json(_uncached(env))


def test_added_and_removed_distributions_run_the_audit_again(env):
    first = _env_audit(env)
    _dist(env["site"], "other", {"other/__init__.py": "", "other/mod.py": ""})
    added = _env_audit(env)
    assert not added.stats["snapshot_reused"]
    assert any("other.mod" in f.message for f in added.findings) and not any("other.mod" in f.message for f in first.findings)
    assert _json(added) == _json(_uncached(env))
    import shutil

    shutil.rmtree(env["site"] / "other-1.0.dist-info")
    removed = _env_audit(env)
    assert not removed.stats["snapshot_reused"]
    assert _json(removed) == _json(first)


def test_another_selection_or_configuration_is_its_own_snapshot(env):
    import dataclasses

    _env_audit(env)
    narrower = dataclasses.replace(env["config"], select=("CU101",))
    got = _env_audit(env, narrower)
    assert not got.stats["snapshot_reused"] and _json(got) == _json(_uncached(env, narrower))
    allowing = dataclasses.replace(env["config"], allow={"submodule-traps": ("trap.*",)})
    got = _env_audit(env, allowing)
    assert not got.stats["snapshot_reused"]
    assert not any("trap.sub" in f.message for f in got.findings)
    # each has its own slot: going back reuses the first one's
    assert _env_audit(env).stats["snapshot_reused"]
    # the finishing step still runs on a reused snapshot: a severity override applies
    from cuaudit.model import Severity

    louder = dataclasses.replace(env["config"], severity={"CU101": Severity.ERROR})
    assert all(f.severity is Severity.ERROR for f in _env_audit(env, louder).findings if f.code == "CU101")


def test_another_interpreter_or_its_variables_run_the_audit_again(env, tmp_path, monkeypatch):
    _env_audit(env)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))  # the loader model reads it (EnvironmentInfo.environ)
    assert not _env_audit(env).stats["snapshot_reused"]
    assert _env_audit(env).stats["snapshot_reused"]
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv2")], check=True, capture_output=True)
    [site2] = list((tmp_path / "venv2").glob("lib/python3*/site-packages"))
    _dist(site2, "trap", TRAP)
    _dist(site2, "fine", FINE)
    other = {**env, "python": str(tmp_path / "venv2" / "bin" / "python")}
    got = _env_audit(other)
    assert not got.stats["snapshot_reused"]
    assert _json(got) == _json(_uncached(other))


def test_no_snapshot_without_the_cache_with_probes_or_with_rules_from_elsewhere(env, marker_rules):
    import dataclasses

    config = env["config"]
    assert snapshot.usable(config, [], [])
    assert not snapshot.usable(dataclasses.replace(config, cache=False), [], [])
    assert not snapshot.usable(dataclasses.replace(config, probe=True), [], [])
    # a rule defined in a test has no source file whose stat could key its answers
    from cuaudit import rules

    outside = [c.code for c in rules.select(("ALL",), ()) if not c.__module__.startswith("cuaudit.")]
    assert outside and not snapshot.usable(config, outside, [])
    marked = dataclasses.replace(config, select=("CU1", "CU098"))
    _env_audit(env, marked)
    assert not _env_audit(env, marked).stats["snapshot_reused"]


def test_evidence_answers_are_asked_again(tmp_path):
    """The standard library (and system files, --with) as the rules saw them: a changed answer is a miss."""
    root = make_tree(tmp_path / "lib", {"os.py": "", "json/__init__.py": "", "lib-dynload/_ssl.so": ""})
    asked: snapshot.Questions = {}
    view = snapshot.RecordingEvidence(StdlibFolder(str(root)), None, asked)
    assert view.exists("json/__init__.py") and not view.exists("xml/__init__.py")
    assert view.listdir("lib-dynload") == ("_ssl.so",) and view.fact("python_source", "os.py") is not None
    assert snapshot.ask_again(StdlibFolder(str(root)), asked)
    (root / "xml").mkdir()
    (root / "xml" / "__init__.py").write_text("")  # a module that was missing now exists
    assert not snapshot.ask_again(StdlibFolder(str(root)), asked)
    (root / "xml" / "__init__.py").unlink()
    assert snapshot.ask_again(StdlibFolder(str(root)), asked)
    (root / "os.py").write_text("import sys\n")  # a fact's member changed
    assert not snapshot.ask_again(StdlibFolder(str(root)), asked)


def test_the_standard_library_questions_are_recorded_and_asked_again(env, monkeypatch):
    _dist(env["site"], "usesjson", {"usesjson/__init__.py": "from json import decoder\n", "usesjson/sub.py": ""})
    _env_audit(env)
    from cuaudit.extraction import Extraction

    store = Extraction(env["config"], None).store
    [(slot,)] = store._conn().execute("SELECT key FROM facts WHERE key LIKE 'snapshot:%'").fetchall()
    saved = store.get_many([slot])[slot]
    store.close()
    [(ref, questions)] = saved.evidence["stdlib"]
    # `from json import decoder`: is json.decoder a module? The stdlib's files answer
    assert ref.name == "stdlib" and questions[("member", "json/decoder.py")] is not None
    monkeypatch.setattr(snapshot, "ask_again", lambda artifact, questions: False)
    assert not _env_audit(env).stats["snapshot_reused"]


# -- an installed distribution's key: the stat of every file its RECORD lists, without listing it --------


def test_a_reused_snapshot_lists_no_distribution_and_reads_no_record(env, monkeypatch):
    """The key of a distribution with a RECORD is made from stat calls alone: no member is built, and a
    RECORD of the same stat is not read again (the last run's paths, its hints, stand for it)."""
    from cuaudit.inputs import environment

    cold = _env_audit(env)
    saved, _ = _saved(env)
    assert {ref.name for ref in saved.hints} == {"trap", "fine"}

    def no_listing(self):
        raise AssertionError(f"{self.ref.name} listed on a snapshot's hit")

    def no_reading(path):
        raise AssertionError(f"{path} read on a snapshot's hit")

    monkeypatch.setattr(environment.InstalledDistribution, "list_members", no_listing)
    monkeypatch.setattr(environment, "_read_record", no_reading)
    warm = _env_audit(env)
    assert warm.stats["snapshot_reused"] and _json(warm) == _json(cold)


def test_a_file_removed_from_disk_runs_the_audit_again(env):
    _env_audit(env)
    (env["site"] / "trap" / "sub.py").unlink()  # still in RECORD: skipped as missing, trap.sub gone
    again = _env_audit(env)
    assert not again.stats["snapshot_reused"]
    assert any("missing on disk" in s.reason for s in again.skipped)
    assert _json(again) == _json(_uncached(env))
    assert _env_audit(env).stats["snapshot_reused"]


def test_a_file_replaced_with_the_same_size_and_mtime_runs_the_audit_again(env):
    """Another inode (and ctime), same size and mtime: what `cp -p` or an installer's rename leaves."""
    _env_audit(env)
    init = env["site"] / "trap" / "__init__.py"
    st = os.stat(init)
    new = init.with_name("new.tmp")
    new.write_text("from . import sub\n"[: st.st_size].ljust(st.st_size))
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(new, init)
    assert os.stat(init).st_size == st.st_size and os.stat(init).st_mtime_ns == st.st_mtime_ns
    again = _env_audit(env)
    assert not again.stats["snapshot_reused"] and _json(again) == _json(_uncached(env))


def test_a_record_listing_other_files_runs_the_audit_again(env):
    """A file on disk becomes a member when the RECORD names it (and a missing one a skip), though no
    file's stat changed: the RECORD here does not list itself, as some installers write it."""
    (env["site"] / "fine" / "extra.py").write_text("import fine.nowhere\n")
    record = env["site"] / "fine-1.0.dist-info" / "RECORD"
    record.write_text(record.read_text().replace("fine-1.0.dist-info/RECORD,,\n", ""))
    before = _env_audit(env)
    for old, new in (("fine/part.py,,\n", "fine/extra.py,,\n"), ("fine/extra.py,,\n", "fine/gone.py,,\n")):
        text = record.read_text()
        assert old in text
        record.write_text(text + new)
        again = _env_audit(env)
        assert not again.stats["snapshot_reused"]
        assert _json(again) == _json(_uncached(env)) != _json(before)
    assert any(s.location.member == "fine/gone.py" for s in again.skipped)


def test_a_file_turned_into_a_fifo_runs_the_audit_again(env):
    _env_audit(env)
    part = env["site"] / "fine" / "part.py"
    part.unlink()
    os.mkfifo(part)
    again = _env_audit(env)
    assert not again.stats["snapshot_reused"]
    assert any(s.reason == "not a regular file; not read" for s in again.skipped)
    assert _json(again) == _json(_uncached(env))


def test_distributions_without_a_stat_key_are_listed_for_the_snapshot(env):
    """An editable install (its sources outside the site dir) has no RECORD-only key: it is listed, and a
    change to its sources runs the audit again.  So are an egg-info and a RECORD that names no file of
    its metadata folder (the listing adds METADATA then)."""
    from cuaudit.inputs.environment import load_environment

    proj = env["site"].parent.parent.parent.parent / "proj"
    make_tree(proj, {"edpkg/__init__.py": "X = 1\n", "edpkg/sub.py": ""})
    make_tree(env["site"], {
        "edpkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: edpkg\nVersion: 1.0\n",
        "edpkg-1.0.dist-info/RECORD": "__editable__.edpkg-1.0.pth,,\nedpkg-1.0.dist-info/METADATA,,\n",
        "edpkg-1.0.dist-info/top_level.txt": "edpkg\n",
        "edpkg-1.0.dist-info/direct_url.json": '{"url": "file:///x", "dir_info": {"editable": true}}',
        "__editable__.edpkg-1.0.pth": f"{proj}\n",
        "nometa-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: nometa\nVersion: 1.0\n",
        "nometa-1.0.dist-info/RECORD": "nometa.py,,\n",
        "nometa.py": "",
        "oldegg-1.0.egg-info/PKG-INFO": "Metadata-Version: 1.1\nName: oldegg\nVersion: 1.0\n",
    })
    keys = {d.ref.name: d.listing_key() for d in load_environment(env["python"]).distributions}
    assert keys["trap"] is not None and keys["fine"] is not None
    assert keys["edpkg"] is keys["nometa"] is keys["oldegg"] is None
    cold = _env_audit(env)
    assert any(f.code == "CU101" and "edpkg.sub" in f.message for f in cold.findings)
    assert _env_audit(env).stats["snapshot_reused"]
    init = proj / "edpkg" / "__init__.py"
    init.write_text("from . import sub\n")
    os.utime(init, ns=(1, 1))
    again = _env_audit(env)
    assert not again.stats["snapshot_reused"] and not any("edpkg.sub" in f.message for f in again.findings)
    assert _json(again) == _json(_uncached(env))


def test_a_listing_after_its_key_stats_each_file_once_and_lists_the_same_members(env, monkeypatch):
    """The snapshot's content (``listing_key``) and the listing that follows a miss share one ``stat``
    of each RECORD path: the members are those a listing alone finds, with the keys the content holds."""
    import cuaudit.inputs.environment as environment
    from cuaudit.inputs.environment import load_environment

    def listed(dist):
        return [(m.path, m.kind, m.size, m.content_key) for m in dist.list_members()]

    alone = {d.ref.name: listed(d) for d in load_environment(env["python"]).distributions}
    calls: list[str] = []
    real_stat = os.stat

    def counting(path, *args, **kwargs):
        calls.append(os.fsdecode(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(environment.os, "stat", counting)
    for dist in load_environment(env["python"]).distributions:
        if dist.ref.name not in ("trap", "fine"):
            continue
        calls.clear()
        key = dist.listing_key()
        assert key is not None
        members = listed(dist)
        assert members == alone[dist.ref.name]
        record = [p for p in dist.record if not p.endswith(".pyc")]
        assert sorted(c for c in calls if not os.path.isabs(c)) == sorted(record)  # each once, by the key
        # none again by the listing (the RECORD's own stat says which RECORD the key was made of)
        assert {c for c in calls if os.path.isabs(c)} <= {os.path.join(dist.meta_dir, "RECORD")}
        # every member's key is the identity the snapshot's content was made of
        assert all(m[3].split(":", 1)[1].rsplit(":", 1)[0] in key[0] for m in members)


def test_the_stats_the_content_took_serve_hostile_names_and_special_files(tmp_path):
    """A RECORD path that is not UTF-8 and carries a terminal escape, and one that is a FIFO: the
    listing after ``listing_key`` keeps the first as a member under an encodable key and skips the
    second without opening it, exactly as a listing alone does."""
    from cuaudit.inputs.environment import InstalledDistribution

    site = tmp_path / "site"
    info = site / "odd-1.0.dist-info"
    (site / "odd").mkdir(parents=True)
    info.mkdir()
    odd = b"odd/\x1b[31mred\xff.py"
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: odd\nVersion: 1.0\n")
    (info / "RECORD").write_bytes(b"odd/__init__.py,,\n" + odd + b",,\nodd/pipe.py,,\nodd-1.0.dist-info/METADATA,,\n")
    (site / "odd" / "__init__.py").write_text("X = 1\n")
    with open(os.fsencode(site) + b"/" + odd, "wb") as fh:
        fh.write(b"Y = 2\n")
    os.mkfifo(site / "odd" / "pipe.py")

    def dist():
        return InstalledDistribution(None, "odd", "1.0", str(info))

    def listed(d):
        return [(m.path, m.size, m.content_key) for m in d.list_members()], [(s.location.member, s.reason) for s in d.skipped]

    keyed = dist()
    assert keyed.listing_key() is not None
    members, skipped = listed(keyed)
    assert (members, skipped) == listed(dist())
    assert skipped == [("odd/pipe.py", "not a regular file; not read")]
    [(path, _size, key)] = [m for m in members if "red" in m[0]]
    assert path == os.fsdecode(odd) and key.encode("utf-8")  # kept as data, under a key SQLite can store


def test_bytecode_written_by_an_import_keeps_the_snapshot(env):
    """RECORD may list ``__pycache__`` files: never members, never stat'ed, so importing the package keeps the key."""
    record = env["site"] / "fine-1.0.dist-info" / "RECORD"
    record.write_text(record.read_text() + "fine/__pycache__/part.cpython-311.pyc,,\n")
    _env_audit(env)
    make_tree(env["site"], {"fine/__pycache__/part.cpython-311.pyc": "bytes"})
    assert _env_audit(env).stats["snapshot_reused"]


def _saved(env: dict):
    """The one snapshot in the store, and a way to write it back changed."""
    from cuaudit.extraction import Extraction

    store = Extraction(env["config"], None).store
    [(slot,)] = store._conn().execute("SELECT key FROM facts WHERE key LIKE 'snapshot:%'").fetchall()
    saved = store.get_many([slot])[slot]
    store.close()

    def put(changed) -> None:
        store = Extraction(env["config"], None).store
        snapshot.save(store, slot, changed)
        store.close()

    return saved, put


def test_hints_count_only_for_the_code_that_left_them(env):
    """Hints are the last run's reading of each RECORD: used when cuaudit's code is the same, else read again."""
    import dataclasses

    _env_audit(env)
    saved, put = _saved(env)
    wrong = {ref: (record, by_names, []) for ref, (record, by_names, _paths) in saved.hints.items()}
    # the same code: the hints are taken as they are (no path, no file stat'ed): another key, a miss
    put(dataclasses.replace(saved, hints=wrong))
    assert not _env_audit(env).stats["snapshot_reused"]
    # another code's hints are left alone: the RECORDs are read, and the key is the one saved
    put(dataclasses.replace(saved, hints=wrong, code="another cuaudit"))
    assert _env_audit(env).stats["snapshot_reused"]
