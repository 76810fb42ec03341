"""Hostile ELF and fat-binary members (issue 13): every table a reader follows is bounded.

Each file is built here byte by byte (no compiler): a 64-bit little-endian
shared object whose one PT_LOAD maps the whole file at address 0, so a
dynamic entry's address is its file offset.  Each hostile member gets its own
CU0xx finding, in bounded time and memory, and the scan goes on to the next
member of the same wheel.
"""

from __future__ import annotations

import struct
import time
import tracemalloc

import pytest

from conftest import make_wheel
from devicecode_bytes import container, elf_with, entry
from cuaudit.config import Config
from cuaudit.engine import audit
from cuaudit.formats.elf import image_of_bytes
from cuaudit.model import InputError

PT_LOAD, PT_DYNAMIC = 1, 2
DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT = 1, 4, 5, 6, 10, 11
DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
HEADER_FIELDS = {"e_phoff": ("<Q", 0x20), "e_shoff": ("<Q", 0x28), "e_phnum": ("<H", 0x38),
                 "e_shentsize": ("<H", 0x3A), "e_shnum": ("<H", 0x3C), "e_shstrndx": ("<H", 0x3E)}
#: one long name: many entries pointing at it would copy it once each
LONG = b"\0" + b"A" * 60_000 + b"\0"


def build_elf(*, strtab: bytes = b"\0", symbols=(), needed=(), verneed=None, verdef=None, sections=None,
              header=None) -> bytes:
    """A shared object with these dynamic tables.

    ``symbols``: (name offset, st_info, st_shndx); ``verneed``/``verdef``: (raw bytes, count);
    ``sections``: (section-name table, [name offset of each section]), the last one being the
    name table itself; ``header``: ELF header fields to overwrite (``HEADER_FIELDS``).
    """
    blobs: list[bytes] = []
    pos = 64 + 2 * 56

    def place(data: bytes) -> int:
        nonlocal pos
        at = pos
        blobs.append(data + b"\0" * (-len(data) % 8))
        pos += len(blobs[-1])
        return at

    dyn = [(DT_NEEDED, n) for n in needed]
    dyn += [(DT_STRTAB, place(strtab)), (DT_STRSZ, len(strtab))]
    if symbols:
        syms = b"\0" * 24 + b"".join(struct.pack("<IBBHQQ", n, info, 0, shndx, 0, 0) for n, info, shndx in symbols)
        nchain = len(symbols) + 1
        dyn += [(DT_SYMTAB, place(syms)), (DT_SYMENT, 24),
                (DT_HASH, place(struct.pack(f"<III{nchain}I", 1, nchain, 0, *([0] * nchain))))]
    if verneed is not None:
        dyn += [(DT_VERNEED, place(verneed[0])), (DT_VERNEEDNUM, verneed[1])]
    if verdef is not None:
        dyn += [(DT_VERDEF, place(verdef[0])), (DT_VERDEFNUM, verdef[1])]
    dyn_raw = b"".join(struct.pack("<qQ", t, v) for t, v in dyn + [(0, 0)])
    dyn_off = place(dyn_raw)
    shoff = shnum = shstrndx = 0
    if sections is not None:
        names, rows = sections
        names_off = place(names)
        last = len(rows) - 1
        table = b"".join(struct.pack("<IIQQQQIIQQ", name, 3 if i == last else 1, 0, 0, names_off if i == last else 0,
                                     len(names) if i == last else 0, 0, 0, 1, 0) for i, name in enumerate(rows))
        shoff, shnum, shstrndx = place(table), len(rows), last
    ehdr = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, shoff, 0, 64, 56, 2,
                                                             64, shnum, shstrndx)
    phdrs = struct.pack("<IIQQQQQQ", PT_LOAD, 5, 0, 0, 0, pos, pos, 0x1000)
    phdrs += struct.pack("<IIQQQQQQ", PT_DYNAMIC, 6, dyn_off, dyn_off, dyn_off, len(dyn_raw), len(dyn_raw), 8)
    out = bytearray(ehdr + phdrs + b"".join(blobs))
    for field, value in (header or {}).items():
        fmt, at = HEADER_FIELDS[field]
        struct.pack_into(fmt, out, at, value)
    return bytes(out)


def verneed_entry(cnt: int, file_name: int, aux: int, nxt: int) -> bytes:
    return struct.pack("<HHIII", 1, cnt, file_name, aux, nxt)


def vernaux(index: int, name: int, nxt: int) -> bytes:
    return struct.pack("<IHHII", 0, 0, index, name, nxt)


def verdef_entry(index: int, aux: int, nxt: int, cnt: int = 1) -> bytes:
    return struct.pack("<HHHHIII", 1, 0, index, cnt, 0, aux, nxt)


GOOD = build_elf(strtab=b"\0libfoo.so.1\0wave\0FOO_1\0", needed=[1], symbols=[(13, 0x12, 5), (13, 0x12, 0)],
                 verneed=(verneed_entry(1, 1, 16, 0) + vernaux(2, 18, 0), 1), sections=(b"\0.shstrtab\0", [0, 1]))

#: name -> (file bytes, code, words of the message)
HOSTILE = {
    # many entries of one table, each naming the same long string
    "symbols_one_string": (build_elf(strtab=LONG, symbols=[(1, 0x12, 0)] * 3000), "CU005", "point into the same strings"),
    "needed_one_string": (build_elf(strtab=LONG, needed=[1] * 3000), "CU005", "point into the same strings"),
    "verneed_one_string": (build_elf(strtab=LONG, verneed=(verneed_entry(3000, 1, 16, 0) + b"".join(
        vernaux(2 + i, 1, 16) for i in range(3000)), 1)), "CU005", "point into the same strings"),
    "verdef_one_string": (build_elf(strtab=LONG, verdef=(b"".join(
        verdef_entry(2 + i, 20, 28) + struct.pack("<II", 1, 0) for i in range(3000)), 3000)), "CU005",
        "point into the same strings"),
    "sections_one_string": (build_elf(sections=(LONG, [1] * 3000)), "CU005", "point into the same strings"),
    # chains whose next pointers would wrap around in 32-bit arithmetic (-16, -20): a loop in C
    "verneed_next_back": (build_elf(strtab=b"\0libfoo.so.1\0FOO_1\0", verneed=(
        verneed_entry(1, 1, 16, 0xFFFFFFF0) + vernaux(2, 13, 0), 1_000_000)), "CU005", "extends past the end"),
    "vernaux_next_back": (build_elf(strtab=b"\0libfoo.so.1\0FOO_1\0", verneed=(
        verneed_entry(60000, 1, 16, 0) + vernaux(2, 13, 0xFFFFFFF0), 1)), "CU005", "extends past the end"),
    "verdef_next_back": (build_elf(strtab=b"\0FOO_1\0", verdef=(
        verdef_entry(2, 20, 0xFFFFFFEC) + struct.pack("<II", 1, 0), 0xFFFFFFFF)), "CU005", "extends past the end"),
    # names outside their table
    "needed_out_of_range": (build_elf(strtab=b"\0libfoo.so.1\0", needed=[1 << 40]), "CU005", "outside the dynamic string table"),
    "needed_past_strsz": (build_elf(strtab=b"\0libfoo.so.1\0", needed=[13]), "CU005", "outside the dynamic string table"),
    "symbol_out_of_range": (build_elf(strtab=b"\0x\0", symbols=[(1 << 31, 0x12, 0)]), "CU005", "outside the string table"),
    # counts that lie
    "phnum_huge": (build_elf(header={"e_phnum": 0xFFFF}), "CU005", "program headers"),
    "shnum_huge": (build_elf(sections=(b"\0.shstrtab\0", [0, 1]), header={"e_shnum": 0xFEFF}), "CU005", "section headers"),
    "shnum_in_section_0": (build_elf(sections=(b"\0.shstrtab\0", [0, 1]), header={"e_shnum": 0}), "CU005", None),
    "shstrndx_out_of_range": (build_elf(sections=(b"\0.shstrtab\0", [0, 1]), header={"e_shstrndx": 0xFEFF}), "CU005",
                              "out of range"),
    "shentsize_tiny": (build_elf(sections=(b"\0.shstrtab\0", [0, 1]), header={"e_shentsize": 8}), "CU005", "too small"),
}


def test_the_builder_makes_a_file_the_reader_agrees_with():
    link = image_of_bytes(GOOD, "good.so").linking()
    assert link.needed == ("libfoo.so.1",) and link.imports == ("wave",) and link.exports == ("wave",)
    assert [(n.file, n.versions) for n in link.version_needs] == [("libfoo.so.1", ("FOO_1",))]
    assert [s.name for s in image_of_bytes(GOOD).sections()] == ["", ".shstrtab"]


def _shnum_from_section_0() -> bytes:
    """e_shnum 0 means "the count is in section 0's sh_size": a count there that no file could hold."""
    data = bytearray(HOSTILE["shnum_in_section_0"][0])
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    struct.pack_into("<Q", data, shoff + 32, 1 << 40)  # section 0's sh_size
    return bytes(data)


HOSTILE["shnum_in_section_0"] = (_shnum_from_section_0(), "CU005", "section headers")


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_each_hostile_table_is_cu005_in_bounded_time_and_memory(name):
    data, code, words = HOSTILE[name]
    tracemalloc.start()
    started = time.process_time()
    try:
        with pytest.raises(InputError) as info:
            image = image_of_bytes(data, f"{name}.so")
            image.check()
            image.sections()
            image.dynsym_names()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.code == code and info.value.message.startswith(f"{name}.so: "), info.value.message
    assert words is None or words in info.value.message, info.value.message
    assert time.process_time() - started < 2.0
    assert peak < 8 * len(data) + (4 << 20), peak  # 3,000 names of 60 KB would be 180 MB


def test_every_hostile_member_of_one_wheel_gets_its_own_finding_and_the_scan_goes_on(tmp_path):
    members = {f"demo/{name}.so": data for name, (data, _, _) in HOSTILE.items()}
    members["demo/good.so"] = GOOD
    whl = make_wheel(tmp_path, "demo", "1.0", members)
    started = time.process_time()
    # every rule: the section headers are read only when a pass asks for sections (device code does)
    report = audit([str(whl)], config=Config(cache=False, jobs=1))
    assert time.process_time() - started < 30
    found = {f.location.member: f.code for f in report.findings if f.code.startswith("CU0")}
    assert found == {f"demo/{name}.so": code for name, (_, code, _) in HOSTILE.items()}
    assert all(f.code != "CU011" for f in report.findings)


# -- fat binaries that lie ----------------------------------------------------------------------


def _device_code(whl, paths) -> dict:
    """The fat-binary extractor's answer (or its InputError) for each member named."""
    from cuaudit.facts import MemberReader
    from cuaudit.facts.fatbin import FatbinExtractor
    from cuaudit.inputs.wheel import WheelArtifact

    art = WheelArtifact(str(whl))
    out = {}
    for m in art.members:
        if m.path in paths:
            try:
                out[m.path] = FatbinExtractor().extract(MemberReader(art, m))
            except InputError as exc:
                out[m.path] = exc
    return out


def test_a_member_starting_with_the_fatbin_magic_whose_headers_lie(tmp_path):
    members = {
        "demo/body.so": container(entry(2, 80, payload=b""), declared=1 << 60),  # a body past the end
        "demo/hsize.so": container(entry(2, 80, header_size=0xFFFFFFFF)),  # a header larger than the body
        "demo/payload.so": container(entry(2, 80, payload_size=1 << 62)),  # a payload past the body
        "demo/short.so": container(entry(2, 80))[:40],  # cut inside the first entry header
        "demo/ok.so": container(entry(2, 90, payload=b"\0" * 64)),
    }
    whl = make_wheel(tmp_path, "demo", "1.0", members)
    code = _device_code(whl, members)
    assert code["demo/body.so"].entries == () and "no fat-binary container" in code["demo/body.so"].notes[0]
    for name in ("hsize", "payload"):
        assert code[f"demo/{name}.so"].entries == () and "malformed entry header" in code[f"demo/{name}.so"].notes[0]
    assert code["demo/short.so"].entries == () and code["demo/short.so"].notes
    assert [e.sm for e in code["demo/ok.so"].entries] == [90]
    report = audit([str(whl)], config=Config(select=("CU0",), cache=False, jobs=1))
    assert all(f.code != "CU011" for f in report.findings), report.findings


def test_a_raw_fatbin_member_is_streamed_not_held_whole(tmp_path):
    payload = b"\0" * (48 << 20)  # deflates to 48 KB in the wheel
    whl = make_wheel(tmp_path, "demo", "1.0", {"demo/big.fatbin": container(entry(2, 86, payload=payload))})
    del payload
    tracemalloc.start()
    try:
        code = _device_code(whl, {"demo/big.fatbin"})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [e.sm for e in code["demo/big.fatbin"].entries] == [86]
    assert peak < 8 << 20, peak  # held whole, it was 48 MB (and more: the reader's copy)


def test_fatbin_entries_past_the_budget_are_cu004(tmp_path, monkeypatch):
    from cuaudit.facts import fatbin

    monkeypatch.setattr(fatbin, "MAX_ENTRIES", 1000)
    many = container(*[entry(2, 80, payload=b"")] * 1001)
    # raw, and in a .nv_fatbin section named again and again over the same bytes (entries counted per member)
    overlapping = bytearray(elf_with({".nv_fatbin": container(*[entry(2, 80, payload=b"")] * 600)}))
    shoff, shnum = struct.unpack_from("<Q", overlapping, 0x28)[0], struct.unpack_from("<H", overlapping, 0x3C)[0]
    sec = overlapping[shoff + 64 : shoff + 128]  # section 1: .nv_fatbin
    overlapping[shoff + 64 * shnum - 64 : shoff + 64 * shnum - 64] = sec  # the name table moves up one
    struct.pack_into("<HH", overlapping, 0x3C, shnum + 1, shnum)
    members = {"demo/raw.so": many, "demo/twice.so": bytes(overlapping)}
    code = _device_code(make_wheel(tmp_path, "demo", "1.0", members), members)
    for name in ("raw", "twice"):
        assert isinstance(code[f"demo/{name}.so"], InputError), code[f"demo/{name}.so"]
        assert code[f"demo/{name}.so"].code == "CU004" and "FATBIN_ENTRIES" in code[f"demo/{name}.so"].message


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_cython_reader_asks_the_dynamic_symbols_of_a_hostile_table_within_bounds(name):
    # cython-capi first asks .dynsym for a PyInit_ (facts/cython.py): a table that lies there is a
    # CU0xx problem of the full reader, one that does not is "not Cython" (no PyInit_), never a crash
    from cuaudit.facts.cython import read_module

    data = HOSTILE[name][0]
    started = time.process_time()
    try:
        module = read_module(data, f"{name}.so")
    except InputError as exc:
        assert exc.code.startswith("CU0"), exc.code
    else:
        assert module.is_cython is False
    assert time.process_time() - started < 2.0
