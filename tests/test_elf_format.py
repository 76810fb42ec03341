"""The ELF image (formats/elf.py): one reader for every ELF pass, robust on broken files.

Every broken file here gives CU005 for that member (never a crash, never an
internal error), in bounded time, whichever rules are selected.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest

from conftest import compile_so, make_wheel
from cuaudit import config
from cuaudit.engine import audit
from cuaudit.facts import InputError
from cuaudit.formats.elf import DT_STRSZ, DT_STRTAB, DT_VERNEED, image_of_bytes, image_of_stream

SOURCE = """
#include <math.h>
#include <string.h>
const char *greeting = "hello.world";
double wave(double x) { return cos(x) + sin(x); }
int copy(char *d, const char *s) { strcpy(d, s); return (int)strlen(d); }
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("elf")
    return compile_so(d, "libwave.so", SOURCE, libs=["m"], flags=["-Wl,-soname,libwave.so.1"])


def _check(data: bytes, path: str = "libwave.so") -> None:
    image = image_of_bytes(data, path)
    image.check()
    image.sections()


def _cu005(data: bytes) -> InputError:
    with pytest.raises(InputError) as info:
        _check(data)
    assert info.value.code == "CU005", info.value.message
    return info.value


def test_image_reads_what_pyelftools_reads(lib):
    from elftools.elf.elffile import ELFFile

    data = lib.read_bytes()
    image = image_of_bytes(data, "libwave.so")
    link = image.linking()
    with open(lib, "rb") as fh:
        elf = ELFFile(fh)
        dyn = elf.get_section_by_name(".dynamic")
        assert link.needed == tuple(t.needed for t in dyn.iter_tags() if t.entry.d_tag == "DT_NEEDED")
        assert link.soname == "libwave.so.1"
        syms = [s for s in elf.get_section_by_name(".dynsym").iter_symbols()
                if s.name and s["st_info"]["bind"] != "STB_LOCAL"]
        assert sorted(link.imports) == sorted(s.name for s in syms if s["st_shndx"] == "SHN_UNDEF")
        assert sorted(link.exports) == sorted(s.name for s in syms if s["st_shndx"] != "SHN_UNDEF")
        assert {s.name for s in image.sections()} == {s.name for s in elf.iter_sections()}
        ro = elf.get_section_by_name(".rodata")
        assert image.section_bytes(".rodata") == ro.data() and b"hello.world" in ro.data()
        vn = elf.get_section_by_name(".gnu.version_r")
        assert {n.file for n in link.version_needs} == {v.name for v, _aux in vn.iter_versions()}
        wave = next(s for s in syms if s.name == "wave")["st_value"]
        notes = [n for sec in elf.iter_sections() if sec["sh_type"] == "SHT_NOTE" for n in sec.iter_notes()]
    assert {(n.name, n.type) for n in image.notes()} >= {(n["n_name"], _NOTE_TYPES.get(n["n_type"], n["n_type"]))
                                                        for n in notes if n["n_name"] == "GNU"} - {("GNU", None)}
    assert dict(zip(link.imports, link.import_files))["cos"] == "libm.so.6"
    text = image.section(".text")
    assert image.offset_of(text.addr) == text.offset
    assert wave in image.function_starts()


_NOTE_TYPES = {"NT_GNU_BUILD_ID": 3, "NT_GNU_ABI_TAG": 1, "NT_GNU_PROPERTY_TYPE_0": 5}


def test_stream_prefix_serves_the_linking_view(lib):
    """The linking view of a streamed member reads only the prefix that holds the dynamic tables."""
    data = lib.read_bytes()
    seen = []

    class Counting:
        def __init__(self) -> None:
            self.pos = 0

        def read(self, n: int = -1) -> bytes:
            out = data[self.pos : self.pos + n if n >= 0 else None]
            self.pos += len(out)
            seen.append(self.pos)
            return out

        def close(self) -> None:
            pass

    streamed = image_of_stream(Counting, len(data), "libwave.so", retain=1 << 20)
    assert streamed.linking() == image_of_bytes(data).linking()
    dynamic = next(s for s in image_of_bytes(data).sections() if s.name == ".dynamic")
    assert max(seen) <= dynamic.offset + dynamic.size, "read past the dynamic tables for the linking view"
    assert streamed.sections() == image_of_bytes(data).sections()
    assert streamed.passes == 1


def test_stripped_and_headerless_files(lib, tmp_path):
    strip = shutil.which("strip")
    if strip:
        stripped = tmp_path / "stripped.so"
        subprocess.run([strip, "--strip-all", "-o", str(stripped), str(lib)], check=True)
        image = image_of_bytes(stripped.read_bytes())
        image.check()
        assert "wave" in image.linking().exports and ".symtab" not in {s.name for s in image.sections()}
    # no section headers at all (sstrip): e_shoff, e_shnum, e_shstrndx zero
    data = bytearray(lib.read_bytes())
    struct.pack_into("<Q", data, 0x28, 0)
    struct.pack_into("<HHH", data, 0x3A, 0, 0, 0)
    image = image_of_bytes(bytes(data))
    image.check()
    assert image.sections() == () and image.section(".rodata") is None and image.section_bytes(".rodata") == b""
    assert "wave" in image.linking().exports
    from cuaudit.facts.fatbin import read_device_code

    assert read_device_code(bytes(data)).notes  # said, not a crash


def _boundaries(data: bytes) -> list[int]:
    image = image_of_bytes(data)
    dyn = image.dynamic()
    cuts = {4, 15, 16, 40, 63, 64, image.phoff + 1, image.phoff + image.phnum * image.phentsize - 1,
            dyn.offset + 8, dyn.offset + dyn.size - 1, image.shoff, image.shoff + 1, len(data) - 1}
    for tag in (DT_STRTAB, DT_VERNEED):
        cuts.add(image.offset_of(dyn.first(tag)) + 1)
    return sorted(c for c in cuts if 0 < c < len(data))


def test_truncated_at_every_boundary_is_cu005(lib):
    data = lib.read_bytes()
    for cut in _boundaries(data):
        start = time.perf_counter()
        err = _cu005(data[:cut])
        assert time.perf_counter() - start < 1.0
        assert err.message.startswith("libwave.so: "), err.message


def _patched(data: bytes, **dyn_values: int) -> bytearray:
    """``data`` with the value of the first dynamic entry of each tag replaced."""
    out = bytearray(data)
    image = image_of_bytes(data)
    dyn = image.dynamic()
    tags = {"strsz": DT_STRSZ, "verneed": DT_VERNEED}
    for key, value in dyn_values.items():
        index = next(i for i, (t, _v) in enumerate(dyn.entries) if t == tags[key])
        struct.pack_into("<qQ", out, dyn.offset + 16 * index, tags[key], value)
    return out


def test_malformed_fields_are_cu005_with_the_field(lib):
    data = lib.read_bytes()
    image = image_of_bytes(data)
    # program headers past the end (a huge e_phnum)
    bad = bytearray(data)
    struct.pack_into("<H", bad, 0x38, 0xFFFF)
    assert _cu005(bytes(bad)).detail["field"] == "e_phoff"
    # section headers past the end (a huge e_shnum)
    bad = bytearray(data)
    struct.pack_into("<H", bad, 0x3C, 0xFEFF)
    assert _cu005(bytes(bad)).detail["field"] in ("e_shoff", "e_shnum")
    # a dynamic string table larger than the file
    assert _cu005(bytes(_patched(data, strsz=1 << 40))).detail["field"] == "DT_STRSZ"
    # the version-need chain pointing outside every segment
    assert "address" in _cu005(bytes(_patched(data, verneed=1 << 50))).detail
    # a dynamic string table without its final NUL
    dyn = image.dynamic()
    end = image.offset_of(dyn.first(DT_STRTAB)) + dyn.first(DT_STRSZ) - 1
    bad = bytearray(data)
    bad[end] = ord("A")
    _cu005(bytes(bad))
    # the section-name table without its final NUL
    shstr = image.sections()[image.shstrndx]
    bad = bytearray(data)
    bad[shstr.offset + shstr.size - 1] = ord("A")
    assert "NUL" in _cu005(bytes(bad)).message


def test_runaway_chains_are_bounded(lib):
    data = lib.read_bytes()
    image = image_of_bytes(data)
    dyn = image.dynamic()
    vn = image.offset_of(dyn.first(DT_VERNEED))
    # a version-need entry claiming 65535 versions, each pointing 16 bytes further: a walk
    # over the rest of the file, stopped by the entry budget or the file's end
    bad = bytearray(data)
    struct.pack_into("<H", bad, vn + 2, 0xFFFF)
    aux = vn + struct.unpack_from("<I", bad, vn + 8)[0]
    for k in range(8):
        struct.pack_into("<I", bad, aux + 12 + 16 * k, 16)
    start = time.perf_counter()
    try:
        _check(bytes(bad))
    except InputError as exc:
        assert exc.code == "CU005"
    assert time.perf_counter() - start < 2.0
    # a GNU hash bucket far beyond its chains (the symbol count comes from them): CU005, not a 16 GB read
    gh = image.offset_of(dyn.first(0x6FFFFEF5))
    nbuckets, symoffset, bloom, _shift = struct.unpack_from("<IIII", data, gh)
    bad = bytearray(data)
    struct.pack_into("<I", bad, gh + 16 + bloom * 8, 0xFFFFFFF0)
    start = time.perf_counter()
    _cu005(bytes(bad))
    assert time.perf_counter() - start < 2.0


def test_a_broken_elf_member_is_cu005_whatever_rules_are_selected(lib, tmp_path):
    data = lib.read_bytes()
    whl = make_wheel(tmp_path, "demo", "1.0", {"demo/libwave.so": data[: image_of_bytes(data).shoff + 10],
                                               "demo/ok.so": data})
    for select in ("CU0", "CU0,CU2", "CU0,CU6", "CU0,CU1", "CU0,CU1,CU2,CU3,CU4,CU5,CU6"):
        cfg = config.load(isolated=True, overrides={"select": select, "cache": False})
        report = audit([str(whl)], config=cfg)
        found = [(f.code, f.location.member) for f in report.findings if f.code.startswith("CU0")]
        assert found == [("CU005", "demo/libwave.so")], (select, found)


def test_other_machines_are_read_by_the_image(lib):
    data = bytearray(lib.read_bytes())
    struct.pack_into("<H", data, 18, 183)  # EM_AARCH64
    image = image_of_bytes(bytes(data))
    image.check()
    assert image.machine_name == "AArch64" and not image.is_x86_64 and "wave" in image.linking().exports


def test_stream_keeps_the_section_headers_it_passes():
    """patchelf moves the dynamic tables past the section headers (torch 2.8.0's libraries): the
    linking view reads beyond them, and the sections are then read without inflating again."""
    import io

    from devicecode_bytes import elf_with

    data = elf_with({".rodata": b"x" * 64}) + b"\2" * (6 << 20)  # more than the stream's tail behind
    opens = []
    image = image_of_stream(lambda: opens.append(1) or io.BytesIO(data), len(data), "libx.so", retain=64)
    assert image.read(len(data) - 8, 8) == b"\2" * 8
    assert image.sections() == image_of_bytes(data).sections()
    assert image.passes == 1 and len(opens) == 1


def test_a_stream_whose_section_entries_lie_about_their_size_pins_nothing():
    """e_shentsize is 16 bits: 65,535-byte rows would pin up to the whole streamed member.  A
    table whose rows are not the ELF class's own size is not kept (the sections then cost a
    second pass, and are CU005 as before)."""
    import io

    from devicecode_bytes import elf_with

    data = bytearray(elf_with({".rodata": b"x" * 64}) + b"\2" * (6 << 20))
    struct.pack_into("<H", data, 58, 0xFFFF)  # e_shentsize of an ELF64 header
    data = bytes(data)
    image = image_of_stream(lambda: io.BytesIO(data), len(data), "libx.so", retain=64)
    assert image.read(len(data) - 8, 8) == b"\2" * 8
    assert image.source.pin_end == 0 and len(image.source.pinned) == 0
    with pytest.raises(InputError) as err:
        image.sections()
    assert err.value.code == "CU005"
