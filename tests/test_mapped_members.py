"""Files on disk are read for what the readers need, not mapped whole into the process.

A CUDA module is mostly device code (cupy's ``thrust`` module: 72 of its 79 MB).  Two readers
used to take all of it into the worker that read the file:

- the device-code listing read each entry's header through the file's mapping, and the kernel
  maps the whole page-cache folio around each touched byte (large folios on Linux 6.x): a 1 GB
  ``libtorch_cuda.so`` grew the process by 164-780 MB whose bytes it never looked at.  The headers
  are now read with ``pread`` (``fatbin._FileWindows``): the tests count those reads, since how much
  a mapping would have brought in depends on the kernel and on the page cache;
- the Cython C-API reader copied the whole file into a bytes object (+167 MB for ``thrust``), then
  into a private anonymous mapping without the fat-binary sections (still the size of a large
  extension module without device code in each worker: 16 workers reading such modules at once
  were the GPU machine's peak).  It now reads the file's mapping where it looks, and its searches
  of the whole file (the Cython markers) go a piece at a time, each piece's pages let go, the
  fat-binary sections read as zeros without being read (``cython_code.scan_markers``).

Each test checks that the result is the same as reading the bytes in memory, and that the memory
is not taken.
"""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import corpus_file
from devicecode_bytes import container, elf_with, entry

from cuaudit.facts import MemberReader, cython_code
from cuaudit.facts import fatbin as fatbin_mod
from cuaudit.facts.cython import read_image
from cuaudit.facts.cython_code import MARKERS, _Image, scan_markers
from cuaudit.facts.fatbin import FatbinExtractor, read_device_code, read_path
from cuaudit.formats.elf import image_of_bytes, map_file
from cuaudit.inputs import resolve

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")

BIG = 48 * 1024**2  # device code large enough that taking it would show in the process's memory


def _library(path: Path, big: int = 0) -> bytes:
    """An ELF with code-like bytes around two containers of device code (one entry with ``big``
    bytes of payload) and a malformed entry at the end of the second (a note)."""
    fat = container(entry(2, 80), entry(2, 90, payload=b"\1" * max(big, 24)), entry(1, 75)) + \
        container(entry(2, 100, payload=b"\2" * 40), entry(2, 120), entry(2, 86)[:40] + b"\0" * 24)
    data = elf_with({".text": b"\x90" * 4096 + b"cython_runtime\0", ".nv_fatbin": fat, ".rodata": b"_cython_3_0_11\0" * 4})
    path.write_bytes(data)
    return data


def _resident_mb(*keys: str) -> float:
    with open("/proc/self/status") as fh:
        d = dict(line.split(":", 1) for line in fh)
    return sum(int(d[k].split()[0]) for k in keys if k in d) / 1024


def test_device_code_of_a_file_is_read_with_pread_and_equals_the_bytes(tmp_path, monkeypatch):
    lib = tmp_path / "libk.so"
    data = _library(lib)
    calls: list[tuple[int, int]] = []
    real = os.pread

    def spy(fd: int, n: int, offset: int) -> bytes:
        calls.append((n, offset))
        return real(fd, n, offset)

    monkeypatch.setattr(fatbin_mod.os, "pread", spy)
    from_file = read_path(str(lib))
    assert from_file == read_device_code(data)
    assert [e.sm for e in from_file.entries] == [80, 90, 75, 100, 120]
    assert from_file.notes and "malformed entry header" in from_file.notes[0]
    # two container headers and a header read for each of the six entries, nothing more
    assert len(calls) == 8 and max(n for n, _ in calls) <= 64

    # the extractor reads a member on disk the same way: headers with pread, the same facts
    calls.clear()
    art = resolve([str(lib)])[0]
    reader = MemberReader(art, art.members[0])
    assert reader.fs_path is not None
    ex = FatbinExtractor()
    ex.prepare(reader)
    assert ex.extract(reader) == from_file
    assert len(calls) == 8


def test_device_code_of_a_file_replaced_by_another_size_is_read_through_the_mapping(tmp_path):
    lib = tmp_path / "libk.so"
    data = _library(lib)
    art = resolve([str(lib)])[0]
    reader = MemberReader(art, art.members[0])
    image = reader.elf()  # mapped: then the file changes under it
    lib.write_bytes(data + b"\0" * 8)
    assert fatbin_mod._FileWindows.of(str(lib), image.size) is None
    assert FatbinExtractor().extract(reader) == read_device_code(data)


def test_a_file_cut_short_under_the_listing_ends_it_with_a_note(tmp_path):
    """A file truncated after it was measured (another process rewriting it): the reads come back
    short, and the listing stops where the bytes end, with a note, not an exception."""
    lib = tmp_path / "libk.so"
    data = _library(lib, big=1 << 16)
    image = image_of_bytes(data, str(lib))
    fat = image.section(".nv_fatbin")
    windows = fatbin_mod._FileWindows.of(str(lib), len(data))
    assert windows is not None
    try:
        cut = fat.offset + 16 + 64 + 24 + 64 + 100  # inside the second entry's payload
        os.truncate(lib, cut)
        entries, containers, notes = fatbin_mod.parse_fatbin(windows, fat.offset, fat.offset + fat.size,
                                                             ".nv_fatbin")
    finally:
        windows.close()
    assert [e.sm for e in entries] == [80, 90]
    assert containers == 1 and notes and "malformed entry header" in notes[0]


def test_a_module_whose_device_code_lies_past_its_end_is_read_whole_as_in_memory(tmp_path):
    """A section table whose ``.nv_fatbin`` claims more bytes than the file has (1 TB): nothing is
    left out on its word, so the reader sees on disk what it sees in memory (the device-code
    listing says CU005 for the lie)."""
    import struct

    from cuaudit.model import InputError

    data = bytearray(_library(tmp_path / "x.so"))
    elf = image_of_bytes(bytes(data))
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    index = [s.name for s in elf.sections()].index(".nv_fatbin")
    struct.pack_into("<Q", data, shoff + index * 64 + 32, 1 << 40)  # sh_size
    assert image_of_bytes(bytes(data)).section(".nv_fatbin").size == 1 << 40
    lib = tmp_path / "mod.cpython-311-x86_64-linux-gnu.so"
    lib.write_bytes(bytes(data))
    with map_file(str(lib)) as mm:
        mapped = image_of_bytes(mm, str(lib))
        assert scan_markers(mapped, mm) == scan_markers(elf, bytes(data))  # the device code read, not zeros
        assert read_image(mapped) == read_image(image_of_bytes(bytes(data), str(lib)))
    art = resolve([str(lib)])[0]
    with pytest.raises(InputError) as err:
        FatbinExtractor().extract(MemberReader(art, art.members[0]))
    assert err.value.code == "CU005"


def test_a_mapped_module_is_read_in_place_and_searched_without_its_device_code(tmp_path):
    lib = tmp_path / "mod.cpython-311-x86_64-linux-gnu.so"
    data = _library(lib, big=1 << 20)
    with map_file(str(lib)) as mm:
        elf = image_of_bytes(mm, str(lib))
        image = _Image(elf)
        assert image.data is mm  # no copy: the readers read the file's pages where they look
        fat = elf.section(".nv_fatbin")
        assert image.data[fat.offset : fat.offset + 64] == data[fat.offset : fat.offset + 64]
        # the whole-file searches read the device code as zeros, as the copy of the file held it
        zeroed = data[: fat.offset] + bytes(fat.size) + data[fat.offset + fat.size :]
        assert image.markers() == scan_markers(elf, zeroed)
        assert image.markers().abi == (b"3", b"0", b"11", None, None)
        assert image.has(b"cython_runtime\0") and not image.has(b"__pyx_capi__")
    assert _Image(image_of_bytes(data, str(lib))).data == data  # bytes in memory stay as they are


#: the process's pages of every kind: its own and the files it maps
_ALL_PAGES = ("RssAnon", "RssFile", "RssShmem")


@linux_only
@pytest.mark.parametrize("device_code", [True, False])
def test_searching_a_mapped_module_leaves_its_pages_out_of_the_process(tmp_path, device_code):
    """A module of 48 MB, device code or host code (a large extension module without any, such as
    OpenCV's): the markers are found, and the process does not keep the file's pages (neither
    anonymous nor mapped)."""
    lib = tmp_path / "mod.cpython-311-x86_64-linux-gnu.so"
    if device_code:
        _library(lib, big=BIG)
    else:
        code = bytes(range(256)) * (BIG // 256)  # code-like: a NUL here and there
        lib.write_bytes(elf_with({".text": code + b"\0cython_runtime\0", ".rodata": b"_cython_3_0_11\0"}))
    with map_file(str(lib)) as mm:
        before = _resident_mb(*_ALL_PAGES)
        image = _Image(image_of_bytes(mm, str(lib)))
        assert image.has(b"cython_runtime\0") and image.markers().abi == (b"3", b"0", b"11", None, None)
        grown = _resident_mb(*_ALL_PAGES) - before
        assert grown < BIG / 1024**2 / 4, f"{grown:.0f} MB kept searching a module of {BIG >> 20} MB"


_NEEDLES = (*MARKERS, b"_cython_3_2_0b1\0", b"_cython_0_29_36\0", b"_cython_12_3_4rc5\0")


@pytest.mark.parametrize("seed", range(40))
def test_markers_found_piece_by_piece_are_those_of_the_whole_file(tmp_path, monkeypatch, seed):
    """Tiny pieces (16 bytes) over random layouts: markers across any cut, stretches without a NUL
    longer than a piece, one ending right where a fat-binary section (read as zeros) begins; the
    file's mapping, searched a piece at a time, says what its bytes with zeros there say whole."""
    import random

    rnd = random.Random(seed)
    monkeypatch.setattr(cython_code, "_SCAN_PIECE", 16)

    def junk() -> bytes:
        return bytes(rnd.choice(b"_abcpyx0123\0\x90") for _ in range(rnd.randrange(0, 40)))

    def part() -> bytes:
        return b"".join(junk() + (rnd.choice(_NEEDLES) if rnd.random() < 0.5 else b"") for _ in range(rnd.randrange(1, 6)))

    needle = rnd.choice(_NEEDLES)
    before_fat = part() + needle.rstrip(b"\0")  # a name whose NUL is the device code's first zero
    fat = container(entry(2, 80, payload=rnd.choice(_NEEDLES) * 3))  # markers inside: read as zeros
    data = elf_with({".text": part(), ".rodata": before_fat, ".nv_fatbin": fat, ".data": part()})
    lib = tmp_path / "mod.cpython-311-x86_64-linux-gnu.so"
    lib.write_bytes(data)
    with map_file(str(lib)) as mm:
        elf = image_of_bytes(mm, str(lib))
        s = elf.section(".nv_fatbin")
        zeroed = data[: s.offset] + bytes(s.size) + data[s.offset + s.size :]
        abi = cython_code.ABI_MARKER.search(zeroed)
        whole = (abi.groups() if abi else None, frozenset(n for n in MARKERS if n in zeroed))
        assert scan_markers(elf, mm) == scan_markers(elf, zeroed) == whole
        if needle.endswith(b"\0"):
            assert needle in scan_markers(elf, mm).found or needle.startswith(b"_cython_")


@pytest.mark.parametrize("wheel, member", [
    ("rmm_cu12-24.12.0-*.whl", "rmm/pylibrmm/memory_resource.cpython-311-x86_64-linux-gnu.so"),
    ("cupy_cuda12x-14.2.0-*.whl", "cupy/cuda/thrust.cpython-311-x86_64-linux-gnu.so"),
])
def test_cython_facts_of_a_module_on_disk_equal_those_of_its_bytes(corpus, tmp_path, wheel, member):
    with zipfile.ZipFile(corpus_file(corpus, wheel)) as zf:
        if member not in zf.namelist():
            pytest.skip(f"{member} is not in {wheel}")
        data = zf.read(member)
    path = tmp_path / member.rsplit("/", 1)[-1]
    path.write_bytes(data)
    in_memory = read_image(image_of_bytes(data, member))
    with map_file(str(path)) as mm:
        on_disk = read_image(image_of_bytes(mm, member))
    assert in_memory.is_cython and in_memory.cython
    assert on_disk == in_memory


def test_a_foreign_cython_module_on_disk_is_told_as_in_memory(tmp_path):
    """An aarch64 Cython module without an ABI marker: its ``cython_runtime`` name was searched with
    ``in``, which on a file's mapping compares single bytes and found nothing: on disk it passed for
    no Cython at all, where the same bytes in memory are a Cython module cuaudit cannot read (CU009)."""
    import struct

    from cuaudit.facts.cython import CythonCapiExtractor
    from cuaudit.model import InputError

    data = bytearray(elf_with({".text": b"\0" * 64, ".rodata": b"cython_runtime\0__pyx_capi__\0"}))
    struct.pack_into("<H", data, 18, 183)  # e_machine: AArch64
    path = tmp_path / "mod.cpython-311-aarch64-linux-gnu.so"
    path.write_bytes(bytes(data))
    with pytest.raises(InputError) as in_memory:
        read_image(image_of_bytes(bytes(data), str(path)))
    art = resolve([str(path)])[0]
    with pytest.raises(InputError) as on_disk:
        CythonCapiExtractor().extract(MemberReader(art, art.members[0]))
    assert in_memory.value.code == on_disk.value.code == "CU009"


@pytest.mark.parametrize("markers", [True, False])
def test_a_foreign_module_with_a_broken_section_table_is_told_on_disk_as_in_memory(tmp_path, markers):
    """A module of another machine is only told Cython (CU009) or not: its section table is never
    read for that, on disk as in memory (no CU005 on disk for a table that points past the end)."""
    import struct

    from cuaudit.facts.cython import CythonCapiExtractor
    from cuaudit.model import InputError

    rodata = b"cython_runtime\0__pyx_capi__\0" if markers else b"plain strings\0"
    data = bytearray(elf_with({".text": b"\0" * 64, ".rodata": rodata}))
    struct.pack_into("<H", data, 18, 183)  # e_machine: AArch64
    struct.pack_into("<Q", data, 0x28, 1 << 40)  # e_shoff: past the end of the file
    path = tmp_path / "mod.cpython-311-aarch64-linux-gnu.so"
    path.write_bytes(bytes(data))

    def outcome(read):
        try:
            return read().is_cython
        except InputError as exc:
            return exc.code

    in_memory = outcome(lambda: read_image(image_of_bytes(bytes(data), str(path))))
    art = resolve([str(path)])[0]
    on_disk = outcome(lambda: CythonCapiExtractor().extract(MemberReader(art, art.members[0])))
    assert in_memory == on_disk == ("CU009" if markers else False)
