"""Device code in ELF files: the CUDA fat binary, read without cuobjdump.

``nvcc`` embeds a module's GPU code in a *fat binary*: one or more
containers (magic ``0xBA55ED50``) in the ``.nv_fatbin`` section (or
``__nv_relfatbin`` for relocatable device code, ``-rdc``), each holding
entries: SASS (a cubin, an ELF for one GPU architecture), PTX (virtual ISA,
compiled by the driver at first use) or LTO IR.  ``.nvFatBinSegment`` holds
the host-side wrappers (magic ``0x466243B1``) the CUDA runtime registers.

What a wheel carries here decides where it runs: a module without SASS or
PTX for a GPU fails there with ``no kernel image is available for execution
on the device`` -- and a wheel built where ``torch.cuda.is_available()`` was
false carries none at all (PyTorch AO, torch-linear-assignment 0.0.5).

Only what the listing needs is read: the ELF header, the section headers,
the section-name table, then the 64- to 120-byte header of each entry
(payloads are skipped, never inflated).  Files on disk are mmapped, so a
749 MB ``libcublasLt.so.12`` costs a few pages.  An archive member cannot
seek: it is inflated once, front to back, and containers are recognised on
the way (their headers validated, then kept only if they lie inside a
fat-binary section once the section headers at the end are known).

Entry header layout (little endian), as nvcc 11-13 write it::

    0  u16 kind          1 PTX, 2 ELF (SASS), 8 LTO IR (4: NVVM IR, CUDA 11)
    2  u16 version       0x0101
    4  u32 header size   64, or more with an options block
    8  u64 payload size  padded to 8
    16 u32 stored size   of a compressed payload
    20 u32 options offset
    24 u16 minor, u16 major  cubin ELF ABI or PTX ISA version
    28 u32 arch          e.g. 90
    32 u32 name offset, u32 name size
    40 u64 flags         0x1 64-bit, 0x2 debug, 0x10 Linux, 0x2000 LZ4,
                         0x8000 Zstandard, 0x100000 arch-specific ("a"),
                         0x200000 family-specific ("f")
    56 u64 uncompressed size
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import IO, Iterable, Iterator, Sequence

from cuaudit.facts import Extractor, InputError, MemberReader
from cuaudit.model import Member, MemberKind

FATBIN_MAGIC = 0xBA55ED50
WRAPPER_MAGIC = 0x466243B1
_MAGIC_BYTES = struct.pack("<I", FATBIN_MAGIC)
#: Sections that hold fat binaries, in the order the CUDA runtime prefers them.
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
WRAPPER_SECTION = ".nvFatBinSegment"

KIND_PTX = 1
KIND_ELF = 2
_KINDS = {1: "ptx", 2: "sass", 4: "nvvm", 8: "lto"}

FLAG_64BIT = 0x1
FLAG_DEBUG = 0x2
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000  # sm_90a: runs only on exactly that GPU
FLAG_FAMILY_SPECIFIC = 0x200000  # sm_100f: runs on the family (10.0, 10.3)

_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")  # the 64-byte entry header
_CONTAINER = struct.Struct("<IHHQ")  # magic, version, header size, body size

#: How much of an archive member before its section headers is kept while
#: inflating, to find the section-name table (GNU ld puts it just before).
_TAIL_KEEP = 4 * 1024 * 1024
_CHUNK = 1 << 20


@dataclass(frozen=True, order=True)
class FatbinEntry:
    """One entry of a fat binary: SASS for one GPU, or PTX, or LTO IR."""

    kind: str  # "sass" | "ptx" | "lto" | "nvvm" | "kind-N"
    sm: int  # 90 for sm_90 / compute_90
    variant: str  # "" | "a" (arch-specific) | "f" (family-specific)
    section: str
    offset: int  # file offset of the entry header
    header_size: int
    payload_size: int  # bytes in the file (padded)
    stored_size: int  # compressed size when compressed, else payload_size
    uncompressed_size: int
    compression: str  # "none" | "lz4" | "zstd"
    version: str  # cubin ABI ("1.8") or PTX ISA ("9.0") version
    flags: int
    debug: bool

    @property
    def arch(self) -> str:
        """``sm_90a`` for SASS, ``compute_90a`` for PTX, ``lto_90`` for LTO IR."""
        prefix = {"sass": "sm", "ptx": "compute"}.get(self.kind, self.kind)
        return f"{prefix}_{self.sm}{self.variant}"

    @property
    def cuobjdump_arch(self) -> str:
        """The architecture as ``cuobjdump --list-elf/--list-ptx`` spells it.

        cuobjdump 13.4 writes ``sm_`` for both kinds and drops the family
        suffix of SASS (``sm_103f`` SASS is listed as ``sm_103``) while it
        keeps it for PTX (``sm_100f``): observed on nvcc 13.0 output.
        """
        suffix = self.variant if (self.kind == "ptx" or self.variant == "a") else ""
        return f"sm_{self.sm}{suffix}"


@dataclass(frozen=True)
class DeviceCode:
    """The device code of one ELF file (or raw ``.fatbin``).

    ``entries`` lists every entry of every fat-binary section in file order;
    ``runnable`` only those the CUDA runtime loads (``.nv_fatbin`` when it
    exists, ``__nv_relfatbin`` only in objects that have nothing else).
    """

    entries: tuple[FatbinEntry, ...]
    sections: tuple[str, ...]
    containers: int
    wrappers: int  # .nvFatBinSegment records
    notes: tuple[str, ...] = ()

    @property
    def primary_section(self) -> str | None:
        for name in FATBIN_SECTIONS:
            if name in self.sections:
                return name
        return self.sections[0] if self.sections else None

    @property
    def runnable(self) -> tuple[FatbinEntry, ...]:
        primary = self.primary_section
        return tuple(e for e in self.entries if e.section == primary)

    @property
    def has_device_code(self) -> bool:
        return any(e.kind in ("sass", "ptx") for e in self.entries)

    def sass(self) -> tuple[FatbinEntry, ...]:
        return tuple(e for e in self.runnable if e.kind == "sass")

    def ptx(self) -> tuple[FatbinEntry, ...]:
        return tuple(e for e in self.runnable if e.kind == "ptx")

    def archs(self) -> tuple[str, ...]:
        """Distinct architectures, SASS then PTX, in ascending order."""
        seen = sorted({(e.kind != "sass", e.sm, e.variant, e.arch) for e in self.runnable if e.kind in ("sass", "ptx")})
        return tuple(a for *_, a in seen)


# -- entry and container parsing -------------------------------------------------


def _entry(buf: bytes | memoryview, pos: int, section: str, file_offset: int) -> FatbinEntry:
    (kind, _ver, hsize, payload, stored, _opt, minor, major, sm, _noff, _nlen, flags, _res, unc) = _ENTRY.unpack_from(buf, pos)
    if flags & FLAG_ZSTD:
        compression = "zstd"
    elif flags & FLAG_LZ4:
        compression = "lz4"
    else:
        compression = "none"
    variant = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY_SPECIFIC else ""
    return FatbinEntry(
        kind=_KINDS.get(kind, f"kind-{kind}"),
        sm=sm,
        variant=variant,
        section=section,
        offset=file_offset,
        header_size=hsize,
        payload_size=payload,
        stored_size=stored if compression != "none" and stored else payload,
        uncompressed_size=unc if compression != "none" and unc else payload,
        compression=compression,
        version=f"{major}.{minor}",
        flags=flags,
        debug=bool(flags & FLAG_DEBUG),
    )


def _valid_container(header: bytes | memoryview, pos: int, limit: int) -> int | None:
    """Body size of a container header at ``pos``, or None if it is not one."""
    if pos + _CONTAINER.size > limit:
        return None
    magic, version, hsize, body = _CONTAINER.unpack_from(header, pos)
    if magic != FATBIN_MAGIC or version != 1 or hsize != 16 or pos + hsize + body > limit:
        return None
    return body


def _valid_entry_header(buf: bytes | memoryview, pos: int, end: int) -> bool:
    if pos + _ENTRY.size > end:
        return False
    kind, ver, hsize, payload = struct.unpack_from("<HHIQ", buf, pos)
    return kind in _KINDS and hsize >= _ENTRY.size and hsize <= 4096 and pos + hsize + payload <= end


def parse_fatbin(buf: bytes | memoryview, start: int, end: int, section: str, base: int = 0) -> tuple[list[FatbinEntry], int, list[str]]:
    """Entries of the containers laid end to end in ``buf[start:end]``.

    ``base`` is the file offset of ``buf[0]``.  Returns (entries, containers, notes).
    """
    entries: list[FatbinEntry] = []
    notes: list[str] = []
    containers = 0
    pos = start
    while pos + _CONTAINER.size <= end:
        body = _valid_container(buf, pos, end)
        if body is None:
            # Sections are padded to 8; anything else that is not a container is worth saying.
            if any(bytes(buf[pos : min(end, pos + 16)])):
                notes.append(f"{section}: no fat-binary container at offset {base + pos:#x}; the rest of the section is not read")
            break
        containers += 1
        q, stop = pos + 16, pos + 16 + body
        while q < stop:
            if not _valid_entry_header(buf, q, stop):
                notes.append(f"{section}: malformed entry header at offset {base + q:#x}")
                break
            e = _entry(buf, q, section, base + q)
            entries.append(e)
            q += e.header_size + e.payload_size
        pos = stop + (-(base + stop) % 8)
    return entries, containers, notes


# -- ELF ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Section:
    name: str
    type: int
    offset: int
    size: int


def _elf_header(head: bytes) -> tuple[int, int, int, int]:
    """(e_shoff, e_shentsize, e_shnum, e_shstrndx) of a 64-bit little-endian ELF."""
    if len(head) < 64 or head[:4] != b"\x7fELF":
        raise InputError("CU006", "not an ELF file (bad magic)")
    if head[4] != 2 or head[5] != 1:
        raise _Unsupported(f"ELF class {head[4]} / data encoding {head[5]} (only 64-bit little-endian is read)")
    shoff, = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
    if shnum == 0 and shoff:
        shnum = -1  # more than 0xff00 sections: the count is in section 0's sh_size
    return shoff, shentsize, shnum, shstrndx


class _Unsupported(Exception):
    pass


def _sections(shdrs: bytes | memoryview, shoff_rel: int, shentsize: int, shnum: int, strtab: bytes | None) -> list[_Section]:
    out = []
    for i in range(shnum):
        p = shoff_rel + i * shentsize
        name_off, stype, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", shdrs, p)
        name = ""
        if strtab is not None and name_off < len(strtab):
            end = strtab.find(b"\0", name_off)
            name = strtab[name_off : end if end >= 0 else len(strtab)].decode("latin-1")
        out.append(_Section(name, stype, offset, size))
    return out


def read_device_code(buf: bytes | memoryview | "mmap.mmap") -> DeviceCode:  # noqa: F821
    """Device code of an ELF (or raw fat binary) held in memory or mmapped."""
    size = len(buf)
    if size >= 4 and bytes(buf[:4]) == _MAGIC_BYTES:  # a raw .fatbin (nvcc -fatbin)
        entries, n, notes = parse_fatbin(buf, 0, size, "fatbin")
        return DeviceCode(tuple(entries), ("fatbin",), n, 0, tuple(notes))
    shoff, shentsize, shnum, shstrndx = _elf_header(bytes(buf[:64]))
    if shoff == 0:
        return DeviceCode((), (), 0, 0, ("no section headers (stripped of them): device code not listed",))
    if shnum == -1:
        shnum = struct.unpack_from("<Q", buf, shoff + 32)[0]
    if shentsize < 64 or shoff + shnum * shentsize > size:
        raise InputError("CU005", f"section headers ({shnum} at {shoff:#x}) extend past the end of the file ({size} bytes)")
    raw = _sections(buf, shoff, shentsize, shnum, None)
    strtab = None
    if shstrndx < len(raw) and raw[shstrndx].offset + raw[shstrndx].size <= size:
        s = raw[shstrndx]
        strtab = bytes(buf[s.offset : s.offset + s.size])
    secs = _sections(buf, shoff, shentsize, shnum, strtab)
    return _from_sections(secs, size, lambda s: (buf, s.offset))


def _from_sections(secs: Sequence[_Section], size: int, view) -> DeviceCode:
    entries: list[FatbinEntry] = []
    notes: list[str] = []
    names: list[str] = []
    containers = wrappers = 0
    for s in secs:
        if s.name in FATBIN_SECTIONS and s.type != 8:  # SHT_NOBITS holds nothing
            if s.offset + s.size > size:
                raise InputError("CU005", f"section {s.name} extends past the end of the file")
            buf, start = view(s)
            found, n, why = parse_fatbin(buf, start, start + s.size, s.name, s.offset - start)
            entries += found
            containers += n
            notes += why
            names.append(s.name)
        elif s.name == WRAPPER_SECTION:
            wrappers += s.size // 24
    return DeviceCode(tuple(entries), tuple(names), containers, wrappers, tuple(notes))


# -- archive members: one forward pass -------------------------------------------------


class _Forward:
    """Forward-only reads at absolute offsets of a stream (an inflating zip member)."""

    def __init__(self, fh: IO[bytes], keep_from: int) -> None:
        self.fh = fh
        self.buf = bytearray()
        self.start = 0  # file offset of buf[0]
        self.eof = False
        self.keep_from = keep_from
        self.kept = bytearray()  # bytes from keep_from on that were dropped
        self.kept_start = -1

    def _fill(self, upto: int) -> None:
        while self.start + len(self.buf) < upto and not self.eof:
            chunk = self.fh.read(max(_CHUNK, upto - self.start - len(self.buf)))
            if not chunk:
                self.eof = True
                break
            self.buf += chunk

    def _drop(self, upto: int) -> None:
        n = min(upto - self.start, len(self.buf))
        if n <= 0:
            return
        end = self.start + n
        if end > self.keep_from:
            lo = max(self.start, self.keep_from)
            if self.kept_start < 0:
                self.kept_start = lo
            self.kept += self.buf[lo - self.start : n]
        del self.buf[:n]
        self.start = end

    def read_at(self, offset: int, n: int) -> bytes:
        if offset < self.start:
            raise ValueError("backwards read")
        self._drop(offset)
        self._fill(offset + n)
        return bytes(self.buf[offset - self.start : offset - self.start + n])

    def find(self, pattern: bytes, offset: int, until: int) -> int:
        """Absolute offset of ``pattern`` at an 8-aligned position in [offset, until), or -1."""
        self._drop(offset)
        pos = offset
        while pos < until:
            self._fill(min(until, pos + _CHUNK))
            avail = self.start + len(self.buf)
            if avail <= pos:
                return -1
            i = self.buf.find(pattern, pos - self.start, min(avail, until) - self.start)
            while i >= 0 and (self.start + i) % 8:
                i = self.buf.find(pattern, i + 1, min(avail, until) - self.start)
            if i >= 0:
                return self.start + i
            pos = max(pos, min(avail, until) - len(pattern) + 1)
            pos += -pos % 8
            self._drop(pos)
        return -1


def read_device_code_stream(fh: IO[bytes], size: int) -> DeviceCode:
    """Device code of an ELF read front to back once (a wheel member)."""
    head = fh.read(64)
    if len(head) >= 4 and head[:4] == _MAGIC_BYTES:
        return read_device_code(head + fh.read())
    shoff, shentsize, shnum, shstrndx = _elf_header(head)
    if shoff == 0:
        return DeviceCode((), (), 0, 0, ("no section headers (stripped of them): device code not listed",))
    fwd = _Forward(fh, keep_from=max(0, shoff - _TAIL_KEEP))
    fwd.buf += head
    # Candidate containers found on the way: (offset, entries, end)
    found: list[tuple[int, int, list[FatbinEntry]]] = []
    pos = 64
    limit = shoff if shoff <= size else size
    while True:
        at = fwd.find(_MAGIC_BYTES, pos, limit)
        if at < 0:
            break
        hdr = fwd.read_at(at, 16)
        body = _valid_container(hdr, 0, limit - at)
        if body is None:
            pos = at + 8
            continue
        q, stop = at + 16, at + 16 + body
        entries: list[FatbinEntry] = []
        ok = True
        while q < stop:
            eh = fwd.read_at(q, 64)
            if len(eh) < 64 or not _valid_entry_header(eh, 0, stop - q):
                ok = False
                break
            e = _entry(eh, 0, "", q)
            entries.append(e)
            q += e.header_size + e.payload_size
        if ok:
            found.append((at, stop, entries))
            pos = stop + (-stop % 8)
        else:
            pos = at + 8
    if shnum == -1:
        first = fwd.read_at(shoff, 64)
        shnum = struct.unpack_from("<Q", first, 32)[0]
    table = fwd.read_at(shoff, shnum * shentsize)
    if len(table) < shnum * shentsize or shentsize < 64:
        raise InputError("CU005", f"section headers ({shnum} at {shoff:#x}) extend past the end of the file ({size} bytes)")
    raw = _sections(table, 0, shentsize, shnum, None)
    strtab = None
    if shstrndx < len(raw):
        s = raw[shstrndx]
        if s.offset >= shoff:
            strtab = fwd.read_at(s.offset, s.size)
        elif fwd.kept_start >= 0 and s.offset >= fwd.kept_start and s.offset + s.size <= fwd.kept_start + len(fwd.kept):
            strtab = bytes(fwd.kept[s.offset - fwd.kept_start : s.offset - fwd.kept_start + s.size])
    if strtab is None:
        # The name table was passed and dropped: keep containers that are section starts.
        secs = _sections(table, 0, shentsize, shnum, None)
        starts = {s.offset: s for s in secs}
        entries = [e for at, _stop, es in found if at in starts for e in es]
        return DeviceCode(tuple(entries), ("?",) if entries else (), len(found), 0,
                          ("section names not read: fat binaries recognised by their headers",))
    secs = _sections(table, 0, shentsize, shnum, strtab)
    entries_out: list[FatbinEntry] = []
    names: list[str] = []
    containers = wrappers = 0
    for s in secs:
        if s.name in FATBIN_SECTIONS and s.type != 8:
            names.append(s.name)
            for at, stop, es in found:
                if s.offset <= at and stop <= s.offset + s.size:
                    containers += 1
                    entries_out += [_with_section(e, s.name) for e in es]
        elif s.name == WRAPPER_SECTION:
            wrappers += s.size // 24
    return DeviceCode(tuple(entries_out), tuple(names), containers, wrappers, ())


def _with_section(e: FatbinEntry, section: str) -> FatbinEntry:
    import dataclasses

    return dataclasses.replace(e, section=section)


def read_path(path: str) -> DeviceCode:
    """Device code of a file on disk (mmapped: only the touched pages are read)."""
    import mmap

    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            raise InputError("CU006", f"{path}: empty file")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            _random_access(mm)
            return read_device_code(mm)


def _random_access(mm) -> None:
    """Entry headers are scattered through the section: no read-ahead around each (less memory, less I/O)."""
    import mmap

    if hasattr(mm, "madvise") and hasattr(mmap, "MADV_RANDOM"):
        try:
            mm.madvise(mmap.MADV_RANDOM)
        except OSError:
            pass


def cuobjdump_listing(code: DeviceCode, filename: str) -> list[str]:
    """The lines ``cuobjdump --list-elf --list-ptx FILE`` prints for this file."""
    base = os.path.splitext(os.path.basename(filename))[0]
    lines = []
    counters = {"sass": 0, "ptx": 0}
    # One counter per kind, lines in file order (cupy's thrust module has its
    # sm_90 SASS after the compute_90 PTX, and cuobjdump lists it there).
    for e in code.runnable:
        if e.kind not in counters:
            continue
        counters[e.kind] += 1
        n = counters[e.kind]
        label, ext = ("ELF", "cubin") if e.kind == "sass" else ("PTX", "ptx")
        lines.append(f"{label} file {n:4d}: {base}.{n}.{e.cuobjdump_arch}.{ext}")
    return lines


# -- the extractor ----------------------------------------------------------------------


class FatbinExtractor(Extractor):
    """Every fat-binary entry of every ELF member (and raw ``.fatbin`` files)."""

    name = "fatbin"
    version = 1

    def applies(self, member: Member) -> bool:
        return member.kind is MemberKind.ELF or member.path.endswith((".fatbin", ".o", ".cubin"))

    def extract(self, reader: MemberReader) -> DeviceCode | None:
        try:
            mm = reader.mmap()
            if mm is not None:
                with mm:
                    _random_access(mm)
                    return read_device_code(mm)
            with reader.open() as fh:
                return read_device_code_stream(fh, reader.member.size)
        except _Unsupported as exc:
            raise InputError("CU009", f"{reader.path}: {exc}; device code not listed") from None
        except struct.error as exc:
            raise InputError("CU005", f"{reader.path}: truncated ELF ({exc})") from None


def iter_entries(codes: Iterable[tuple[str, DeviceCode]]) -> Iterator[tuple[str, FatbinEntry]]:
    for path, code in codes:
        for e in code.runnable:
            yield path, e
