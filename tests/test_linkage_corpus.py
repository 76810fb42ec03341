"""CU2xx and `cuaudit repair` on the real public artifacts (tests/corpus.toml)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import corpus_file, corpus_python
from cuaudit.config import Config
from cuaudit.engine import audit

pytestmark = pytest.mark.corpus

CUDA_LIBS_OF_FLAGS = {"libcuda.so.1", "libcudart.so.11.0", "libcublas.so.11", "libcufft.so.10", "libcurand.so.10",
                      "libcusparse.so.11", "libnvrtc.so.11.2"}


def cfg(**kw) -> Config:
    return dataclasses.replace(Config(select=("CU2",), cache=False), **kw)


@pytest.fixture(scope="module")
def cupy12(corpus):
    whl = corpus_file(corpus, "cupy_cuda11x-12.3.0-*.whl")
    return whl, audit([str(whl)], config=cfg())


def test_cupy_12_3_flags_is_over_linked(cupy12):
    _whl, report = cupy12
    flags = [f for f in report.findings if f.code == "CU201" and f.location.member.startswith("cupy/_core/flags")]
    errors = {f.location.symbol for f in flags if f.severity.name == "ERROR"}
    assert errors == CUDA_LIBS_OF_FLAGS
    by = {f.location.symbol: f for f in flags}
    assert by["libcublas.so.11"].evidence["evidence"] == "catalog"
    assert by["libcuda.so.1"].evidence["kind"] == "driver"
    # present on every manylinux system (auditwheel's policy): reported, as info only
    assert by["libm.so.6"].severity.name == "INFO" and by["libm.so.6"].evidence["evidence"] == "library"


def test_cupy_12_3_cublas_module_uses_cublas(cupy12):
    _whl, report = cupy12
    cublas = [f for f in report.findings if f.code == "CU201" and f.location.member.startswith("cupy_backends/cuda/libs/cublas")]
    assert cublas, "the module's other unused libraries are still reported"
    assert "libcublas.so.11" not in {f.location.symbol for f in cublas}


def test_import_cupy_needs_the_driver(cupy12):
    _whl, report = cupy12
    cupy = [f for f in report.findings if f.code == "CU202" and f.evidence["package"] == "cupy"]
    assert len(cupy) == 1 and cupy[0].location.symbol == "libcuda.so.1"
    chain = cupy[0].evidence["gpu_libraries"]["libcuda.so.1"]
    assert chain[0] == "cupy/__init__.py" and chain[-1] == "libcuda.so.1"


def test_cupy_13_0_has_no_cuda_over_linking(corpus):
    whl = corpus_file(corpus, "cupy_cuda11x-13.0.0-*.whl")
    report = audit([str(whl)], config=cfg(select=("CU201",)))
    cuda = [f for f in report.findings if f.evidence.get("kind") in ("cuda", "driver")]
    assert cuda == []


def test_repaired_cupy_12_3_flags_loads_without_a_driver(cupy12, tmp_path):
    from cuaudit.repair.wheel import plan, rewrite_wheel

    whl, _ = cupy12
    removals = plan(str(whl), cfg())
    result = rewrite_wheel(str(whl), removals, str(tmp_path / "out"))
    member = next(r.member for r in result.removals if r.member.startswith("cupy/_core/flags"))
    for name, where in ((whl, "orig"), (Path(result.output), "fixed")):
        with zipfile.ZipFile(name) as zf:
            zf.extract(member, tmp_path / where)
    code = "import ctypes, sys; ctypes.CDLL(sys.argv[1])"
    python = corpus_python()  # a cp311 extension module loads into a CPython 3.11 only (libpython symbols)
    orig = subprocess.run([python, "-c", code, str(tmp_path / "orig" / member)], capture_output=True, text=True)
    fixed = subprocess.run([python, "-c", code, str(tmp_path / "fixed" / member)], capture_output=True, text=True)
    if "libcuda.so.1" not in orig.stderr and orig.returncode == 0:
        pytest.skip("this machine has the CUDA libraries: the original loads too")
    assert orig.returncode != 0
    assert fixed.returncode == 0, fixed.stderr


def test_elf_reader_agrees_with_pyelftools_on_a_cuda_library(corpus, tmp_path):
    from elftools.elf.elffile import ELFFile

    from cuaudit.facts.elf import read_elf_file, read_elf_stream

    whl = corpus_file(corpus, "nvidia_curand_cu11-*.whl")
    with zipfile.ZipFile(whl) as zf:
        name = next(n for n in zf.namelist() if n.endswith("libcurand.so.10"))
        streamed = read_elf_stream(lambda: zf.open(name), zf.getinfo(name).file_size, name)
        zf.extract(name, tmp_path)
    mapped = read_elf_file(str(tmp_path / name))
    assert dataclasses.replace(streamed, sections=mapped.sections) == mapped
    with open(tmp_path / name, "rb") as fh:
        dynsym = ELFFile(fh).get_section_by_name(".dynsym")
        assert mapped.symbol_count == dynsym.num_symbols()
        exported = {s.name for s in dynsym.iter_symbols() if s.name and s["st_shndx"] != "SHN_UNDEF"
                    and s["st_info"]["bind"] != "STB_LOCAL"}
    assert set(mapped.exports) == exported and "curandCreateGenerator" in exported


def test_libtorch_cpu_is_read_in_one_pass_from_the_wheel(corpus):
    from cuaudit.facts.elf import read_elf_stream

    whl = corpus_file(corpus, "torch-2.8.0-*.whl")
    with zipfile.ZipFile(whl) as zf:
        info = zf.getinfo("torch/lib/libtorch_cpu.so")
        e = read_elf_stream(lambda: zf.open(info), info.file_size, info.filename)
    # .dynstr and .gnu.hash sit after the dynamic section (a patchelf'd layout): still one pass
    assert e.passes == 1
    assert e.symbol_count == 73159 and len(e.imports) == 1141
    assert "libc10.so" in e.needed and "$ORIGIN/../../nvidia/cublas/lib" in e.rpath


def test_module_imports_of_cupy(corpus):
    from cuaudit.facts import module_imports as mi
    from cuaudit.formats.python import parse_python

    whl = corpus_file(corpus, "cupy_cuda12x-14.2.0-*.whl")
    with zipfile.ZipFile(whl) as zf:
        modules = {n: parse_python(zf.read(n), n) for n in zf.namelist() if n.endswith(".py")}
    assert len(modules) > 300 and all(m.ok for m in modules.values())
    init = {(i.module, i.level, i.names, i.guarded) for i in mi.module_imports(modules["cupy/__init__.py"]).imports}
    # eager, guarded by a try that re-raises (not guarded), and lazy-free: what importing cupy loads
    assert {("numpy", 0, (), False), ("cupy", 0, ("_core",), False), ("cupy", 0, ("cuda",), False),
            ("cupy._core", 0, ("ndarray",), False)} <= init
