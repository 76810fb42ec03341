"""What both Cython C-API readers share: the x86-64 view of the image, call sites, register tracking.

:mod:`cuaudit.facts.cython_tables` (Cython up to 3.1: names and signatures
as plain C strings at the call sites) and :mod:`cuaudit.facts.cython_blob`
(Cython 3.2+: one compressed string table) both read a module's code through
this module; the ELF itself is read by :mod:`cuaudit.formats.elf` alone.
The records they produce (:class:`CExport`, :class:`CImport`,
:class:`TypeImport`, :class:`TypeDef`) are defined here and re-exported by
:mod:`cuaudit.facts.cython`.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from bisect import bisect_left, bisect_right
from itertools import compress
from operator import itemgetter
from typing import Any, NamedTuple

from cuaudit.formats.elf import EM_X86_64, SHT_NOBITS, ElfImage
from cuaudit.model import InputError

# -- facts ----------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class CExport:
    """One entry of a module's ``__pyx_capi__``: name -> capsule signature."""

    name: str
    signature: str
    kind: str = "function"  # or "variable"


@dataclass(frozen=True, order=True)
class CImport:
    """A C function or variable a module imports from another module's ``__pyx_capi__``."""

    module: str
    name: str
    signature: str
    kind: str = "function"


@dataclass(frozen=True, order=True)
class TypeImport:
    """An extension type a module imports (``__Pyx_ImportType``) and the struct size it expects."""

    module: str
    name: str
    size: int | None
    #: what a size mismatch does at import: "error", "warn", "ignore", or "" when unknown
    check_size: str = ""


@dataclass(frozen=True, order=True)
class TypeDef:
    """An extension type a module defines, and its ``tp_basicsize`` when readable."""

    name: str  # qualified: "rmm.pylibrmm.device_buffer.DeviceBuffer"
    size: int | None


CHECK_SIZE = {0: "error", 1: "warn", 2: "ignore"}

# -- the x86-64 view of the member's ELF image ----------------------------------------


class _Image:
    """What the call-site readers need of one x86-64 ELF image: its bytes, sections, PLT/GOT slots.

    A view over :class:`cuaudit.formats.elf.ElfImage` (the member's one image):
    sections, address translation and ``.eh_frame_hdr`` come from it; what is
    specific to x86-64 code (PLT stubs, GOT slots, ``R_X86_64_*`` relocations)
    is read here.  Anything but 64-bit little-endian x86-64 is CU009.
    """

    def __init__(self, elf: ElfImage) -> None:
        path = elf.path
        if elf.elf_class != 64 or not elf.little_endian:
            raise InputError("CU009", f"{path}: 32-bit or big-endian ELF is not analysed for Cython C-API (x86-64 only)")
        if elf.machine != EM_X86_64:
            raise InputError(
                "CU009",
                f"{path}: ELF machine {elf.machine} is not analysed for Cython C-API imports (x86-64 only)",
                machine=elf.machine,
            )
        self.elf = elf
        self.path = path
        elf.sections()  # a section table that does not parse is CU005 here, before any code is read
        #: the file's bytes at their offsets: bytes in memory, or the file's read-only mapping, whose
        #: pages are read where the readers look (code around call sites, strings, tables).  Whether
        #: a string lies anywhere in the file is :meth:`has` (``in`` does not search a mapping)
        self.data = elf.whole()
        self._markers: Markers | None = None

    def markers(self) -> "Markers":
        """What the whole-file tests ask, found in one pass (:func:`scan_markers`)."""
        if self._markers is None:
            self._markers = scan_markers(self.elf, self.data)
        return self._markers

    def has(self, needle: bytes) -> bool:
        """Whether one of :data:`MARKERS` lies anywhere in the file (a fat-binary section of a file on
        disk reads as zeros: see :func:`scan_markers`)."""
        return needle in self.markers().found

    def offset(self, vaddr: int) -> int | None:
        return self.elf.offset_of(vaddr)

    def cstr(self, vaddr: int, limit: int = 8192) -> str | None:
        off = self.offset(vaddr)
        if off is None:
            return None
        end = self.data.find(b"\0", off, off + limit)
        if end < 0:
            return None
        try:
            return self.data[off:end].decode("utf-8")
        except UnicodeDecodeError:
            return None

    def section(self, name: str) -> tuple[int, int, int] | None:
        """(addr, offset, size) of a section."""
        s = self.elf.section(name)
        return (s.addr, s.offset, s.size) if s else None

    def section_bytes(self, name: str) -> tuple[int, bytes]:
        s = self.elf.section(name)
        if not s or s.size == 0:
            return 0, b""
        return s.addr, self.elf.section_bytes(s)

    def in_section(self, vaddr: int, *names: str) -> bool:
        for lo, hi in self.ranges(names):
            if lo <= vaddr < hi:
                return True
        return False

    def ranges(self, names: tuple[str, ...]) -> list[tuple[int, int]]:
        """[addr, end) of each of the named sections the image has (asked per pointer: kept by names)."""
        cache = self.__dict__.setdefault("_ranges", {})
        found = cache.get(names)
        if found is None:
            found = cache[names] = [(s[0], s[0] + s[2]) for s in map(self.section, names) if s]
        return found

    def function_starts(self) -> list[int]:
        return self.elf.function_starts()

    def _relocations(self, name: str) -> list[tuple[int, int, int]]:
        _addr, data = self.section_bytes(name)
        return list(struct.iter_unpack("<QQq", data[: len(data) - len(data) % 24]))

    def imported_functions(self, wanted: frozenset[str]) -> dict[str, tuple[set[int], set[int]]]:
        """name -> (PLT stub addresses, GOT slots) for the wanted dynamic symbols."""
        cached = self.__dict__.get("_imported")
        if cached is not None and cached[0] == wanted:
            return cached[1]
        self._imported = (wanted, self._imported_functions(wanted))
        return self._imported[1]

    def _imported_functions(self, wanted: frozenset[str]) -> dict[str, tuple[set[int], set[int]]]:
        names = self.elf.dynsym_names()
        slots: dict[int, str] = {}
        # the relocations of the wanted symbols, picked in C (.rela.dyn holds thousands of others)
        symbols = {i for i, name in enumerate(names) if i and name in wanted}
        for rel in (".rela.plt", ".rela.dyn"):
            _addr, data = self.section_bytes(rel)
            flat = struct.unpack_from(f"<{len(data) // 24 * 3}Q", data)
            infos = flat[1::3]
            wanted_rows = map(symbols.__contains__, map((32).__rrshift__, infos))  # r_info >> 32: the symbol
            for r_offset, r_info in compress(zip(flat[0::3], infos), wanted_rows):
                if r_info & 0xFFFFFFFF in (6, 7):  # GLOB_DAT, JUMP_SLOT
                    slots[r_offset] = names[r_info >> 32]
        out: dict[str, tuple[set[int], set[int]]] = {n: (set(), set()) for n in wanted}
        for slot, name in slots.items():
            out[name][1].add(slot)
        for sec in (".plt", ".plt.sec", ".plt.got"):
            addr, blob = self.section_bytes(sec)
            for m in re.finditer(rb"\xff\x25", blob):
                p = m.start()
                if p + 6 > len(blob):
                    continue
                (disp,) = struct.unpack_from("<i", blob, p + 2)
                target = addr + p + 6 + disp
                name = slots.get(target)
                if name:
                    stub = addr + p - (p % 16 if sec != ".plt.got" else p % 8)
                    out[name][0].add(stub)
        return out

    def rela_relative(self) -> dict[int, int]:
        """R_X86_64_RELATIVE relocations: address -> value (for pointers in initialised data)."""
        cached = self.__dict__.get("_relative")
        if cached is None:
            cached = self._relative = {r_offset: addend for r_offset, r_info, addend in self._relocations(".rela.dyn")
                                       if r_info & 0xFFFFFFFF == 8}
        return cached


# -- call sites and argument registers ------------------------------------------------------

_REG64 = {
    "edi": "rdi", "esi": "rsi", "edx": "rdx", "ecx": "rcx", "eax": "rax", "ebx": "rbx", "ebp": "rbp",
    "r8d": "r8", "r9d": "r9", "r10d": "r10", "r11d": "r11", "r12d": "r12", "r13d": "r13", "r14d": "r14", "r15d": "r15",
}
_TRACKED = {"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"}
_CLOBBERED = ("rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11")
_NO_WRITE = {"test", "cmp", "push", "bt", "ret", "call", "nop", "endbr64", "leave", "hlt", "ud2", "int3"}
_RIP = re.compile(r"\[rip ([+-]) (0x[0-9a-f]+|\d+)\]")
_BASE_DISP = re.compile(r"^(?:qword ptr )?\[(\w+)(?: \+ (0x[0-9a-f]+|\d+))?\]$")


#: operand text -> the tracked 64-bit register it names (one lookup per operand of every instruction)
_REG_OF = {**{r: r for r in _TRACKED}, **{k: v for k, v in _REG64.items() if v in _TRACKED}}


def _reg(name: str) -> str | None:
    return _REG_OF.get(name) or _REG_OF.get(name.strip())


@dataclass(slots=True)  # one per call passed over (tens of thousands a module)
class CallSite:
    address: int
    target: int  # call rel32 target, or -slot for call [rip+slot]
    args: dict = field(default_factory=dict)  # register -> value


#: the Cython ABI marker (``_cython_3_0_11``): its first occurrence in a file names the Cython release
ABI_MARKER = re.compile(rb"_cython_(\d+)_(\d+)_(\d+)(?:([abr]|rc)(\d+))?\x00")
#: the strings the readers look for anywhere in a module's file (``_Image.has``).  Like the ABI
#: marker, each holds no NUL byte but a last one: no occurrence spans a NUL (see scan_markers)
MARKERS = (b"__pyx_capi__\x00", b"cython_runtime\x00", b"__pyx_capi__", b"cython_runtime", b"__pyx_")


def _search(buf: Any, found: set[bytes]) -> None:
    """Add to ``found`` the :data:`MARKERS` in ``buf`` not found yet.  A longer marker is looked for
    only where its prefix is (``__pyx_`` before ``__pyx_capi__``): most modules hold none, and each
    search is a pass over the whole buffer."""
    for prefix, longer in _BY_PREFIX:
        if prefix in buf:
            found.add(prefix)
            found.update(n for n in longer if n not in found and n in buf)


#: each marker that is no other's prefix, with the markers it is a prefix of (longest last)
_BY_PREFIX = ((b"__pyx_", (b"__pyx_capi__", b"__pyx_capi__\x00")), (b"cython_runtime", (b"cython_runtime\x00",)))


class Markers(NamedTuple):
    """What one pass over a module's file found: the ABI marker's groups (its first occurrence),
    and which of :data:`MARKERS` occur."""

    abi: tuple[bytes | None, ...] | None
    found: frozenset[bytes]


#: a file on disk is searched this many bytes at a time (and up to the next NUL byte)
_SCAN_PIECE = 8 * 1024**2


def scan_markers(elf: ElfImage, data: Any, *, device_code_as_zeros: bool = True) -> Markers:
    """The ABI marker and :data:`MARKERS` in a module's bytes (``data``: bytes, or the file's mapping).

    Bytes in memory are searched as they are.  A file on disk is searched a piece at a time, each
    piece's pages let go once searched (``MADV_DONTNEED``): its whole-file searches mapped every
    page into the worker (a copy of the file before; 16 workers reading large extension modules at
    once were the GPU machine's peak), and its fat-binary sections, most of a CUDA module, read as
    zeros without being read at all (72 of cupy's ``thrust`` module's 79 MB), as the copy held them.
    Pieces end just after a NUL byte: no occurrence of the marker or of the strings holds a NUL but
    as its last byte, so none spans two pieces; a piece before a fat-binary section ends with one
    NUL of its zeros.  A stretch with no NUL at all is searched whole.

    ``device_code_as_zeros=False``: the fat-binary sections are searched too, and the section table
    is not read (a module of another machine, which the reader only tells Cython or not).
    """
    import mmap

    if not isinstance(data, mmap.mmap):
        buf = data if isinstance(data, (bytes, bytearray)) else bytes(data)
        first = ABI_MARKER.search(buf)
        hits: set[bytes] = set()
        _search(buf, hits)
        return Markers(first.groups() if first else None, frozenset(hits))
    from cuaudit.facts.fatbin import FATBIN_SECTIONS

    size = len(data)
    # only a section that lies within the file reads as zeros: one that claims more bytes than the
    # file has (CU005 for the device-code listing) leaves out nothing, as the bytes in memory do not
    skip = sorted((s.offset, s.offset + s.size) for s in elf.sections()
                  if s.name in FATBIN_SECTIONS and s.type != SHT_NOBITS and s.offset + s.size <= size) \
        if device_code_as_zeros else []
    keep, pos = [], 0
    for start, end in skip:
        if start > pos:
            keep.append((pos, start, True))
        pos = max(pos, end)
    keep.append((pos, size, False))
    let_go = getattr(data, "madvise", None) if hasattr(mmap, "MADV_DONTNEED") else None
    abi: tuple[bytes | None, ...] | None = None
    found: set[bytes] = set()
    for start, end, zeros_after in keep:
        at = start
        while at < end:
            stop = min(at + _SCAN_PIECE, end)
            piece = data[at:stop]
            cut = piece.rfind(b"\x00")
            while cut < 0 and stop < end:  # no NUL yet: the stretch goes on
                more = data[stop:min(stop + _SCAN_PIECE, end)]
                j = more.rfind(b"\x00")
                if j >= 0:
                    cut = len(piece) + j
                piece += more
                stop += len(more)
            if stop < end:  # (here cut >= 0) the rest of the range from the byte after that NUL
                piece, stop = piece[:cut + 1], at + cut + 1
            if stop == end and zeros_after:
                piece += b"\x00"
            _search(piece, found)
            if abi is None and b"_cython_" in piece:
                m = ABI_MARKER.search(piece)
                if m:
                    abi = m.groups()
            if let_go is not None:
                page = mmap.PAGESIZE
                lo, hi = at - at % page, stop - stop % page
                if hi > lo:
                    try:
                        let_go(mmap.MADV_DONTNEED, lo, hi - lo)
                    except (OSError, ValueError):
                        let_go = None
            at = stop
    return Markers(abi, frozenset(found))


class _Tracker:
    """A linear pass over x86-64 code tracking what each register holds.

    Values: ("addr", vaddr) for a rip-relative ``lea``; ("imm", n); ("mem", vaddr)
    for a rip-relative load; ("ret", target) for a call's result; ("module", name)
    for the result of ``PyImport_ImportModule(name)``.
    """

    def __init__(self, image: _Image) -> None:
        self.cs = _disassembler()
        self.image = image
        taddr, toff, tsize = image.section(".text") or (0, 0, 0)
        self.text = (taddr, toff, tsize)
        self._starts: list[int] | None = None
        #: back-edge targets whose state should also be merged when reached by fall-through
        #: (loops rotated with their entry block placed after the function's hot path)
        self._loop_heads: set[int] = set()
        #: the instructions of the last range decoded: `run` passes over one range up to four times
        self._decoded: tuple[int, int, list] | None = None
        #: instruction address -> the sweep that met it and went furthest (see _sweep): the readers' ranges overlap
        #: (import sites, capsule sites, helpers: 1.46 MB asked for 0.78 MB of distinct code in cupy
        #: 14.2.0's 65 modules)
        self._at: dict[int, tuple[list, list, list, int]] = {}

    def code(self, start: int, end: int) -> bytes:
        taddr, toff, tsize = self.text
        start = max(start, taddr)
        end = min(end, taddr + tsize)
        return bytes(self.image.data[toff + start - taddr : toff + end - taddr])

    def aligned_start(self, address: int, back: int) -> int:
        """An address at most ``back`` bytes before ``address`` from which decoding lands on it."""
        taddr = self.text[0]
        if self._starts is None:
            self._starts = self.image.function_starts()
        i = bisect_right(self._starts, address) - 1
        if i >= 0 and address - back <= self._starts[i] <= address:
            return self._starts[i]  # a function start is an instruction boundary
        for delta in range(back, max(back - 24, 0), -1):
            start = max(taddr, address - delta)
            blob = self.code(start, address + 16)
            pos = start
            for a, size, _m, _o in self.cs.disasm_lite(blob, start):
                if a >= address:
                    pos = a
                    break
            if pos == address:
                return start
        return address

    def run(self, start: int, end: int, on_call, regs: dict | None = None, on_load=None) -> dict:
        back: dict[int, dict] = {}
        arrivals: set[int] = set()
        out = self._run(start, end, on_call, regs, on_load, back, arrivals, {})
        # A loop entered by a jump to its condition: its body is reached only by the
        # back edge; decode again with the state that edge carries (a chain of such
        # jumps needs one more pass per link).
        passes = 3 if self._loop_heads else 1
        last: tuple[dict, list] | None = None  # the seeds of the last pass, and the calls it made
        for left in range(passes - 1, -1, -1):
            seeds = {a: back[a] for a in back if a in arrivals or self._loop_heads}
            if not seeds:
                break
            if last is not None and last[0] == seeds and on_load is None:
                # the same seeds: this pass would be the last one again, call for call (the readers'
                # callbacks answer by their arguments alone; loads are not recorded, so a reader that
                # watches them has every pass walked); a quarter of the export loops' passes
                for site in last[1]:
                    on_call(CallSite(site.address, site.target, dict(site.args)))
                continue
            calls: list | None = [] if left else None  # kept only where a pass may follow
            back, arrivals = {}, set()
            out = self._run(start, end, on_call, regs, on_load, back, arrivals, seeds, calls)
            last = (seeds, calls) if calls is not None else None
        return out

    def _instructions(self, start: int, end: int) -> list:
        last = self._decoded
        if last is None or last[0] != start or last[1] != end:
            last = self._decoded = (start, end, self._decode(start, end))
        return last[2]

    def _decode(self, start: int, end: int) -> list:
        """The ops of ``[start, end)`` as a linear sweep from ``start`` decodes them.

        A sweep depends only on where it stands, so instructions an earlier sweep met at the
        same addresses are reused: those that end by ``end`` and were decoded with the bytes
        this sweep has (the same end or further, or 15 bytes past them: the longest x86
        instruction; capstone reads a truncated one as one skipped byte).  Where no earlier
        sweep stood, pieces are decoded fresh, growing, until one lands on an address an
        earlier sweep met (x86 code resynchronises within a few instructions: a range that
        starts off the boundaries of one already decoded is decoded only up to there).
        """
        taddr, _toff, tsize = self.text
        if not taddr <= start <= end <= taddr + tsize:
            # `code` clamps such a range to .text: decoded as it comes, and not kept for other
            # ranges (its addresses are not those of the bytes read)
            return self._sweep(start, end)[0]
        out: list = []
        pos = start
        at = self._at
        piece = _PIECE
        while pos < end:
            seg = at.get(pos)
            if seg is not None:
                nxt = _take(seg, pos, end, out)
                if nxt > pos:
                    pos, piece = nxt, _PIECE
                    continue
            seg = self._fresh(pos, min(end, pos + piece))
            piece *= 2
            nxt = _take(seg, pos, end, out)
            if nxt == pos:
                break  # nothing decoded (capstone failed): the range ends here
            pos = nxt
        return out

    def _fresh(self, start: int, end: int) -> tuple[list, list, list, int]:
        """One sweep of ``[start, end)``, kept for its addresses (where an earlier sweep met one, the
        sweep that went further serves more ranges)."""
        seg = self._sweep(start, end)
        at = self._at
        met = set(seg[1])
        new = met.difference(at)
        at.update(dict.fromkeys(new, seg))
        for address in met.difference(new):  # few: sweeps overlap where they resynchronise
            if at[address][3] < end:
                at[address] = seg
        return seg

    def _sweep(self, start: int, end: int) -> tuple[list, list, list, int]:
        """(ops, their addresses, their ends, ``end``) of a linear sweep of ``[start, end)``."""
        ops: list = []
        memo = _OPS
        if len(memo) > _OPS_MAX:
            memo.clear()
        append = ops.append
        get = memo.get
        for address, size, mnem, operands in self.cs.disasm_lite(self.code(start, end), start):
            nxt = address + size
            if "rip" in operands:  # the only operands whose meaning depends on the address
                append((address, nxt, _op(mnem, operands, nxt)))
            else:
                key = (mnem, operands)
                op = get(key)
                if op is None:
                    op = memo[key] = _op(mnem, operands, nxt)
                append((address, nxt, op))
        return ops, list(map(_FIRST, ops)), list(map(_SECOND, ops)), end

    def _run(self, start, end, on_call, regs, on_load, back, arrivals, seeds, calls=None) -> dict:
        regs = dict(regs or {})
        # Forward branches carry their state to their target; after an unconditional
        # jump the next instruction is reached only through such a branch (error
        # blocks sit between the import calls and load registers of their own).
        pending: dict[int, dict] = {}
        dead = False
        for address, nxt, (code, a, b) in self._instructions(start, end):
            if pending and address in pending:
                other = pending.pop(address)
                # At a join, the state the jump brings wins: what we need is the first
                # iteration of the helper loops, entered by a jump to their condition.
                regs = dict(other) if dead else {**regs, **other}
                dead = False
            elif dead:
                if address in seeds:
                    regs = dict(seeds[address])
                arrivals.add(address)
                dead = False
            elif seeds and address in seeds:
                regs = {**regs, **seeds[address]}
            # (the codes in the order of how often they come: a quarter of the instructions write nothing tracked)
            if code == _SKIP:
                pass
            elif code == _JUMP:
                if a is not None:
                    if a > address:
                        prev = pending.get(a)
                        pending[a] = dict(regs) if prev is None else {k: v for k, v in prev.items() if regs.get(k) == v}
                    elif a >= start and a not in back:
                        back[a] = dict(regs)
                if b:
                    dead = True
            elif code == _SET:
                regs[a] = b
            elif code == _COPY:
                if b in regs:
                    regs[a] = regs[b]
                else:
                    regs.pop(a, None)
            elif code == _CALL:
                if calls is None:
                    result = on_call(CallSite(address, a if a is not None else 0, regs))
                else:  # what it was called with is kept (see run)
                    site = CallSite(address, a if a is not None else 0, dict(regs))
                    calls.append(site)
                    result = on_call(site)
                for r in _CLOBBERED:
                    regs.pop(r, None)
                if result is not None:
                    regs["rax"] = result
                elif a is not None:
                    regs["rax"] = ("ret", a)
            elif code == _KILL:
                regs.pop(a, None)
            elif code == _RET:
                dead = True
            elif code == _LOAD:
                regs[a] = ("mem", b)
                if on_load is not None:
                    on_load(b)
            elif code == _SPILL:
                if b is not None and b in regs:
                    regs[a] = regs[b]
                else:
                    regs.pop(a, None)
            elif code == _RELOAD:
                if b is not None and b in regs:
                    regs[a] = regs[b]
                else:
                    regs.pop(a, None)
            elif code == _LEA_BASE:
                base = regs.get(b[0])
                if base and base[0] in ("mem", "memoff"):
                    regs[a] = ("memoff", base[1], (base[2] if base[0] == "memoff" else 0) + b[1])
                else:
                    regs.pop(a, None)
            else:  # _ADD_IMM
                cur = regs.get(a)
                if cur is not None and cur[0] in ("mem", "memoff"):
                    regs[a] = ("memoff", cur[1], (cur[2] if cur[0] == "memoff" else 0) + b)
                else:
                    regs.pop(a, None)
        return regs


#: the first piece a range decodes fresh (bytes; doubled per piece while no earlier sweep is met)
_PIECE = 256
_FIRST, _SECOND = itemgetter(0), itemgetter(1)


def _take(seg: tuple[list, list, list, int], pos: int, end: int, out: list) -> int:
    """Append to ``out`` the ops of sweep ``seg`` from ``pos`` (one of its addresses) that a sweep of
    ``[pos, end)`` also decodes; the address after the last one (``pos`` if none)."""
    ops, addrs, ends, stop = seg
    i = bisect_left(addrs, pos)
    j = bisect_right(ends, end)
    if end > stop:  # this sweep ran out of bytes sooner: only what a truncated instruction cannot reach
        j = min(j, bisect_right(addrs, stop - 15))
    if j <= i:
        return pos
    out += ops[i:j]
    return ends[j - 1]


def _disassembler():
    """One capstone handle (x86-64, data skipped: :func:`cuaudit.formats.x86.disassembler`) for every
    tracker of the process: opening one costs more than reading a small module's call sites.
    Extraction runs one member at a time per process."""
    global _CS
    if _CS is None:
        from cuaudit.formats.x86 import disassembler

        _CS = disassembler()
    return _CS


_CS = None


# What one instruction does to the tracked state, worked out once when its range is decoded
# (a range is passed over up to four times: the operand text is parsed once, not per pass).
_SKIP, _KILL, _SET, _COPY, _JUMP, _CALL, _RET, _LOAD, _SPILL, _RELOAD, _LEA_BASE, _ADD_IMM = range(12)


#: _op of an instruction's text that names no address relative to itself (most repeat: "mov rdi, rbx")
_OPS: dict[tuple[str, str], tuple[int, object, object]] = {}
#: entries the memo holds before a sweep starts it afresh.  The repeats are few and hot: reading the
#: 466 extension modules of the accuracy-venv in one process took 4.1-4.4 CPU-s with 4,096 and
#: 4.3-4.7 with 131,072, which the memo reached, holding about 15 MB in every worker to the end
_OPS_MAX = 1 << 12


def _rip_target(match: "re.Match[str]", nxt: int) -> int:
    disp = int(match.group(2), 16 if match.group(2).startswith("0x") else 10)
    return nxt + (disp if match.group(1) == "+" else -disp)


def _slot(match: "re.Match[str]") -> str:
    return f"[rsp+{int(match.group(2), 0) if match.group(2) else 0}]"


def _op(mnem: str, ops: str, nxt: int) -> tuple[int, object, object]:
    """(code, a, b) of one instruction for :meth:`_Tracker._run`."""
    if mnem[0] == "j":
        return _JUMP, (int(ops, 16) if ops.startswith("0x") else None), mnem == "jmp"
    if mnem == "ret":
        return _RET, None, None
    if mnem == "call":
        target = None
        if ops.startswith("0x"):
            target = int(ops, 16)
        else:
            m = _RIP.search(ops)
            if m:
                target = -_rip_target(m, nxt)
        return _CALL, target, None
    if mnem in _NO_WRITE:
        return _SKIP, None, None
    dst, _, src = ops.partition(", ")
    rd = _reg(dst)
    if rd is None:
        # spills: a value kept in the frame (qword [rsp + off]) for later
        if mnem == "mov" and dst.startswith("qword ptr [rsp"):
            m = _BASE_DISP.match(dst)
            if m:
                return _SPILL, _slot(m), _reg(src)
        return _SKIP, None, None
    if mnem == "mov" and src.startswith("qword ptr [rsp"):
        m = _BASE_DISP.match(src)
        return _RELOAD, rd, (_slot(m) if m else None)
    if mnem == "lea":
        m = _RIP.search(src)
        if m:
            return _SET, rd, ("addr", _rip_target(m, nxt))
        # lea r, [r2 + imm] over a loaded object: a pointer into it (Cython 3.2's
        # PyBytes_AS_STRING(table) + offset)
        m2 = _BASE_DISP.match(src)
        base = _reg(m2.group(1)) if m2 else None
        if base is None:
            return _KILL, rd, None
        return _LEA_BASE, rd, (base, int(m2.group(2), 0) if m2.group(2) else 0)
    if mnem in ("mov", "movabs"):
        rs = _reg(src)
        if rs is not None:
            return _COPY, rd, rs
        if src.startswith("0x") or src.isdigit() or src.startswith("-"):
            try:
                return _SET, rd, ("imm", int(src, 0))
            except ValueError:
                return _KILL, rd, None
        m = _RIP.search(src)
        if m and src.startswith("qword"):
            return _LOAD, rd, _rip_target(m, nxt)
        return _KILL, rd, None
    if mnem == "xor" and _reg(src) == rd:
        return _SET, rd, ("imm", 0)
    if mnem == "add" and src.startswith("0x"):
        return _ADD_IMM, rd, int(src, 16)
    return _KILL, rd, None


def _scan_calls(image: _Image, targets: set[int], slots: set[int]) -> dict[int, list[int]]:
    """target (or -slot) -> sites of ``call rel32`` / ``call [rip+slot]`` to the given ones, in .text."""
    taddr, toff, tsize = image.section(".text") or (0, 0, 0)
    out: dict[int, list[int]] = {}
    if targets:
        _scan_opcode(image.data, taddr, toff, tsize, b"\xe8", targets, 1, out)
    if slots:
        _scan_opcode(image.data, taddr, toff, tsize, b"\xff\x15", slots, -1, out)
    return out


#: the stretch of .text whose calls one pattern looks for (see _scan_opcode)
_WINDOW = 1 << 16


def _scan_opcode(data, taddr: int, toff: int, tsize: int, opcode: bytes, wanted: set[int], sign: int,
                 out: dict[int, list[int]]) -> None:
    """Sites of ``opcode rel32`` in .text whose rel32 reaches one of ``wanted`` (keyed ``sign * wanted``).

    One ``find`` per 0xE8 byte was most of this scan.  Here the opcodes are found in C, and only
    those whose rel32 can reach a wanted address from where they stand: per 64 KiB of .text, the
    rel32 of a call to the wanted ones (the PLT stubs, next to .text) lies in a band about as wide,
    which excludes nearly every call within the module.  The exact target of each is worked out as
    before.
    """
    size = len(opcode) + 4
    stop = min(toff + tsize, len(data))  # a call cut off by the end of the file is none
    lowest, highest = min(wanted), max(wanted)
    unpack = struct.unpack_from
    at = len(opcode)
    here = taddr - toff + size  # the address after a call, less its file offset
    for start in range(toff, stop, _WINDOW):
        end = min(start + _WINDOW, stop)
        # the rel32 of a call at file offset p reaching t is t - (here + p)
        pattern = _opcode_reaching(opcode, lowest - (here + end - 1), highest - (here + start))
        for m in pattern.finditer(data, start, min(end + size - 1, stop)):
            p = m.start()
            t = here + p + unpack("<i", data, p + at)[0]
            if t in wanted:
                out.setdefault(sign * t, []).append(taddr + p - toff)


def _opcode_reaching(opcode: bytes, lowest: int, highest: int) -> "re.Pattern[bytes]":
    """``opcode`` followed by a little-endian rel32 in ``[lowest, highest]`` (or more: the low 16 bits
    are not looked at), matching only the opcode so that a match may start inside another's rel32."""
    key = (opcode, lowest >> 16, highest >> 16)
    found = _REACHING.get(key)
    if found is None:
        lo, hi = max(lowest, -(1 << 31)) >> 16, min(highest, (1 << 31) - 1) >> 16
        if lo > hi:
            tail = b"(?!)"  # no rel32 reaches
        elif hi - lo > 1024:
            tail = b"(?=....)"
        else:
            # the two high bytes of every value the rel32 may take: per top byte, a class of second bytes
            second: dict[int, list[int]] = {}
            for high16 in range(lo, hi + 1):
                second.setdefault((high16 >> 8) & 0xFF, []).append(high16 & 0xFF)
            tail = b"(?=..(?:" + b"|".join(
                b"[" + b"".join(re.escape(bytes([b])) for b in seconds) + b"]" + re.escape(bytes([top]))
                for top, seconds in second.items()) + b"))"
        if len(_REACHING) > 4096:
            _REACHING.clear()
        found = _REACHING[key] = re.compile(re.escape(opcode) + tail, re.DOTALL)
    return found


_REACHING: dict[tuple[bytes, int, int], "re.Pattern[bytes]"] = {}


def _prime_calls(image: _Image, imported: dict) -> None:
    """One scan for the call sites of every imported function we look at."""
    targets = {t for stubs, _slots in imported.values() for t in stubs}
    slots = {s for _stubs, sl in imported.values() for s in sl}
    known = image.__dict__.get("_known_calls")
    if known is not None and targets <= known[0] and slots <= known[1]:
        return  # scanned already (a module without an ABI marker is primed while it is recognised)
    image._known_calls = (targets, slots, _scan_calls(image, targets, slots))


def _call_sites(image: _Image, targets: set[int], slots: set[int]) -> list[int]:
    """Addresses of ``call rel32`` to one of ``targets`` and ``call [rip+slot]`` in .text."""
    known = image.__dict__.get("_known_calls")
    if known is not None and targets <= known[0] and slots <= known[1]:
        found = known[2]
    else:
        found = _scan_calls(image, targets, slots)
    out = [a for t in targets for a in found.get(t, ())]
    out += [a for s in slots for a in found.get(-s, ())]
    return sorted(out)


def _scan_runs(
    tracker: "_Tracker", sites: list[int], on_call, gap: int = 8192, tail: int = 4096, on_load=None, back: int = 96
) -> None:
    """Decode the code around ``sites`` in linear passes, one per cluster of nearby sites."""
    runs: list[list[int]] = []
    for s in sites:
        if runs and s - runs[-1][-1] < gap:
            runs[-1].append(s)
        else:
            runs.append([s])
    for run in runs:
        tracker.run(tracker.aligned_start(run[0], back), run[-1] + tail, on_call, on_load=on_load)


#: the imported functions whose call sites the readers look at
_IMPORTED = frozenset({
    "PyImport_ImportModule", "PyCapsule_New", "PyDict_SetItemString", "PyDict_SetItem", "PyErr_Format",
    "PyErr_WarnFormat", "PyOS_snprintf", "PyMemoryView_FromMemory", "PyBytes_FromStringAndSize",
    "PyDict_GetItemString",
})
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _looks_like_signature(text: str) -> bool:
    return bool(text) and "\n" not in text and len(text) < 4096


def _str(image: _Image, value) -> str | None:
    if value and value[0] == "addr":
        return image.cstr(value[1])
    return None


def _function_of(image: _Image, address: int) -> int | None:
    starts = image.function_starts()
    i = bisect_right(starts, address) - 1
    return starts[i] if i >= 0 else None
