"""A canary package that writes a marker file when imported, built, or started
by site (``.pth``, ``sitecustomize``), audited as a tree, an sdist, a wheel and
installed in a venv: after ``cuaudit check`` and ``cuaudit env`` (the real CLI,
in a subprocess), no marker exists.  Nothing audited is ever run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import make_tree, make_wheel


def _writer(marker_dir: Path, name: str) -> str:
    return f"import os; open(os.path.join({str(marker_dir)!r}, {name!r}), 'w').write('ran')\n"


@pytest.fixture(scope="module")
def canary(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("canary")
    markers = base / "markers"
    markers.mkdir()
    files = {
        "canary/__init__.py": _writer(markers, "imported"),
        "canary/sub.py": _writer(markers, "submodule-imported"),
        "setup.py": _writer(markers, "setup-py-ran") + "from setuptools import setup\nsetup(name='canary', version='1.0')\n",
        "pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
                          '[project]\nname = "canary"\nversion = "1.0"\n',
        "conftest.py": _writer(markers, "conftest-imported"),
        # a tree named as the working directory: `python -c` would import these first
        "json.py": _writer(markers, "json-shadow-imported") + "from _json import *\n",
        "sysconfig.py": _writer(markers, "sysconfig-shadow-imported"),
    }
    tree = make_tree(base / "canary-1.0", files)
    sdist = base / "canary-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        tf.add(tree, arcname="canary-1.0")
    wheel_files = {
        "canary/__init__.py": files["canary/__init__.py"],
        "canary/sub.py": files["canary/sub.py"],
        "canary-startup.pth": _writer(markers, "pth-import-ran"),
        "sitecustomize.py": _writer(markers, "sitecustomize-ran"),
    }
    wheel = make_wheel(base, "canary", "1.0", wheel_files)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--no-deps",
                           "-q", str(wheel)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    [site] = list(venv.glob("lib/python3*/site-packages"))
    assert (site / "canary-startup.pth").exists() and (site / "sitecustomize.py").exists()
    assert list(markers.iterdir()) == [], "installing the wheel must not run it either"
    return {"tree": tree, "sdist": sdist, "wheel": wheel, "python": python, "markers": markers, "site": site}


ENTRY_POINTS = [
    pytest.param([str(Path(sys.executable).with_name("cuaudit"))], id="console-script"),
    pytest.param([sys.executable, "-m", "cuaudit"], id="python-m"),
]


def _cuaudit(entry: list[str], *args: str, cwd: Path) -> subprocess.CompletedProcess:
    if not os.path.exists(entry[0]):
        pytest.skip(f"{entry[0]} is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTHONPATH")}
    return subprocess.run([*entry, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_check_runs_nothing(canary, entry):
    proc = _cuaudit(entry, "check", str(canary["tree"]), str(canary["sdist"]), str(canary["wheel"]), "-f", "json",
                    cwd=canary["tree"])
    assert proc.returncode in (0, 1), proc.stderr
    assert '"kind": "sdist"' in proc.stdout and '"kind": "wheel"' in proc.stdout
    assert sorted(os.listdir(canary["markers"])) == []


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_check_of_the_working_directory_runs_nothing(canary, entry):
    proc = _cuaudit(entry, "check", cwd=canary["tree"])
    assert proc.returncode in (0, 1), proc.stderr
    assert sorted(os.listdir(canary["markers"])) == []


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_env_runs_nothing(canary, entry):
    proc = _cuaudit(entry, "env", "--python", str(canary["python"]), "-f", "json", cwd=canary["tree"])
    assert proc.returncode in (0, 1), proc.stderr
    assert '"name": "canary"' in proc.stdout  # it was found and audited
    assert sorted(os.listdir(canary["markers"])) == []


def test_the_canary_works(canary, tmp_path):
    """The control: starting the venv normally does run the .pth line and sitecustomize."""
    subprocess.run([str(canary["python"]), "-c", "pass"], check=True, cwd=tmp_path)
    ran = sorted(os.listdir(canary["markers"]))
    for name in ran:
        os.remove(canary["markers"] / name)
    assert ran == ["pth-import-ran", "sitecustomize-ran"]
