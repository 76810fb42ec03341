"""CU2xx (linking and loading), the ELF reader and `cuaudit repair`, on libraries built here with cc."""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import compile_so, make_wheel
from cuaudit.config import Config
from cuaudit.engine import audit
from cuaudit.facts import InputError
from cuaudit.facts.elf import read_elf_bytes, read_elf_file, read_elf_stream

EXT = "cpython-311-x86_64-linux-gnu.so"


def cfg(**kw) -> Config:
    return dataclasses.replace(Config(select=("CU2", "CU0"), cache=False, jobs=1), **kw)


def findings(report, code: str) -> list:
    return [f for f in report.findings if f.code == code]


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny libraries: used/unused providers, a versioned one, CUDA and driver stand-ins, modules."""
    d = tmp_path_factory.mktemp("libs")
    out: dict[str, Path] = {"dir": d}
    out["used"] = compile_so(d, "libused.so", "int used_fn(void) { return 1; }\n", flags=["-Wl,-soname,libused.so"])
    out["unused"] = compile_so(d, "libunused.so", "int unused_fn(void) { return 2; }\n", flags=["-Wl,-soname,libunused.so"])
    (d / "ver.map").write_text("VER_1 { global: ver_fn; local: *; };\n")
    out["ver"] = compile_so(d, "libver.so", "int ver_fn(void) { return 3; }\n",
                            flags=["-Wl,-soname,libver.so", f"-Wl,--version-script={d / 'ver.map'}"])
    # Stand-ins with the sonames of a CUDA library and of the driver (only their names matter).
    cuda = d / "cuda"
    cuda.mkdir()
    out["curand"] = compile_so(cuda, "libcurand.so.10", "int curandCreateGenerator(void *g, int t) { return 0; }\n",
                               flags=["-Wl,-soname,libcurand.so.10"])
    (cuda / "libcurand.so").symlink_to("libcurand.so.10")
    out["cublas11"] = compile_so(cuda, "libcublas.so.11", "int cublasCreate_v2(void *h) { return 0; }\n",
                                 flags=["-Wl,-soname,libcublas.so.11"])
    (cuda / "libcublas.so").symlink_to("libcublas.so.11")
    out["libcuda"] = compile_so(cuda, "libcuda.so.1", "int cuInit(unsigned f) { return 0; }\n", flags=["-Wl,-soname,libcuda.so.1"])
    (cuda / "libcuda.so").symlink_to("libcuda.so.1")
    out["cuda"] = cuda
    link = ["-Wl,--no-as-needed", f"-L{d}", f"-L{cuda}", "-Wl,-rpath,$ORIGIN"]
    src = "#include <stdio.h>\nextern int used_fn(void);\nint PyInit__ext(void) { puts(\"hi\"); return used_fn(); }\n"
    out["ext"] = compile_so(d, f"_ext.{EXT}", src, libs=["used", "unused"], flags=link)
    out["ext_ver"] = compile_so(d, f"_ver.{EXT}", "extern int ver_fn(void);\nint PyInit__ver(void) { return ver_fn(); }\n",
                                libs=["ver"], flags=link)
    out["ext_cuda_unused"] = compile_so(d, f"_flags.{EXT}", "int PyInit__flags(void) { return 0; }\n",
                                        libs=["curand", "cuda"], flags=link)
    out["ext_cuda_used"] = compile_so(
        d, f"_rand.{EXT}", "extern int curandCreateGenerator(void*, int);\nint PyInit__rand(void) { return curandCreateGenerator(0, 0); }\n",
        libs=["curand"], flags=link)
    out["ext_cublas"] = compile_so(d, f"_blas.{EXT}", "extern int cublasCreate_v2(void*);\nint PyInit__blas(void) { return cublasCreate_v2(0); }\n",
                                   libs=["cublas"], flags=link)
    out["sysv"] = compile_so(d, "libsysv.so", "int a(void){return 1;} int b(void){return 2;}\n",
                             flags=["-Wl,--hash-style=sysv", "-Wl,-soname,libsysv.so"])
    return out


def wheel_with(tmp_path: Path, files: dict[str, Path | str | bytes], **kw) -> Path:
    data = {k: (v.read_bytes() if isinstance(v, Path) else v) for k, v in files.items()}
    return make_wheel(tmp_path, kw.pop("name", "demo"), kw.pop("version", "1.0"), data,
                      tag=kw.pop("tag", "cp311-cp311-linux_x86_64"), **kw)


# -- the ELF reader ---------------------------------------------------------------------------


def test_elf_facts_of_a_built_module(built):
    e = read_elf_file(str(built["ext"]))
    assert e.machine == "x86-64" and e.elf_class == 64 and e.elf_type == "DYN"
    assert e.needed[:2] == ("libused.so", "libunused.so")
    assert "$ORIGIN" in (e.rpath + e.runpath)
    assert "PyInit__ext" in e.exports and e.is_python_extension
    assert "used_fn" in e.imports and "unused_fn" not in e.imports
    # puts is versioned: bound to libc.so.6 by .gnu.version_r
    j = e.imports.index("puts")
    assert e.import_versions[j].startswith("GLIBC_") and e.import_files[j] == "libc.so.6"
    assert any(v.file == "libc.so.6" for v in e.version_needs)
    lib = read_elf_file(str(built["ver"]))
    assert lib.soname == "libver.so" and "VER_1" in lib.version_defs
    assert lib.export_versions[lib.exports.index("ver_fn")] == "VER_1"


def test_symbol_count_matches_pyelftools(built):
    from elftools.elf.elffile import ELFFile

    for key in ("ext", "sysv", "ver"):
        with open(built[key], "rb") as fh:
            dynsym = ELFFile(fh).get_section_by_name(".dynsym")
            expected = dynsym.num_symbols()
            undefined = {s.name for s in dynsym.iter_symbols() if s.name and s["st_shndx"] == "SHN_UNDEF"}
        e = read_elf_file(str(built[key]))
        assert e.symbol_count == expected, key
        assert set(e.imports) == undefined, key


def test_streamed_member_equals_mapped_file(built, tmp_path):
    path = tmp_path / "x.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(built["ext"], "m.so")
    with zipfile.ZipFile(path) as zf:
        streamed = read_elf_stream(lambda: zf.open("m.so"), zf.getinfo("m.so").file_size, "m.so")
    assert streamed == read_elf_file(str(built["ext"]))
    assert streamed.passes == 1


def test_truncated_and_foreign_files_are_input_errors(built):
    data = built["ext"].read_bytes()
    with pytest.raises(InputError) as exc:
        read_elf_bytes(data[:3000], "cut.so")
    assert exc.value.code == "CU005" and "truncated" in exc.value.message
    with pytest.raises(InputError) as exc:
        read_elf_bytes(b"<html>not found</html>" * 10, "page.so")
    assert exc.value.code == "CU006"


def test_corrupt_member_is_a_finding_not_a_crash(built, tmp_path):
    data = built["ext"].read_bytes()
    whl = wheel_with(tmp_path, {"demo/_cut.so": data[: len(data) // 3], "demo/_ok.so": data,
                                "demo/libused.so": built["used"], "demo/libunused.so": built["unused"]})
    report = audit([str(whl)], config=cfg())
    cu005 = findings(report, "CU005")
    assert [f.location.member for f in cu005] == ["demo/_cut.so"]
    # the intact module was still analysed
    assert [f.location.member for f in findings(report, "CU201")] == ["demo/_ok.so"]


# -- CU201 over-linking ----------------------------------------------------------------------------


def test_unused_library_in_the_wheel_is_reported_with_its_evidence(built, tmp_path):
    whl = wheel_with(tmp_path, {f"demo/_ext.{EXT}": built["ext"], "demo/libused.so": built["used"],
                                "demo/libunused.so": built["unused"], "demo/__init__.py": ""})
    report = audit([str(whl)], config=cfg())
    libs = {f.location.symbol: f for f in findings(report, "CU201") if f.location.member.startswith("demo/_ext")}
    assert "libunused.so" in libs and "libused.so" not in libs
    f = libs["libunused.so"]
    assert f.severity.name == "WARNING"  # not a CUDA library
    assert f.evidence["evidence"] == "library" and "demo/libunused.so" in f.message


def test_versioned_reference_counts_as_use_even_without_the_library(built, tmp_path):
    whl = wheel_with(tmp_path, {f"demo/_ver.{EXT}": built["ext_ver"]})  # libver.so not shipped
    report = audit([str(whl)], config=cfg())
    assert not [f for f in findings(report, "CU201") if f.location.symbol == "libver.so"]


def test_cuda_catalog_decides_for_a_cuda_library_that_is_absent(built, tmp_path):
    whl = wheel_with(tmp_path, {f"demo/_flags.{EXT}": built["ext_cuda_unused"], f"demo/_rand.{EXT}": built["ext_cuda_used"]})
    report = audit([str(whl)], config=cfg())
    by = {(f.location.member.split("/")[-1].split(".")[0], f.location.symbol): f for f in findings(report, "CU201")}
    curand = by[("_flags", "libcurand.so.10")]
    assert curand.severity.name == "ERROR" and curand.evidence["evidence"] == "catalog"
    assert "nvidia-curand-cu11" in curand.message
    driver = by[("_flags", "libcuda.so.1")]
    assert driver.severity.name == "ERROR" and driver.evidence["kind"] == "driver"
    assert driver.evidence["evidence"] == "accounting"
    assert ("_rand", "libcurand.so.10") not in by


def test_with_extra_folder_supplies_the_library_itself(built, tmp_path, cli):
    whl = wheel_with(tmp_path, {f"demo/_flags.{EXT}": built["ext_cuda_unused"]})
    rc, out, _ = cli("check", "--isolated", "--no-cache", "--select", "CU201", "--format", "json", "--with", str(built["cuda"]), str(whl))
    import json

    found = {f["location"]["symbol"]: f for f in json.loads(out)["findings"]}
    assert rc == 1
    assert found["libcurand.so.10"]["evidence"]["evidence"] == "library"
    assert str(built["cuda"]) in found["libcurand.so.10"]["message"]


def test_preload_allow_list_silences_a_shim(built, tmp_path):
    whl = wheel_with(tmp_path, {f"demo/_ext.{EXT}": built["ext"], "demo/libused.so": built["used"],
                                "demo/libunused.so": built["unused"]})
    report = audit([str(whl)], config=cfg(allow={"preload-libraries": ("libunused*.so",)}))
    assert not [f for f in findings(report, "CU201") if f.location.symbol == "libunused.so"]


# -- CU202 what import loads ------------------------------------------------------------------------


def test_import_chain_to_the_driver(built, tmp_path):
    whl = wheel_with(tmp_path, {
        "demo/__init__.py": "from demo import core\n",
        "demo/core/__init__.py": "from ._flags import x\n",
        f"demo/core/_flags.{EXT}": built["ext_cuda_unused"],
        "lazy/__init__.py": "def f():\n    from lazy import _flags\n",
        f"lazy/_flags.{EXT}": built["ext_cuda_unused"],
        "guarded/__init__.py": "try:\n    from guarded import _flags\nexcept ImportError:\n    _flags = None\n",
        f"guarded/_flags.{EXT}": built["ext_cuda_unused"],
    })
    report = audit([str(whl)], config=cfg())
    cu202 = {f.evidence["package"]: f for f in findings(report, "CU202")}
    assert set(cu202) == {"demo"}
    f = cu202["demo"]
    assert f.severity.name == "WARNING" and f.location.symbol == "libcuda.so.1"
    assert f.evidence["gpu_libraries"]["libcuda.so.1"] == [
        "demo/__init__.py", "demo/core/__init__.py", f"demo/core/_flags.{EXT}", "libcuda.so.1"]
    assert "libcurand.so.10" in f.evidence["gpu_libraries"]


# -- CU204 / CU205 / CU206 -------------------------------------------------------------------------------


def test_bundled_driver_library(built, tmp_path):
    whl = wheel_with(tmp_path, {"demo.libs/libcuda-0123abcd.so.1": built["libcuda"], "demo/stubs/libcuda.so": built["libcuda"]})
    report = audit([str(whl)], config=cfg())
    assert [f.location.member for f in findings(report, "CU204")] == ["demo.libs/libcuda-0123abcd.so.1"]


def test_undeclared_and_declared_cuda_dependencies(built, tmp_path):
    files = {f"demo/_rand.{EXT}": built["ext_cuda_used"]}
    (tmp_path / "a").mkdir()
    bare = audit([str(wheel_with(tmp_path / "a", files))], config=cfg())
    assert [f.location.symbol for f in findings(bare, "CU205")] == ["libcurand.so.10"]
    (tmp_path / "b").mkdir()
    declared = audit([str(wheel_with(tmp_path / "b", files, requires=["nvidia-curand-cu11"]))], config=cfg())
    assert not findings(declared, "CU205")
    (tmp_path / "c").mkdir()
    extra = audit([str(wheel_with(tmp_path / "c", files, requires=['cuda-toolkit[curand]==12.*; extra == "ctk"']))], config=cfg())
    assert [f.severity.name for f in findings(extra, "CU205")] == ["INFO"]


def test_declared_dependency_of_another_cuda_major(built, tmp_path):
    whl = wheel_with(tmp_path, {f"demo/_blas.{EXT}": built["ext_cublas"]}, requires=["nvidia-cublas-cu12"])
    report = audit([str(whl)], config=cfg())
    f = findings(report, "CU206")
    assert [x.location.symbol for x in f] == ["libcublas.so.11"] and "nvidia-cublas-cu12" in f[0].message
    assert not findings(report, "CU205")


def _installed(site: Path, name: str, files: dict[str, bytes]) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    rows = []
    for rel, data in files.items():
        p = site / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        rows.append(f"{rel},,")
    rows += [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")


def test_environment_not_found_and_major_mismatch(built, tmp_path):
    from cuaudit.inputs.environment import find_distributions

    site = tmp_path / "site-packages"
    _installed(site, "demo", {f"demo/_ext.{EXT}": built["ext"].read_bytes(), "demo/libused.so": built["used"].read_bytes(),
                              f"demo/_blas.{EXT}": built["ext_cublas"].read_bytes()})
    # another distribution ships cuBLAS, but of another major
    _installed(site, "nvidia-cublas-cu12", {"nvidia/cublas/lib/libcublas.so.12": built["cublas11"].read_bytes()})
    dists = find_distributions([str(site)])
    report = audit(dists, config=cfg())
    missing = {f.location.symbol: f for f in findings(report, "CU203")}
    assert missing["libunused.so"].severity.name == "ERROR"
    assert "DT_RUNPATH $ORIGIN" in missing["libunused.so"].message or "DT_RPATH $ORIGIN" in missing["libunused.so"].message
    assert "/etc/ld.so.cache" in missing["libunused.so"].evidence["tried"]
    assert "libused.so" not in missing
    mismatch = findings(report, "CU206")
    assert [f.location.symbol for f in mismatch] == ["libcublas.so.11"] and "libcublas.so.12" in mismatch[0].message


# -- cuaudit repair --------------------------------------------------------------------------------


def _loads(path: Path) -> subprocess.CompletedProcess:
    # a fresh process each time: dlopen keeps what it loaded by soname
    return subprocess.run([sys.executable, "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])", str(path)],
                          capture_output=True, text=True)


def test_repair_removes_the_unused_entry_and_the_module_loads(built, tmp_path, cli):
    whl = wheel_with(tmp_path, {f"demo/_ext.{EXT}": built["ext"], "demo/libused.so": built["used"],
                                "demo/libunused.so": built["unused"]})
    before = tmp_path / "before"
    zipfile.ZipFile(whl).extractall(before)
    assert _loads(before / "demo" / f"_ext.{EXT}").returncode == 0
    (before / "demo" / "libunused.so").unlink()  # the library it does not use is gone...
    broken = _loads(before / "demo" / f"_ext.{EXT}")
    assert broken.returncode != 0 and "libunused.so" in broken.stderr  # ...and the import fails

    rc, out, _ = cli("repair", "--isolated", "--no-cache", "--dry-run", str(whl))
    assert rc == 0 and f"demo/_ext.{EXT}: remove DT_NEEDED libunused.so" in out
    assert not (tmp_path / "fixed").exists()
    rc, out, _ = cli("repair", "--isolated", "--no-cache", str(whl), "-o", str(tmp_path / "fixed"))
    assert rc == 0
    # marked in the build-tag slot (and in WHEEL): never mistaken for the original
    repaired = tmp_path / "fixed" / whl.name.replace("demo-1.0-", "demo-1.0-1cuaudit-")
    assert os.listdir(tmp_path / "fixed") == [repaired.name]
    after = tmp_path / "after"
    with zipfile.ZipFile(repaired) as zf:
        zf.extractall(after)
        names = zf.namelist()
        record = {r[0]: r for r in csv.reader(io.StringIO(zf.read("demo-1.0.dist-info/RECORD").decode())) if r}
    assert names == zipfile.ZipFile(whl).namelist()
    with zipfile.ZipFile(whl) as a, zipfile.ZipFile(repaired) as b:
        assert b.read("demo-1.0.dist-info/WHEEL").decode().splitlines()[-1] == "Build: 1cuaudit"
        same = [n for n in names if n not in (f"demo/_ext.{EXT}", "demo-1.0.dist-info/RECORD", "demo-1.0.dist-info/WHEEL")]
        # untouched members are copied raw: same compressed bytes
        assert [(a.getinfo(n).CRC, a.getinfo(n).compress_size) for n in same] == [
            (b.getinfo(n).CRC, b.getinfo(n).compress_size) for n in same]
        assert b.testzip() is None
    (after / "demo" / "libunused.so").unlink()
    assert _loads(after / "demo" / f"_ext.{EXT}").returncode == 0
    e = read_elf_file(str(after / "demo" / f"_ext.{EXT}"))
    assert "libunused.so" not in e.needed and "libused.so" in e.needed
    # RECORD has the new hash and size
    import base64
    import hashlib

    data = (after / "demo" / f"_ext.{EXT}").read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert record[f"demo/_ext.{EXT}"][1:] == [f"sha256={digest}", str(len(data))]
    wheel_meta = (after / "demo-1.0.dist-info" / "WHEEL").read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(wheel_meta).digest()).rstrip(b"=").decode()
    assert record["demo-1.0.dist-info/WHEEL"][1:] == [f"sha256={digest}", str(len(wheel_meta))]
    # nothing left to repair
    assert not findings(audit([str(repaired)], config=cfg(select=("CU201",))), "CU201") or all(
        f.location.symbol != "libunused.so" for f in audit([str(repaired)], config=cfg(select=("CU201",))).findings)


def test_rule_docs_are_complete():
    from cuaudit.rules import all_rules

    cu2 = [r for r in all_rules() if r.code.startswith("CU2")]
    assert [r.code for r in cu2] == ["CU201", "CU202", "CU203", "CU204", "CU205", "CU206"]
    for r in cu2:
        assert set(r.doc().sections) >= {"What it does", "Why is this bad?", "Example", "Use instead", "Fix safety"}, r.code


# -- the import scan (module_imports) ---------------------------------------------------------------

SCAN_SOURCE = '''"""Docstring with an example:

import not_a_real_import
"""
import a.b as ab, c
from . import sibling
from ..parent import (x,
    y as z)
if TYPE_CHECKING:
    import typing_only
try:
    import optional_dep
except ImportError:
    optional_dep = None
try:
    from pkg import _core
except ImportError as exc:
    raise ImportError("build it") from exc
with suppress():
    import in_with


def f(
    arg,
) -> None:
    import lazy_inside_function


class C:
    import in_class
'''


def test_module_imports_are_the_import_time_statements_of_the_shared_parse():
    from cuaudit.facts import module_imports as mi
    from cuaudit.formats.python import parse_python_text

    got = {(i.module, i.level, i.names, i.guarded) for i in mi.module_imports(parse_python_text(SCAN_SOURCE)).imports}
    assert got == {
        ("a.b", 0, (), False), ("c", 0, (), False), ("", 1, ("sibling",), False), ("parent", 2, ("x", "y"), False),
        ("optional_dep", 0, (), True), ("pkg", 0, ("_core",), False), ("in_with", 0, (), False),
    }
    # a module that does not parse imports nothing here, as for every other extractor
    # (the text scan this replaced found `import os` in it)
    assert mi.module_imports(parse_python_text("import os\ndef (:\n")).imports == ()


def test_allow_listed_shim_file_keeps_its_entries(built, tmp_path):
    whl = wheel_with(tmp_path, {"demo/lib/libdemo_global_deps.so": built["ext"], "demo/lib/libused.so": built["used"],
                                "demo/lib/libunused.so": built["unused"]})
    flagged = audit([str(whl)], config=cfg(select=("CU201",)))
    assert [f.location.symbol for f in flagged.findings] == ["libunused.so"]
    allowed = audit([str(whl)], config=cfg(select=("CU201",), allow={"preload-libraries": ("libdemo_global_deps.so",)}))
    assert allowed.findings == []


def test_with_folder_of_another_major_is_a_mismatch(built, tmp_path):
    extra = tmp_path / "cu12"
    extra.mkdir()
    (extra / "libcublas.so.12").write_bytes(built["cublas11"].read_bytes())
    whl = wheel_with(tmp_path, {f"demo/_blas.{EXT}": built["ext_cublas"]})
    report = audit([str(whl)], config=cfg(options={"linkage": {"with": [str(extra)]}}))
    f = findings(report, "CU206")
    assert [x.location.symbol for x in f] == ["libcublas.so.11"] and "libcublas.so.12" in f[0].message


def test_libs_command_shows_provenance(built, tmp_path, cli):
    whl = wheel_with(tmp_path, {f"demo/_ext.{EXT}": built["ext"], "demo/libused.so": built["used"]})
    rc, out, _ = cli("libs", "--no-cache", "--format", "json", str(whl))
    import json

    (row,) = [r for r in json.loads(out)["files"] if r["member"] == f"demo/_ext.{EXT}"]
    by = {x["needed"]: x for x in row["needed"]}
    assert rc == 0
    assert by["libused.so"]["found_via"] in ("DT_RUNPATH", "DT_RPATH") and by["libused.so"]["where"] == "demo/libused.so"
    assert by["libused.so"]["used"] is True
    assert by["libunused.so"]["found_via"] is None and by["libunused.so"]["tried"]
    assert by["libc.so.6"]["found_via"] == "ld.so.cache" and by["libc.so.6"]["evidence"] == "symbol-versions"


def test_forked_workers_give_the_serial_answer(built, tmp_path):
    # enough members for several groups, so extraction runs in forked workers
    files: dict = {f"demo/m{i}.py": f"from demo import _ext{i % 3}\n" for i in range(150)}
    files.update({f"demo/_ext{k}.{EXT}": built["ext_cuda_unused"] for k in range(3)})
    files["demo/__init__.py"] = "from demo import m1\n"
    whl = wheel_with(tmp_path, files)
    serial = audit([str(whl)], config=cfg(jobs=1))
    forked = audit([str(whl)], config=cfg(jobs=2))
    assert [f.fingerprint() for f in forked.findings] == [f.fingerprint() for f in serial.findings]
    assert {f.code for f in forked.findings} >= {"CU201", "CU202"}


def test_corrupted_bytes_never_crash_the_reader(built):
    """Hostile input: every mutation gives facts or an InputError, never another exception."""
    import random

    from cuaudit.facts.elf import ElfFacts

    data = built["ext"].read_bytes()
    dyn = read_elf_file(str(built["ext"])).dynamic
    hot = list(range(0, 64 + 56 * 12)) + list(range(dyn.offset, dyn.offset + dyn.size))
    rng = random.Random(3)
    outcomes = set()
    for _ in range(400):
        buf = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            pos = rng.choice(hot) if rng.random() < 0.8 else rng.randrange(len(buf))
            buf[pos] = rng.randrange(256)
        try:
            result = read_elf_bytes(bytes(buf), "fuzz.so")
            assert isinstance(result, ElfFacts)
            outcomes.add("facts")
        except InputError as exc:
            assert exc.code in ("CU005", "CU006")
            outcomes.add(exc.code)
    assert "facts" in outcomes and "CU005" in outcomes


def test_resolver_steps_and_provenance(built, tmp_path):
    from cuaudit.analysis.loader import Resolver
    from cuaudit.inputs.file import FileArtifact

    mod = tmp_path / "mod" / f"_ext.{EXT}"
    mod.parent.mkdir()
    mod.write_bytes(built["ext"].read_bytes())  # RUNPATH/RPATH $ORIGIN: libused.so is not beside it
    art = FileArtifact(str(mod))
    facts = read_elf_file(str(mod))
    fact = lambda a, m: facts  # noqa: E731

    plain = Resolver([art], fact, environ={}).resolve(0, art.members[0].path, facts, "libused.so")
    assert not plain.found and any("$ORIGIN" in t for t in plain.tried) and "/etc/ld.so.cache" in plain.tried

    env = Resolver([art], fact, environ={"LD_LIBRARY_PATH": str(built["dir"])})
    res = env.resolve(0, art.members[0].path, facts, "libused.so")
    assert (res.found_via, res.where, res.on_loader_path) == ("LD_LIBRARY_PATH", str(built["used"]), True)
    assert env.facts_of(res).exports == ("used_fn",)

    conda = tmp_path / "conda"
    (conda / "lib").mkdir(parents=True)
    (conda / "lib" / "libused.so").write_bytes(built["used"].read_bytes())
    res = Resolver([art], fact, environ={"CONDA_PREFIX": str(conda)}).resolve(0, art.members[0].path, facts, "libused.so")
    assert res.found_via == "conda prefix" and not res.on_loader_path

    # the driver only ever comes from the system, even when a copy sits on the module's RUNPATH
    (mod.parent / "libcuda.so.1").write_bytes(built["libcuda"].read_bytes())
    res = Resolver([art], fact, environ={}).resolve(0, art.members[0].path, facts, "libcuda.so.1")
    assert res.found_via in (None, "ld.so.cache", "system directory")
    assert not any("$ORIGIN" in t for t in res.tried)


def test_wheel_checked_against_an_environment_resolves_into_it(built, tmp_path):
    from cuaudit.analysis.loader import Resolver
    from cuaudit.inputs.environment import find_distributions
    from cuaudit.inputs.wheel import WheelArtifact

    site = tmp_path / "site-packages"
    _installed(site, "nvlibs", {"nvlibs/lib/libused.so": built["used"].read_bytes()})
    mod = compile_so(tmp_path, f"_m.{EXT}", "extern int used_fn(void);\nint PyInit__m(void) { return used_fn(); }\n",
                     libs=["used"], flags=["-Wl,--no-as-needed", f"-L{built['dir']}", "-Wl,-rpath,$ORIGIN/../nvlibs/lib"])
    whl = WheelArtifact(str(wheel_with(tmp_path, {f"demo/_m.{EXT}": mod})))
    arts = [whl, *find_distributions([str(site)])]
    facts = read_elf_file(str(mod))
    alone = Resolver(arts, lambda a, m: None, environ={}).resolve(0, f"demo/_m.{EXT}", facts, "libused.so")
    assert not alone.on_loader_path
    placed = Resolver(arts, lambda a, m: None, environ={}, site_root=str(site)).resolve(0, f"demo/_m.{EXT}", facts, "libused.so")
    assert placed.on_loader_path and placed.where == "nvlibs/lib/libused.so" and placed.found_via in ("DT_RPATH", "DT_RUNPATH")


def test_torch_global_deps_shim_is_allow_listed_by_default_and_the_list_is_replaceable(built, tmp_path):
    # torch/lib/libtorch_global_deps.so exists to be preloaded: its entries are its purpose (GPU run, torch 2.11)
    whl = wheel_with(tmp_path, {"demo/lib/libtorch_global_deps.so": built["ext"], "demo/lib/libused.so": built["used"],
                                "demo/lib/libunused.so": built["unused"]})
    default = audit([str(whl)], config=dataclasses.replace(Config(select=("CU201",), cache=False, jobs=1)))
    assert default.findings == []
    emptied = audit([str(whl)], config=cfg(select=("CU201",), allow={"preload-libraries": ()}))
    assert [f.location.symbol for f in emptied.findings] == ["libunused.so"]


def test_repair_takes_name_version_and_writes_to_the_wheel_dir(built, tmp_path, cli, monkeypatch):
    import shutil

    from cuaudit.inputs.index import download_dir

    whl = wheel_with(tmp_path, {f"demo/_ext.{EXT}": built["ext"], "demo/libused.so": built["used"],
                                "demo/libunused.so": built["unused"]})
    cache = tmp_path / "cache"
    dest = download_dir("demo==1.0", str(cache))
    os.makedirs(dest)
    shutil.copy(whl, dest)  # what `pip download` would have left: nothing is fetched here
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUAUDIT_CACHE_DIR", str(cache))
    rc, out, err = cli("repair", "--isolated", "--no-cache", "demo==1.0")
    assert rc == 0, err
    (written,) = os.listdir(tmp_path / "wheelhouse")  # auditwheel's default folder
    assert written == whl.name.replace("demo-1.0-", "demo-1.0-1cuaudit-") and written in out
    rc, out, err = cli("repair", "--isolated", "--no-cache", "-w", tmp_path / "again",
                       tmp_path / "wheelhouse" / written)
    # a repaired wheel keeps its mark (no 1cuaudit1cuaudit) and has nothing left to repair
    assert rc == 0 and "nothing to repair" in out
