"""Cython C-API facts, read from compiled extension modules without running them.

A Cython module that declares ``cdef api`` functions (or anything in a
``.pxd``) exports them as capsules in its ``__pyx_capi__`` dict; a module
that ``cimport``s it imports each one by name and checks the capsule's
signature string at import time.  When the provider changes, the consumer
fails at ``import`` — the seed incident: cuda-python 12.6.1 turned
``cuda.ccudart`` into a shim without ``__pyx_capi__`` and RMM, cuDF, cuGraph
stopped importing (``AttributeError: module 'cuda.ccudart' has no attribute
'__pyx_capi__'``).

What the generated C code looks like (Cython 0.29 - 3.1)::

    mod = PyImport_ImportModule("cuda.ccudart");
    __Pyx_ImportFunction_3_0_11(mod, "cudaMemcpyAsync", &ptr, "cudaError_t (void *, ...)");
    tp = __Pyx_ImportType_3_0_11(mod, "cuda.ccudart", "Foo", sizeof(struct Foo), align, check_size);
    __Pyx_ExportFunction("cudaMalloc", (void (*)(void))f, "cudaError_t (void **, size_t)");

The strings are plain C strings; the pairs (name, signature), the providing
module and the expected struct size are only joined at the call sites.  We
find the calls to ``PyImport_ImportModule`` (through its PLT stub or GOT
slot), disassemble forward with capstone, track what each argument register
holds (a string address, an immediate, the imported module), and read every
call that receives the imported module as its first argument.  Exports are
the call sites of the helper that calls ``PyCapsule_New`` with a signature.

Cython 3.2 keeps the names and signatures of a module's imports and exports
in one bytes constant (``sig\\0sig\\0...\\0name\\0name...``), stored with all
the module's other string constants in one zlib-compressed blob; see
:mod:`cuaudit.facts._cython_blob`.

Only x86-64 ELF is read; anything else is a CU009 ``InputError``.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from cuaudit.facts import Extractor, InputError, MemberReader
from cuaudit.model import Member, MemberKind

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


@dataclass(frozen=True)
class CythonModule:
    """The C-API facts of one compiled Cython module."""

    module: str  # dotted import name, from the member path
    cython: str  # "3.0.11", "0.29.37", ... ("" when no ABI marker was found)
    #: False: an extension module that is not Cython (so it has no ``__pyx_capi__``)
    is_cython: bool = True
    exports: tuple[CExport, ...] = ()
    has_capi: bool = False  # the module creates a __pyx_capi__ dict
    imports: tuple[CImport, ...] = ()
    type_imports: tuple[TypeImport, ...] = ()
    types: tuple[TypeDef, ...] = ()
    #: things the static reader could not recover (each a sentence)
    unresolved: tuple[str, ...] = ()
    #: the module sets ``__pyx_capi__`` from Python code (``__pyx_capi__ = other.__pyx_capi__``,
    #: cuda-python 12.6.2.post1's ``cuda.ccudart``); these are the module names it may take it from
    reexport_candidates: tuple[str, ...] = ()
    #: signatures of exported variables whose names are Python objects the static
    #: reader does not resolve (Cython 3.1 ``__Pyx_ExportVoidPtr(PyObject *name, ...)``)
    unnamed_variable_exports: tuple[str, ...] = ()

    @property
    def cimported_modules(self) -> tuple[str, ...]:
        return tuple(sorted({i.module for i in self.imports} | {t.module for t in self.type_imports}))


CHECK_SIZE = {0: "error", 1: "warn", 2: "ignore"}

_EXT = re.compile(r"(\.cpython-[^./]*|\.abi3|\.cp\d+[^./]*)?\.so$")


def module_name_for(path: str) -> str:
    """``cuda/ccudart.cpython-311-x86_64-linux-gnu.so`` -> ``cuda.ccudart``."""
    p = path
    for prefix in ("site-packages/", "dist-packages/"):
        if prefix in p:
            p = p.split(prefix, 1)[1]
    return _EXT.sub("", p).replace("/", ".")


# -- a minimal x86-64 ELF image ---------------------------------------------------------


class _Image:
    """Sections, PLT/GOT of imported functions and string reads of one ELF file."""

    def __init__(self, data: bytes | memoryview, path: str) -> None:
        self.data = data
        self.path = path
        if len(data) < 64 or bytes(data[:4]) != b"\x7fELF":
            raise InputError("CU006", f"{path}: not an ELF file")
        if data[4] != 2 or data[5] != 1:
            raise InputError("CU009", f"{path}: 32-bit or big-endian ELF is not analysed for Cython C-API (x86-64 only)")
        machine = struct.unpack_from("<H", data, 18)[0]
        if machine != 62:
            raise InputError(
                "CU009",
                f"{path}: ELF machine {machine} is not analysed for Cython C-API imports (x86-64 only)",
                machine=machine,
            )
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        (phoff,) = struct.unpack_from("<Q", data, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
        if shoff + shnum * shentsize > len(data) or phoff + phnum * phentsize > len(data):
            raise InputError("CU005", f"{path}: section or program headers extend past the end of the file")
        raw = []
        for i in range(shnum):
            raw.append(struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize))
        self.sections: dict[str, tuple[int, int, int, int, int, int]] = {}  # name -> (type, addr, off, size, link, entsize)
        self._by_index = raw
        if shnum and shstrndx < shnum:
            strtab_off = raw[shstrndx][4]
            for sh in raw:
                name = self._cstr_at(strtab_off + sh[0])
                self.sections.setdefault(name, (sh[1], sh[3], sh[4], sh[5], sh[6], sh[9]))
        self.loads: list[tuple[int, int, int]] = []  # (vaddr, offset, filesz)
        for i in range(phnum):
            p_type, _flags, p_off, p_vaddr, _pa, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
            if p_type == 1:
                self.loads.append((p_vaddr, p_off, p_filesz))

    def _cstr_at(self, off: int, limit: int = 4096) -> str:
        end = self.data.find(b"\0", off, off + limit) if isinstance(self.data, (bytes, bytearray)) else bytes(self.data[off : off + limit]).find(b"\0") + off
        if end < 0:
            end = off + limit
        return bytes(self.data[off:end]).decode("utf-8", "replace")

    def offset(self, vaddr: int) -> int | None:
        for va, off, size in self.loads:
            if va <= vaddr < va + size:
                return off + vaddr - va
        return None

    def cstr(self, vaddr: int, limit: int = 8192) -> str | None:
        off = self.offset(vaddr)
        if off is None:
            return None
        end = self.data.find(b"\0", off, off + limit)
        if end < 0:
            return None
        try:
            return bytes(self.data[off:end]).decode("utf-8")
        except UnicodeDecodeError:
            return None

    def section(self, name: str) -> tuple[int, int, int] | None:
        """(addr, offset, size) of a section."""
        s = self.sections.get(name)
        return (s[1], s[2], s[3]) if s else None

    def section_bytes(self, name: str) -> tuple[int, bytes]:
        s = self.section(name)
        if not s or s[2] == 0:
            return 0, b""
        addr, off, size = s
        return addr, bytes(self.data[off : off + size])

    def in_section(self, vaddr: int, *names: str) -> bool:
        for n in names:
            s = self.section(n)
            if s and s[0] <= vaddr < s[0] + s[2]:
                return True
        return False

    def dynsym_names(self) -> list[str]:
        s = self.sections.get(".dynsym")
        if not s:
            return []
        _t, _addr, off, size, link, entsize = s
        strsec = self._by_index[link]
        str_off = strsec[4]
        out = []
        for i in range(size // (entsize or 24)):
            (st_name,) = struct.unpack_from("<I", self.data, off + i * 24)
            out.append(self._cstr_at(str_off + st_name, 512))
        return out

    def imported_functions(self, wanted: frozenset[str]) -> dict[str, tuple[set[int], set[int]]]:
        """name -> (PLT stub addresses, GOT slots) for the wanted dynamic symbols."""
        cached = self.__dict__.get("_imported")
        if cached is not None and cached[0] == wanted:
            return cached[1]
        self._imported = (wanted, self._imported_functions(wanted))
        return self._imported[1]

    def _imported_functions(self, wanted: frozenset[str]) -> dict[str, tuple[set[int], set[int]]]:
        names = self.dynsym_names()
        slots: dict[int, str] = {}
        for rel in (".rela.plt", ".rela.dyn"):
            s = self.sections.get(rel)
            if not s:
                continue
            _t, _addr, off, size, _link, _ent = s
            for r_offset, r_info, _add in struct.iter_unpack("<QQq", bytes(self.data[off : off + size - size % 24])):
                rtype, sym = r_info & 0xFFFFFFFF, r_info >> 32
                if rtype in (6, 7) and 0 < sym < len(names) and names[sym] in wanted:  # GLOB_DAT, JUMP_SLOT
                    slots[r_offset] = names[sym]
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
        if cached is not None:
            return cached
        self._relative = self._rela_relative()
        return self._relative

    def _rela_relative(self) -> dict[int, int]:
        s = self.sections.get(".rela.dyn")
        out: dict[int, int] = {}
        if not s:
            return out
        _t, _addr, off, size, _link, _ent = s
        for r_offset, r_info, addend in struct.iter_unpack("<QQq", bytes(self.data[off : off + size - size % 24])):
            if r_info & 0xFFFFFFFF == 8:
                out[r_offset] = addend
        return out

    def function_starts(self) -> list[int]:
        """Sorted function start addresses from .eh_frame_hdr's search table."""
        cached = self.__dict__.get("_starts")
        if cached is None:
            cached = self._starts = self._function_starts()
        return cached

    def _function_starts(self) -> list[int]:
        s = self.section(".eh_frame_hdr")
        if not s:
            return []
        addr, off, size = s
        hdr = bytes(self.data[off : off + size])
        if len(hdr) < 12 or hdr[0] != 1:
            return []
        eh_ptr_enc, count_enc, table_enc = hdr[1], hdr[2], hdr[3]
        if count_enc != 0x03 or table_enc != 0x3B:  # udata4 count, datarel sdata4 table
            return []
        (count,) = struct.unpack_from("<I", hdr, 8)
        starts = []
        for i in range(count):
            if 12 + 8 * i + 8 > len(hdr):
                break
            loc, _fde = struct.unpack_from("<ii", hdr, 12 + 8 * i)
            starts.append(addr + loc)
        starts.sort()
        return starts


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


def _reg(name: str) -> str | None:
    name = name.strip()
    name = _REG64.get(name, name)
    return name if name in _TRACKED else None


@dataclass
class CallSite:
    address: int
    target: int  # call rel32 target, or -slot for call [rip+slot]
    args: dict = field(default_factory=dict)  # register -> value


class _Tracker:
    """A linear pass over x86-64 code tracking what each register holds.

    Values: ("addr", vaddr) for a rip-relative ``lea``; ("imm", n); ("mem", vaddr)
    for a rip-relative load; ("ret", target) for a call's result; ("module", name)
    for the result of ``PyImport_ImportModule(name)``.
    """

    def __init__(self, image: _Image) -> None:
        import capstone

        self.cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
        self.cs.skipdata = True
        self.image = image
        taddr, toff, tsize = image.section(".text") or (0, 0, 0)
        self.text = (taddr, toff, tsize)
        self._starts: list[int] | None = None
        #: back-edge targets whose state should also be merged when reached by fall-through
        #: (loops rotated with their entry block placed after the function's hot path)
        self._loop_heads: set[int] = set()

    def code(self, start: int, end: int) -> bytes:
        taddr, toff, tsize = self.text
        start = max(start, taddr)
        end = min(end, taddr + tsize)
        return bytes(self.image.data[toff + start - taddr : toff + end - taddr])

    def aligned_start(self, address: int, back: int) -> int:
        """An address at most ``back`` bytes before ``address`` from which decoding lands on it."""
        import bisect

        taddr = self.text[0]
        if self._starts is None:
            self._starts = self.image.function_starts()
        i = bisect.bisect_right(self._starts, address) - 1
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
        for _ in range(3 if self._loop_heads else 1):
            seeds = {a: back[a] for a in back if a in arrivals or self._loop_heads}
            if not seeds:
                break
            back, arrivals = {}, set()
            out = self._run(start, end, on_call, regs, on_load, back, arrivals, seeds)
        return out

    def _run(self, start, end, on_call, regs, on_load, back, arrivals, seeds) -> dict:
        regs = dict(regs or {})
        blob = self.code(start, end)
        # Forward branches carry their state to their target; after an unconditional
        # jump the next instruction is reached only through such a branch (error
        # blocks sit between the import calls and load registers of their own).
        pending: dict[int, dict] = {}
        dead = False
        for address, size, mnem, ops in self.cs.disasm_lite(blob, start):
            nxt = address + size
            if address in pending:
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
            elif address in seeds:
                regs = {**regs, **seeds[address]}
            if mnem[0] == "j":
                if ops.startswith("0x"):
                    target = int(ops, 16)
                    if target > address:
                        prev = pending.get(target)
                        pending[target] = dict(regs) if prev is None else {k: v for k, v in prev.items() if regs.get(k) == v}
                    elif target >= start:
                        back.setdefault(target, dict(regs))
                if mnem == "jmp":
                    dead = True
                continue
            if mnem == "ret":
                dead = True
                continue
            if mnem == "call":
                target = None
                if ops.startswith("0x"):
                    target = int(ops, 16)
                else:
                    m = _RIP.search(ops)
                    if m:
                        disp = int(m.group(2), 16 if m.group(2).startswith("0x") else 10)
                        target = -(nxt + (disp if m.group(1) == "+" else -disp))
                result = on_call(CallSite(address, target if target is not None else 0, regs))
                for r in _CLOBBERED:
                    regs.pop(r, None)
                if result is not None:
                    regs["rax"] = result
                elif target is not None:
                    regs["rax"] = ("ret", target)
                continue
            if mnem in _NO_WRITE or mnem.startswith("j") or mnem.startswith("cmov") and False:
                continue
            dst, _, src = ops.partition(", ")
            rd = _reg(dst)
            if rd is None:
                # spills: a value kept in the frame (qword [rsp + off]) for later
                if mnem == "mov" and dst.startswith("qword ptr [rsp"):
                    m = _BASE_DISP.match(dst)
                    if m:
                        slot = f"[rsp+{int(m.group(2), 0) if m.group(2) else 0}]"
                        rs = _reg(src)
                        if rs is not None and rs in regs:
                            regs[slot] = regs[rs]
                        else:
                            regs.pop(slot, None)
                continue
            if mnem == "mov" and src.startswith("qword ptr [rsp"):
                m = _BASE_DISP.match(src)
                slot = f"[rsp+{int(m.group(2), 0) if m.group(2) else 0}]" if m else None
                if slot and slot in regs:
                    regs[rd] = regs[slot]
                else:
                    regs.pop(rd, None)
                continue
            if mnem == "lea":
                m = _RIP.search(src)
                if m:
                    disp = int(m.group(2), 16 if m.group(2).startswith("0x") else 10)
                    regs[rd] = ("addr", nxt + (disp if m.group(1) == "+" else -disp))
                else:
                    # lea r, [r2 + imm] over a loaded object: a pointer into it (Cython 3.2's
                    # PyBytes_AS_STRING(table) + offset)
                    m2 = _BASE_DISP.match(src)
                    base = regs.get(_reg(m2.group(1)) or "") if m2 else None
                    if base and base[0] in ("mem", "memoff"):
                        off = int(m2.group(2), 0) if m2.group(2) else 0
                        regs[rd] = ("memoff", base[1], (base[2] if base[0] == "memoff" else 0) + off)
                    else:
                        regs.pop(rd, None)
            elif mnem in ("mov", "movabs"):
                rs = _reg(src)
                if rs is not None:
                    if rs in regs:
                        regs[rd] = regs[rs]
                    else:
                        regs.pop(rd, None)
                elif src.startswith("0x") or src.isdigit() or src.startswith("-"):
                    try:
                        regs[rd] = ("imm", int(src, 0))
                    except ValueError:
                        regs.pop(rd, None)
                else:
                    m = _RIP.search(src)
                    if m and src.startswith("qword"):
                        disp = int(m.group(2), 16 if m.group(2).startswith("0x") else 10)
                        regs[rd] = ("mem", nxt + (disp if m.group(1) == "+" else -disp))
                        if on_load is not None:
                            on_load(regs[rd][1])
                    else:
                        regs.pop(rd, None)
            elif mnem == "xor" and _reg(src) == rd:
                regs[rd] = ("imm", 0)
            elif mnem == "add" and rd in regs and regs[rd][0] in ("mem", "memoff") and src.startswith("0x"):
                cur = regs[rd]
                regs[rd] = ("memoff", cur[1], (cur[2] if cur[0] == "memoff" else 0) + int(src, 16))
            else:
                regs.pop(rd, None)
        return regs


def _scan_calls(image: _Image, targets: set[int], slots: set[int]) -> dict[int, list[int]]:
    """target (or -slot) -> sites of ``call rel32`` / ``call [rip+slot]`` to the given ones, in .text."""
    taddr, toff, tsize = image.section(".text") or (0, 0, 0)
    text = image.__dict__.get("_text")
    if text is None:
        text = image.data[toff : toff + tsize]
        image._text = text = text if isinstance(text, bytes) else bytes(text)
    out: dict[int, list[int]] = {}
    unpack = struct.unpack_from
    find = text.find
    if targets:
        lo, hi = min(targets), max(targets)
        p = find(b"\xe8")
        limit = tsize - 5
        while 0 <= p <= limit:
            t = taddr + p + 5 + unpack("<i", text, p + 1)[0]
            if lo <= t <= hi and t in targets:
                out.setdefault(t, []).append(taddr + p)
            p = find(b"\xe8", p + 1)
    if slots:
        p = find(b"\xff\x15")
        while 0 <= p <= tsize - 6:
            slot = taddr + p + 6 + unpack("<i", text, p + 2)[0]
            if slot in slots:
                out.setdefault(-slot, []).append(taddr + p)
            p = find(b"\xff\x15", p + 1)
    return out


def _prime_calls(image: _Image, imported: dict) -> None:
    """One scan for the call sites of every imported function we look at."""
    targets = {t for stubs, _slots in imported.values() for t in stubs}
    slots = {s for _stubs, sl in imported.values() for s in sl}
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


# -- the extractor ------------------------------------------------------------------------

#: the imported functions whose call sites the reader looks at
_IMPORTED = frozenset({
    "PyImport_ImportModule", "PyCapsule_New", "PyDict_SetItemString", "PyDict_SetItem", "PyErr_Format",
    "PyErr_WarnFormat", "PyOS_snprintf", "PyMemoryView_FromMemory", "PyBytes_FromStringAndSize",
    "PyDict_GetItemString",
})
_ABI = re.compile(rb"_cython_(\d+)_(\d+)_(\d+)(?:([abr]|rc)(\d+))?\x00")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _looks_like_signature(text: str) -> bool:
    return bool(text) and "\n" not in text and len(text) < 4096


class CythonCapiExtractor(Extractor):
    """C-API exports, imports and extension types of a compiled Cython module."""

    name = "cython-capi"
    version = 2  # bump whenever the reader finds more or different facts (the cache is keyed on it)

    def applies(self, member: Member) -> bool:
        # Python extension modules only: a Cython module is never a versioned
        # shared library (libcublasLt.so.12), and reading those (hundreds of MB in
        # the torch and nvidia-* wheels) would cost the whole member for nothing.
        if member.kind is not MemberKind.ELF or not member.path.endswith(".so"):
            return False
        name = member.path.rsplit("/", 1)[-1]
        return ".cpython-" in name or ".abi3." in name or not name.startswith("lib")

    def extract(self, reader: MemberReader) -> CythonModule:
        data = reader.mmap()
        if data is None:
            data = reader.read()
        return read_module(data, reader.path)


def read_module(data: bytes, path: str) -> CythonModule:
    """The C-API facts of one extension module (``is_cython=False`` when it is not Cython)."""
    if not isinstance(data, bytes):
        data = bytes(data)
    if data[:4] != b"\x7fELF":
        raise InputError("CU006", f"{path}: not an ELF file")
    # Not Cython (no ABI marker, no capi name): nothing to say, and nothing to read further.
    abi = _ABI.search(data)
    has_capi_name = b"__pyx_capi__\x00" in data
    looks_cython = bool(abi) or has_capi_name or b"cython_runtime" in data or b"__pyx_" in data
    if len(data) > 20 and (data[4] != 2 or data[5] != 1 or struct.unpack_from("<H", data, 18)[0] != 62) and not looks_cython:
        # another machine, and not Cython either: nothing to say (CU009 is for Cython modules)
        return CythonModule(module=module_name_for(path), cython="", is_cython=False)
    image = _Image(data, path)
    cython = ""
    if abi:
        cython = ".".join(g.decode() for g in abi.groups()[:3])
        if abi.group(4):
            cython += abi.group(4).decode() + abi.group(5).decode()
    else:
        # No ABI marker (a module without extension types): a Cython 3.2+ module keeps
        # its names in a compressed blob.
        from cuaudit.facts import _cython_blob

        imported = image.imported_functions(_IMPORTED)
        _prime_calls(image, imported)
        located = _cython_blob.locate(image, _Tracker(image), imported)
        if located and (b"cython_runtime" in located[1] or b"__pyx_capi__" in located[1] or b"cython_runtime\x00" in data):
            cython = "3.2+"
        elif has_capi_name:
            pass  # Cython up to 3.1 without an ABI marker
        elif b"cython_runtime\x00" not in data and b"__pyx_" not in data:
            return CythonModule(module=module_name_for(path), cython="", is_cython=False)
        elif b"__pyx_capi__" in data:
            # the name inside an uncompressed 3.2+ string table: not read
            return CythonModule(module=module_name_for(path), cython="3.2+", has_capi=True,
                                unresolved=("uncompressed Cython 3.2+ string table: C-API not read",))
        else:
            return CythonModule(module=module_name_for(path), cython="")
    module = module_name_for(path)
    unresolved: list[str] = []
    unnamed: list[str] = []
    generation = (3, 2) if cython == "3.2+" else tuple(int(x) for x in cython.split(".")[:2]) if cython else (0, 0)
    imported = image.imported_functions(_IMPORTED)
    tracker = _Tracker(image)
    _prime_calls(image, imported)
    if generation >= (3, 2):
        from cuaudit.facts import _cython_blob

        exports, imports, type_imports, notes, has_capi, reexport = _cython_blob.read(image, tracker, imported, module)
        unresolved += notes
    else:
        reexport = ()
        imports, type_imports, notes = _read_imports(image, tracker, imported)
        unresolved += notes
        exports, has_capi, notes = _read_exports(image, tracker, imported, unnamed)
        unresolved += notes
    types = _read_typedefs(image, module)
    if generation < (3, 2):
        reexport = ()
    if not exports and has_capi_name and generation < (3, 2) and (
        not imports or _python_name_used(image, b"__pyx_capi__")
    ):
        # The name without any import of a C function (which is what passes it to
        # PyObject_GetAttrString in consumers): a Python-level __pyx_capi__.
        reexport = _reexport_candidates(image)
    return CythonModule(
        module=module,
        cython=cython,
        exports=tuple(sorted(set(exports))),
        has_capi=has_capi or bool(exports),
        imports=tuple(sorted(set(imports))),
        type_imports=tuple(sorted(set(type_imports))),
        types=tuple(sorted(set(types))),
        unresolved=tuple(unresolved),
        reexport_candidates=reexport,
        unnamed_variable_exports=tuple(sorted(unnamed)),
    )


_NAME_STR = re.compile(rb"(?<![\x21-\x7e])([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\x00")


def _python_name_used(image: _Image, name: bytes) -> bool:
    """Whether ``name`` is a Python-level identifier of the module (an entry of its string table).

    Consumers pass ``"__pyx_capi__"`` as a C string to ``PyObject_GetAttrString``
    (referenced from code only); a module that assigns ``__pyx_capi__`` in
    Python code has it in its string table, a relocated pointer in data.
    """
    _addr, ro = image.section_bytes(".rodata")
    ro_addr = _addr
    targets = set()
    start = 0
    while True:
        i = ro.find(name + b"\0", start)
        if i < 0:
            break
        targets.add(ro_addr + i)
        start = i + 1
    if not targets:
        return False
    return any(v in targets for v in image.rela_relative().values())


def _reexport_candidates(image: _Image) -> tuple[str, ...]:
    """Dotted names a module that assigns ``__pyx_capi__`` in Python code may take it from.

    ``from cuda.bindings import cyruntime; __pyx_capi__ = cyruntime.__pyx_capi__``
    leaves the strings ``cuda.bindings`` and ``cyruntime``: every dotted string,
    and every dotted string joined with every identifier (the rules keep those
    that are modules with a C-API).
    """
    _addr, ro = image.section_bytes(".rodata")
    dotted: set[str] = set()
    idents: set[str] = set()
    for m in _NAME_STR.finditer(ro):
        text = m.group(1).decode()
        if len(text) > 200 or text.startswith("__pyx"):
            continue
        (dotted if "." in text else idents).add(text)
    out = set(dotted)
    if len(dotted) * len(idents) < 200_000:
        out |= {f"{d}.{i}" for d in dotted for i in idents}
    return tuple(sorted(out))


def _str(image: _Image, value) -> str | None:
    if value and value[0] == "addr":
        return image.cstr(value[1])
    return None


def _read_imports(
    image: _Image, tracker: _Tracker, imported, loops: list | None = None
) -> tuple[list[CImport], list[TypeImport], list[str]]:
    """Imports of functions, variables and types: the calls that take a just-imported module."""
    stubs, slots = imported["PyImport_ImportModule"]
    sites = _call_sites(image, stubs, slots)
    imports: list[CImport] = []
    type_imports: list[TypeImport] = []
    notes: list[str] = []
    if not sites:
        return imports, type_imports, notes
    targets = stubs | {-s for s in slots}
    fmt_stubs, fmt_slots = imported["PyErr_Format"]
    warn_stubs, warn_slots = imported["PyErr_WarnFormat"]
    snp_stubs, snp_slots = imported["PyOS_snprintf"]
    formats = fmt_stubs | {-s for s in fmt_slots}
    # Cython 3.1 warns with PyErr_WarnFormat(NULL, 0, fmt, ...); 0.29/3.0 format the
    # warning with PyOS_snprintf(buf, 200, fmt, ...) first: same argument registers.
    warns = warn_stubs | {-s for s in warn_slots} | snp_stubs | {-s for s in snp_slots}
    lk_stubs, lk_slots = imported.get("PyDict_GetItemString", (set(), set()))
    lookups = lk_stubs | {-s for s in lk_slots}
    current: list[str | None] = [None]
    # Helpers inlined into the module init leave no call taking the module; their
    # error messages still name everything: (module, name, signature) or
    # (module, class, expected size).
    inlined_sigs: dict[tuple[str, str], tuple[str, str]] = {}
    inlined_names: dict[tuple[str, str], str] = {}
    inlined_types: dict[tuple[str, str], list] = {}

    def on_error(site: CallSite, warn: bool) -> None:
        a = site.args
        fmt = _str(image, a.get("rdx" if warn else "rsi")) or ""
        if "size changed" in fmt:
            mod, cls, size = (a.get(r) for r in (("rcx", "r8", "r9") if warn else ("rdx", "rcx", "r8")))
            mod_s, cls_s = _str(image, mod), _str(image, cls)
            if mod_s and cls_s and size and size[0] == "imm":
                entry = inlined_types.setdefault((mod_s, cls_s), [size[1], []])
                entry[1].append("warn" if warn else "error")
        elif current[0] and ("does not export expected C" in fmt or "has wrong signature" in fmt):
            name = _str(image, a.get("rcx"))
            if not name or not _IDENT.match(name):
                return
            kind = "variable" if "C variable" in fmt else "function"
            inlined_names[(current[0], name)] = kind
            if "has wrong signature" in fmt:
                sig = _str(image, a.get("r8"))
                if sig is not None:
                    inlined_sigs[(current[0], name)] = (sig, kind)

    def on_call(site: CallSite):
        if site.target in targets:
            name = _str(image, site.args.get("rdi"))
            current[0] = name
            if name is None:
                notes.append(f"module name of the import at {site.address:#x} not recovered")
                return ("module", None)
            return ("module", name)
        if site.target in formats or site.target in warns:
            on_error(site, site.target in warns)
            return None
        mod = site.args.get("rdi")
        rsi, rdx, rcx = (site.args.get(r) for r in ("rsi", "rdx", "rcx"))
        if (loops is not None and site.target in lookups and rsi and rsi[0] == "memoff" and current[0]):
            # Cython 3.2+ with the import helper inlined in the loop:
            # PyDict_GetItemString(capi, names + i) with the signatures pointer in another register
            sigs = [v[2] for v in site.args.values() if v[0] == "memoff" and v[1] == rsi[1] and v[2] < rsi[2]]
            if sigs:
                loops.append((current[0], rsi[1], rsi[2] - max(sigs) - 1, None))
            return None
        if loops is not None and rsi and rcx and rsi[0] == "memoff" and rcx[0] == "memoff" and rsi[1] == rcx[1]:
            # Cython 3.2: helper(target, names, ptr, signatures) over one bytes constant
            what = _str(image, site.args.get("r8"))
            owner = mod[1] if mod and mod[0] == "module" else None
            loops.append((owner, rsi[1], rsi[2] - rcx[2] - 1, what))
            return None
        if not mod or mod[0] != "module" or mod[1] is None:
            return None
        a_str = _str(image, rsi)
        if a_str is None:
            return None
        c_str = _str(image, rcx)
        if c_str is not None and _IDENT.match(a_str) and _looks_like_signature(c_str):
            what = _str(image, site.args.get("r8"))
            kind = "variable" if what == "pointer" else "function"
            if what is None and "(" not in c_str:
                kind = "variable"
            imports.append(CImport(mod[1], a_str, c_str, kind))
            return None
        if c_str is None and _IDENT.match(a_str) and site.target > 0 and not (rcx and rcx[0] == "imm"):
            # the helper specialised for one signature (ImportVoidPtr.constprop): its
            # own error message holds the signature
            found = helper_signature(site.target)
            if found is not None:
                imports.append(CImport(mod[1], a_str, found[0], found[1]))
                return None
        b_str = _str(image, rdx)
        if b_str is not None and rcx and rcx[0] == "imm":
            r9 = site.args.get("r9")
            check = CHECK_SIZE.get(r9[1], "") if r9 and r9[0] == "imm" else ""
            if not check and site.target > 0:
                check = helper_check_size(site.target)
            type_imports.append(TypeImport(a_str, b_str, rcx[1], check))
        return None

    helper_checks: dict[int, str] = {}
    helper_sigs: dict[int, tuple[str, str] | None] = {}

    def helper_signature(target: int) -> tuple[str, str] | None:
        if target in helper_sigs:
            return helper_sigs[target]
        end = next((x for x in image.function_starts() if x > target), target + 2048)
        found: list[tuple[str, str]] = []

        def look(site: CallSite):
            if site.target in formats:
                fmt = _str(image, site.args.get("rsi")) or ""
                if "has wrong signature" in fmt:
                    sig = _str(image, site.args.get("r8"))
                    if sig is not None:
                        found.append((sig, "variable" if "C variable" in fmt else "function"))
            return None

        tracker.run(target, min(end, target + 4096), look)
        helper_sigs[target] = found[0] if len(set(found)) == 1 else None
        return helper_sigs[target]


    def helper_check_size(target: int) -> str:
        """check_size of a type-import helper GCC specialised for one constant (constprop clone)."""
        if target in helper_checks:
            return helper_checks[target]
        import bisect

        starts = image.function_starts()
        i = bisect.bisect_right(starts, target)
        end = starts[i] if i < len(starts) else target + 2048
        seen: list[str] = []

        def look(site: CallSite):
            if site.target in formats or site.target in warns:
                warn = site.target in warns
                fmt = _str(image, site.args.get("rdx" if warn else "rsi")) or ""
                if "size changed" in fmt:
                    seen.append("warn" if warn else "error")
            return None

        tracker.run(target, min(end, target + 8192), look)
        check = "warn" if "warn" in seen else "error" if seen.count("error") >= 2 else "ignore" if seen else ""
        helper_checks[target] = check
        return check

    _scan_runs(tracker, sites, on_call)
    known = {(i.module, i.name) for i in imports}
    for (mod, name), (sig, kind) in inlined_sigs.items():
        if (mod, name) not in known:
            imports.append(CImport(mod, name, sig, kind))
    for (mod, name) in inlined_names:
        if (mod, name) not in known and (mod, name) not in inlined_sigs:
            notes.append(f"signature of {mod}.{name} not recovered")
    known_types = {(t.module, t.name) for t in type_imports}
    for (mod, cls), (size, checks) in inlined_types.items():
        if (mod, cls) not in known_types:
            # One error format: the "smaller" check every import has; a second one
            # is check_size='error', a warning is 'warn', neither is 'ignore'.
            check = "warn" if "warn" in checks else "error" if checks.count("error") >= 2 else "ignore"
            type_imports.append(TypeImport(mod, cls, size, check))
    return imports, type_imports, notes


def _python_names(image: _Image) -> dict[int, str]:
    """Address of a module's ``PyObject *`` string constant -> its text (Cython 0.29/3.0).

    Their ``__pyx_string_tab`` entries are ``{&__pyx_n_s_name, __pyx_k_name, sizeof, ...}``:
    two relocated pointers side by side.
    """
    cached = getattr(image, "_pynames", None)
    if cached is not None:
        return cached
    relocs = image.rela_relative()
    out: dict[int, str] = {}
    for where, value in relocs.items():
        s_ptr = relocs.get(where + 8)
        if s_ptr is None or image.in_section(value, ".rodata") or not image.in_section(s_ptr, ".rodata"):
            continue
        text = image.cstr(s_ptr, 512)
        if text and _IDENT.match(text):
            out.setdefault(value, text)
    image._pynames = out
    return out


def _export_helpers(image: _Image, tracker: _Tracker, sites: list[int]) -> tuple[set[int], list[int]]:
    """Functions that call ``PyCapsule_New`` with a signature they were given, and inlined calls."""
    import bisect

    starts = image.function_starts()
    helpers: set[int] = set()
    inline_sites: list[int] = []
    for s in sites:
        regs: dict = {}

        def grab(site: CallSite, regs=regs, s=s):
            if site.address == s:
                regs.update(site.args)
            return None

        tracker.run(tracker.aligned_start(s, 48), s + 6, grab)
        if _str(image, regs.get("rsi")) is not None:
            inline_sites.append(s)
        elif starts:
            i = bisect.bisect_right(starts, s) - 1
            if i >= 0:
                helpers.add(starts[i])
    return helpers, inline_sites


def _read_exports(image: _Image, tracker: _Tracker, imported, unnamed: list[str]) -> tuple[list[CExport], bool, list[str]]:
    """``__Pyx_ExportFunction(name, f, sig)`` / ``__Pyx_ExportVoidPtr(name, p, sig)`` call sites."""
    stubs, slots = imported["PyCapsule_New"]
    sites = _call_sites(image, stubs, slots)
    exports: list[CExport] = []
    notes: list[str] = []
    if not sites:
        return exports, False, notes
    has_capi = b"__pyx_capi__\x00" in image.data
    helpers, inline_sites = _export_helpers(image, tracker, sites)
    constprop: dict[int, str] = {}
    # Exports through a helper: every call to it passes (name, pointer, signature).
    # One linear pass over the block of calls: a signature used twice is often
    # kept in a callee-saved register loaded long before.
    def on_export(site: CallSite):
        if site.target not in helpers:
            return None
        regs = site.args
        name, sig = _str(image, regs.get("rdi")), _str(image, regs.get("rdx"))
        if name is None and regs.get("rdi") and regs["rdi"][0] == "mem":
            # the name as a Python string object (variables, Cython 0.29/3.0)
            name = _python_names(image).get(regs["rdi"][1])
        if name is None or sig is None or not _IDENT.match(name):
            if sig is not None:
                ptr = regs.get("rsi")
                if ptr and ptr[0] == "addr" and not image.in_section(ptr[1], ".text"):
                    unnamed.append(sig)
                else:
                    notes.append(f"export at {site.address:#x}: name not recovered")
            elif name is not None:
                notes.append(f"export at {site.address:#x}: signature not recovered")
            return None
        ptr = regs.get("rsi")
        kind = "function"
        if ptr and ptr[0] == "addr" and not image.in_section(ptr[1], ".text"):
            kind = "variable"
        exports.append(CExport(name, sig, kind))
        return None

    _scan_runs(tracker, _call_sites(image, helpers, set()), on_export, back=1024)
    # Exports with the helper inlined: PyCapsule_New(f, sig, 0) then PyDict_SetItemString(d, name, cobj).
    if inline_sites:
        set_stubs, set_slots = imported["PyDict_SetItemString"]
        set_targets = set_stubs | {-s for s in set_slots}
        obj_stubs, obj_slots = imported["PyDict_SetItem"]
        set_targets |= obj_stubs | {-s for s in obj_slots}
        for s in inline_sites:
            pending: dict = {}

            def walk(site: CallSite, pending=pending, s=s):
                if site.address == s:
                    pending["sig"] = _str(image, site.args.get("rsi"))
                    pending["ptr"] = site.args.get("rdi")
                elif "sig" in pending and site.target in set_targets and "name" not in pending:
                    key = site.args.get("rsi")
                    pending["name"] = _str(image, key)
                    if pending["name"] is None and key and key[0] == "mem":
                        pending["name"] = _python_names(image).get(key[1])
                return None

            tracker.run(tracker.aligned_start(s, 512), s + 96, walk)
            ptr = pending.get("ptr")
            kind = "variable" if ptr and ptr[0] == "addr" and not image.in_section(ptr[1], ".text") else "function"
            if pending.get("sig") and pending.get("name") and _IDENT.match(pending["name"]):
                exports.append(CExport(pending["name"], pending["sig"], kind))
            elif pending.get("sig") and ptr and ptr[0] == "addr":
                if kind == "variable":
                    unnamed.append(pending["sig"])
            elif pending.get("sig"):
                # GCC specialised the helper for one signature (ExportVoidPtr.constprop):
                # the callers pass (name, pointer)
                start = _function_of(image, s)
                if start is not None:
                    constprop[start] = pending["sig"]
    if constprop:
        def on_constprop(site: CallSite):
            sig = constprop.get(site.target)
            if sig is None:
                return None
            key, ptr = site.args.get("rdi"), site.args.get("rsi")
            name = _str(image, key)
            if name is None and key and key[0] == "mem":
                name = _python_names(image).get(key[1])
            kind = "variable" if ptr and ptr[0] == "addr" and not image.in_section(ptr[1], ".text") else "function"
            if name and _IDENT.match(name):
                exports.append(CExport(name, sig, kind))
            elif kind == "variable":
                unnamed.append(sig)
            return None

        _scan_runs(tracker, _call_sites(image, set(constprop), set()), on_constprop, back=512)
    return exports, has_capi, notes


def _function_of(image: _Image, address: int) -> int | None:
    import bisect

    starts = image.function_starts()
    i = bisect.bisect_right(starts, address) - 1
    return starts[i] if i >= 0 else None


def _read_typedefs(image: _Image, module: str) -> list[TypeDef]:
    """Static ``PyTypeObject``s of the module: ``tp_name`` (a relocated pointer) then ``tp_basicsize``."""
    out: list[TypeDef] = []
    prefix = module + "."
    for where, value in image.rela_relative().items():
        if not image.in_section(where, ".data", ".data.rel.ro", ".data.rel"):
            continue
        name = image.cstr(value, 512)
        if not name or not name.startswith(prefix) or not _IDENT.match(name[len(prefix) :]):
            continue
        off = image.offset(where + 8)
        if off is None:
            continue
        # A PyTypeObject: tp_name at +24, tp_basicsize at +32, tp_itemsize at +40.
        size, itemsize = struct.unpack_from("<qq", image.data, off)
        if 16 <= size < 1 << 20 and 0 <= itemsize < 1 << 16:
            out.append(TypeDef(name, size))
    return out
