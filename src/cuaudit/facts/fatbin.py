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

A pass over the member's ELF image (:mod:`cuaudit.formats.elf`): only what
the listing needs is read, the section headers, the section-name table, then
the 64- to 120-byte header of each entry (payloads are skipped, never
inflated).  Files on disk are mmapped, so a 749 MB ``libcublasLt.so.12``
costs a few pages.  A huge archive member cannot seek: its image's stream
goes on front to back from where the ``elf`` pass stopped, and containers
are recognised on the way (their headers validated, then kept only if they
lie inside a fat-binary section once the section headers at the end are
known).

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

import dataclasses
import io
import os
import struct
from dataclasses import dataclass
from typing import IO, Iterable, Iterator, Sequence

from cuaudit.facts import Extractor, InputError, MemberReader
from cuaudit.inputs.artifact import open_regular
from cuaudit.inputs.budgets import budget
from cuaudit.formats.elf import SHT_NOBITS, ElfImage, Section, image_of_bytes, image_of_stream, map_file, random_access
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

#: Entries listed from one member (libcublasLt.so.12: 5,969): past it, CU004.  Each costs
#: about 300 bytes, and a lying header can make one of every 64 bytes of a section.
MAX_ENTRIES = budget("FATBIN_ENTRIES")

_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")  # the 64-byte entry header
_CONTAINER = struct.Struct("<IHHQ")  # magic, version, header size, body size



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
    if pos + _CONTAINER.size > min(limit, len(header)):
        return None
    magic, version, hsize, body = _CONTAINER.unpack_from(header, pos)
    if magic != FATBIN_MAGIC or version != 1 or hsize != 16 or pos + hsize + body > limit:
        return None
    return body


def _valid_entry_header(buf: bytes | memoryview, pos: int, end: int) -> bool:
    if pos + _ENTRY.size > min(end, len(buf)):
        return False
    kind, ver, hsize, payload = struct.unpack_from("<HHIQ", buf, pos)
    return kind in _KINDS and hsize >= _ENTRY.size and hsize <= 4096 and pos + hsize + payload <= end


def parse_fatbin(buf: "bytes | memoryview | _FileWindows", start: int, end: int, section: str,
                 base: int = 0) -> tuple[list[FatbinEntry], int, list[str]]:
    """Entries of the containers laid end to end in ``buf[start:end]`` (bytes, a mapping, or a file
    read with ``pread``: each header is sliced out of it, nothing else is read).

    ``base`` is the file offset of ``buf[0]``.  Returns (entries, containers, notes).
    """
    entries: list[FatbinEntry] = []
    notes: list[str] = []
    containers = 0
    pos = start
    # each header is read as a slice of its own: ``buf`` may be a file's :class:`_FileWindows`
    while pos + _CONTAINER.size <= end:
        head = bytes(buf[pos : pos + _CONTAINER.size])
        body = _valid_container(head, 0, end - pos)
        if body is None:
            # Sections are padded to 8; anything else that is not a container is worth saying.
            if any(head):
                notes.append(f"{section}: no fat-binary container at offset {base + pos:#x}; the rest of the section is not read")
            break
        containers += 1
        q, stop = pos + 16, pos + 16 + body
        while q < stop:
            hdr = bytes(buf[q : q + min(_ENTRY.size, stop - q)])
            if not _valid_entry_header(hdr, 0, stop - q):
                notes.append(f"{section}: malformed entry header at offset {base + q:#x}")
                break
            e = _entry(hdr, 0, section, base + q)
            entries.append(e)
            _check_count(len(entries))
            q += e.header_size + e.payload_size
        pos = stop + (-(base + stop) % 8)
    return entries, containers, notes


def _check_count(n: int) -> None:
    if n > MAX_ENTRIES:
        raise InputError("CU004", f"more than {MAX_ENTRIES} fat-binary entries (budget FATBIN_ENTRIES): "
                         "device code not listed", budget="FATBIN_ENTRIES")


def parse_fatbin_stream(fh: IO[bytes], size: int, section: str = "fatbin") -> tuple[list[FatbinEntry], int, list[str]]:
    """:func:`parse_fatbin` over a stream read once: headers are read, payloads skipped in bounded reads."""
    entries: list[FatbinEntry] = []
    notes: list[str] = []
    containers = pos = 0
    while pos + _CONTAINER.size <= size:
        head = _read_exactly(fh, _CONTAINER.size)
        body = _valid_container(head, 0, size - pos)
        if body is None:
            if any(head):
                notes.append(f"{section}: no fat-binary container at offset {pos:#x}; the rest of the section is not read")
            break
        containers += 1
        q, stop = pos + 16, pos + 16 + body
        while q < stop:
            hdr = _read_exactly(fh, min(_ENTRY.size, stop - q))
            if not _valid_entry_header(hdr, 0, stop - q):
                notes.append(f"{section}: malformed entry header at offset {q:#x}")
                _skip(fh, stop - q - len(hdr))
                break
            e = _entry(hdr, 0, section, q)
            entries.append(e)
            _check_count(len(entries))
            _skip(fh, e.header_size + e.payload_size - len(hdr))
            q += e.header_size + e.payload_size
        pad = min(-stop % 8, size - stop)
        _skip(fh, pad)
        pos = stop + pad
    return entries, containers, notes


def _read_exactly(fh: IO[bytes], n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = fh.read(n - len(data))
        if not chunk:
            raise InputError("CU005", f"fat binary truncated: {n} bytes expected, {len(data)} left")
        data += chunk
    return data


def _skip(fh: IO[bytes], n: int) -> None:
    while n > 0:
        n -= len(_read_exactly(fh, min(n, 1 << 20)))


# -- over the member's ELF image -------------------------------------------------------


def device_code_of(image: ElfImage, scan: "_ContainerScan | None" = None, windows: "_FileWindows | None" = None) -> DeviceCode:
    """Device code of one ELF image: its fat-binary sections, read in place or as the stream passes
    (``scan``: the scan :func:`watch` attached to the stream before other passes read it).
    ``windows``: the image's file, whose entry headers are then read with ``pread`` rather than
    through the image's mapping."""
    if not image.shoff:
        return DeviceCode((), (), 0, 0, ("no section headers (stripped of them): device code not listed",))
    buf = image.buffer
    if buf is not None:
        src = windows if windows is not None else buf
        return _from_sections(image.sections(), image.size, lambda s: (src, s.offset))
    return _from_stream(image, scan or watch(image))


class _FileWindows:
    """A file on disk as slices read with ``pread``: ``self[a:b]`` is its bytes ``a`` to ``b``.

    A fat-binary section is most of a CUDA library (600 of libcublasLt's 749 MB) and its reader
    needs only the headers of its entries, a few thousand of 64 bytes.  Read through a mapping of
    the file, each header maps the page-cache folio around it into the process: with the large
    folios of Linux 6.x page caches (an ext4 file read or written in sequence), most of the
    section, so the process's resident size grew by hundreds of megabytes that it never read
    (the same 1 GB ``libtorch_cuda.so``: 38 MB out of the page cache, 164-780 MB in it).
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def of(cls, path: str, size: int) -> "_FileWindows | None":
        """The file at ``path`` if it is still a regular file of ``size`` bytes (what was mapped), else None."""
        opened = open_regular(path)
        if opened is None:
            return None
        fd, st = opened
        if st.st_size != size:
            os.close(fd)
            return None
        return cls(fd)

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> "_FileWindows":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getitem__(self, s: slice) -> bytes:
        if s.step is not None or s.start is None or s.stop is None or s.start < 0:
            raise TypeError("_FileWindows takes [start:stop] slices only")
        n = s.stop - s.start
        return os.pread(self.fd, n, s.start) if n > 0 else b""


def _from_sections(secs: Sequence[Section], size: int, view) -> DeviceCode:
    entries: list[FatbinEntry] = []
    notes: list[str] = []
    names: list[str] = []
    containers = wrappers = 0
    for s in secs:
        if s.name in FATBIN_SECTIONS and s.type != SHT_NOBITS:
            if s.offset + s.size > size:
                raise InputError("CU005", f"section {s.name} extends past the end of the file", offset=s.offset)
            buf, start = view(s)
            found, n, why = parse_fatbin(buf, start, start + s.size, s.name, s.offset - start)
            entries += found
            _check_count(len(entries))  # sections may overlap: the same entries again
            containers += n
            notes += why
            names.append(s.name)
        elif s.name == WRAPPER_SECTION:
            wrappers += s.size // 24
    return DeviceCode(tuple(entries), tuple(names), containers, wrappers, tuple(notes))


class _ContainerScan:
    """Fat-binary containers recognised in a stream as it passes (an archive member read once).

    Containers are found by their magic at 8-aligned offsets before the
    section headers and kept with their entry headers validated; once the
    section headers (at the end) are read, those inside a fat-binary section
    are the device code.  Payloads are skipped without being copied.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buf = bytearray()
        self.base = 0  # file offset of buf[0]
        self.pos = 64  # where to look for the next container
        self.found: list[tuple[int, int, list[FatbinEntry]]] = []
        self.cur: tuple[int, int, list[FatbinEntry]] | None = None
        self.q = 0  # the next entry header of the container being read
        self.count = 0  # entries found so far

    def feed(self, offset: int, chunk: bytes) -> None:
        need = self.q if self.cur is not None else self.pos
        if offset != self.base + len(self.buf):  # never expected: start again from here
            self.buf, self.base = bytearray(), offset
        if not self.buf and need >= offset + len(chunk):
            self.base = offset + len(chunk)  # inside a payload: nothing to keep
            return
        self.buf += chunk
        self._run()
        need = self.q if self.cur is not None else self.pos
        drop = min(need, self.base + len(self.buf)) - self.base
        if drop > 0:
            del self.buf[:drop]
            self.base += drop

    def _run(self) -> None:
        end = self.base + len(self.buf)
        while True:
            if self.cur is not None:
                at, stop, entries = self.cur
                if self.q >= stop:
                    self.found.append(self.cur)
                    self.cur = None
                    self.pos = stop + (-stop % 8)
                    continue
                if self.q + _ENTRY.size > end:
                    return
                p = self.q - self.base
                if not _valid_entry_header(self.buf, p, p + stop - self.q):
                    self.cur, self.pos = None, at + 8
                    continue
                e = _entry(self.buf, p, "", self.q)
                entries.append(e)
                self.count += 1
                _check_count(self.count)
                self.q += e.header_size + e.payload_size
                continue
            stop_at = min(end, self.limit)
            if self.pos >= stop_at:
                return
            i = self.buf.find(_MAGIC_BYTES, self.pos - self.base, stop_at - self.base)
            while i >= 0 and (self.base + i) % 8:
                i = self.buf.find(_MAGIC_BYTES, i + 1, stop_at - self.base)
            if i < 0:
                self.pos = max(self.pos, stop_at - len(_MAGIC_BYTES) + 1)
                self.pos += -self.pos % 8
                return
            at = self.base + i
            if at + _CONTAINER.size > end:
                self.pos = at
                return
            body = _valid_container(self.buf, i, self.limit - self.base)
            if body is None:
                self.pos = at + 8
                continue
            self.cur, self.q = (at, at + 16 + body, []), at + 16


def watch(image: ElfImage) -> "_ContainerScan":
    """A container scan that sees every byte of a streamed image from the first (see :class:`_ContainerScan`)."""
    scan = _ContainerScan(min(image.shoff, image.size))
    image.source.watch(scan.feed)
    return scan


def _from_stream(image: ElfImage, scan: "_ContainerScan") -> DeviceCode:
    """One forward pass: containers are recognised on the way to the section headers at the end."""
    src = image.source
    try:
        secs = image.sections()
        # sections read earlier (the elf pass, from the stream's tail) come from the image's cache
        # without moving the stream: read on to them, or the containers after a rewind go unseen
        src.skip_to(scan.limit)
    finally:
        src.observers.remove(scan.feed)
    entries: list[FatbinEntry] = []
    names: list[str] = []
    containers = wrappers = 0
    for s in secs:
        if s.name in FATBIN_SECTIONS and s.type != SHT_NOBITS:
            names.append(s.name)
            for at, stop, es in scan.found:
                if s.offset <= at and stop <= s.offset + s.size:
                    containers += 1
                    entries += [dataclasses.replace(e, section=s.name) for e in es]
                    _check_count(len(entries))
        elif s.name == WRAPPER_SECTION:
            wrappers += s.size // 24
    return DeviceCode(tuple(entries), tuple(names), containers, wrappers, ())


def _raw_fatbin(buf) -> DeviceCode:
    entries, n, notes = parse_fatbin(buf, 0, len(buf), "fatbin")
    return DeviceCode(tuple(entries), ("fatbin",), n, 0, tuple(notes))


def _raw_fatbin_stream(fh: IO[bytes], size: int) -> DeviceCode:
    """A raw fat binary read front to back: never held whole (a member may be gigabytes)."""
    entries, n, notes = parse_fatbin_stream(fh, size)
    return DeviceCode(tuple(entries), ("fatbin",), n, 0, tuple(notes))


def read_device_code(buf: bytes | memoryview | "mmap.mmap") -> DeviceCode:  # noqa: F821
    """Device code of an ELF (or raw fat binary) held in memory or mmapped."""
    if len(buf) >= 4 and bytes(buf[:4]) == _MAGIC_BYTES:  # a raw .fatbin (nvcc -fatbin)
        return _raw_fatbin(buf)
    return device_code_of(image_of_bytes(buf))


def read_device_code_stream(fh: IO[bytes], size: int) -> DeviceCode:
    """Device code of an ELF read front to back once (a wheel member)."""
    head = fh.read(4)
    if head == _MAGIC_BYTES:
        return _raw_fatbin_stream(_Prefixed(head, fh), size)
    first = [True]

    def opener() -> IO[bytes]:
        if first[0]:
            first[0] = False
            return _Prefixed(head, fh)
        raise InputError("CU005", "device code: the stream would have to be read twice")

    image = image_of_stream(opener, size)
    return device_code_of(image)


class _Prefixed(io.RawIOBase):
    """A stream with its first bytes already read."""

    def __init__(self, head: bytes, fh: IO[bytes]) -> None:
        self.head, self.fh = head, fh

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self.head:
            out, self.head = (self.head, b"") if n < 0 or n >= len(self.head) else (self.head[:n], self.head[n:])
            return out
        return self.fh.read(n)


def read_path(path: str) -> DeviceCode:
    """Device code of a file on disk: its ELF tables through a mapping, its entry headers with
    ``pread`` (:class:`_FileWindows`: only those are read, and nothing of the payloads is mapped)."""
    mm = map_file(path)
    with mm:
        random_access(mm)
        windows = _FileWindows.of(path, len(mm))
        if windows is None:
            return read_device_code(mm)
        with windows:
            if bytes(mm[:4]) == _MAGIC_BYTES:  # a raw .fatbin
                entries, n, notes = parse_fatbin(windows, 0, len(mm), "fatbin")
                return DeviceCode(tuple(entries), ("fatbin",), n, 0, tuple(notes))
            return device_code_of(image_of_bytes(mm), None, windows)


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
    version = 3  # 2: read through the member's ELF image (32-bit, big-endian); 3: a streamed member's entries whatever pass read its sections first

    @classmethod
    def reads_whole(cls, member: Member) -> bool:
        return False  # a pass over the member's image: a prefix, or one forward pass

    def applies(self, member: Member) -> bool:
        return member.kind is MemberKind.ELF or member.path.endswith((".fatbin", ".o", ".cubin"))

    def prepare(self, reader: MemberReader) -> None:
        # The passes before this one read a streamed member as far as their tables: to the end
        # of torch 2.8.0's libraries, whose dynamic tables patchelf moved there.  Watching from
        # the first byte makes that one inflation serve the device code too (it was two).
        if reader.member.kind is not MemberKind.ELF:
            return
        image = reader.elf()
        if image.buffer is None and image.shoff:
            reader.prepared[self.name] = watch(image)

    def extract(self, reader: MemberReader) -> DeviceCode | None:
        scan = reader.prepared.pop(self.name, None)
        if scan is None and reader.head(4) == _MAGIC_BYTES:
            with reader.open() as fh:
                return _raw_fatbin_stream(fh, reader.member.size)
        image = reader.elf()
        if image.buffer is not None and reader.fs_path is not None:
            # the entry headers read where they lie, not through the mapping (see _FileWindows)
            windows = _FileWindows.of(reader.fs_path, image.size) if image.shoff else None
            if windows is not None:
                with windows:
                    return device_code_of(image, scan, windows)
            random_access(image.buffer)
        return device_code_of(image, scan)


def iter_entries(codes: Iterable[tuple[str, DeviceCode]]) -> Iterator[tuple[str, FatbinEntry]]:
    for path, code in codes:
        for e in code.runnable:
            yield path, e
