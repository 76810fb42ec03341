"""The CI integration of this repository: action.yml, .pre-commit-hooks.yaml, the README snippet.

Each file is parsed, and the commands it runs are run here, on wheels and trees built by the
tests, with `cuaudit` on PATH meaning this checkout (a shim), not anything from an index.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from conftest import REPO, make_wheel


@pytest.fixture
def cuaudit_on_path(tmp_path) -> dict[str, str]:
    """An environment whose `cuaudit` runs this checkout's code."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "cuaudit"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m cuaudit \"$@\"\n")
    shim.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["CI"] = "1"
    return env


def _wheel_with_a_trap(directory: Path) -> Path:
    return make_wheel(directory, "trapdemo", "1.0", {
        "trapdemo/__init__.py": "import numpy as np\n\nOK = np.can_cast(300, np.uint8)\n",
    })


# -- action.yml ----------------------------------------------------------------------------------


def test_action_installs_from_the_repository_and_uploads_whatever_the_status():
    action = yaml.safe_load((REPO / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    steps = {s["name"]: s for s in action["runs"]["steps"]}
    install = steps["Install cuaudit from this repository"]
    assert "github.action_path" in install["env"]["SRC"] and "pip install" in install["run"]
    assert "pip install cuaudit" not in install["run"]  # not on PyPI
    upload = steps["Upload SARIF"]
    assert upload["uses"].startswith("github/codeql-action/upload-sarif@")
    assert upload["if"].startswith("always()")
    assert steps["Exit status"]["if"].startswith("always()")
    # no ${{ }} expression is pasted into a script (script injection): inputs arrive as env
    for s in action["runs"]["steps"]:
        assert "${{" not in s.get("run", "")


def test_action_keeps_the_fact_cache_between_runs(tmp_path, cuaudit_on_path):
    action = yaml.safe_load((REPO / "action.yml").read_text())
    steps = action["runs"]["steps"]
    restore = next(s for s in steps if str(s.get("uses", "")).startswith("actions/cache@"))
    audit = next(s for s in steps if s.get("id") == "audit")
    assert steps.index(restore) < steps.index(audit) and restore["if"] == "inputs.cache == 'true'"
    folder = restore["with"]["path"]
    assert audit["env"]["CUAUDIT_CACHE_DIR"] == folder
    assert restore["with"]["restore-keys"] and restore["with"]["key"].startswith(restore["with"]["restore-keys"])
    # one entry per Python grammar, as the facts of sources are kept (store.GRAMMAR), named by the install step
    install = next(s for s in steps if s.get("id") == "install")
    assert "${{ steps.install.outputs.grammar }}-" in restore["with"]["restore-keys"]
    assert steps.index(install) < steps.index(restore)
    [line] = [ln for ln in install["run"].splitlines() if "grammar=" in ln]
    python_code = line.split("-c '", 1)[1].split("'", 1)[0]
    from cuaudit.store import GRAMMAR

    printed = subprocess.run([sys.executable, "-c", python_code], capture_output=True, text=True, check=True)
    assert printed.stdout.strip() == GRAMMAR and ">> \"$GITHUB_OUTPUT\"" in line
    # what the step leaves there serves the next run's wheel, built again (another file): by content
    cache = tmp_path / "cache"
    dists = []
    for build in ("a", "b"):
        dists.append(tmp_path / build / "dist")
        dists[-1].mkdir(parents=True)
        _wheel_with_a_trap(dists[-1])
    env = {**cuaudit_on_path, "PATHS": "dist/*.whl", "ARGS": "--isolated", "SARIF": "cuaudit.sarif",
           "GITHUB_OUTPUT": str(tmp_path / "out"), "CUAUDIT_CACHE_DIR": str(cache)}
    proc = subprocess.run(["bash", "-e", "-c", audit["run"]], cwd=dists[0].parent, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    again = subprocess.run(["cuaudit", "check", *map(str, dists[1].glob("*.whl")), "--isolated", "--format", "json",
                            "--exit-zero"], env={**cuaudit_on_path, "CUAUDIT_CACHE_DIR": str(cache)},
                           capture_output=True, text=True)
    stats = json.loads(again.stdout)["stats"]
    assert stats["facts_by_content"] > 0 and stats["facts_by_content"] == stats["facts_cached"]


def test_action_audit_step_writes_sarif_and_records_the_status(tmp_path, cuaudit_on_path):
    action = yaml.safe_load((REPO / "action.yml").read_text())
    audit = next(s for s in action["runs"]["steps"] if s.get("id") == "audit")
    dist = tmp_path / "dist"
    dist.mkdir()
    _wheel_with_a_trap(dist)
    out = tmp_path / "github_output"
    env = {**cuaudit_on_path, "PATHS": "dist/*.whl", "ARGS": "--select CU402 --isolated", "SARIF": "cuaudit.sarif",
           "GITHUB_OUTPUT": str(out)}
    proc = subprocess.run(["bash", "-e", "-c", audit["run"]], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr  # findings never stop the step before the upload
    assert out.read_text().strip() == "exit-code=1"
    sarif = json.loads((tmp_path / "cuaudit.sarif").read_text())
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["CU402"]
    exit_step = next(s for s in action["runs"]["steps"] if s["name"] == "Exit status")
    proc = subprocess.run(["bash", "-e", "-c", exit_step["run"]], env={**env, "STATUS": "1"}, capture_output=True)
    assert proc.returncode == 1


def test_readme_ci_snippet_installs_from_git_and_uploads_always():
    readme = (REPO / "README.md").read_text()
    section = readme.split("### In CI", 1)[1].split("\n## ", 1)[0]
    assert "pip install cuaudit " not in section and "pip install cuaudit\n" not in section
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
    steps = [s for b in blocks if isinstance(yaml.safe_load(b), list) for s in yaml.safe_load(b)]
    runs = " ".join(s.get("run", "") for s in steps)
    assert "git+https://" in runs and "--exit-zero" in runs or any(s.get("if", "").startswith("always()") for s in steps)
    uploads = [s for s in steps if str(s.get("uses", "")).startswith("github/codeql-action/upload-sarif")]
    assert uploads and all(str(s.get("if", "")).startswith("always()") for s in uploads)


# -- .pre-commit-hooks.yaml -----------------------------------------------------------------------------


def _hooks() -> dict[str, dict]:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    return {h["id"]: h for h in hooks}


def test_precommit_manifest_schema():
    hooks = _hooks()
    assert set(hooks) == {"cuaudit-source", "cuaudit-build-scripts", "cuaudit-wheels"}
    allowed = {"id", "name", "description", "entry", "language", "files", "exclude", "types", "types_or",
               "exclude_types", "always_run", "pass_filenames", "require_serial", "stages", "args", "minimum_pre_commit_version",
               "verbose", "fail_fast", "language_version", "additional_dependencies", "log_file"}
    for h in hooks.values():
        assert {"id", "name", "entry", "language"} <= set(h) <= allowed, h["id"]
        assert h["language"] == "python"  # pre-commit installs this repository (setup via pyproject) into a venv
        if "files" in h:
            re.compile(h["files"])
        for stage in h.get("stages", ()):
            assert stage in {"pre-commit", "pre-push", "manual", "commit-msg", "post-checkout"}
    assert re.search(hooks["cuaudit-build-scripts"]["files"], "pkg/setup.py")
    assert not re.search(hooks["cuaudit-build-scripts"]["files"], "pkg/setup_helpers.py")


def _run_hook(hook: dict, files: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    cmd = shlex.split(hook["entry"]) + list(hook.get("args", ())) + (files if hook.get("pass_filenames", True) else [])
    return subprocess.run(cmd, cwd=cwd, env={**env, "CUAUDIT_CACHE_DIR": str(cwd / ".cache")},
                          capture_output=True, text=True)


def test_source_hook_runs_on_the_files_pre_commit_passes(tmp_path, cuaudit_on_path):
    (tmp_path / "ok.py").write_text("import numpy as np\nx = np.can_cast(np.int16, np.uint8)\n")
    (tmp_path / "bad.py").write_text("import numpy as np\nx = np.can_cast(300, np.uint8)\n")
    hook = _hooks()["cuaudit-source"]
    assert _run_hook(hook, ["ok.py"], tmp_path, cuaudit_on_path).returncode == 0
    bad = _run_hook(hook, ["ok.py", "bad.py"], tmp_path, cuaudit_on_path)
    assert bad.returncode == 1 and "CU402" in bad.stdout


def test_build_script_hook_finds_the_gpu_probe(tmp_path, cuaudit_on_path):
    (tmp_path / "setup.py").write_text(textwrap.dedent("""\
        import setuptools
        import torch
        from torch.utils.cpp_extension import CUDAExtension, CppExtension
        if torch.cuda.is_available():
            ext = [CUDAExtension("pkg._k", ["k.cu"])]
        else:
            ext = [CppExtension("pkg._k", ["k.cpp"])]
        setuptools.setup(name="pkg", ext_modules=ext)
        """))
    proc = _run_hook(_hooks()["cuaudit-build-scripts"], ["setup.py"], tmp_path, cuaudit_on_path)
    assert proc.returncode == 1 and "CU501" in proc.stdout


def test_wheel_hook_audits_dist_and_is_quiet_without_it(tmp_path, cuaudit_on_path):
    hook = _hooks()["cuaudit-wheels"]
    proc = _run_hook(hook, [], tmp_path, cuaudit_on_path)
    assert proc.returncode == 0 and "nothing to audit" in proc.stdout
    (tmp_path / "dist").mkdir()
    _wheel_with_a_trap(tmp_path / "dist")
    proc = _run_hook(hook, [], tmp_path, cuaudit_on_path)
    assert proc.returncode == 1 and "CU402" in proc.stdout
