"""ELF facts read from the dynamic segment: what the dynamic loader sees.

Everything comes from the program headers and the ``DT_*`` entries of
``PT_DYNAMIC`` (their addresses translated to file offsets through the
``PT_LOAD`` segments), never from the section table at the end of the file:

* ``libcublasLt.so.12`` (749 MB) has its symbol tables in its first 0.3 MB,
  so an installed copy is read with a handful of page faults (``mmap``);
* a wheel member cannot be read at random: it is inflated from the start and
  the reader stops as soon as the last table it needs has gone by.  The part
  of the file before ``PT_DYNAMIC`` is kept (up to :data:`RETAIN_LIMIT`)
  because the tables the dynamic section points to usually lie before it;
  a table behind what was kept costs a second inflation (counted in
  :attr:`ElfFacts.passes`).

Nothing is loaded, no subprocess runs (no readelf/objdump): results do not
depend on the machine's tools.

The section table is optional information here: it sits at the very end of
the file (``e_shoff``), so for a streamed 1 GB ``libtorch_cuda.so`` reading
it means inflating the whole member.  It is read when it is cheap (the file
is mapped, the member is small, or the stream is already within
:data:`SECTION_SLACK` bytes of it); otherwise :attr:`ElfFacts.sections` is
``None`` and rules that need ``.nv_fatbin`` say the evidence is missing.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass
from typing import IO, Callable

from cuaudit.facts import Extractor, InputError, MemberReader
from cuaudit.model import Member, MemberKind

#: Bytes at the start of a streamed member kept in memory while looking for PT_DYNAMIC: the
#: tables it points to are normally there (libtorch_cpu.so: .dynsym, .gnu.version and
#: .gnu.version_r end before 7.2 MB; libcublasLt.so.12: 0.3 MB).  A table beyond costs a
#: second inflation, never a wrong answer.
RETAIN_LIMIT = 16 * 1024**2
#: Streamed members up to this size get their section table read.
SMALL_MEMBER = 1024**2
#: ... and larger ones when the stream is already this close to it.
SECTION_SLACK = 8 * 1024**2
#: Section names later rules ask for (device code, fat binaries).
INTERESTING_SECTION_PREFIXES = (".nv", "__nv", ".nvFatBin")

PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT = 0, 1, 4, 5, 6, 10, 11
DT_SONAME, DT_RPATH, DT_RUNPATH, DT_FLAGS, DT_FLAGS_1 = 14, 15, 29, 30, 0x6FFFFFFB
DT_GNU_HASH, DT_VERSYM, DT_VERDEF, DT_VERDEFNUM = 0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFD
DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFE, 0x6FFFFFFF
STB_LOCAL = 0
STB_WEAK = 2
SHN_UNDEF = 0
VERSYM_HIDDEN = 0x8000

MACHINES = {3: "x86", 62: "x86-64", 40: "ARM", 183: "AArch64", 21: "PPC64", 22: "S390", 243: "RISC-V", 190: "CUDA"}
TYPES = {1: "REL", 2: "EXEC", 3: "DYN", 4: "CORE"}


@dataclass(frozen=True)
class VersionNeed:
    """One ``.gnu.version_r`` entry: versions required from one library file."""

    file: str
    versions: tuple[str, ...]


@dataclass(frozen=True)
class SectionInfo:
    name: str
    type: int
    offset: int
    size: int
    addr: int


@dataclass(frozen=True)
class DynamicEntry:
    """Where the dynamic section lies in the file (for in-place edits)."""

    offset: int
    size: int
    entry_size: int


@dataclass(frozen=True)
class ElfFacts:
    """What the dynamic loader needs to know about one ELF file.

    ``imports`` are the undefined dynamic symbols (what the file needs from
    others); ``import_versions[i]`` is the version of ``imports[i]`` ('' when
    unversioned) and ``import_files[i]`` the library file the version belongs
    to (``.gnu.version_r``'s ``vn_file``: ``libcublas.so.11``), or ''.
    ``weak_imports`` holds the indexes of weak undefined symbols (the loader
    accepts them missing).  ``exports`` are the defined global/weak dynamic
    symbols, ``export_versions`` their versions.  ``sections`` is ``None``
    when the section table was not read (see the module doc).
    """

    elf_class: int
    little_endian: bool
    machine: str
    elf_type: str
    soname: str
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    imports: tuple[str, ...]
    import_versions: tuple[str, ...]
    import_files: tuple[str, ...]
    weak_imports: frozenset[int]
    exports: tuple[str, ...]
    export_versions: tuple[str, ...]
    version_needs: tuple[VersionNeed, ...]
    version_defs: tuple[str, ...]
    symbol_count: int
    dynamic: DynamicEntry | None
    sections: tuple[SectionInfo, ...] | None
    size: int
    passes: int = 1

    @property
    def is_python_extension(self) -> bool:
        return any(n.startswith("PyInit_") for n in self.exports)

    def needs_from(self, library: str) -> tuple[str, ...]:
        """Imports bound by symbol version to ``library`` (a DT_NEEDED name)."""
        return tuple(n for n, f in zip(self.imports, self.import_files) if f == library)

    def section(self, name: str) -> SectionInfo | None:
        for s in self.sections or ():
            if s.name == name:
                return s
        return None


# -- byte sources ----------------------------------------------------------------------


class _Source:
    """Random reads over a mapped file, or over a forward-only stream."""

    size: int
    passes: int = 1

    def read_at(self, offset: int, n: int) -> bytes:  # pragma: no cover - abstract
        raise NotImplementedError

    def cheap(self, offset: int) -> bool:
        return True

    def close(self) -> None:
        pass


class _BufferSource(_Source):
    def __init__(self, data, size: int) -> None:
        self.data = data
        self.size = size

    def read_at(self, offset: int, n: int) -> bytes:
        if offset < 0 or n < 0 or offset + n > self.size:
            raise _Truncated(offset, n)
        return self.data[offset : offset + n]


class _StreamSource(_Source):
    """A forward-only stream (an inflating zip member).

    The first bytes are kept (up to ``retain``) so that the tables that lie
    before the dynamic section are not inflated twice, and so are the last
    :attr:`WINDOW` bytes read (short reads that overlap).  Reads ahead skip
    forward; a read behind what was kept reopens the stream (``passes``).
    """

    CHUNK = 1 << 20
    WINDOW = 1 << 16

    def __init__(self, opener: Callable[[], IO[bytes]], size: int, retain: int) -> None:
        self.opener = opener
        self.size = size
        self.retain = min(retain, size)
        self.kept = bytearray()
        self.window = b""
        self.window_start = 0
        self.fh = opener()
        self.pos = 0
        self.passes = 1

    def _take(self, n: int) -> bytes:
        chunk = self.fh.read(n)
        if not chunk:
            raise _Truncated(self.pos, n)
        if self.pos < self.retain and self.pos == len(self.kept):
            self.kept += chunk[: self.retain - self.pos]
        self.pos += len(chunk)
        if len(chunk) >= self.WINDOW:
            self.window = chunk[-self.WINDOW :]
        else:
            self.window = (self.window + chunk)[-self.WINDOW :]
        self.window_start = self.pos - len(self.window)
        return chunk

    def read_at(self, offset: int, n: int) -> bytes:
        if offset < 0 or n < 0 or offset + n > self.size:
            raise _Truncated(offset, n)
        end = offset + n
        if end <= len(self.kept):
            with memoryview(self.kept) as view:
                return bytes(view[offset:end])
        if self.window_start <= offset and end <= self.pos:
            return self.window[offset - self.window_start : end - self.window_start]
        in_window = self.window_start <= offset < self.pos
        if offset < self.pos and not in_window and not (offset < len(self.kept) == self.pos):
            # behind us and not kept: inflate again from the start
            self.fh.close()
            self.fh = self.opener()
            self.passes += 1
            self.pos = 0
            self.retain = len(self.kept)
            self.window, self.window_start = b"", 0
        if in_window:
            head = self.window[offset - self.window_start :]
        else:
            with memoryview(self.kept) as view:
                head = bytes(view[offset : self.pos]) if offset < self.pos else b""
        while self.pos < offset:
            self._take(min(self.CHUNK, offset - self.pos))
        parts = [head]
        while self.pos < end:
            parts.append(self._take(end - self.pos))
        return b"".join(parts)

    def cheap(self, offset: int) -> bool:
        return self.size <= SMALL_MEMBER or (offset >= self.window_start and offset - self.pos <= SECTION_SLACK)

    def close(self) -> None:
        self.fh.close()


class _Truncated(Exception):
    def __init__(self, offset: int, n: int) -> None:
        super().__init__(offset, n)
        self.offset = offset
        self.n = n


# -- the parser -------------------------------------------------------------------------


class _Layout:
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


def parse_elf(source: _Source, path: str = "") -> ElfFacts:
    """Parse ``source``; raises InputError for what is not (valid) ELF."""
    try:
        return _parse(source, path)
    except _Truncated as exc:
        raise InputError(
            "CU005", f"{path}: ELF data at offset {exc.offset} (+{exc.n}) extends past the end of the file "
            f"({source.size} bytes): truncated or corrupt", offset=exc.offset, size=source.size,
        ) from None
    except struct.error as exc:
        raise InputError("CU005", f"{path}: malformed ELF structure ({exc})") from None


def _parse(src: _Source, path: str) -> ElfFacts:
    if src.size < 16:
        raise InputError("CU006", f"{path}: not an ELF file ({src.size} bytes)")
    ident = src.read_at(0, 16)
    if ident[:4] != b"\x7fELF":
        raise InputError("CU006", f"{path}: not an ELF file (starts with {bytes(ident[:4])!r})", magic=bytes(ident[:4]).hex())
    elf_class, data = ident[4], ident[5]
    if elf_class not in (1, 2) or data not in (1, 2):
        raise InputError("CU005", f"{path}: bad ELF identification (class {elf_class}, data {data})")
    L = _Layout(elf_class, data == 1)
    hdr = L.ehdr.unpack(src.read_at(16, L.ehdr.size))
    e_type, e_machine, _ver, _entry, e_phoff, e_shoff, _flags, _ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx = hdr
    if e_phnum and e_phentsize < L.phdr.size:
        raise InputError("CU005", f"{path}: program header entries of {e_phentsize} bytes are too small")
    phdata = src.read_at(e_phoff, e_phnum * e_phentsize) if e_phnum else b""
    loads: list[tuple[int, int, int]] = []  # vaddr, offset, filesz
    dyn_off = dyn_size = None
    for i in range(e_phnum):
        fields = L.phdr.unpack_from(phdata, i * e_phentsize)
        if L.is64:
            p_type, _pf, p_offset, p_vaddr, _pa, p_filesz, _pm, _al = fields
        else:
            p_type, p_offset, p_vaddr, _pa, p_filesz, _pm, _pf, _al = fields
        if p_type == PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == PT_DYNAMIC:
            dyn_off, dyn_size = p_offset, p_filesz

    def to_offset(addr: int, what: str) -> int:
        for vaddr, off, filesz in loads:
            if vaddr <= addr < vaddr + filesz:
                return addr - vaddr + off
        raise InputError("CU005", f"{path}: {what} address {addr:#x} is in no loadable segment", address=addr)

    machine = MACHINES.get(e_machine, f"machine {e_machine}")
    elf_type = TYPES.get(e_type, f"type {e_type}")
    tags: dict[int, int] = {}
    needed_off: list[int] = []
    rpath_off: list[int] = []
    runpath_off: list[int] = []
    soname_off = None
    dynamic = None
    if dyn_off is not None and dyn_size:
        if dyn_off + dyn_size > src.size:
            raise _Truncated(dyn_off, dyn_size)
        raw = src.read_at(dyn_off, dyn_size)
        count = 0
        for tag, val in L.dyn.iter_unpack(raw[: len(raw) - len(raw) % L.dyn.size]):
            count += 1
            if tag == DT_NULL:
                break
            if tag == DT_NEEDED:
                needed_off.append(val)
            elif tag == DT_RPATH:
                rpath_off.append(val)
            elif tag == DT_RUNPATH:
                runpath_off.append(val)
            elif tag == DT_SONAME:
                soname_off = val
            else:
                tags.setdefault(tag, val)
        dynamic = DynamicEntry(dyn_off, dyn_size, L.dyn.size)

    # Read the tables in file order: a stream then inflates once.
    plan: list[tuple[int, str]] = []
    if DT_STRTAB in tags:
        if DT_STRSZ not in tags:
            raise InputError("CU005", f"{path}: dynamic section has DT_STRTAB without DT_STRSZ")
        plan.append((to_offset(tags[DT_STRTAB], "DT_STRTAB"), "strtab"))
    elif needed_off or soname_off is not None:
        raise InputError("CU005", f"{path}: dynamic section without its string table (DT_STRTAB)")
    for tag, what in ((DT_GNU_HASH, "gnu_hash"), (DT_HASH, "hash"), (DT_SYMTAB, "symtab"), (DT_VERSYM, "versym"),
                      (DT_VERNEED, "verneed"), (DT_VERDEF, "verdef")):
        if tag in tags:
            plan.append((to_offset(tags[tag], what), what))
    offsets = dict((w, o) for o, w in plan)

    # The symbol count comes from a hash table, which normally precedes .dynsym.
    nsyms = 0
    if "gnu_hash" in offsets:
        nsyms = _gnu_hash_count(src, offsets["gnu_hash"], L)
    elif "hash" in offsets:
        nsyms = struct.unpack(L.e + "II", src.read_at(offsets["hash"], 8))[1]
    strtab = b""
    symdata = b""
    versym = b""
    verneed_raw: list[tuple[str, list[tuple[int, str]]]] = []
    verdefs: dict[int, str] = {}
    for off, what in sorted(plan):
        if what == "strtab":
            strtab = bytes(src.read_at(off, tags[DT_STRSZ]))
        elif what == "symtab" and nsyms:
            symdata = src.read_at(off, nsyms * L.sym.size)
        elif what == "versym" and nsyms:
            versym = src.read_at(off, nsyms * 2)
    # Version tables are lists linked by offsets; their names are in strtab.
    if "verneed" in offsets:
        verneed_raw = _verneed(src, offsets["verneed"], tags.get(DT_VERNEEDNUM, 0), L)
    if "verdef" in offsets:
        verdefs = _verdef(src, offsets["verdef"], tags.get(DT_VERDEFNUM, 0), L)

    def string(off: int) -> str:
        if off >= len(strtab):
            raise InputError("CU005", f"{path}: string offset {off} outside the dynamic string table", offset=off)
        end = strtab.find(b"\0", off)
        return strtab[off : end if end >= 0 else len(strtab)].decode("utf-8", "surrogateescape")

    needed = tuple(string(o) for o in needed_off)
    soname = string(soname_off) if soname_off is not None else ""
    rpath = tuple(p for o in rpath_off for p in string(o).split(":") if p)
    runpath = tuple(p for o in runpath_off for p in string(o).split(":") if p)
    version_needs = tuple(VersionNeed(string(f), tuple(string(n) for _, n in aux)) for f, aux in verneed_raw)
    # version index -> (version name, file)
    vindex: dict[int, tuple[str, str]] = {}
    for (f, aux), need in zip(verneed_raw, version_needs):
        for (idx, _n), vname in zip(aux, need.versions):
            vindex[idx] = (vname, need.file)
    for idx, name_off in verdefs.items():
        vindex[idx] = (string(name_off), "")
    version_defs = tuple(vindex[i][0] for i in sorted(verdefs) if i in vindex)

    imports: list[str] = []
    import_versions: list[str] = []
    import_files: list[str] = []
    weak: set[int] = set()
    exports: list[str] = []
    export_versions: list[str] = []
    if symdata:
        _symbols(strtab, symdata, versym, nsyms, vindex, L, path, imports, import_versions, import_files, weak,
                 exports, export_versions, bool(verdefs))

    sections = None
    if e_shoff and e_shnum and e_shentsize >= L.shdr.size and src.cheap(e_shoff):
        sections = _sections(src, L, e_shoff, e_shnum, e_shentsize, e_shstrndx)
    elif not e_shoff:
        sections = ()
    return ElfFacts(
        elf_class=64 if L.is64 else 32,
        little_endian=L.e == "<",
        machine=machine,
        elf_type=elf_type,
        soname=soname,
        needed=needed,
        rpath=rpath,
        runpath=runpath,
        imports=tuple(imports),
        import_versions=tuple(import_versions) if any(import_versions) else ("",) * len(imports),
        import_files=tuple(import_files),
        weak_imports=frozenset(weak),
        exports=tuple(exports),
        export_versions=tuple(export_versions),
        version_needs=version_needs,
        version_defs=version_defs,
        symbol_count=nsyms,
        dynamic=dynamic,
        sections=sections,
        size=src.size,
        passes=src.passes,
    )


def _symbols(strtab, symdata, versym, nsyms, vindex, L, path, imports, import_versions, import_files, weak,
             exports, export_versions, has_defs: bool = True) -> None:
    """Split the dynamic symbols into imports and exports (the hot loop: 73 k symbols in libtorch_cpu).

    Columns are pulled out whole (memoryview casts, list comprehensions) rather than
    one struct per symbol; names are sliced from the decoded table, whose byte offsets
    equal character offsets when it is ASCII (the normal case).
    """
    import sys

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
        raise InputError("CU005", f"{path}: symbol {bad} names offset {name_offs[bad]} outside the string table")
    # Keep named, non-local symbols (st_info's binding is its high nibble).
    keep = [i for i, (o, b) in enumerate(zip(name_offs, infos)) if o and b >= 0x10]
    offs = [name_offs[i] for i in keep]
    text = strtab.decode("ascii") if strtab.isascii() else None
    if text is not None:
        find = text.find
        names = [text[o : find("\0", o)] for o in offs]
    else:
        bfind = strtab.find
        names = [strtab[o : bfind(b"\0", o)].decode("utf-8", "surrogateescape") for o in offs]
    und = [not shndx[i] for i in keep]
    imports += itertools.compress(names, und)
    imp_idx = list(itertools.compress(keep, und))
    defined = [not u for u in und]
    exports += itertools.compress(names, defined)
    weak.update(j for j, i in enumerate(imp_idx) if infos[i] >> 4 == STB_WEAK)
    if versym:
        vers = struct.unpack(f"{L.e}{nsyms}H", versym)
        none = ("", "")
        vget = vindex.get
        iv = [vget(vers[i] & 0x7FFF, none) if vers[i] & 0x7FFF > 1 else none for i in imp_idx]
        import_versions += [v[0] for v in iv]
        import_files += [v[1] for v in iv]
        if has_defs:
            export_versions += [
                vget(vers[i] & 0x7FFF, none)[0] if vers[i] & 0x7FFF > 1 else "" for i in itertools.compress(keep, defined)
            ]
        else:  # without .gnu.version_d, defined symbols carry no version
            export_versions += [""] * (len(keep) - len(imp_idx))
    else:
        import_versions += [""] * len(imp_idx)
        import_files += [""] * len(imp_idx)
        export_versions += [""] * (len(keep) - len(imp_idx))


def _gnu_hash_count(src: _Source, off: int, L: _Layout) -> int:
    """Number of dynamic symbols, from DT_GNU_HASH: one past the last chain's end."""
    nbuckets, symoffset, bloom_size, _shift = struct.unpack(L.e + "IIII", src.read_at(off, 16))
    if nbuckets > 1 << 26 or bloom_size > 1 << 26:
        raise InputError("CU005", f"GNU hash table with {nbuckets} buckets / {bloom_size} bloom words is implausible")
    buckets_off = off + 16 + bloom_size * L.word
    buckets = struct.unpack(f"{L.e}{nbuckets}I", src.read_at(buckets_off, nbuckets * 4))
    last = max(buckets, default=0)
    if last < symoffset:
        return symoffset
    chain_off = buckets_off + nbuckets * 4 + (last - symoffset) * 4
    n = last
    while True:
        block = src.read_at(chain_off, min(4096, src.size - chain_off) // 4 * 4)
        if not block:
            raise _Truncated(chain_off, 4)
        for value in struct.unpack(f"{L.e}{len(block) // 4}I", block):
            n += 1
            if value & 1:
                return n
        chain_off += len(block)


def _verneed(src: _Source, off: int, count: int, L: _Layout) -> list[tuple[int, list[tuple[int, int]]]]:
    out = []
    for _ in range(min(count, 4096)):
        _v, cnt, file_off, aux, nxt = struct.unpack(L.e + "HHIII", src.read_at(off, 16))
        entries = []
        a = off + aux
        for _ in range(min(cnt, 4096)):
            _h, _fl, other, name, anext = struct.unpack(L.e + "IHHII", src.read_at(a, 16))
            entries.append((other, name))
            if not anext:
                break
            a += anext
        out.append((file_off, entries))
        if not nxt:
            break
        off += nxt
    # names are resolved by the caller (it has the string table)
    return [(f, [(idx, n) for idx, n in e]) for f, e in out]  # type: ignore[misc]


def _verdef(src: _Source, off: int, count: int, L: _Layout) -> dict[int, int]:
    out: dict[int, int] = {}
    for _ in range(min(count, 4096)):
        _v, flags, ndx, cnt, _h, aux, nxt = struct.unpack(L.e + "HHHHIII", src.read_at(off, 20))
        if cnt:
            (name,) = struct.unpack(L.e + "I", src.read_at(off + aux, 4))
            out[ndx] = name
        if not nxt:
            break
        off += nxt
    return out


def _sections(src: _Source, L: _Layout, shoff: int, shnum: int, shentsize: int, shstrndx: int) -> tuple[SectionInfo, ...]:
    if shnum > 1 << 16:
        return ()
    table = src.read_at(shoff, shnum * shentsize)
    rows = [L.shdr.unpack_from(table, i * shentsize) for i in range(shnum)]
    if not 0 < shstrndx < shnum:
        return ()
    names_off, names_size = rows[shstrndx][4], rows[shstrndx][5]
    if names_off + names_size > src.size or names_size > 1 << 24:
        return ()
    names = bytes(src.read_at(names_off, names_size))
    out = []
    for r in rows:
        name_off, sh_type, _flags, addr, offset, size = r[:6]
        end = names.find(b"\0", name_off)
        name = names[name_off:end].decode("ascii", "replace") if name_off < len(names) else ""
        if name.startswith(INTERESTING_SECTION_PREFIXES):
            out.append(SectionInfo(name, sh_type, offset, size, addr))
    return tuple(out)


# -- entry points ------------------------------------------------------------------------


def read_elf_file(path: str) -> ElfFacts:
    """Facts of an ELF file on disk (mapped, never read whole)."""
    import mmap
    import os

    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            raise InputError("CU006", f"{path}: empty file, not ELF")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return parse_elf(_BufferSource(mm, size), path)


def read_elf_bytes(data: bytes, path: str = "") -> ElfFacts:
    return parse_elf(_BufferSource(data, len(data)), path)


def read_elf_stream(opener: Callable[[], IO[bytes]], size: int, path: str = "") -> ElfFacts:
    src = _StreamSource(opener, size, RETAIN_LIMIT)
    try:
        return parse_elf(src, path)
    finally:
        src.close()


class ElfExtractor(Extractor):
    """Dynamic-section facts of every ELF member (``.so``, ``.so.N``, sniffed files)."""

    name = "elf"
    version = 1

    def applies(self, member: Member) -> bool:
        return member.kind is MemberKind.ELF

    def extract(self, reader: MemberReader) -> ElfFacts:
        size = reader.member.size
        mm = reader.mmap()
        if mm is not None:
            try:
                return parse_elf(_BufferSource(mm, len(mm)), reader.path)
            finally:
                mm.close()
        return read_elf_stream(reader.open, size, reader.path)
