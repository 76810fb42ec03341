"""capstone's engine opened through its C API (formats/x86.py) answers as capstone's own binding does."""

from __future__ import annotations

import random

import capstone
import pytest
from conftest import compile_so, make_wheel
from test_capi import SO, cython_fixture  # noqa: F401 - the session fixture, shared
from test_startup import imported_by

from cuaudit.formats import x86
from cuaudit.formats.elf import image_of_bytes

C_SOURCE = """
#include <string.h>
static const char *names[] = {"alpha", "beta", "gamma"};
int pick(int i, char *out) {
    switch (i) {
    case 0: strcpy(out, names[0]); return 1;
    case 1: strcpy(out, names[1]); return 2;
    case 2: strcpy(out, names[2]); return 3;
    case 3: return out[0] * 3;
    case 4: return out[1] ^ 5;
    default: return -1;
    }
}
double mix(double a, float b, long c) { return a * b + (double)c / 3.0; }
"""


def _engine_expected() -> None:
    """The engine is opened directly wherever capstone's own binding reports a 5.x engine: a later
    major version is the binding's to read (another ``cs_insn`` layout), and skips these tests."""
    if capstone.cs_version()[0] != x86._MAJOR:
        pytest.skip(f"capstone's engine is {capstone.cs_version()[:2]}, not 5.x: its binding answers (formats/x86.py)")


def _both(code: bytes, address: int) -> tuple[list, list]:
    _engine_expected()
    engine = x86.disassembler()
    binding = x86.disassembler(through_binding=True)
    assert isinstance(engine, x86._Engine) and isinstance(binding, capstone.Cs)
    return list(engine.disasm_lite(code, address)), list(binding.disasm_lite(code, address))


def _text(data: bytes, path: str) -> tuple[bytes, int]:
    image = image_of_bytes(data, path)
    text = next(s for s in image.sections() if s.name == ".text")
    return data[text.offset:text.offset + text.size], text.addr


def test_engine_decodes_compiled_code_as_the_binding(tmp_path):
    so = compile_so(tmp_path, "libpick.so", C_SOURCE, flags=["-O2"])
    code, address = _text(so.read_bytes(), "libpick.so")
    engine, binding = _both(code, address)
    assert len(engine) > 20 and engine == binding
    assert {"ret", "call"} & {m for _a, _s, m, _o in engine}
    assert engine[0][0] == address and all(isinstance(m, str) and isinstance(o, str) for _a, _s, m, o in engine)


def test_engine_decodes_a_cython_module_as_the_binding(cython_fixture):  # noqa: F811
    data = (cython_fixture["consumer"] / "pkgcons" / f"cons{SO}").read_bytes()
    code, address = _text(data, f"pkgcons/cons{SO}")
    engine, binding = _both(code, address)
    assert len(engine) > 1000 and engine == binding


def test_engine_skips_data_as_the_binding():
    """Bytes that are no instruction come out as capstone's ``.byte`` entries, one per byte skipped."""
    noise = random.Random(7).randbytes(20_000) + b"\x0f\x0b\xff\xff\xff"  # ends in a truncated instruction
    engine, binding = _both(noise, 0x400000)
    assert engine == binding
    assert any(m == ".byte" for _a, _s, m, _o in engine)
    assert engine[-1][0] + engine[-1][1] <= 0x400000 + len(noise)
    assert _both(b"", 0x1000) == ([], [])
    code = b"\x55\x48\x89\xe5\xc3"
    for given in (bytearray(code), memoryview(code)):  # what the binding also takes
        assert list(x86.disassembler().disasm_lite(given, 0)) == _both(code, 0)[1]


@pytest.mark.parametrize("patch", ["_MAJOR", "_LIBRARY"])
def test_the_binding_answers_where_the_engine_is_not_certain(monkeypatch, patch):
    """Another major version (another ``cs_insn`` layout) or no library where the wheel keeps it."""
    _engine_expected()
    assert isinstance(x86.disassembler(), x86._Engine)
    monkeypatch.setattr(x86, patch, 4 if patch == "_MAJOR" else "lib/no-such-libcapstone.so")
    fallback = x86.disassembler()
    assert isinstance(fallback, capstone.Cs) and fallback.skipdata
    assert [m for _a, _s, m, _o in fallback.disasm_lite(b"\x55\xc3", 0)] == ["push", "ret"]


def test_a_check_that_disassembles_imports_no_capstone_binding(tmp_path, cython_fixture):  # noqa: F811
    """A wheel with a Cython module: its import sites are disassembled (the consumer's C-API imports
    are read) without capstone's Python package (27 ms of start-up)."""
    _engine_expected()
    cons = (cython_fixture["consumer"] / "pkgcons" / f"cons{SO}").read_bytes()
    wheel = make_wheel(tmp_path, "pkgcons", "1.0", {"pkgcons/__init__.py": "", f"pkgcons/cons{SO}": cons})
    proc, mods = imported_by("check", "--isolated", "--no-cache", "--color", "never", "-f", "json", str(wheel),
                             cwd=tmp_path, env={"CUAUDIT_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode in (0, 1), proc.stderr
    assert "cuaudit.formats.x86" in mods and "cuaudit.facts.cython" in mods
    assert not {m for m in mods if m == "capstone" or m.startswith("capstone.")}
