"""The snapshot of ``cuaudit check`` (``snapshot.py``): an unchanged wheel, sdist or tree reuses
the findings of its last check without reading a fact or running a rule, and any change the
findings depend on (a member, the file itself, the configuration, the selection, cuaudit, the
budgets) makes the check run again, with the findings an uncached check gives.

Also the rule index (``rules/_index.py``) a snapshot's hit and start-up read instead of
importing every rule module: it must match the rules.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import REPO, make_tree, make_wheel

from cuaudit import audit, engine, extraction, snapshot
from cuaudit.config import Config
from cuaudit.report import json_report

#: `import trap` does not bind trap.sub (CU101); use.py reaches it through attributes at line 2 (CU104),
#: suppressed inline, and at line 3 (CU104), reported
FILES = {
    "trap/__init__.py": "X = 1\n",
    "trap/sub.py": "Y = 2\n",
    "trap/use.py": "import trap\nprint(trap.sub.Y)  # cuaudit: ignore[CU104]\nZ = trap.sub.Y\n",
}


def _json(report) -> str:
    data = json.loads(json_report.render(report))
    data.pop("stats", None)
    return json.dumps(data, sort_keys=True)


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return Config(select=("CU1",), cache=True, cache_dir=str(tmp_path / "cache"), jobs=1)


def _check(path: Path, config: Config):
    return audit([str(path)], config=config)


def _uncached(path: Path, config: Config):
    return audit([str(path)], config=dataclasses.replace(config, cache=False))


def _no_rules_or_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, reading a fact or running a rule fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("a snapshot hit read facts")

    monkeypatch.setattr(extraction.Extraction, "run", refuse)
    monkeypatch.setattr(engine, "RuleContext", refuse)


def test_an_unchanged_wheel_reuses_its_findings_without_facts_or_rules(tmp_path, config, monkeypatch):
    wheel = make_wheel(tmp_path, "trap", "1.0", FILES)
    cold = _check(wheel, config)
    assert not cold.stats["snapshot_reused"]
    assert [(f.code, f.location.line) for f in cold.findings if f.code == "CU104"] == [("CU104", 3)]
    assert cold.suppressed == 1 and any(f.code == "CU101" and "trap.sub" in f.message for f in cold.findings)
    _no_rules_or_facts(monkeypatch)
    from cuaudit.inputs.wheel import ZipArtifact

    def unlisted(self):
        raise AssertionError("the zip directory was read: the wheel stands by its file's identity")

    monkeypatch.setattr(ZipArtifact, "list_members", unlisted)
    warm = _check(wheel, config)
    assert warm.stats["snapshot_reused"] and warm.suppressed == 1
    assert warm.stats["facts_extracted"] == 0 and warm.stats["facts_cached"] == cold.stats["facts_extracted"]
    monkeypatch.undo()
    assert _json(warm) == _json(cold) == _json(_uncached(wheel, config))


def test_a_rewritten_or_touched_wheel_runs_the_check_again(tmp_path, config):
    wheel = make_wheel(tmp_path, "trap", "1.0", FILES)
    _check(wheel, config)
    fixed = {**FILES, "trap/__init__.py": "from . import sub, use\n"}  # binds both: the CU101s go
    st = os.stat(wheel)
    make_wheel(tmp_path, "trap", "1.0", fixed)
    os.utime(wheel, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime: the identity still differs (ctime, size)
    again = _check(wheel, config)
    assert not again.stats["snapshot_reused"] and not any(f.code == "CU101" for f in again.findings)
    assert _json(again) == _json(_uncached(wheel, config))
    assert _check(wheel, config).stats["snapshot_reused"]
    os.utime(wheel, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # the same bytes, touched
    touched = _check(wheel, config)
    assert not touched.stats["snapshot_reused"] and _json(touched) == _json(again)


def test_wheels_checked_in_turn_each_keep_their_snapshot(tmp_path, config):
    one = make_wheel(tmp_path, "trap", "1.0", FILES)
    two = make_wheel(tmp_path, "trap", "2.0", {**FILES, "trap/__init__.py": "from . import sub, use\n"})
    first = [_check(one, config), _check(two, config)]
    again = [_check(one, config), _check(two, config)]
    assert [r.stats["snapshot_reused"] for r in first + again] == [False, False, True, True]
    assert [_json(r) for r in again] == [_json(r) for r in first]


def test_an_sdist_and_a_tree_run_the_check_again_when_a_member_changes(tmp_path, config):
    tree = make_tree(tmp_path / "trap-1.0", {**FILES, "pyproject.toml": "[project]\nname = 'trap'\nversion = '1.0'\n"})
    sdist = tmp_path / "trap-1.0.tar.gz"

    def pack() -> None:
        with tarfile.open(sdist, "w:gz") as tf:
            tf.add(tree, arcname="trap-1.0")

    pack()
    for path in (sdist, tree):
        first = _check(path, config)
        assert _check(path, config).stats["snapshot_reused"]
        assert any(f.code == "CU101" for f in first.findings)
    (tree / "trap" / "__init__.py").write_text("from . import sub, use\n")
    pack()
    for path in (sdist, tree):
        again = _check(path, config)
        assert not again.stats["snapshot_reused"] and not any(f.code == "CU101" for f in again.findings)
        assert _json(again) == _json(_uncached(path, config))


def test_configuration_selection_budgets_and_cuaudit_each_key_the_snapshot(tmp_path, config, monkeypatch):
    wheel = make_wheel(tmp_path, "trap", "1.0", FILES)
    _check(wheel, config)
    narrower = dataclasses.replace(config, select=("CU101",))
    got = _check(wheel, narrower)
    assert not got.stats["snapshot_reused"] and _json(got) == _json(_uncached(wheel, narrower))
    allowing = dataclasses.replace(config, allow={"submodule-traps": ("trap.*",)})
    got = _check(wheel, allowing)
    assert not got.stats["snapshot_reused"] and _json(got) == _json(_uncached(wheel, allowing))
    assert _check(wheel, config).stats["snapshot_reused"]  # each has its own slot
    monkeypatch.setenv("CUAUDIT_BUDGET_RATIO", "2")  # bounds are read from the environment (docs/security.md)
    assert not _check(wheel, config).stats["snapshot_reused"]
    monkeypatch.delenv("CUAUDIT_BUDGET_RATIO")
    assert _check(wheel, config).stats["snapshot_reused"]
    monkeypatch.setattr(snapshot, "_loader_identity", lambda: "another loader")  # the machine's ld.so changed
    assert not _check(wheel, config).stats["snapshot_reused"]
    monkeypatch.undo()
    assert _check(wheel, config).stats["snapshot_reused"]
    monkeypatch.setattr(snapshot, "__version__", "0.0.0-other")  # another cuaudit
    assert not _check(wheel, config).stats["snapshot_reused"]


def test_code_identity_follows_cuaudit_s_own_files(tmp_path):
    pkg = make_tree(tmp_path / "pkg", {"a.py": "", "rules/b.py": "", "__pycache__/a.cpython-311.pyc": ""})
    before = snapshot.code_identity(str(pkg))
    assert snapshot.code_identity(str(pkg)) == before
    (pkg / "__pycache__" / "a.cpython-311.pyc").write_text("compiled again")
    assert snapshot.code_identity(str(pkg)) == before  # bytecode is not the code
    st = os.stat(pkg / "rules" / "b.py")
    os.utime(pkg / "rules" / "b.py", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert snapshot.code_identity(str(pkg)) != before


def test_a_hit_imports_no_rule_or_fact_module(tmp_path):
    """Start-up and a snapshot's hit import only what they use (the rule index, not the rules)."""
    wheel = make_wheel(tmp_path, "trap", "1.0", FILES)
    probe = (
        "import sys; from cuaudit.cli import main; rc = main(sys.argv[1:]); "
        "loaded = sorted(m for m in sys.modules if m.startswith(('cuaudit.rules.', 'cuaudit.facts.', 'cuaudit.analysis.'))); "
        "print(repr(loaded), file=sys.stderr); sys.exit(0)"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    args = [sys.executable, "-c", probe, "check", str(wheel), "--cache-dir", str(tmp_path / "cache"), "--select", "CU1",
            "-f", "json", "-q"]
    first = subprocess.run(args, capture_output=True, text=True, env=env, check=True)
    assert "cuaudit.rules.imports" in first.stderr  # the miss ran the rules
    second = subprocess.run(args, capture_output=True, text=True, env=env, check=True)
    assert json.loads(second.stdout)["stats"]["snapshot_reused"]
    # the engine's evidence view (a base class) and the suppression facts the snapshot holds
    assert eval(second.stderr.strip().splitlines()[-1]) == [
        "cuaudit.facts.evidence", "cuaudit.facts.suppressions", "cuaudit.rules._index"]
    assert json.loads(second.stdout)["findings"] == json.loads(first.stdout)["findings"]
    version = subprocess.run([sys.executable, "-c", probe, "--version"], capture_output=True, text=True, env=env)
    assert eval(version.stderr.strip().splitlines()[-1]) == []


def test_the_rule_index_matches_the_rules():
    # a subprocess: a clean registry, without the rules other tests define
    code = "from cuaudit import rules; import sys; sys.stdout.write(rules.index_source())"
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONPATH": str(REPO / "src")}).stdout
    committed = (REPO / "src" / "cuaudit" / "rules" / "_index.py").read_text(encoding="utf-8")
    assert fresh == committed, "stale rule index: run python scripts/gen_rule_docs.py"


def test_the_index_answers_as_the_rule_classes_do():
    from cuaudit import rules

    for cls in rules.all_rules():
        if not cls.__module__.startswith("cuaudit."):
            continue  # a test's rule: not in the index
        info = rules.info(cls.code)
        assert (info.module, info.qualname, info.name, info.needs, info.emitted_by_engine) == \
            (cls.__module__, cls.__qualname__, cls.name, tuple(cls.needs), cls.emitted_by_engine)
        assert rules.get(cls.code) is cls
    assert [c.code for c in rules.select(("CU1", "CU2"), ("CU20",))] == rules.selected_codes(("CU1", "CU2"), ("CU20",))
    with pytest.raises(KeyError):
        rules.info("CU999")
