"""ELF: one image per member, read lazily from the bytes already in hand.

:class:`ElfImage` is the only ELF reader of cuaudit's facts: the ``elf``,
``fatbin``, ``cython-capi`` and ``extension_strings`` extractors are passes
over the one image ``MemberReader.elf()`` builds for a member.  Its source is
whatever the engine holds:

* the member's bytes, inflated once for several extractors (archive members
  up to the engine's shared-read size);
* an ``mmap`` of a file on disk (a 749 MB ``libcublasLt.so.12`` costs the
  pages that are touched);
* a forward-only stream of a huge archive member (``libtorch_cuda.so`` in the
  torch wheel): its first bytes are kept (:data:`RETAIN_LIMIT`), reads ahead
  skip forward, a read behind what was kept inflates again (``passes``).

Everything the dynamic loader uses lies in the first loadable segment: the
ELF header leads to the program headers, ``PT_DYNAMIC`` to the dynamic
symbols, strings and versions (their addresses translated through the
``PT_LOAD`` segments).  :meth:`ElfImage.linking` reads only that, so a
streamed member is inflated no further than its last dynamic table; the
section headers at the end of the file are read only when a pass asks for
sections (``.nv_fatbin``, ``.rodata``, ``.text``, ``.eh_frame_hdr``).

Every count, length and chain is bounded by the file's size; every
malformation is an :class:`InputError` ``CU005`` whose detail names the
offset or field (``CU006`` when it is not ELF at all).  32-bit and
big-endian images and other machines are read wherever the format allows;
the analyses that handle only x86-64 say so themselves (CU009).
"""

from __future__ import annotations

import functools
import itertools
import struct
import sys
from collections import deque
from dataclasses import dataclass
from typing import IO, Any, Callable

from cuaudit.inputs.budgets import budget
from cuaudit.model import InputError

#: Bytes at the start of a streamed member kept in memory: the tables PT_DYNAMIC points to
#: normally lie there (libtorch_cpu.so: .dynsym, .gnu.version and .gnu.version_r end before
#: 7.2 MB; libcublasLt.so.12: 0.3 MB).  A table beyond costs a second inflation, never a wrong answer.
RETAIN_LIMIT = 16 * 1024**2
#: Bytes before the section headers of a streamed member kept as the stream passes them, with the
#: headers: the section-name table lies just there (300-420 bytes in torch 2.8.0's libraries).
SECTION_NAMES_BEFORE = 64 * 1024
#: Streamed members up to this size get their section table read by the linking view.
SMALL_MEMBER = 1024**2
#: ... and larger ones when the stream is already this close to it.
SECTION_SLACK = 8 * 1024**2
#: Section names the linking view keeps (device code, fat binaries).
#: ".init_array": the constructors a library runs at load (CU201's umbrella verdict)
INTERESTING_SECTION_PREFIXES = (".nv", "__nv", ".nvFatBin", ".init_array")
#: Longest string read from a string table (names, paths, versions).
MAX_STRING = 64 * 1024
#: Names read from one string table total at most this many times its size (plus MAX_STRING):
#: entries that all point into one long string would otherwise copy it once each (a 156 KB file
#: made 200 MB of names).  Real files stay under 1.4 (304 system and corpus libraries measured).
MAX_NAME_FANOUT = budget("ELF_NAME_FANOUT")
#: More version entries than this is not a real file (glibc's libc.so.6 has 40).
MAX_VERSION_ENTRIES = 1 << 16

PT_LOAD, PT_DYNAMIC, PT_NOTE = 1, 2, 4
SHT_NOBITS = 8
SHN_XINDEX = 0xFFFF
DT_NULL, DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT = 0, 1, 4, 5, 6, 10, 11
DT_INIT, DT_FINI, DT_SONAME, DT_RPATH = 12, 13, 14, 15
DT_INIT_ARRAY, DT_FINI_ARRAY, DT_INIT_ARRAYSZ, DT_FINI_ARRAYSZ = 25, 26, 27, 28
DT_RUNPATH, DT_FLAGS, DT_FLAGS_1 = 29, 30, 0x6FFFFFFB
DT_GNU_HASH, DT_VERSYM, DT_VERDEF, DT_VERDEFNUM = 0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFD
DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFE, 0x6FFFFFFF
STB_WEAK = 2
EM_X86_64 = 62

MACHINES = {3: "x86", 62: "x86-64", 40: "ARM", 183: "AArch64", 21: "PPC64", 22: "S390", 243: "RISC-V", 190: "CUDA"}
TYPES = {1: "REL", 2: "EXEC", 3: "DYN", 4: "CORE"}


def _corrupt(path: str, message: str, **detail: Any) -> InputError:
    return InputError("CU005", f"{path}: {message}", **detail)


class _Truncated(Exception):
    def __init__(self, offset: int, n: int) -> None:
        super().__init__(offset, n)
        self.offset = offset
        self.n = n


# -- byte sources ----------------------------------------------------------------------


class _Source:
    """Random reads over bytes in memory (``buffer`` set), or over a forward-only stream."""

    size: int
    passes: int = 1
    buffer: Any = None

    def read_at(self, offset: int, n: int) -> bytes:  # pragma: no cover - abstract
        raise NotImplementedError

    def cheap(self, offset: int) -> bool:
        return True

    def whole(self) -> Any:
        return self.buffer

    def close(self) -> None:
        pass


class _BufferSource(_Source):
    def __init__(self, data: Any) -> None:
        self.buffer = data
        self.size = len(data)

    def read_at(self, offset: int, n: int) -> bytes:
        if offset < 0 or n < 0 or offset + n > self.size:
            raise _Truncated(offset, n)
        return self.buffer[offset : offset + n]


class _StreamSource(_Source):
    """A forward-only stream (an inflating zip member).

    The first bytes are kept (up to ``retain``) so that the tables that lie
    before the dynamic section are not inflated twice, and so are the last
    :attr:`TAIL` bytes read (short reads that overlap) and one range
    pinned ahead (:meth:`pin`: the section headers: patchelf moves the dynamic
    tables past them, to the end of the file, so the linking view reads
    beyond them before any pass asks for sections).  Reads ahead skip
    forward; a read behind what was kept reopens the stream (``passes``).
    Observers (:meth:`watch`) see every byte the stream passes, in order
    (the fat-binary scan of a member read once, front to back).
    """

    CHUNK = 1 << 20
    #: bytes kept behind the stream's position: a section-name table just before the
    #: section headers, and short reads that overlap, are not inflated twice
    TAIL = 4 * 1024 * 1024

    def __init__(self, opener: Callable[[], IO[bytes]], size: int, retain: int = RETAIN_LIMIT) -> None:
        self.opener = opener
        self.size = size
        self.retain = min(retain, size)
        self.kept = bytearray()
        #: the chunks last read, (file offset, bytes), at least TAIL bytes in all
        self.recent: deque[tuple[int, bytes]] = deque()
        self.recent_bytes = 0
        self.fh = opener()
        self.pos = 0
        self.passes = 1
        self.observers: list[Callable[[int, bytes], None]] = []
        #: the pinned range's start and end, and its bytes read so far (from its start)
        self.pin_start = self.pin_end = 0
        self.pinned = bytearray()

    def _take(self, n: int) -> bytes:
        chunk = self.fh.read(n)
        if not chunk:
            raise _Truncated(self.pos, n)
        if self.pos < self.retain and self.pos == len(self.kept):
            self.kept += chunk[: self.retain - self.pos]
        lo = self.pin_start + len(self.pinned)
        if self.pos <= lo < min(self.pin_end, self.pos + len(chunk)):
            self.pinned += chunk[lo - self.pos : self.pin_end - self.pos]
        for observe in self.observers:
            observe(self.pos, chunk)
        self.recent.append((self.pos, chunk))
        self.recent_bytes += len(chunk)
        while self.recent_bytes - len(self.recent[0][1]) >= self.TAIL:
            self.recent_bytes -= len(self.recent.popleft()[1])
        self.pos += len(chunk)
        return chunk

    def pin(self, start: int, end: int) -> None:
        """Keep the bytes of ``[start, end)`` (not yet read) when the stream passes them."""
        start, end = max(start, self.pos, 0), min(end, self.size)
        if start < end:
            self.pin_start, self.pin_end, self.pinned = start, end, bytearray()

    def watch(self, observer: Callable[[int, bytes], None]) -> None:
        """Let ``observer`` see every byte from the first: those kept at once, the rest as the stream
        passes them (it starts again when bytes already went by unseen)."""
        if self.pos > len(self.kept):
            self.rewind()
        elif self.pos:
            observer(0, bytes(self.kept[: self.pos]))
        self.observers.append(observer)

    def _held(self, offset: int, end: int) -> bytes | None:
        """Bytes of ``[offset, end)``, all behind the stream's position, when something kept them."""
        if end <= len(self.kept):
            with memoryview(self.kept) as view:
                return bytes(view[offset:end])
        if self.pin_start <= offset and end <= self.pin_start + len(self.pinned):
            with memoryview(self.pinned) as view:
                return bytes(view[offset - self.pin_start : end - self.pin_start])
        return self._from_recent(offset, end)

    def _from_recent(self, offset: int, end: int) -> bytes | None:
        if not self.recent or offset < self.recent[0][0] or end > self.pos:
            return None
        parts = []
        for start, chunk in self.recent:
            stop = start + len(chunk)
            if stop <= offset or start >= end:
                continue
            parts.append(chunk[max(offset, start) - start : min(end, stop) - start])
        return b"".join(parts)

    def rewind(self) -> None:
        """Start the stream again (the observers then see every byte from the first)."""
        self.fh.close()
        self.fh = self.opener()
        self.passes += 1
        self.pos = 0
        self.retain = len(self.kept)
        self.recent.clear()
        self.recent_bytes = 0

    def read_at(self, offset: int, n: int) -> bytes:
        if offset < 0 or n < 0 or offset + n > self.size:
            raise _Truncated(offset, n)
        end = offset + n
        if self.buffer is not None:
            return self.buffer[offset:end]
        if end <= len(self.kept):
            with memoryview(self.kept) as view:
                return bytes(view[offset:end])
        head = b""
        if offset < self.pos:
            got = self._held(offset, min(end, self.pos))
            if got is None:
                self.rewind()  # behind us and not kept: inflate again from the start
            else:
                head = got
        while self.pos < offset:
            self._take(min(self.CHUNK, offset - self.pos))
        parts = [head]
        while self.pos < end:
            parts.append(self._take(end - self.pos))
        return b"".join(parts)

    def skip_to(self, offset: int) -> None:
        """Read forward to ``offset`` (observers see it all)."""
        while self.pos < min(offset, self.size):
            self._take(min(self.CHUNK, offset - self.pos))

    def cheap(self, offset: int) -> bool:
        return self.buffer is not None or self.size <= SMALL_MEMBER or (offset >= self.pos - self.recent_bytes and offset - self.pos <= SECTION_SLACK)

    def whole(self) -> Any:
        """Every byte in memory, from here on read as a buffer (what a code reader needs)."""
        if self.buffer is None:
            if self.pos != len(self.kept):
                self.rewind()
                self.kept = bytearray()
            self.retain = self.size
            self.skip_to(self.size)
            self.buffer = bytes(self.kept)
            self.kept = bytearray()
            self.fh.close()
        return self.buffer

    def close(self) -> None:
        self.fh.close()


def _guarded(method: Callable) -> Callable:
    """Reads past the end and short structures become CU005 with the offset in the detail."""

    @functools.wraps(method)
    def wrapper(self: "ElfImage", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except _Truncated as exc:
            raise _corrupt(
                self.path, f"ELF data at offset {exc.offset} (+{exc.n}) extends past the end of the file "
                f"({self.size} bytes): truncated or corrupt", offset=exc.offset, size=self.size,
            ) from None
        except struct.error as exc:
            raise _corrupt(self.path, f"malformed ELF structure ({exc})") from None

    return wrapper


# -- what the image holds ------------------------------------------------------------------


class _Layout:
    """The struct layouts of one ELF class and byte order."""

    def __init__(self, elf_class: int, le: bool) -> None:
        e = "<" if le else ">"
        self.e = e
        self.is64 = elf_class == 2
        if self.is64:
            self.ehdr = struct.Struct(e + "HHIQQQIHHHHHH")
            self.phdr = struct.Struct(e + "IIQQQQQQ")
            self.shdr = struct.Struct(e + "IIQQQQIIQQ")
            self.dyn = struct.Struct(e + "qQ")
            self.sym = struct.Struct(e + "IBBHQQ")
            self.word = 8
        else:
            self.ehdr = struct.Struct(e + "HHIIIIIHHHHHH")
            self.phdr = struct.Struct(e + "IIIIIIII")
            self.shdr = struct.Struct(e + "IIIIIIIIII")
            self.dyn = struct.Struct(e + "iI")
            self.sym = struct.Struct(e + "IIIBBH")
            self.word = 4


@dataclass(frozen=True)
class Segment:
    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


@dataclass(frozen=True)
class Note:
    name: str
    type: int
    desc: bytes


@dataclass(frozen=True)
class Dynamic:
    """The ``PT_DYNAMIC`` entries up to ``DT_NULL``, and where they lie (for in-place edits)."""

    offset: int
    size: int
    entry_size: int
    entries: tuple[tuple[int, int], ...]

    def first(self, tag: int) -> int | None:
        return next((v for t, v in self.entries if t == tag), None)

    def all(self, tag: int) -> tuple[int, ...]:
        return tuple(v for t, v in self.entries if t == tag)


@dataclass(frozen=True)
class VersionNeed:
    """One ``.gnu.version_r`` entry: versions required from one library file."""

    file: str
    versions: tuple[str, ...]


@dataclass(frozen=True)
class Linking:
    """What the dynamic loader reads: the dynamic section, dynamic symbols and versions.

    ``imports`` are the undefined dynamic symbols, ``import_versions[i]`` the
    version of ``imports[i]`` ('' when unversioned) and ``import_files[i]``
    the library file that version belongs to ('' if none); ``weak_imports``
    holds the indexes of weak ones.  ``exports`` are the defined global/weak
    symbols, ``export_versions`` their versions.
    """

    soname: str
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    flags: int
    flags_1: int
    imports: tuple[str, ...]
    import_versions: tuple[str, ...]
    import_files: tuple[str, ...]
    weak_imports: frozenset[int]
    exports: tuple[str, ...]
    export_versions: tuple[str, ...]
    version_needs: tuple[VersionNeed, ...]
    version_defs: tuple[str, ...]
    symbol_count: int
    dynamic: Dynamic | None


# -- the image -------------------------------------------------------------------------------


class ElfImage:
    """One ELF file: header and program headers read at once, everything else on demand."""

    def __init__(self, source: _Source, path: str = "") -> None:
        self.source = source
        self.path = path
        self.size = source.size
        self._cache: dict[str, Any] = {}
        self._read_header()

    # -- construction

    @_guarded
    def _read_header(self) -> None:
        src, path = self.source, self.path
        if self.size < 16:
            head = bytes(src.read_at(0, min(self.size, 4)))
            if head and b"\x7fELF".startswith(head) and self.size >= 4:
                raise _corrupt(path, f"ELF file of {self.size} bytes: truncated in its identification",
                               field="e_ident", size=self.size)
            raise InputError("CU006", f"{path}: not an ELF file ({self.size} bytes)", size=self.size)
        ident = bytes(src.read_at(0, 16))
        if ident[:4] != b"\x7fELF":
            raise InputError("CU006", f"{path}: not an ELF file (starts with {ident[:4]!r})", magic=ident[:4].hex())
        elf_class, data = ident[4], ident[5]
        if elf_class not in (1, 2) or data not in (1, 2):
            raise _corrupt(path, f"bad ELF identification (class {elf_class}, data {data})", field="e_ident")
        L = self.layout = _Layout(elf_class, data == 1)
        (self.type, self.machine, _ver, self.entry, self.phoff, self.shoff, self.flags, _ehsize, self.phentsize,
         self.phnum, self.shentsize, self.shnum, self.shstrndx) = L.ehdr.unpack(src.read_at(16, L.ehdr.size))
        self.elf_class = 64 if L.is64 else 32
        self.little_endian = L.e == "<"
        if self.phnum and self.phentsize < L.phdr.size:
            raise _corrupt(path, f"program header entries of {self.phentsize} bytes are too small (e_phentsize)",
                           field="e_phentsize", value=self.phentsize)
        if self.phnum and self.phoff + self.phnum * self.phentsize > self.size:
            raise _corrupt(path, f"{self.phnum} program headers at offset {self.phoff} extend past the end of the file "
                           f"({self.size} bytes)", field="e_phoff", offset=self.phoff, size=self.size)
        phdata = src.read_at(self.phoff, self.phnum * self.phentsize) if self.phnum else b""
        segments = []
        for i in range(self.phnum):
            f = L.phdr.unpack_from(phdata, i * self.phentsize)
            if L.is64:
                p_type, p_flags, p_offset, p_vaddr, _pa, p_filesz, p_memsz, _al = f
            else:
                p_type, p_offset, p_vaddr, _pa, p_filesz, p_memsz, p_flags, _al = f
            segments.append(Segment(p_type, p_flags, p_offset, p_vaddr, p_filesz, p_memsz))
        self.segments: tuple[Segment, ...] = tuple(segments)
        self._loads = [(s.vaddr, s.offset, s.filesz) for s in segments if s.type == PT_LOAD]

    # -- plain facts

    @property
    def machine_name(self) -> str:
        return MACHINES.get(self.machine, f"machine {self.machine}")

    @property
    def type_name(self) -> str:
        return TYPES.get(self.type, f"type {self.type}")

    @property
    def is_x86_64(self) -> bool:
        return self.elf_class == 64 and self.little_endian and self.machine == EM_X86_64

    @property
    def passes(self) -> int:
        return self.source.passes

    @property
    def buffer(self) -> Any:
        """The whole file as a buffer when it is in memory or mapped (None for a stream)."""
        return self.source.buffer

    @_guarded
    def whole(self) -> Any:
        """The whole file as a buffer (a streamed member is inflated into memory once)."""
        return self.source.whole()

    @_guarded
    def read(self, offset: int, n: int) -> bytes:
        return bytes(self.source.read_at(offset, n))

    def offset_of(self, addr: int) -> int | None:
        """The file offset of a virtual address (None when no loadable segment holds it)."""
        for vaddr, off, filesz in self._loads:
            if vaddr <= addr < vaddr + filesz:
                return addr - vaddr + off
        return None

    def _offset(self, addr: int, what: str) -> int:
        off = self.offset_of(addr)
        if off is None:
            raise _corrupt(self.path, f"{what} address {addr:#x} is in no loadable segment", field=what, address=addr)
        return off

    @_guarded
    def check(self) -> None:
        """What the format check verifies of every ELF member: headers that fit the file, and the linking view.

        Costs no more than the ``elf`` facts (it reads the same prefix); the section
        headers themselves are read only when something asks for sections.
        """
        for i, s in enumerate(self.segments):
            # PT_LOAD segments past the end are left alone: `objcopy --only-keep-debug` files keep them
            if s.type == PT_DYNAMIC and s.offset + s.filesz > self.size:
                raise _corrupt(self.path, f"program header {i} (PT_DYNAMIC at offset {s.offset}, {s.filesz} bytes) "
                               f"extends past the end of the file ({self.size} bytes): truncated", field=f"phdr[{i}]",
                               offset=s.offset, size=self.size)
        shnum = self.shnum
        if self.shoff:
            if self.shentsize < self.layout.shdr.size:
                raise _corrupt(self.path, f"section header entries of {self.shentsize} bytes are too small (e_shentsize)",
                               field="e_shentsize", value=self.shentsize)
            if self.shoff + max(shnum, 1) * self.shentsize > self.size:
                raise _corrupt(self.path, f"{shnum} section headers at offset {self.shoff} extend past the end of the "
                               f"file ({self.size} bytes): truncated", field="e_shoff", offset=self.shoff, size=self.size)
        self.linking()

    # -- the dynamic section and what it points to

    @_guarded
    def dynamic(self) -> Dynamic | None:
        if "dynamic" in self._cache:
            return self._cache["dynamic"]
        seg = next((s for s in self.segments if s.type == PT_DYNAMIC), None)
        out = None
        if seg is not None and seg.filesz:
            if seg.offset + seg.filesz > self.size:
                raise _Truncated(seg.offset, seg.filesz)
            L = self.layout
            raw = self.source.read_at(seg.offset, seg.filesz)
            entries = []
            for tag, val in L.dyn.iter_unpack(raw[: len(raw) - len(raw) % L.dyn.size]):
                if tag == DT_NULL:
                    break
                entries.append((tag, val))
            out = Dynamic(seg.offset, seg.filesz, L.dyn.size, tuple(entries))
        self._cache["dynamic"] = out
        return out

    def _dynstr(self) -> bytes:
        return self._cache.get("dynstr", b"")

    def string(self, off: int, table: bytes | None = None, what: str = "dynamic string table") -> str:
        """The NUL-terminated string at ``off`` of a string table (the dynamic one by default)."""
        table = self._dynstr() if table is None else table
        if off >= len(table):
            raise _corrupt(self.path, f"string offset {off} outside the {what} ({len(table)} bytes)", offset=off)
        end = table.find(b"\0", off, off + MAX_STRING)
        if end < 0:
            raise _corrupt(self.path, f"string at offset {off} of the {what} has no terminating NUL "
                           f"within {min(MAX_STRING, len(table) - off)} bytes", offset=off)
        spent = self._cache.setdefault("name_bytes", {})
        spent[what] = spent.get(what, 0) + end - off
        _check_fanout(self.path, spent[what], len(table), what)
        return table[off:end].decode("utf-8", "surrogateescape")

    @_guarded
    def linking(self) -> Linking:
        """The dynamic loader's view, read from the tables PT_DYNAMIC points to (file order: one inflation)."""
        if "linking" in self._cache:
            return self._cache["linking"]
        out = self._cache["linking"] = self._linking()
        return out

    def _linking(self) -> Linking:
        src, L, path = self.source, self.layout, self.path
        dyn = self.dynamic()
        entries = dyn.entries if dyn else ()
        tags: dict[int, int] = {}
        for tag, val in entries:
            tags.setdefault(tag, val)
        plan: list[tuple[int, str]] = []
        if DT_STRTAB in tags:
            if DT_STRSZ not in tags:
                raise _corrupt(path, "dynamic section has DT_STRTAB without DT_STRSZ", field="DT_STRSZ")
            plan.append((self._offset(tags[DT_STRTAB], "DT_STRTAB"), "strtab"))
        elif DT_NEEDED in tags or DT_SONAME in tags:
            raise _corrupt(path, "dynamic section without its string table (DT_STRTAB)", field="DT_STRTAB")
        for tag, what in ((DT_GNU_HASH, "gnu_hash"), (DT_HASH, "hash"), (DT_SYMTAB, "symtab"), (DT_VERSYM, "versym"),
                          (DT_VERNEED, "verneed"), (DT_VERDEF, "verdef")):
            if tag in tags:
                plan.append((self._offset(tags[tag], what), what))
        offsets = {w: o for o, w in plan}
        # The symbol count comes from a hash table, which normally precedes .dynsym.
        nsyms = 0
        if "gnu_hash" in offsets:
            nsyms = self._gnu_hash_count(offsets["gnu_hash"])
        elif "hash" in offsets:
            nsyms = struct.unpack(L.e + "II", src.read_at(offsets["hash"], 8))[1]
        if nsyms * L.sym.size > self.size:
            raise _corrupt(path, f"{nsyms} dynamic symbols cannot fit in {self.size} bytes (hash table)",
                           field="nchain", value=nsyms)
        strtab = b""
        symdata = b""
        versym = b""
        for off, what in sorted(plan):
            if what == "strtab":
                if tags[DT_STRSZ] > self.size:
                    raise _corrupt(path, f"DT_STRSZ {tags[DT_STRSZ]} is larger than the file", field="DT_STRSZ")
                strtab = bytes(src.read_at(off, tags[DT_STRSZ]))
            elif what == "symtab" and nsyms:
                symdata = bytes(src.read_at(off, nsyms * L.sym.size))
            elif what == "versym" and nsyms:
                versym = bytes(src.read_at(off, nsyms * 2))
        self._cache["dynstr"] = strtab
        verneed_raw = self._verneed(offsets["verneed"], tags.get(DT_VERNEEDNUM, 0)) if "verneed" in offsets else []
        verdefs = self._verdef(offsets["verdef"], tags.get(DT_VERDEFNUM, 0)) if "verdef" in offsets else {}
        string = self.string
        needed = tuple(string(v) for t, v in entries if t == DT_NEEDED)
        soname = string(tags[DT_SONAME]) if DT_SONAME in tags else ""
        rpath = tuple(p for t, v in entries if t == DT_RPATH for p in string(v).split(":") if p)
        runpath = tuple(p for t, v in entries if t == DT_RUNPATH for p in string(v).split(":") if p)
        version_needs = tuple(VersionNeed(string(f), tuple(string(n) for _, n in aux)) for f, aux in verneed_raw)
        vindex: dict[int, tuple[str, str]] = {}  # version index -> (version name, file)
        for (_f, aux), need in zip(verneed_raw, version_needs):
            for (idx, _n), vname in zip(aux, need.versions):
                vindex[idx] = (vname, need.file)
        for idx, name_off in verdefs.items():
            vindex[idx] = (string(name_off), "")
        version_defs = tuple(vindex[i][0] for i in sorted(verdefs) if i in vindex)
        cols = _Symbols()
        if symdata:
            _split_symbols(self, strtab, symdata, versym, nsyms, vindex, cols, bool(verdefs))
        n_imp = len(cols.imports)
        return Linking(
            soname=soname, needed=needed, rpath=rpath, runpath=runpath,
            flags=tags.get(DT_FLAGS, 0), flags_1=tags.get(DT_FLAGS_1, 0),
            imports=tuple(cols.imports),
            import_versions=tuple(cols.import_versions) if any(cols.import_versions) else ("",) * n_imp,
            import_files=tuple(cols.import_files) if cols.import_files else ("",) * n_imp,
            weak_imports=frozenset(cols.weak),
            exports=tuple(cols.exports),
            export_versions=tuple(cols.export_versions) if cols.export_versions else ("",) * len(cols.exports),
            version_needs=version_needs, version_defs=version_defs, symbol_count=nsyms, dynamic=dyn,
        )

    def _gnu_hash_count(self, off: int) -> int:
        """Number of dynamic symbols, from DT_GNU_HASH: one past the last chain's end."""
        src, L = self.source, self.layout
        nbuckets, symoffset, bloom_size, _shift = struct.unpack(L.e + "IIII", src.read_at(off, 16))
        if nbuckets * 4 + bloom_size * L.word > self.size:
            raise _corrupt(self.path, f"GNU hash table with {nbuckets} buckets and {bloom_size} bloom words cannot fit "
                           f"in the file", field="DT_GNU_HASH", offset=off)
        buckets_off = off + 16 + bloom_size * L.word
        buckets = struct.unpack(f"{L.e}{nbuckets}I", src.read_at(buckets_off, nbuckets * 4))
        last = max(buckets, default=0)
        if last < symoffset:
            return symoffset
        chain_off = buckets_off + nbuckets * 4 + (last - symoffset) * 4
        n = last
        while True:  # bounded: every step reads further into the file
            avail = min(4096, self.size - chain_off) // 4 * 4
            if avail <= 0:
                raise _Truncated(chain_off, 4)
            block = src.read_at(chain_off, avail)
            for value in struct.unpack(f"{L.e}{len(block) // 4}I", block):
                n += 1
                if value & 1:
                    return n
            chain_off += len(block)

    def _verneed(self, off: int, count: int) -> list[tuple[int, list[tuple[int, int]]]]:
        """(file name offset, [(version index, name offset)]) per entry; chains bounded and loop-free."""
        src, e = self.source, self.layout.e
        out: list[tuple[int, list[tuple[int, int]]]] = []
        seen: set[int] = set()
        budget = MAX_VERSION_ENTRIES
        for _ in range(count):
            if off in seen:
                raise _corrupt(self.path, f"version-need chain loops at offset {off}", field="vn_next", offset=off)
            seen.add(off)
            _v, cnt, file_off, aux, nxt = struct.unpack(e + "HHIII", src.read_at(off, 16))
            entries = []
            a = off + aux
            for _ in range(cnt):
                budget -= 1
                if budget < 0:
                    raise _corrupt(self.path, f"more than {MAX_VERSION_ENTRIES} version-need entries", field="vn_cnt")
                _h, _fl, other, name, anext = struct.unpack(e + "IHHII", src.read_at(a, 16))
                entries.append((other, name))
                if not anext:
                    break
                a += anext
            out.append((file_off, entries))
            if not nxt:
                break
            off += nxt
        return out

    def _verdef(self, off: int, count: int) -> dict[int, int]:
        src, e = self.source, self.layout.e
        out: dict[int, int] = {}
        for _ in range(min(count, MAX_VERSION_ENTRIES)):
            _v, _flags, ndx, cnt, _h, aux, nxt = struct.unpack(e + "HHHHIII", src.read_at(off, 20))
            if cnt:
                (name,) = struct.unpack(e + "I", src.read_at(off + aux, 4))
                out[ndx] = name
            if not nxt:
                break
            off += nxt
        return out

    # -- sections

    def sections_if_cheap(self) -> tuple[Section, ...] | None:
        """The sections when reading their headers costs little (mapped, in memory, or the stream is near)."""
        if not self.shoff:
            return ()
        if not self.source.cheap(self.shoff):
            return None
        return self.sections()

    @_guarded
    def sections(self) -> tuple[Section, ...]:
        """Every section header with its name (``()`` when the file has none: stripped of them)."""
        if "sections" in self._cache:
            return self._cache["sections"]
        out = self._cache["sections"] = self._sections()
        return out

    def _sections(self) -> tuple[Section, ...]:
        L, src, path = self.layout, self.source, self.path
        if not self.shoff:
            return ()
        if self.shentsize < L.shdr.size:
            raise _corrupt(path, f"section header entries of {self.shentsize} bytes are too small (e_shentsize)",
                           field="e_shentsize", value=self.shentsize)
        shnum, shstrndx = self.shnum, self.shstrndx
        if shnum == 0 or shstrndx == SHN_XINDEX:  # more than 0xff00 sections: counts are in section 0
            first = L.shdr.unpack(src.read_at(self.shoff, L.shdr.size))
            shnum = shnum or first[5]
            if shstrndx == SHN_XINDEX:
                shstrndx = first[6]
        if self.shoff + shnum * self.shentsize > self.size:
            raise _corrupt(path, f"{shnum} section headers at offset {self.shoff} extend past the end of the file "
                           f"({self.size} bytes)", field="e_shnum", offset=self.shoff, size=self.size)
        table = src.read_at(self.shoff, shnum * self.shentsize)
        rows = [L.shdr.unpack_from(table, i * self.shentsize) for i in range(shnum)]
        names = b""
        if 0 < shstrndx < shnum:
            r = rows[shstrndx]
            n_off, n_size = r[4], r[5]
            if n_off + n_size > self.size:
                raise _corrupt(path, f"section-name table (section {shstrndx}) at offset {n_off} (+{n_size}) extends "
                               f"past the end of the file", field="e_shstrndx", offset=n_off)
            names = bytes(src.read_at(n_off, n_size))
        elif shstrndx and shnum:
            raise _corrupt(path, f"section-name table index {shstrndx} out of range ({shnum} sections)",
                           field="e_shstrndx", value=shstrndx)
        out = []
        for r in rows:
            name_off, sh_type, flags, addr, offset, size, link, info, _align, entsize = r
            name = self.string(name_off, names, "section-name table") if names else ""
            out.append(Section(name, sh_type, flags, addr, offset, size, link, info, entsize))
        return tuple(out)

    def section(self, name: str) -> Section | None:
        by_name = self._cache.get("by_name")
        if by_name is None:
            by_name = {}
            for s in self.sections():
                by_name.setdefault(s.name, s)
            self._cache["by_name"] = by_name
        return by_name.get(name)

    @_guarded
    def section_bytes(self, section: Section | str) -> bytes:
        """A section's bytes (``b""`` for a section without any in the file)."""
        s = self.section(section) if isinstance(section, str) else section
        if s is None or s.type == SHT_NOBITS or s.size == 0:
            return b""
        if s.offset + s.size > self.size:
            raise _corrupt(self.path, f"section {s.name} (offset {s.offset}, {s.size} bytes) extends past the end of "
                           f"the file ({self.size} bytes)", field=s.name, offset=s.offset, size=self.size)
        return bytes(self.source.read_at(s.offset, s.size))

    def _names(self, offsets: list[int], table: bytes, what: str) -> list[str]:
        """:meth:`string` of each offset ("" for 0), checked as it checks them, in one loop: a
        module's thousands of symbols."""
        spent = self._cache.setdefault("name_bytes", {})
        total, size, limit = spent.get(what, 0), len(table), _fanout_limit(len(table))
        find, seen, out = table.find, {}, []
        append = out.append
        for off in offsets:
            if not off:
                append("")
                continue
            if off >= size:
                spent[what] = total
                return [self.string(off, table, what)]  # raises the error string() raises
            end = find(b"\0", off, off + MAX_STRING)
            if end < 0:
                spent[what] = total
                return [self.string(off, table, what)]
            total += end - off
            if total > limit:
                spent[what] = total
                _check_fanout(self.path, total, size, what)
            name = seen.get(off)
            if name is None:
                name = seen[off] = table[off:end].decode("utf-8", "surrogateescape")
            append(name)
        spent[what] = total
        return out

    @_guarded
    def dynsym_names(self) -> list[str]:
        """Every ``.dynsym`` entry's name, by symbol index (what relocations refer to)."""
        if "dynsym_names" in self._cache:
            return self._cache["dynsym_names"]
        s = self.section(".dynsym")
        out: list[str] = []
        if s is not None and s.type != SHT_NOBITS:
            secs = self.sections()
            strings = self.section_bytes(secs[s.link]) if s.link < len(secs) else b""
            data = self.section_bytes(s)
            step = self.layout.sym.size
            rows = struct.iter_unpack(self.layout.e + "I" + "x" * (step - 4), data[: len(data) - len(data) % step])
            offsets = [st_name for (st_name,) in rows]
            out = self._names(offsets, strings, ".dynstr")
        self._cache["dynsym_names"] = out
        return out

    # -- notes and unwind tables

    @_guarded
    def notes(self) -> tuple[Note, ...]:
        """The notes of the ``PT_NOTE`` segments (build id, ABI tag, properties)."""
        out = []
        e = self.layout.e
        for seg in self.segments:
            if seg.type != PT_NOTE or not seg.filesz:
                continue
            data = self.source.read_at(seg.offset, seg.filesz)
            pos = 0
            while pos + 12 <= len(data):
                namesz, descsz, ntype = struct.unpack_from(e + "III", data, pos)
                name_end = pos + 12 + namesz
                desc_at = name_end + (-namesz % 4)
                if desc_at + descsz > len(data):
                    raise _corrupt(self.path, f"note at offset {seg.offset + pos} extends past its segment",
                                   offset=seg.offset + pos)
                name = bytes(data[pos + 12 : name_end]).rstrip(b"\0").decode("utf-8", "replace")
                out.append(Note(name, ntype, bytes(data[desc_at : desc_at + descsz])))
                pos = desc_at + descsz + (-descsz % 4)
        return tuple(out)

    @_guarded
    def function_starts(self) -> list[int]:
        """Sorted function start addresses from ``.eh_frame_hdr``'s binary-search table."""
        if "starts" in self._cache:
            return self._cache["starts"]
        starts: list[int] = []
        s = self.section(".eh_frame_hdr") if self.shoff else None
        hdr = self.section_bytes(s) if s else b""
        # version 1, udata4 count, datarel sdata4 table: what GNU ld writes
        if len(hdr) >= 12 and hdr[0] == 1 and hdr[2] == 0x03 and hdr[3] == 0x3B:
            (count,) = struct.unpack_from(self.layout.e + "I", hdr, 8)
            count = min(count, (len(hdr) - 12) // 8)
            locs = struct.unpack_from(f"{self.layout.e}{2 * count}i", hdr, 12)[0::2]
            starts = sorted(s.addr + loc for loc in locs)
        self._cache["starts"] = starts
        return starts

    def close(self) -> None:
        self.source.close()


class _Symbols:
    def __init__(self) -> None:
        self.imports: list[str] = []
        self.import_versions: list[str] = []
        self.import_files: list[str] = []
        self.weak: set[int] = set()
        self.exports: list[str] = []
        self.export_versions: list[str] = []


def _split_symbols(image: ElfImage, strtab: bytes, symdata: bytes, versym: bytes, nsyms: int,
                   vindex: dict[int, tuple[str, str]], out: _Symbols, has_defs: bool) -> None:
    """Split the dynamic symbols into imports and exports (the hot loop: 73 k symbols in libtorch_cpu).

    Columns are pulled out whole (memoryview casts, list comprehensions) rather than
    one struct per symbol; names are sliced from the decoded table, whose byte offsets
    equal character offsets when it is ASCII (the normal case).
    """
    L = image.layout
    slen = len(strtab)
    if (L.e == "<") == (sys.byteorder == "little"):
        view = memoryview(symdata)
        words = view.cast("I")
        if L.is64:  # st_name @0, st_info @4, st_shndx @6 of 24 bytes
            name_offs, infos, shndx = words[0::6].tolist(), bytes(view[4::24]), view.cast("H")[3::12].tolist()
        else:  # st_name @0, st_info @12, st_shndx @14 of 16 bytes
            name_offs, infos, shndx = words[0::4].tolist(), bytes(view[12::16]), view.cast("H")[7::8].tolist()
    else:
        fmt = L.e + ("IBxH16x" if L.is64 else "I8xBxH")
        rows = list(struct.iter_unpack(fmt, symdata))
        name_offs = [r[0] for r in rows]
        infos = bytes(r[1] for r in rows)
        shndx = [r[2] for r in rows]
    if max(name_offs, default=0) >= slen:
        bad = next(i for i, o in enumerate(name_offs) if o >= slen)
        raise _corrupt(image.path, f"symbol {bad} names offset {name_offs[bad]} outside the string table ({slen} bytes)",
                       field="st_name", symbol=bad, offset=name_offs[bad])
    if slen and strtab[-1] != 0:
        raise _corrupt(image.path, "the dynamic string table does not end with a NUL byte", field="DT_STRTAB")
    # Keep named, non-local symbols (st_info's binding is its high nibble).
    keep = [i for i, (o, b) in enumerate(zip(name_offs, infos)) if o and b >= 0x10]
    offs = [name_offs[i] for i in keep]
    text = strtab.decode("ascii") if strtab.isascii() else None
    find = text.find if text is not None else strtab.find
    nul = "\0" if text is not None else b"\0"
    # Each search stops where the names' budget does: time is bounded too, not only memory.
    left = _fanout_limit(slen)
    ends = []
    for o in offs:
        e = find(nul, o, o + left)  # type: ignore[arg-type]
        if e < 0:  # the table ends with a NUL (checked above): the budget is spent
            _check_fanout(image.path, _fanout_limit(slen) + 1, slen, "dynamic string table (symbol names)")
        left -= e - o
        ends.append(e)
    if text is not None:
        names = [text[o:e] for o, e in zip(offs, ends)]
    else:
        names = [strtab[o:e].decode("utf-8", "surrogateescape") for o, e in zip(offs, ends)]
    und = [not shndx[i] for i in keep]
    out.imports += itertools.compress(names, und)
    imp_idx = list(itertools.compress(keep, und))
    defined = [not u for u in und]
    out.exports += itertools.compress(names, defined)
    out.weak.update(j for j, i in enumerate(imp_idx) if infos[i] >> 4 == STB_WEAK)
    if versym:
        vers = struct.unpack(f"{L.e}{nsyms}H", versym)
        none = ("", "")
        vget = vindex.get
        iv = [vget(vers[i] & 0x7FFF, none) if vers[i] & 0x7FFF > 1 else none for i in imp_idx]
        out.import_versions += [v[0] for v in iv]
        out.import_files += [v[1] for v in iv]
        if has_defs:
            out.export_versions += [
                vget(vers[i] & 0x7FFF, none)[0] if vers[i] & 0x7FFF > 1 else "" for i in itertools.compress(keep, defined)
            ]


def _fanout_limit(table_size: int) -> int:
    return MAX_NAME_FANOUT * table_size + MAX_STRING


def _check_fanout(path: str, total: int, table_size: int, what: str) -> None:
    """CU005 when names read from a table total more than MAX_NAME_FANOUT times its size."""
    limit = _fanout_limit(table_size)
    if total > limit:
        raise _corrupt(path, f"names read from the {what} total more than {limit} bytes ({MAX_NAME_FANOUT} times its "
                       f"{table_size} bytes): its entries point into the same strings over and over",
                       field=what, size=table_size)


# -- opening ---------------------------------------------------------------------------------


def image_of_bytes(data: Any, path: str = "") -> ElfImage:
    """The image of bytes in memory (or an mmap)."""
    return ElfImage(_BufferSource(data), path)


def image_of_stream(opener: Callable[[], IO[bytes]], size: int, path: str = "", retain: int = RETAIN_LIMIT) -> ElfImage:
    """The image of a forward-only stream (``opener`` opens it again when a read goes back)."""
    src = _StreamSource(opener, size, retain)
    try:
        image = ElfImage(src, path)
    except BaseException:
        src.close()
        raise
    # only a table of the size every real file has: a lying e_shentsize (up to 64 KB a row) would
    # otherwise pin most of a huge member; without the pin the sections cost a second pass, never more
    if image.shoff and image.shentsize == image.layout.shdr.size:
        src.pin(image.shoff - SECTION_NAMES_BEFORE, image.shoff + max(image.shnum, 1) * image.shentsize)
    return image


def map_file(path: str) -> Any:
    """A read-only mapping of a file on disk; InputError CU006 when it is empty."""
    import mmap
    import os

    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            raise InputError("CU006", f"{path}: empty file, not ELF")
        return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


def random_access(mm: Any) -> None:
    """No read-ahead around each touched page of a mapping (scattered reads: less memory, less I/O)."""
    import mmap

    if hasattr(mm, "madvise") and hasattr(mmap, "MADV_RANDOM"):
        try:
            mm.madvise(mmap.MADV_RANDOM)
        except (OSError, ValueError):
            pass
