"""CU317: a module compiled against one NumPy major next to a NumPy of the other.

The fixture is a real Cython module that cimports numpy, compiled here with
the test environment's NumPy 2.x headers; the NumPy next to it is a tiny
wheel that only names a version.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

from cuaudit import audit  # noqa: E402
from cuaudit.config import Config  # noqa: E402
from conftest import corpus_file  # noqa: E402


def _build(root, numpy_dir: str, include: str) -> None:
    pkg = root / "numabi"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ext.pyx").write_text(
        f"# distutils: include_dirs = {include}\n"
        "cimport numpy as cnp\ncnp.import_array()\ndef kind(cnp.dtype d):\n    return d.kind\n"
    )
    # `cimport numpy` reads numpy/__init__.pxd from the first numpy on the path: the one built against
    env = {**os.environ, "PYTHONPATH": numpy_dir}
    proc = subprocess.run([sys.executable, "-m", "Cython.Build.Cythonize", "-i", "-q", "numabi/ext.pyx"], cwd=root,
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        pytest.fail(f"cythonize failed: {proc.stderr[-2000:]}")
    for junk in ("ext.c", "ext.pyx"):
        (pkg / junk).unlink()
    shutil.rmtree(root / "build", ignore_errors=True)


@pytest.fixture(scope="module")
def built_with_numpy1(tmp_path_factory, corpus):
    """A module compiled with the NumPy 1.26.4 wheel's headers (from the corpus)."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    wheel = corpus_file(corpus, "numpy-1.26.4-*.whl")
    src = tmp_path_factory.mktemp("numpy126")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(src, [n for n in zf.namelist() if n.startswith("numpy/") and n.endswith((".h", ".pxd", "__init__.py"))])
    root = tmp_path_factory.mktemp("numabi1")
    _build(root, str(src), str(src / "numpy" / "core" / "include"))
    return root


@pytest.fixture(scope="module")
def built_with_numpy2(tmp_path_factory):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    root = tmp_path_factory.mktemp("numabi2")
    _build(root, str(Path(np.__file__).parent.parent), np.get_include())
    return root


def _run(paths):
    return audit([str(p) for p in paths], config=Config(cache=False, select=("CU317",)))


def test_built_with_numpy1_next_to_numpy2(built_with_numpy1, wheel_factory):
    report = _run([built_with_numpy1, wheel_factory("numpy", "2.0.2", {"numpy/__init__.py": ""})])
    assert [f.code for f in report.findings] == ["CU317"]
    f = report.findings[0]
    assert f.evidence["expected_size"] == 96 and f.evidence["built_with"] == "1.x (1.20-1.26)"
    assert "compiled using NumPy 1.x cannot be run in NumPy 2.x" in f.message and "numpy 2.0.2" in f.message
    # with the NumPy it was built for, or with no NumPy named, nothing is claimed
    assert _run([built_with_numpy1, wheel_factory("numpy", "1.26.4", {"numpy/__init__.py": ""})]).findings == []
    assert _run([built_with_numpy1]).findings == []


def test_built_with_numpy2_runs_on_both(built_with_numpy2, wheel_factory):
    """NumPy 2 headers target 1.19+ by default: no claim next to 1.26 or 2.x."""
    for version in ("1.26.4", "2.1.0"):
        assert _run([built_with_numpy2, wheel_factory("numpy", version, {"numpy/__init__.py": ""})]).findings == []
