"""CU3xx (Cython C-API), the cython-capi extractor, --probe and `cuaudit diff`.

Fixtures: a tiny Cython provider (functions, a variable, a cdef class in a
.pxd) and a consumer that cimports them, compiled once per session with the
test extra's Cython; a second provider release with one function removed,
one signature changed, one added and the class shrunk.  Then the real
artifacts of the corpus (cuda-python, cuda-bindings, rmm).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import compile_so, corpus_file, make_venv

from cuaudit.facts import InputError
from cuaudit.facts.cython import CExport, CImport, TypeDef, TypeImport, read_module

PXD_V1 = """
cdef int add(int a, int b)
cdef double scale(double x, double f)
cdef int removed_later(int a)
cdef int counter
cdef class Box:
    cdef public int a
    cdef double b
"""
PYX_V1 = """
cdef int counter = 0
cdef int add(int a, int b):
    return a + b
cdef double scale(double x, double f):
    return x * f
cdef int removed_later(int a):
    return a
cdef class Box:
    pass
"""
# v2: add() takes a long, removed_later() is gone, added_fn() is new, Box loses a field.
PXD_V2 = """
cdef int add(long a, int b)
cdef double scale(double x, double f)
cdef int added_fn(int a)
cdef int counter
cdef class Box:
    cdef public int a
"""
PYX_V2 = """
cdef int counter = 0
cdef int add(long a, int b):
    return <int>a + b
cdef double scale(double x, double f):
    return x * f
cdef int added_fn(int a):
    return a
cdef class Box:
    pass
"""
CONSUMER = """
from pkgprov.prov cimport add, scale, removed_later, counter, Box
def run():
    return add(1, 2) + scale(1.0, 2.0) + removed_later(3) + counter
def make():
    return Box()
"""
SO = ".cpython-311-x86_64-linux-gnu.so"


def _cythonize(root: Path, sources: list[str]) -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    proc = subprocess.run([sys.executable, "-m", "Cython.Build.Cythonize", "-i", "-q", *sources], cwd=root,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"cythonize failed: {proc.stderr[-2000:]}")


def _so(directory: Path, stem: str) -> Path:
    found = sorted(directory.glob(f"{stem}.*.so"))
    assert found, f"no {stem}*.so in {directory}"
    return found[0]


def _build_cache() -> Path:
    """Where the compiled fixtures are kept between sessions (keyed by sources, Cython, Python)."""
    import hashlib

    import Cython

    key = hashlib.sha256("\0".join([PXD_V1, PYX_V1, PXD_V2, PYX_V2, CONSUMER, Cython.__version__, sys.version]).encode())
    root = Path(os.environ.get("CUAUDIT_TEST_BUILD_CACHE") or Path.home() / ".cache" / "cuaudit" / "test-builds")
    return root / f"capi-{key.hexdigest()[:16]}"


@pytest.fixture(scope="session")
def cython_fixture(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """v1: provider + consumer built together; v2: the provider's next release (built once, cached)."""
    cache = _build_cache()
    base = tmp_path_factory.mktemp("cython")
    if (cache / "done").exists():
        shutil.copytree(cache, base, dirs_exist_ok=True)
        return _layout(base)
    _build_fixture(base)
    out = _layout(base)
    try:
        shutil.copytree(base, cache, dirs_exist_ok=True)
        (cache / "done").write_text("ok\n")
    except OSError:
        pass  # a read-only cache is fine: the next session builds again
    return out


def _build_fixture(base: Path) -> None:
    v1, v2 = base / "v1", base / "v2"
    for root, pxd, pyx in ((v1, PXD_V1, PYX_V1), (v2, PXD_V2, PYX_V2)):
        (root / "pkgprov").mkdir(parents=True)
        (root / "pkgprov" / "__init__.py").write_text("")
        (root / "pkgprov" / "prov.pxd").write_text(pxd)
        (root / "pkgprov" / "prov.pyx").write_text(pyx)
    (v1 / "pkgcons").mkdir()
    (v1 / "pkgcons" / "__init__.py").write_text("")
    (v1 / "pkgcons" / "cons.pyx").write_text(CONSUMER)
    _cythonize(v1, ["pkgprov/prov.pyx", "pkgcons/cons.pyx"])
    _cythonize(v2, ["pkgprov/prov.pyx"])


def _layout(base: Path) -> dict[str, Path]:
    """Installed-like trees (only the built modules): the consumer with each provider release."""
    v1, v2 = base / "v1", base / "v2"
    out = {"v1": v1, "v2": v2}
    for name in ("env_v1", "env_v2", "prov_v1", "prov_v2", "consumer"):
        shutil.rmtree(base / name, ignore_errors=True)
    for name, prov_root in (("env_v1", v1), ("env_v2", v2)):
        tree = base / name
        for pkg, src in (("pkgprov", prov_root), ("pkgcons", v1)):
            (tree / pkg).mkdir(parents=True)
            (tree / pkg / "__init__.py").write_text("")
            stem = "prov" if pkg == "pkgprov" else "cons"
            shutil.copy(_so(src / pkg, stem), tree / pkg / f"{stem}{SO}")
        out[name] = tree
    for name, prov_root in (("prov_v1", v1), ("prov_v2", v2)):
        tree = base / name / "pkgprov"
        tree.mkdir(parents=True)
        (tree / "__init__.py").write_text("")
        shutil.copy(_so(prov_root / "pkgprov", "prov"), tree / f"prov{SO}")
        out[name] = base / name
    cons = base / "consumer" / "pkgcons"
    cons.mkdir(parents=True)
    (cons / "__init__.py").write_text("")
    shutil.copy(_so(v1 / "pkgcons", "cons"), cons / f"cons{SO}")
    out["consumer"] = base / "consumer"
    return out


def _read(path: Path, member: str):
    return read_module(path.read_bytes(), member)


# -- the extractor on built fixtures -------------------------------------------------------------


def test_consumer_imports_are_read_from_the_binary(cython_fixture):
    m = _read(cython_fixture["env_v1"] / "pkgcons" / f"cons{SO}", f"pkgcons/cons{SO}")
    assert m.module == "pkgcons.cons" and m.cython.startswith("3.1")
    assert m.imports == (
        CImport("pkgprov.prov", "add", "int (int, int)", "function"),
        CImport("pkgprov.prov", "counter", "int", "variable"),
        CImport("pkgprov.prov", "removed_later", "int (int)", "function"),
        CImport("pkgprov.prov", "scale", "double (double, double)", "function"),
    )
    # cimported cdef classes are checked with check_size='warn' (bigger warns, smaller fails)
    assert m.type_imports == (TypeImport("pkgprov.prov", "Box", 32, "warn"),)
    assert m.cimported_modules == ("pkgprov.prov",)


def test_provider_exports_and_types_are_read_from_the_binary(cython_fixture):
    v1 = _read(cython_fixture["env_v1"] / "pkgprov" / f"prov{SO}", f"pkgprov/prov{SO}")
    assert v1.exports == (
        CExport("add", "int (int, int)"),
        CExport("removed_later", "int (int)"),
        CExport("scale", "double (double, double)"),
    )
    assert v1.has_capi and v1.unnamed_variable_exports == ("int",)
    assert v1.types == (TypeDef("pkgprov.prov.Box", 32),)
    v2 = _read(cython_fixture["env_v2"] / "pkgprov" / f"prov{SO}", f"pkgprov/prov{SO}")
    assert {e.name: e.signature for e in v2.exports} == {
        "add": "int (long, int)", "added_fn": "int (int)", "scale": "double (double, double)"}
    assert v2.types == (TypeDef("pkgprov.prov.Box", 24),)


def test_non_cython_extension_is_marked(tmp_path):
    so = compile_so(tmp_path, "plain.so", "int f(void) { return 1; }")
    m = read_module(so.read_bytes(), "pkg/plain.so")
    assert m.is_cython is False and m.exports == () and m.imports == ()


def test_a_library_without_module_init_is_not_read_whole(tmp_path, monkeypatch):
    # Cython's markers in a shared object that exports no PyInit_ (a plugin, not an extension
    # module): nothing Python can import, so no C-API, and the image is never copied whole
    markers = 'const char *m[] = {"_cython_3_0_11", "__pyx_capi__", "cython_runtime"}; int f(void) { return 1; }'
    plugin = compile_so(tmp_path, "xla_plugin.so", markers)
    module = compile_so(tmp_path, "mod.so", markers + " void *PyInit_mod(void) { return 0; }")
    import cuaudit.facts.cython as cython

    read = []
    monkeypatch.setattr(cython, "_Image", lambda elf, _real=cython._Image: read.append(elf.path) or _real(elf))
    p = read_module(plugin.read_bytes(), "pkg/xla_plugin.so")
    assert p.is_cython is False and p.cython == "" and read == []
    m = read_module(module.read_bytes(), "pkg/mod.so")
    assert m.is_cython is True and m.cython == "3.0.11" and read == ["pkg/mod.so"]


def test_other_machines_are_reported_as_unsupported(tmp_path, cython_fixture):
    data = bytearray((cython_fixture["env_v1"] / "pkgcons" / f"cons{SO}").read_bytes())
    struct.pack_into("<H", data, 18, 183)  # EM_AARCH64
    with pytest.raises(InputError) as info:
        read_module(bytes(data), f"pkgcons/cons{SO}")
    assert info.value.code == "CU009" and "x86-64 only" in info.value.message
    with pytest.raises(InputError) as info:
        read_module(b"MZ" + b"\0" * 100, "x.so")
    assert info.value.code == "CU006"


# -- the rules ---------------------------------------------------------------------------------


def _audit(*paths, probe=False):
    from cuaudit import config
    from cuaudit.engine import audit

    overrides = {"select": "CU3", "cache": False}
    if probe:
        overrides["probe"] = True
    return audit([str(p) for p in paths], config=config.load(isolated=True, overrides=overrides))


def test_matching_provider_gives_no_finding(cython_fixture):
    assert _audit(cython_fixture["env_v1"]).findings == []


def test_extension_beside_a_py_of_the_same_name_is_the_provider(cython_fixture, tmp_path):
    # Cython's own wheel ships Compiler/Scanning.py beside Scanning.cpython-*.so; the import
    # system loads the .so, which has the __pyx_capi__ (a false CU301 seen on `cuaudit env`).
    tree = tmp_path / "env"
    shutil.copytree(cython_fixture["env_v1"], tree)
    (tree / "pkgprov" / "prov.py").write_text("# pure-Python fallback, shadowed by the extension\n")
    assert _audit(tree).findings == []
    (tree / "pkgprov" / f"prov{SO}").unlink()  # now the .py is what imports: no C-API at all
    assert [f.code for f in _audit(tree).findings] == ["CU301"]


def test_changed_provider_breaks_the_consumer(cython_fixture):
    report = _audit(cython_fixture["env_v2"])
    by_code = {f.code: f for f in report.findings}
    assert sorted(by_code) == ["CU301", "CU302", "CU303"]
    missing = by_code["CU301"]
    assert missing.location.member == f"pkgcons/cons{SO}" and missing.location.symbol == "pkgprov.prov"
    assert "removed_later" in missing.message and "does not export" in missing.message
    assert [f["name"] for f in missing.evidence["functions"]] == ["removed_later"]  # counter is exported
    sig = by_code["CU302"]
    assert sig.evidence["expected"] == "int (int, int)" and sig.evidence["found"] == "int (long, int)"
    size = by_code["CU303"]
    assert size.evidence["expected_size"] == 32 and size.evidence["actual_size"] == 24
    assert str(size.severity) == "error"  # smaller than expected always fails
    assert all(f.fix and f.fix.description for f in report.findings)


def test_probe_confirms_the_findings(cython_fixture):
    report = _audit(cython_fixture["env_v2"], probe=True)
    assert sorted(f.code for f in report.findings) == ["CU301", "CU302", "CU303"]
    assert {f.origin for f in report.findings} == {"probe"}
    assert report.probes and "pkgcons.cons" in report.probes[0].what


def test_probe_from_nothing_equals_static_recovery(cython_fixture):
    """Starting with empty stand-ins, the failed checks name every import: same as the static facts."""
    from cuaudit.probe.capi import probe_consumer

    path = cython_fixture["env_v1"] / "pkgcons" / f"cons{SO}"
    static = _read(path, f"pkgcons/cons{SO}")
    result = probe_consumer(sys.executable, "pkgcons.cons", str(path), {"pkgprov.prov": {}}, timeout=60)
    assert result.complete
    assert result.imports == {(i.module, i.name): (i.signature, i.kind) for i in static.imports}
    assert result.type_sizes == {("pkgprov.prov", "Box"): 32}


# -- diff ------------------------------------------------------------------------------------------


def test_diff_of_the_fixture_releases(cython_fixture, cli):
    rc, out, _ = cli("diff", cython_fixture["prov_v1"], cython_fixture["prov_v2"],
                     "--consumers", cython_fixture["consumer"], "--format", "json", "--isolated", "--no-cache")
    assert rc == 1
    findings = json.loads(out)["findings"]
    got = {(f["code"], f["location"]["symbol"]) for f in findings}
    assert ("CU310", "pkgprov.prov.removed_later") in got
    assert ("CU311", "pkgprov.prov.add") in got
    assert ("CU312", "pkgprov.prov.added_fn") in got
    assert ("CU314", "pkgprov.prov.Box") in got
    broken = [f for f in findings if f["code"] == "CU316"]
    assert {f["evidence"]["problem"] for f in broken} == {"missing", "signature", "type-size"}
    triage = {f["code"]: f["evidence"]["triage"] for f in findings}
    assert triage["CU312"] == "harmless" and triage["CU310"] == "breaking"


def test_diff_identical_releases_is_clean(cython_fixture, cli):
    rc, out, _ = cli("diff", cython_fixture["prov_v1"], cython_fixture["prov_v1"], "--isolated", "--no-cache")
    assert rc == 0, out


# -- the real corpus -------------------------------------------------------------------------------


_venv = make_venv


@pytest.mark.corpus
@pytest.mark.parametrize("cuda_python, broken", [("12.6.0", False), ("12.6.1", True), ("12.6.2.post1", False)])
def test_env_rmm_with_cuda_python(corpus, tmp_path, cli, cuda_python, broken):
    py = _venv(tmp_path / "venv", [corpus_file(corpus, "rmm_cu12-24.12.0-*.whl"),
                                   corpus_file(corpus, f"cuda_python-{cuda_python}-*.whl")])
    rc, out, _ = cli("env", "--python", py, "--select", "CU3", "--format", "json", "--isolated", "--no-cache")
    findings = json.loads(out)["findings"]
    if not broken:
        assert rc == 0 and findings == []
        return
    assert rc == 1
    (f,) = findings
    assert f["code"] == "CU301" and f["severity"] == "error"
    assert f["location"]["member"].startswith("rmm/pylibrmm/device_buffer")
    assert "cuda.ccudart" in f["message"] and "__pyx_capi__" in f["message"]
    assert "cuda-python 12.6.1" in f["message"]
    assert "cuda-python<13.0a0,<=12.6.0,>=12.0" in f["fix"]["description"]
    # The same environment as the consumers of a diff: rmm breaks, cuda-python itself is not a consumer.
    rc, out, _ = cli("diff", corpus_file(corpus, "cuda_python-12.6.0-*.whl"), corpus_file(corpus, "cuda_python-12.6.1-*.whl"),
                     "--consumers-python", py, "--select", "CU316", "--format", "json", "--isolated")
    (broken_consumer,) = json.loads(out)["findings"]
    assert broken_consumer["evidence"]["consumer"] == "rmm-cu12 24.12.0"


@pytest.mark.corpus
def test_diff_cuda_python_12_6_0_to_12_6_1(corpus, cli):
    rc, out, _ = cli("diff", corpus_file(corpus, "cuda_python-12.6.0-*.whl"), corpus_file(corpus, "cuda_python-12.6.1-*.whl"),
                     "--consumers", corpus_file(corpus, "rmm_cu12-24.12.0-*.whl"), "--format", "json", "--isolated")
    assert rc == 1
    findings = json.loads(out)["findings"]
    lost = {f["evidence"]["module"]: f for f in findings if f["code"] == "CU313"}
    for module in ("cuda.ccudart", "cuda.ccuda", "cuda.cnvrtc"):
        assert lost[module]["severity"] == "error" and lost[module]["evidence"]["triage"] == "breaking"
        assert "loses its __pyx_capi__" in lost[module]["message"]
    assert lost["cuda.ccudart"]["evidence"]["moved_to"] == "cuda.bindings.cyruntime"
    (rmm,) = [f for f in findings if f["code"] == "CU316"]
    assert "rmm-cu12 24.12.0" in rmm["message"] and "cuda.ccudart" in rmm["message"]


@pytest.mark.corpus
def test_diff_cuda_bindings_12_9_to_13_0(corpus, cli):
    rc, out, _ = cli("diff", corpus_file(corpus, "cuda_bindings-12.9.4-*.whl"), corpus_file(corpus, "cuda_bindings-13.0.3-*.whl"),
                     "--format", "json", "--isolated")
    findings = json.loads(out)["findings"]

    def count(code, module):
        return sum(1 for f in findings if f["code"] == code and f["evidence"].get("module") == module)

    assert (count("CU312", "cuda.bindings.cyruntime"), count("CU310", "cuda.bindings.cyruntime"),
            count("CU311", "cuda.bindings.cyruntime")) == (13, 11, 12)
    assert (count("CU312", "cuda.bindings.cydriver"), count("CU310", "cuda.bindings.cydriver"),
            count("CU311", "cuda.bindings.cydriver")) == (11, 14, 13)
    assert any(f["location"]["symbol"] == "cuda.bindings.cyruntime.cudaGraphAddNode" for f in findings if f["code"] == "CU311")


_LIVE = r"""
import ctypes, importlib, json, os, sys, types
# Read each module's __pyx_capi__ without running its parent packages' __init__
# (cupy's needs CUDA libraries): parents are stand-ins over the real directories.
# cuda.bindings imports cuda.pathfinder (not in the corpus) at import time; reading
# __pyx_capi__ needs none of it.
site = sys.argv[1]
if os.path.isdir(os.path.join(site, "cuda", "bindings")):
    stub = types.ModuleType("cuda.pathfinder")
    stub.__getattr__ = lambda name: (lambda *a, **k: None)
    sys.modules["cuda.pathfinder"] = stub
get = ctypes.pythonapi.PyCapsule_GetName
get.restype = ctypes.c_char_p
get.argtypes = [ctypes.py_object]
out = {}
for name in sys.argv[2:]:
    parts = name.split(".")
    for i in range(1, len(parts)):
        p = ".".join(parts[:i])
        if p not in sys.modules:
            m = types.ModuleType(p)
            m.__path__ = [os.path.join(site, *parts[:i])]
            sys.modules[p] = m
    try:
        m = importlib.import_module(name)
    except BaseException as e:
        out[name] = {"error": "%s: %s" % (type(e).__name__, str(e)[:200])}
        continue
    capi = getattr(m, "__pyx_capi__", None)
    out[name] = {"capi": None if capi is None else {k: get(v).decode() for k, v in capi.items()}}
print(json.dumps(out))
"""


def _static_vs_live(wheel: Path, py: Path) -> tuple[int, int, list[str]]:
    """(exports compared, imports compared, modules that do not import here)."""
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    static = {}
    with zipfile.ZipFile(wheel) as zf:
        members = [n for n in zf.namelist() if n.endswith(".so")]
    for member in members:  # the installed copies: no need to inflate the wheel again
        m = read_module(Path(site, member).read_bytes(), member)
        if m.is_cython:
            static[m.module] = m
    names = sorted(set(static) | {i.module for m in static.values() for i in m.imports})
    proc = subprocess.run([str(py), "-c", _LIVE, site, *names], capture_output=True, text=True, timeout=600)
    live = json.loads(proc.stdout.strip().splitlines()[-1])
    exports = imports = 0
    for name, m in static.items():
        if "error" in live[name]:
            continue
        assert {e.name: e.signature for e in m.exports} == (live[name]["capi"] or {}), name
        exports += len(m.exports)
        for imp in m.imports:
            provider = live.get(imp.module, {})
            if "error" in provider:
                continue  # the provider does not import here
            assert (provider["capi"] or {}).get(imp.name) == imp.signature, (name, imp)
            imports += 1
    return exports, imports, sorted(n for n, v in live.items() if "error" in v)


@pytest.mark.corpus
@pytest.mark.slow
def test_static_recovery_equals_live_exports_cuda_bindings_13(corpus, tmp_path):
    wheel = corpus_file(corpus, "cuda_bindings-13.0.3-*.whl")
    py = _venv(tmp_path / "venv", [wheel, corpus_file(corpus, "numpy-2.0.2-*.whl")])
    exports, imports, failed = _static_vs_live(wheel, py)
    assert failed == []  # every module imports without a GPU
    assert (exports, imports) == (2132, 750)


@pytest.mark.corpus
@pytest.mark.slow
def test_static_recovery_equals_live_exports_cupy_14_cython_3_2(corpus, tmp_path):
    wheel = corpus_file(corpus, "cupy_cuda12x-14.2.0-*.whl")
    py = _venv(tmp_path / "venv", [wheel, corpus_file(corpus, "numpy-2.0.2-*.whl"),
                                   corpus_file(corpus, "fastrlock-*.whl")])
    exports, imports, failed = _static_vs_live(wheel, py)
    # Modules that need the CUDA libraries (cupy._core.core and what imports it) are
    # not compared; everything else is, entry for entry (here: 234 exports, 283 imports
    # of the 715 and 825 read statically).
    assert exports >= 230 and imports >= 280, (exports, imports, failed)
    assert "cupy.cuda.memory" not in failed and "cupy_backends.cuda.api.runtime" not in failed


# -- other Cython generations (0.29, 3.0, 3.2, 3.3): interpreters with that Cython, if given ----------

_OTHER_CYTHONS = os.environ.get("CUAUDIT_TEST_CYTHON_PYTHONS", "").split()


@pytest.mark.slow
@pytest.mark.parametrize("python", _OTHER_CYTHONS or [None])
def test_other_cython_generations_static_equals_probe(python, tmp_path):
    """Build a provider with 60 exports and a consumer of 20 with another Cython (big enough
    for 3.2's zlib and 3.3's LZSS string compression); static facts == what --probe reads,
    and == the provider's live __pyx_capi__."""
    if python is None:
        pytest.skip("set CUAUDIT_TEST_CYTHON_PYTHONS to interpreters with other Cython versions installed")
    from cuaudit.probe.capi import probe_consumer

    root = tmp_path / "big"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "prov.pxd").write_text("".join(f"cdef int function_number_{i}_with_a_long_name(int a, double b)\n"
                                           for i in range(60)))
    (root / "prov.pyx").write_text(
        "".join(f"cdef int function_number_{i}_with_a_long_name(int a, double b):\n    return a + {i}\n" for i in range(60))
        + "".join(f"def py_function_{i}(x):\n    '''Docstring number {i}, long enough to make the string table big.'''\n"
                  f"    return x + {i}\n" for i in range(40)))
    names = [f"function_number_{i}_with_a_long_name" for i in range(0, 60, 3)]
    (root / "cons.pyx").write_text(f"from big.prov cimport {', '.join(names)}\n"
                                   f"def run():\n    return {' + '.join(n + '(1, 2.0)' for n in names)}\n")
    proc = subprocess.run([python, "-m", "Cython.Build.Cythonize", "-i", "-q", "big/prov.pyx", "big/cons.pyx"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cons, prov = _so(root, "cons"), _so(root, "prov")
    c = read_module(cons.read_bytes(), f"big/cons{SO}")
    p = read_module(prov.read_bytes(), f"big/prov{SO}")
    assert not c.unresolved and not p.unresolved
    assert len(p.exports) == 60 and len(c.imports) == 20
    result = probe_consumer(python, "big.cons", str(cons), {"big.prov": {}}, timeout=120)
    assert result.imports == {(i.module, i.name): (i.signature, i.kind) for i in c.imports}
    live = subprocess.run([python, "-c", "import ctypes, json, big.prov as m; g = ctypes.pythonapi.PyCapsule_GetName; "
                           "g.restype = ctypes.c_char_p; g.argtypes = [ctypes.py_object]; "
                           "print(json.dumps({k: g(v).decode() for k, v in m.__pyx_capi__.items()}))"],
                          cwd=tmp_path, capture_output=True, text=True, check=True)
    assert json.loads(live.stdout) == {e.name: e.signature for e in p.exports}


def _index_of(modules: dict):
    """A CapiIndex over one fake installed artifact: member path -> CythonModule facts (or None)."""
    from cuaudit.analysis.capi_index import CapiIndex
    from cuaudit.model import ArtifactKind, ArtifactRef, Member, MemberKind

    class Fake:
        ref = ArtifactRef(ArtifactKind.INSTALLED, "/site", "demo", "1.0")
        members = [Member(p, MemberKind.ELF if p.endswith(".so") else MemberKind.PYTHON, 1, p) for p in modules]

    art = Fake()
    return CapiIndex.build([art], lambda a, path: modules[path]), art


def test_no_verdict_when_a_module_with_a_capi_table_reads_as_empty():
    # scipy 1.17 (Cython 3.2.4): cython_blas's __pyx_capi__ exists but the reader found no entry
    from cuaudit.analysis.capi_index import import_problems
    from cuaudit.facts.cython import CythonModule

    cons = CythonModule("demo.cons", "3.2.4", imports=(CImport("demo.prov", "dgemm", "void (int)"),))
    for prov, expected in ((CythonModule("demo.prov", "3.2.4", has_capi=True), []),
                           (CythonModule("demo.prov", "3.2.4", has_capi=False), ["no-capi"])):
        index, _ = _index_of({"demo/cons.so": cons})
        index.modules["demo.prov"] = _index_of({"demo/prov.so": prov})[0].modules["demo.prov"]  # another distribution
        [consumer] = [p for p in index.providers("demo.cons")]
        assert [p.kind for p in import_problems(consumer, index)] == expected


def test_shared_utility_imports_get_no_verdict():
    # Cython >= 3.1 `__Pyx_*` imports come from the package's own _cyutility module, built with it
    from cuaudit.analysis.capi_index import import_problems
    from cuaudit.facts.cython import CythonModule

    cons = CythonModule("demo.cons", "3.2.4", imports=(CImport("demo.other", "__Pyx_Raise", "void (void)"),
                                                        CImport("demo._cyutility", "__Pyx_Raise", "void (void)"),
                                                        CImport("demo._cyutility", "real_api", "int (int)")))
    other = CythonModule("demo.other", "", is_cython=False)
    util = CythonModule("demo._cyutility", "3.2.4", has_capi=True, exports=(CExport("__Pyx_Other", "void (void)"),))
    index, _ = _index_of({"demo/cons.so": cons, "demo/other.so": other, "demo/_cyutility.so": util})
    [consumer] = index.providers("demo.cons")
    problems = import_problems(consumer, index)
    # nothing from the shared utility module is judged, whatever its names (`_allocate_buffer`
    # is a memoryview helper scipy 1.18 and scikit-learn 1.9 import from it)
    assert problems == []
    cons2 = CythonModule("demo.cons", "3.2.4", imports=(CImport("demo.other_api", "real_api", "int (int)"),))
    api = CythonModule("demo.other_api", "3.2.4", has_capi=True, exports=(CExport("__Pyx_Other", "void (void)"),))
    index, _ = _index_of({"demo/cons.so": cons2, "demo/other_api.so": api})
    [consumer] = index.providers("demo.cons")
    assert [(p.kind, p.module) for p in import_problems(consumer, index)] == [("missing", "demo.other_api")]


def test_a_build_variant_in_another_folder_gets_no_verdict():
    # cuda-core 1.2: cuda/core/cu12/_device.so is the CUDA 12 build of cuda.core._device
    from cuaudit.analysis.capi_index import import_problems
    from cuaudit.facts.cython import CythonModule

    imp = (CImport("demo.core._stream", "accept", "int (int)"),)
    stream = CythonModule("demo.core.cu12._stream", "3.1", has_capi=True, exports=(CExport("accept", "int (int)"),))
    variant = CythonModule("demo.core.cu12._device", "3.1", imports=imp)
    index, _ = _index_of({"demo/core/cu12/_device.so": variant, "demo/core/cu12/_stream.so": stream})
    [consumer] = index.providers("demo.core.cu12._device")
    assert import_problems(consumer, index) == []
    # a module deeper in the variant (cuda/core/cu12/_memory/_buffer.so) is a variant too
    deep = CythonModule("demo.core.cu12._memory._buffer", "3.1", imports=imp)
    index, _ = _index_of({"demo/core/cu12/_memory/_buffer.so": deep, "demo/core/cu12/_stream.so": stream})
    [consumer] = index.providers("demo.core.cu12._memory._buffer")
    assert import_problems(consumer, index) == []
    # without the sibling on disk it is a real missing module
    index, _ = _index_of({"demo/core/cu12/_device.so": variant, "demo/core/other.so": None})
    [consumer] = index.providers("demo.core.cu12._device")
    assert [p.kind for p in import_problems(consumer, index)] == ["no-module"]


def test_a_cython_sibling_without_capi_in_the_same_distribution_gets_no_verdict():
    # pandas 3.0.6: tslibs.offsets cimports tslibs.ccalendar, whose table the reader misses
    from cuaudit.analysis.capi_index import import_problems
    from cuaudit.facts.cython import CythonModule

    cons = CythonModule("demo.offsets", "3.2+", imports=(CImport("demo.ccalendar", "dayofweek", "int (int)"),))
    prov = CythonModule("demo.ccalendar", "3.2+", has_capi=False)
    index, _ = _index_of({"demo/offsets.so": cons, "demo/ccalendar.so": prov})
    [consumer] = index.providers("demo.offsets")
    assert import_problems(consumer, index) == []
    # the same provider in another distribution is the seed's shape: judged
    other, _ = _index_of({"demo/ccalendar.so": prov})
    index.modules["demo.ccalendar"] = other.modules["demo.ccalendar"]
    assert [p.kind for p in import_problems(consumer, index)] == ["no-capi"]
