"""CU317: a module compiled against the C-API of one NumPy next to a NumPy without it.

The fixtures are real modules compiled here: a Cython module that cimports
numpy, and a C module that calls ``import_array()``, with the NumPy 1.26.4
wheel's headers (from the corpus) or the test environment's NumPy 2.x
headers; the NumPy next to them is a tiny wheel that only names a version.
Where the claim is about what an import prints, the module is imported too,
in the test's interpreter (NumPy 2.x) or in a venv of the corpus NumPy 1.26.4.
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
from conftest import compile_so, corpus_file, corpus_python, make_venv  # noqa: E402
from cuaudit.facts.extension_strings import numpy_c_api  # noqa: E402


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
def numpy1_source(tmp_path_factory, corpus) -> Path:
    """The headers and .pxd of the NumPy 1.26.4 wheel (from the corpus)."""
    wheel = corpus_file(corpus, "numpy-1.26.4-*.whl")
    src = tmp_path_factory.mktemp("numpy126")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(src, [n for n in zf.namelist() if n.startswith("numpy/") and n.endswith((".h", ".pxd", "__init__.py"))])
    return src


@pytest.fixture(scope="module")
def built_with_numpy1(tmp_path_factory, numpy1_source):
    """A module compiled with the NumPy 1.26.4 wheel's headers (from the corpus)."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    root = tmp_path_factory.mktemp("numabi1")
    _build(root, str(numpy1_source), str(numpy1_source / "numpy" / "core" / "include"))
    return root


@pytest.fixture(scope="module")
def built_with_numpy2(tmp_path_factory):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    root = tmp_path_factory.mktemp("numabi2")
    _build(root, str(Path(np.__file__).parent.parent), np.get_include())
    return root


def _run(paths, cache_dir: Path | None = None):
    """CU317 over ``paths``; with ``cache_dir``, the facts of one run serve the next."""
    config = Config(cache=cache_dir is not None, cache_dir=str(cache_dir) if cache_dir else None, select=("CU317",))
    return audit([str(p) for p in paths], config=config)


def _import_error(root: Path, module: str, python: str = sys.executable) -> str:
    """What importing ``module`` from ``root`` prints, in a fresh interpreter (it must fail)."""
    proc = subprocess.run([python, "-c", f"import {module}"], cwd=root, capture_output=True, text=True)
    assert proc.returncode != 0, f"{module} imported"
    return proc.stderr


def test_built_with_numpy1_next_to_numpy2(built_with_numpy1, wheel_factory):
    report = _run([built_with_numpy1, wheel_factory("numpy", "2.0.2", {"numpy/__init__.py": ""})])
    assert [f.code for f in report.findings] == ["CU317"]
    f = report.findings[0]
    assert f.evidence["expected_size"] == 96 and f.evidence["built_with"] == "1.x (1.20-1.26)"
    assert f.evidence["import_array_headers"] == "1.x"
    # Cython checks numpy.dtype's size before import_array() runs: that is the error the import shows
    error = "numpy.dtype size changed, may indicate binary incompatibility. Expected 96 from C header, got 88 from PyObject"
    assert error in f.message and "numpy 2.0.2" in f.message
    assert error in _import_error(built_with_numpy1, "numabi.ext")  # under the test's NumPy 2.x
    # with the NumPy it was built for, or with no NumPy named, nothing is claimed
    assert _run([built_with_numpy1, wheel_factory("numpy", "1.26.4", {"numpy/__init__.py": ""})]).findings == []
    assert _run([built_with_numpy1]).findings == []


_C_MODULE = """
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <numpy/arrayobject.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "capext", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_capext(void) { import_array(); return PyModule_Create(&def); }
"""


def _c_module(directory: Path, numpy_include: Path | str, *, flags: tuple[str, ...] = (),
              python: str = sys.executable) -> Path:
    """Package ``capkg`` whose C module ``capkg.capext`` calls import_array(), built with ``numpy_include``."""
    python_include = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                                    capture_output=True, text=True, check=True).stdout.strip()
    pkg = directory / "capkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    compile_so(pkg, "capext.so", _C_MODULE, flags=[f"-I{python_include}", f"-I{numpy_include}", *flags])
    (pkg / "capext.so.c").unlink()
    return directory


def test_c_module_built_with_numpy1_next_to_numpy2(tmp_path, numpy1_source, wheel_factory):
    """Not Cython: only the strings of NumPy's import_array() say which headers it was built with."""
    root = _c_module(tmp_path / "c1", numpy1_source / "numpy" / "core" / "include")
    assert numpy_c_api((root / "capkg" / "capext.so").read_bytes()) == ("1.x", None)
    report = _run([root, wheel_factory("numpy", "2.0.2", {"numpy/__init__.py": ""})])
    assert [(f.code, f.location.symbol, f.evidence["built_with"]) for f in report.findings] == \
        [("CU317", "import_array", "1.x")]
    message = report.findings[0].message
    printed = _import_error(root, "capkg.capext")  # under the test's NumPy 2.x
    for said in ("A module that was compiled using NumPy 1.x cannot be run in", "numpy.core.multiarray failed to import"):
        assert said in message and said in printed
    assert "numpy<2" in report.findings[0].fix.user
    assert _run([root, wheel_factory("numpy", "1.26.4", {"numpy/__init__.py": ""})]).findings == []


def test_c_module_targeting_newer_numpy(tmp_path, wheel_factory):
    """2.x headers spell their target C-API in import_array()'s error literal; older NumPys refuse it."""
    default = _c_module(tmp_path / "default", np.get_include())
    headers, target = numpy_c_api((default / "capkg" / "capext.so").read_bytes())
    assert headers == "2.x" and target.startswith("1.")  # NumPy 2 headers target a 1.x C-API by default
    targeted = _c_module(tmp_path / "t20", np.get_include(), flags=("-DNPY_TARGET_VERSION=NPY_2_0_API_VERSION",))
    assert numpy_c_api((targeted / "capkg" / "capext.so").read_bytes()) == ("2.x", "2.0")
    old = wheel_factory("numpy", "1.26.4", {"numpy/__init__.py": ""})
    assert _run([default, old]).findings == []
    report = _run([targeted, old])
    assert [(f.code, f.evidence["target"]) for f in report.findings] == [("CU317", "2.0")]
    f = report.findings[0]
    assert ("module was compiled against NumPy C-API version 0x12 (NumPy 2.0) but the running NumPy has C-API "
            "version 0x11") in f.message
    assert "numpy>=2.0" in f.fix.user
    for version in ("2.0.2", "2.1.0"):
        assert _run([targeted, wheel_factory("numpy", version, {"numpy/__init__.py": ""})]).findings == []


def test_one_module_for_newer_numpys_is_info(tmp_path, wheel_factory):
    """A package that declares the older NumPy and builds its other modules for it (h5py 3.16.0's _npystrings)
    keeps the newer-target module for newer NumPys: said as info, not as a broken import."""
    default = _c_module(tmp_path / "default", np.get_include()) / "capkg" / "capext.so"
    targeted = _c_module(tmp_path / "t20", np.get_include(), flags=("-DNPY_TARGET_VERSION=NPY_2_0_API_VERSION",))
    files = {"capkg/__init__.py": "", "capkg/_strings.so": (targeted / "capkg" / "capext.so").read_bytes(),
             "capkg/core.so": default.read_bytes()}
    old = wheel_factory("numpy", "1.26.4", {"numpy/__init__.py": ""})
    guarded = _run([wheel_factory("capkg", "1.0", files, requires=["numpy>=1.21"]), old])
    assert [(f.location.member, f.severity.name) for f in guarded.findings] == [("capkg/_strings.so", "INFO")]
    assert "1 other module of capkg run with numpy 1.26.4" in guarded.findings[0].message
    # declared for NumPy 2 only, or not declared at all: the module is what breaks
    for requires in (["numpy>=2"], []):
        report = _run([wheel_factory("capkg", "1.0", files, requires=requires), old])
        assert [f.severity.name for f in report.findings] == ["ERROR"]


@pytest.mark.corpus
@pytest.mark.slow
def test_target_error_is_what_numpy_1_26_prints(tmp_path, corpus):
    """The RuntimeError CU317 quotes, byte for byte, from a real import under the corpus NumPy 1.26.4."""
    python = str(make_venv(tmp_path / "venv", [corpus_file(corpus, "numpy-1.26.4-*.whl")]))
    numpy2 = Path(np.get_include())
    root = _c_module(tmp_path / "t20", numpy2, flags=("-DNPY_TARGET_VERSION=NPY_2_0_API_VERSION",),
                     python=corpus_python())
    printed = _import_error(root, "capkg.capext", python)
    report = _run([root, corpus_file(corpus, "numpy-1.26.4-*.whl")])
    quoted = report.findings[0].message.split("RuntimeError: ", 1)[1].split("`", 1)[0]
    assert quoted in printed and "(NumPy 2.0)" in quoted


@pytest.mark.corpus
@pytest.mark.slow
def test_corpus_cupy_14_needs_numpy_2(corpus, tmp_path):
    """CuPy 14.2.0's modules that import_array() target NumPy 2.0 (it declares numpy>=2.0): next to NumPy
    1.26.4 they are reported, with the declared range in the fix; next to 2.0.2 nothing is."""
    cupy = corpus_file(corpus, "cupy_cuda12x-14.2.0-*.whl")
    report = _run([cupy, corpus_file(corpus, "numpy-1.26.4-*.whl")], cache_dir=tmp_path)
    assert sorted(f.location.member.rsplit("/", 1)[-1].split(".")[0] for f in report.findings) == ["_scalar", "core", "dlpack"]
    assert {f.evidence["target"] for f in report.findings} == {"2.0"}
    assert "`numpy<2.6,>=2.0`" in report.findings[0].fix.user
    assert _run([cupy, corpus_file(corpus, "numpy-2.0.2-*.whl")], cache_dir=tmp_path).findings == []


def test_built_with_numpy2_runs_on_both(built_with_numpy2, wheel_factory):
    """NumPy 2 headers target 1.19+ by default: no claim next to 1.26 or 2.x."""
    for version in ("1.26.4", "2.1.0"):
        assert _run([built_with_numpy2, wheel_factory("numpy", version, {"numpy/__init__.py": ""})]).findings == []
