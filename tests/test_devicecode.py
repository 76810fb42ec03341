"""Device code: the fat-binary reader (vs cuobjdump), CU510, CU6xx and ``cuaudit archs``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from conftest import corpus_file
from devicecode_bytes import container, elf_with, entry

from cuaudit import audit
from cuaudit.config import Config
from cuaudit.facts import InputError
from cuaudit.facts.fatbin import (
    FLAG_ARCH_SPECIFIC, FLAG_FAMILY_SPECIFIC, FLAG_LZ4, FLAG_ZSTD, cuobjdump_listing, read_device_code,
    read_device_code_stream, read_path,
)
from cuaudit.rules.devicecode import Target, parse_target, runs_on

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc (CUDA toolkit) is not on this machine")

KERNEL = 'extern "C" __global__ void add(float* a, float b) { a[threadIdx.x] += b; }\n' \
         'extern "C" int launch(float* a) { add<<<1, 32>>>(a, 1.0f); return 0; }\n'


def test_entries_kinds_variants_and_compression():
    blob = container(
        entry(2, 80),
        entry(2, 90, 0x11 | FLAG_ARCH_SPECIFIC),
        entry(2, 100, 0x11 | FLAG_FAMILY_SPECIFIC | FLAG_ZSTD, stored=20, unc=4000),
        entry(1, 100, 0x11 | FLAG_LZ4, stored=22, unc=900),
    )
    code = read_device_code(elf_with({".nv_fatbin": blob}))
    assert [e.arch for e in code.entries] == ["sm_80", "sm_90a", "sm_100f", "compute_100"]
    assert [e.compression for e in code.entries] == ["none", "none", "zstd", "lz4"]
    assert code.entries[2].uncompressed_size == 4000 and code.entries[2].stored_size == 20
    assert code.archs() == ("sm_80", "sm_90a", "sm_100f", "compute_100")
    # cuobjdump drops the family suffix of SASS, keeps it for PTX
    assert cuobjdump_listing(code, "libx.so") == [
        "ELF file    1: libx.1.sm_80.cubin", "ELF file    2: libx.2.sm_90a.cubin",
        "ELF file    3: libx.3.sm_100.cubin", "PTX file    1: libx.1.sm_100.ptx",
    ]


def test_stream_reader_agrees_and_relfatbin_only_without_nv_fatbin(tmp_path):
    import io

    linked = container(entry(2, 80))
    rel = container(entry(2, 80), entry(1, 80))
    data = elf_with({".nv_fatbin": linked, "__nv_relfatbin": rel})
    mem = read_device_code(data)
    assert read_device_code_stream(io.BytesIO(data), len(data)) == mem
    assert len(mem.entries) == 3 and [e.arch for e in mem.runnable] == ["sm_80"]  # what the runtime loads
    only_rel = read_device_code(elf_with({"__nv_relfatbin": rel}))
    assert [e.arch for e in only_rel.runnable] == ["sm_80", "compute_80"]


def test_corrupt_inputs_are_input_errors_or_notes():
    no_headers = read_device_code(b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 57)
    assert no_headers.entries == () and "no section headers" in no_headers.notes[0]
    with pytest.raises(InputError) as exc:
        read_device_code(elf_with({".nv_fatbin": container(entry(2, 80))})[:-40])
    assert exc.value.code == "CU005"
    garbage = read_device_code(elf_with({".nv_fatbin": b"\x01" * 64}))
    assert garbage.entries == () and "no fat-binary container" in garbage.notes[0]
    with pytest.raises(InputError):
        read_device_code(b"MZ not an elf" + b"\0" * 60)


def test_compatibility_rules():
    e = read_device_code(container(entry(2, 80), entry(2, 90, 0x11 | FLAG_ARCH_SPECIFIC), entry(1, 75),
                                   entry(2, 100, 0x11 | FLAG_FAMILY_SPECIFIC))).entries
    sm80, sm90a, ptx75, sm100f = e
    assert runs_on(sm80, Target(86)) and not runs_on(sm80, Target(90))
    assert runs_on(sm90a, Target(90)) and not runs_on(sm90a, Target(100))
    assert runs_on(ptx75, Target(120)) and not runs_on(ptx75, Target(70))
    assert runs_on(sm100f, Target(103)) and not runs_on(sm100f, Target(120))
    assert parse_target("9.0") == parse_target("sm_90") == parse_target("90") == Target(90)


# -- nvcc-built binaries vs cuobjdump ---------------------------------------------------------------


@pytest.fixture(scope="session")
def cuobjdump(tmp_path_factory) -> str:
    found = shutil.which("cuobjdump")
    if found:
        return found
    corpus = Path(os.environ.get("CUAUDIT_CORPUS") or Path.home() / ".cache" / "cuaudit" / "corpus")
    wheels = sorted(corpus.glob("nvidia_cuda_cuobjdump-*.whl"))
    if not wheels:
        pytest.skip("cuobjdump is neither installed nor in the corpus (nvidia-cuda-cuobjdump)")
    out = tmp_path_factory.mktemp("cuobjdump")
    with zipfile.ZipFile(wheels[0]) as zf:
        name = next(n for n in zf.namelist() if n.endswith("bin/cuobjdump"))
        path = Path(zf.extract(name, out))
    path.chmod(0o755)
    return str(path)


def listing(cuobjdump: str, path: Path | str) -> list[str]:
    proc = subprocess.run([cuobjdump, "--list-elf", "--list-ptx", str(path)], capture_output=True, text=True, timeout=300)
    text = proc.stdout.replace("cubincuobjdump", "cubin\ncuobjdump")
    return [line for line in text.splitlines() if line.startswith(("ELF file", "PTX file"))]


@pytest.fixture(scope="session")
def nvcc_lib(tmp_path_factory) -> Path:
    if NVCC is None:
        pytest.skip("nvcc is not on this machine")
    d = tmp_path_factory.mktemp("nvcc")
    (d / "k.cu").write_text(KERNEL)
    out = d / "libk.so"
    subprocess.run([NVCC, "-shared", "-Xcompiler", "-fPIC", "-o", str(out), str(d / "k.cu"),
                    "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90a,code=sm_90a",
                    "-gencode", "arch=compute_100f,code=sm_100f", "-gencode", "arch=compute_90,code=compute_90",
                    "--compress-mode=size"], check=True, capture_output=True, timeout=600)
    return out


@needs_nvcc
def test_nvcc_library_matches_cuobjdump(nvcc_lib, cuobjdump):
    code = read_path(str(nvcc_lib))
    assert cuobjdump_listing(code, str(nvcc_lib)) == listing(cuobjdump, nvcc_lib)
    assert {"sm_80", "sm_90a", "sm_100f", "compute_90"} <= set(code.archs())
    assert {e.compression for e in code.runnable} >= {"zstd"}


# -- the tiny CUDA package, built twice ------------------------------------------------------------------

SETUP = '''\
import os
import subprocess

import torch
from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

WITH_CUDA = torch.cuda.is_available()


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


class build_with_kernels(build_py):
    def run(self):
        super().run()
        out = os.path.join(self.build_lib, "tinycuda")
        host = os.path.join(out, "_host.cpython-311-x86_64-linux-gnu.so")
        subprocess.check_call(["cc", "-shared", "-fPIC", "-o", host, "src/host.c"])
        if WITH_CUDA:
            subprocess.check_call(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-o", os.path.join(out, "_kernels.so"),
                                   "-gencode", "arch=compute_80,code=[sm_80,compute_80]", "src/kernel.cu"])


setup(name="tinycuda", version="0.1+cu130", packages=["tinycuda"], distclass=BinaryDistribution,
      cmdclass={"build_py": build_with_kernels})
'''

STUB_TORCH = "class cuda:\n    @staticmethod\n    def is_available():\n        return False\n\nclass version:\n    cuda = '13.0'\n"


def _build_wheel(project: Path, stub: Path, dist: Path) -> Path:
    env = {**os.environ, "PYTHONPATH": str(stub)}
    subprocess.run([sys.executable, "setup.py", "-q", "bdist_wheel", "-d", str(dist)], cwd=project, env=env,
                   check=True, capture_output=True, timeout=600)
    (whl,) = dist.glob("*.whl")
    return whl


@pytest.fixture(scope="session")
def tiny_wheels(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(buggy wheel, fixed wheel, fixed project) built on this GPU-less machine with nvcc."""
    if NVCC is None or shutil.which("cc") is None:
        pytest.skip("nvcc and cc are needed to build the tiny CUDA package")
    from cuaudit.repair.source import apply_fixes

    base = tmp_path_factory.mktemp("tinycuda")
    stub = base / "stub"
    stub.mkdir()
    (stub / "torch.py").write_text(STUB_TORCH)
    wheels = []
    for variant in ("buggy", "fixed"):
        project = base / variant
        (project / "src").mkdir(parents=True)
        (project / "tinycuda").mkdir()
        (project / "tinycuda" / "__init__.py").write_text("")
        (project / "src" / "kernel.cu").write_text(KERNEL)
        (project / "src" / "host.c").write_text("int host(void) { return 1; }\n")
        (project / "setup.py").write_text(SETUP)
        if variant == "fixed":
            report = audit([str(project)], config=Config(cache=False, select=("CU5",), jobs=1))
            assert [f.code for f in report.findings] == ["CU501"]
            apply_fixes(report, write=True)
            assert "WITH_CUDA = torch.version.cuda is not None" in (project / "setup.py").read_text()
        wheels.append(_build_wheel(project, stub, base / f"dist-{variant}"))
    return wheels[0], wheels[1], base / "fixed"


@needs_nvcc
def test_buggy_wheel_is_flagged_and_fixed_wheel_lists_archs(tiny_wheels, cli):
    buggy, fixed, _ = tiny_wheels
    report = audit([str(buggy)], config=Config(cache=False, select=("CU5", "CU6"), jobs=1))
    (f,) = report.findings
    assert f.code == "CU510" and str(f.severity) == "error" and "0.1+cu130" in f.message
    report = audit([str(fixed)], config=Config(cache=False, select=("CU5", "CU6"), jobs=1, target_archs=("sm_86", "sm_90")))
    assert sorted((f.code, f.location.symbol) for f in report.findings) == [("CU602", "sm_90")]
    rc, out, _ = cli("archs", "--no-cache", str(fixed))
    assert rc == 0 and "tinycuda/_kernels.so" in out and "sm_80" in out and "compute_80" in out
    rc, out, _ = cli("archs", "--no-cache", str(buggy))
    assert "no device code found" in out


@needs_nvcc
def test_no_sass_and_no_ptx_for_target(tiny_wheels):
    _, fixed, _ = tiny_wheels
    report = audit([str(fixed)], config=Config(cache=False, select=("CU6",), jobs=1, target_archs=("sm_75",)))
    assert [(f.code, f.location.symbol) for f in report.findings] == [("CU601", "sm_75")]


# -- the real corpus ---------------------------------------------------------------------------------


@pytest.mark.corpus
def test_cupy_14_listing_equals_cuobjdump(corpus, cuobjdump, tmp_path):
    whl = corpus_file(corpus, "cupy_cuda12x-14.2.0-*.whl")
    checked = entries = 0
    with zipfile.ZipFile(whl) as zf:
        for name in zf.namelist():
            if not name.endswith(".so"):
                continue
            with zf.open(name) as fh:
                code = read_device_code_stream(fh, zf.getinfo(name).file_size)
            if not code.entries:
                continue
            path = Path(zf.extract(name, tmp_path))
            assert cuobjdump_listing(code, str(path)) == listing(cuobjdump, path), name
            assert read_path(str(path)) == code  # mmap and stream agree
            checked += 1
            entries += len(code.runnable)
    assert checked == 3 and entries == 39


@pytest.mark.corpus
def test_cublaslt_listing_equals_cuobjdump(corpus, cuobjdump, tmp_path):
    whl = corpus_file(corpus, "nvidia_cublas_cu12-12.9.1.4-*.whl")
    with zipfile.ZipFile(whl) as zf:
        path = Path(zf.extract("nvidia/cublas/lib/libcublasLt.so.12", tmp_path))
    code = read_path(str(path))
    assert (len(code.sass()), len(code.ptx())) == (5839, 130)
    assert cuobjdump_listing(code, str(path)) == listing(cuobjdump, path)


@pytest.mark.corpus
def test_cupy_13_thrust_is_read(corpus):
    whl = corpus_file(corpus, "cupy_cuda12x-13.3.0-*.whl")
    with zipfile.ZipFile(whl) as zf:
        name = "cupy/cuda/thrust.cpython-311-x86_64-linux-gnu.so"
        with zf.open(name) as fh:
            code = read_device_code_stream(fh, zf.getinfo(name).file_size)
    assert code.archs()[:2] == ("sm_50", "sm_52") and "compute_90" in code.archs()


# -- targets from --probe, paired sdists, archs formats -----------------------------------------------------


def _sm50_wheel(wheel_factory, **kw) -> Path:
    return wheel_factory("demo", "1.0", {"demo/_k.cpython-311-x86_64-linux-gnu.so": elf_with({".nv_fatbin": container(entry(2, 50))})},
                         tag="cp311-cp311-linux_x86_64", **kw)


def test_probe_takes_the_local_gpu_as_target(wheel_factory, tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 9.0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    report = audit([str(_sm50_wheel(wheel_factory))], config=Config(cache=False, probe=True, select=("CU6",), jobs=1))
    assert [(f.code, f.location.symbol) for f in report.findings] == [("CU601", "sm_90"), ("CU603", None)]
    (probe,) = report.probes
    assert probe.outcome.endswith("sm_90") and "nvidia-smi" in probe.command
    # without --probe nothing runs and there is no target
    report = audit([str(_sm50_wheel(wheel_factory))], config=Config(cache=False, select=("CU6",), jobs=1))
    assert report.probes == [] and [f.code for f in report.findings] == ["CU603"]


def test_cu_sources_in_the_paired_sdist_are_strong_evidence(wheel_factory, tmp_path):
    import tarfile, io

    whl = wheel_factory("tiny", "1.0", {"tiny/_host.cpython-311-x86_64-linux-gnu.so": elf_with({".text": b"\0" * 16})},
                        tag="cp311-cp311-linux_x86_64")
    sdist = tmp_path / "tiny-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        for name, data in {"tiny-1.0/setup.py": b"", "tiny-1.0/src/k.cu": b"__global__ void k() {}\n"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    alone = audit([str(whl)], config=Config(cache=False, select=("CU510",), jobs=1))
    assert alone.findings == []  # nothing says this wheel is a CUDA build
    (f,) = audit([str(whl), str(sdist)], config=Config(cache=False, select=("CU510",), jobs=1)).findings
    assert str(f.severity) == "error" and "src/k.cu" in f.message


def test_name_only_evidence_is_info(wheel_factory):
    whl = wheel_factory("thing-cu12", "1.0", {"thing/_x.cpython-311-x86_64-linux-gnu.so": elf_with({".text": b"\0" * 16})},
                        tag="cp311-cp311-linux_x86_64")
    (f,) = audit([str(whl)], config=Config(cache=False, select=("CU510",), jobs=1)).findings
    assert str(f.severity) == "info"


def test_archs_formats(wheel_factory, cli):
    import json

    whl = _sm50_wheel(wheel_factory)
    rc, out, _ = cli("archs", "--no-cache", "--format", "json", str(whl))
    (module,) = json.loads(out)["modules"]
    assert module["sass"] == ["sm_50"] and module["entries"][0]["compression"] == "none"
    rc, out, _ = cli("archs", "--no-cache", "--format", "cuobjdump", str(whl))
    assert "ELF file    1: _k.cpython-311-x86_64-linux-gnu.1.sm_50.cubin" in out


def test_cu_sources_in_a_wheel_alone_are_weak_evidence(tmp_path):
    # numba-cuda ships memsys.cu for run-time compilation: CU510 must not be an error on that alone
    from conftest import compile_so, make_wheel

    so = compile_so(tmp_path, "_host.so", "int host_only(void) { return 0; }\n")
    whl = make_wheel(tmp_path, "demo", "1.0", {"demo/_host.cpython-311-x86_64-linux-gnu.so": so.read_bytes(), "demo/kernels/memsys.cu": "__global__ void k() {}\n"},
                     tag="cp311-cp311-linux_x86_64")
    report = audit([str(whl)], config=Config(select=("CU510",), cache=False))
    assert [(f.code, str(f.severity)) for f in report.findings] == [("CU510", "info")]
    tagged = make_wheel(tmp_path, "demo", "1.0+cu121", {"demo/_host.cpython-311-x86_64-linux-gnu.so": so.read_bytes()}, tag="cp311-cp311-linux_x86_64")
    strong = audit([str(tagged)], config=Config(select=("CU510",), cache=False))
    assert [(f.code, str(f.severity)) for f in strong.findings] == [("CU510", "error")]


def _stream_opener(data: bytes, opens: list[int]):
    import io

    def opener():
        opens.append(1)
        return io.BytesIO(data)

    return opener


def test_stream_lists_device_code_whatever_read_the_sections_first():
    """A pass that read the section headers from far ahead (the elf facts, when the stream is near
    them) left the scan after its rewind nothing to see: torch 2.8.0's libtorch_cuda_linalg.so
    listed no device code (856 entries) and had no CU603."""
    from cuaudit.facts.fatbin import device_code_of
    from cuaudit.formats.elf import image_of_stream

    data = elf_with({".nv_fatbin": container(entry(2, 80), entry(1, 80)), ".pad": b"\1" * 4096})
    image = image_of_stream(_stream_opener(data, []), len(data), "libx.so", retain=64)
    image.sections()  # far past what was kept
    assert [e.arch for e in device_code_of(image).entries] == ["sm_80", "compute_80"]


def test_one_inflation_serves_every_elf_pass(tmp_path):
    """The fat-binary scan watches the stream from the engine's prepare step, before the passes
    that read ahead: the member is inflated once (it was twice for torch's large libraries)."""
    from cuaudit.workers import extract_group
    from cuaudit.inputs.wheel import WheelArtifact
    from conftest import make_wheel

    lib = elf_with({".nv_fatbin": container(entry(2, 80)), ".pad": b"\1" * 4096})
    wheel = make_wheel(tmp_path, "dev", "1.0", {"dev/libdev.so": lib})
    art = WheelArtifact(str(wheel))
    member = next(m for m in art.members if m.path == "dev/libdev.so")
    opens: list[str] = []
    real_open = art.open_member
    art.open_member = lambda path: opens.append(path) or real_open(path)  # type: ignore[method-assign]
    out = {name: value for _p, name, ok, value in extract_group(art, [(member, ("format", "elf", "fatbin"))]) if ok}
    assert [e.arch for e in out["fatbin"].entries] == ["sm_80"]
    assert opens == ["dev/libdev.so"]
