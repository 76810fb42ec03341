"""``cuaudit check FILE.py`` resolves the script's imports against this interpreter's environment,
and cross-package checks say when a provider was not among the audited artifacts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import corpus_file, make_venv, make_wheel


@pytest.fixture(scope="module")
def trap_python(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("scriptenv")
    wheel = make_wheel(base, "trappkg", "1.0", {
        "trappkg/__init__.py": "",
        "trappkg/comm/__init__.py": "",
        "trappkg/comm/nccl.py": "def init():\n    return 1\n",
    })
    return make_venv(base / "venv", [wheel])


def test_script_imports_resolve_against_the_current_interpreter(cli, trap_python, tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text("import trappkg\nimport notinstalled_xyz\n\ntrappkg.comm.nccl.init()\n")
    monkeypatch.setattr(sys, "executable", str(trap_python))  # "the current interpreter"
    rc, out, _ = cli("check", script, "--format", "json", "--isolated")
    doc = json.loads(out)
    assert rc == 1
    assert [(f["code"], f["location"]["line"]) for f in doc["findings"]] == [("CU104", 4)]
    # the evidence distribution is read, not reported on
    assert [a["path"] for a in doc["inputs"]] == [str(script)]
    (skip,) = doc["skipped"]
    assert skip["location"]["line"] == 2 and "import notinstalled_xyz: not installed in" in skip["reason"]


def test_script_without_resolvable_imports_is_not_a_silent_no_findings(cli, tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import notinstalled_xyz\nnotinstalled_xyz.a.b\n")
    rc, out, _ = cli("check", script, "--isolated", "-q")
    assert rc == 0 and "[1 skipped]" in out
    rc, out, _ = cli("check", script, "--isolated", "-q", "-v")
    assert "import notinstalled_xyz: not installed" in out


def test_with_python_the_environment_is_audited_as_before(cli, trap_python, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import trappkg\n\ntrappkg.comm.nccl.init()\n")
    rc, out, _ = cli("check", script, "--python", trap_python, "--format", "json", "--isolated", "--select", "CU104")
    assert [f["code"] for f in json.loads(out)["findings"]] == ["CU104"]


@pytest.mark.corpus
def test_rmm_alone_says_its_provider_was_not_audited(corpus, cli):
    rmm = corpus_file(corpus, "rmm_cu12-24.12.0-*.whl")
    rc, out, _ = cli("check", rmm, "--select", "CU3", "--format", "json", "--isolated")
    doc = json.loads(out)
    assert rc == 0 and doc["findings"] == []
    notes = [s for s in doc["skipped"] if "C-API provider `cuda.ccudart`" in s["reason"]]
    assert len(notes) == 1
    assert "cuaudit check rmm-cu12==24.12.0 cuda-python==<version>" in notes[0]["reason"]
    # named together, the break is found and nothing is said about an absent provider
    rc, out, _ = cli("check", rmm, corpus_file(corpus, "cuda_python-12.6.1-*.whl"), "--select", "CU3", "--format",
                     "json", "--isolated")
    doc = json.loads(out)
    assert rc == 1 and [f["code"] for f in doc["findings"]] == ["CU301"]
    assert not [s for s in doc["skipped"] if "C-API provider" in s["reason"]]
