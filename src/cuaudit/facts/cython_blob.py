"""Cython 3.2+: names and signatures of C-API imports and exports inside the compressed string table.

Cython 3.2 no longer passes C string literals to its import/export helpers.
Per cimported module (and once for the module's own exports) it emits one
bytes constant ``sig\\0sig\\0...\\0name\\0name...`` (the pairs sorted by
signature; a signature equal to the previous one is left empty) and loops
over it.  All the module's string constants are concatenated, compressed
with zlib (3.3: its own LZSS, not read yet) and stored as one blob, with a
separate array of their lengths::

    const struct { const unsigned int length: 9; } index[] = {{12},{7},...};
    const char* const cstring = "x\\332...";   /* zlib */

The concatenation has no separators, so a constant's edges are ambiguous in
the blob alone.  We resolve them exactly with the length array, found in
``.rodata`` as the run of 32-bit values whose sum is the blob's inflated
size.  Which constant belongs to which cimported module is decided from the
code: after ``PyImport_ImportModule("m")`` the helper loop loads the
constant from the module state's string table (``mov reg, [rip+X]``), slot
``X = base + 8*k`` for the constant's position ``k``; one ``base`` explains
every import site.

Type imports and any name still passed as a plain string are read by
:mod:`cuaudit.facts.cython_tables`; the code is read through
:mod:`cuaudit.facts.cython_code`.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections import Counter

from cuaudit.facts.cython_code import CallSite, CExport, CImport, _call_sites, _IDENT, _Image, _scan_runs
from cuaudit.facts.cython_tables import _export_helpers, _read_imports

_ACC = {"al": 8, "ax": 16, "eax": 32}
_STACK = re.compile(r"^(byte|word|dword) ptr \[rsp(?: \+ (0x[0-9a-f]+|\d+))?\], (al|ax|eax|0x[0-9a-f]+|\d+)$")


def inflate(image: _Image) -> tuple[int, bytes] | None:
    """(address, inflated bytes) of the zlib blob of string constants in .rodata, the largest found."""
    addr, ro = image.section_bytes(".rodata")
    best: tuple[int, bytes] | None = None
    p = ro.find(b"\x78\xda")
    while p >= 0:
        d = zlib.decompressobj()
        try:
            out = d.decompress(ro[p : p + 64])
            if not d.eof:
                out += d.decompress(ro[p + 64 :])
            if d.eof and (best is None or len(out) > len(best[1])):
                best = (addr + p, out)
        except zlib.error:
            pass
        p = ro.find(b"\x78\xda", p + 1)
    return best


def split_strings(image: _Image, blob: bytes) -> list[bytes] | None:
    """The string constants, cut at the lengths of the index array (None when it is not found).

    The index is the longest run of 32-bit values in .rodata (the first such run if several)
    that adds up to the blob's size.  No value of such a run is larger than the size: only the
    stretches of such values are added up (.rodata is mostly text and larger numbers).
    """
    _addr, ro = image.section_bytes(".rodata")
    n = len(ro) // 4
    if n == 0:
        return None
    total = len(blob)
    values = struct.unpack_from(f"<{n}I", ro)
    small = bytes(map(total.__ge__, values))  # 1 where a value is not larger than the size
    best: tuple[int, int] | None = None
    for stretch in _STRETCH.finditer(small):
        start, stop = stretch.span()
        # first_at: the first index at which the sum from the stretch's start takes each value
        first_at: dict[int, int] = {0: start}
        acc = 0
        for i in range(start, stop):
            acc += values[i]
            j = first_at.get(acc - total)
            if j is not None and i + 1 - j >= 2 and (best is None or (i + 1 - j) > best[1] - best[0]):
                best = (j, i + 1)
            first_at.setdefault(acc, i + 1)
    if best is None:
        return None
    out, pos = [], 0
    for length in values[best[0] : best[1]]:
        out.append(blob[pos : pos + length])
        pos += length
    return out


#: two or more values in a row not larger than the blob's size (see split_strings)
_STRETCH = re.compile(rb"\x01{2,}")


def lzss_decompress(src: bytes, size: int) -> bytes | None:
    """Cython 3.3's LZSS (``__pyx_lzss_decompress``); None when ``src`` is not such a stream."""
    out = bytearray()
    pos = 0
    try:
        while True:
            flags = src[pos] | 0xFF00
            pos += 1
            while flags & 0x100:
                if flags & 1:
                    out.append(src[pos])
                    pos += 1
                else:
                    lo, hi = src[pos], src[pos + 1]
                    pos += 2
                    if not lo & 0x80:
                        back, length = lo, hi
                    elif not hi & 0x80:
                        back, length = 0x80 + (((hi << 2) & 0x180) | (lo & 0x7F)), hi & 0x1F
                    else:
                        back, length = 0x80 + ((hi & 0x7F) << 7 | (lo & 0x7F)), src[pos]
                        pos += 1
                    length += 3
                    ref = len(out) - back - length
                    if ref < 0:
                        return None
                    out += out[ref : ref + length]  # ends `back` bytes before the end: copied whole
                if len(out) >= size:
                    return bytes(out[:size]) if len(out) == size else None
                flags >>= 1
    except IndexError:
        return None


def locate(image: _Image, tracker, imported) -> tuple[int | None, bytes] | None:
    """(call site that uses it, inflated bytes) of the module's string constants.

    zlib (3.2 default): the stream in .rodata, passed to PyMemoryView_FromMemory.
    LZSS (3.3 default): ``PyBytes_FromStringAndSize(NULL, size)`` for the output,
    then the compressed ``cstring`` is the next .rodata address the code loads.
    Found once per image (a module without an ABI marker is recognised by it, then read).
    """
    if "_located" not in image.__dict__:
        image._located = _locate(image, tracker, imported)
    return image._located


def _locate(image: _Image, tracker, imported) -> tuple[int | None, bytes] | None:
    users: dict[str, list[int]] = {}
    for name in ("PyMemoryView_FromMemory", "PyBytes_FromStringAndSize"):
        stubs, slots = imported.get(name, (set(), set()))
        users[name] = _call_sites(image, stubs, slots)
    found = inflate(image)
    if found is not None:
        for site in users["PyMemoryView_FromMemory"]:
            if _args_at(tracker, site).get("rdi") == ("addr", found[0]):
                return site, found[1]
        return None, found[1]
    rodata = image.section(".rodata")
    if not rodata:
        return None
    for site in users["PyBytes_FromStringAndSize"]:
        args = _args_at(tracker, site)
        if args.get("rdi") != ("imm", 0) or not args.get("rsi") or args["rsi"][0] != "imm" or args["rsi"][1] < 16:
            continue
        size = args["rsi"][1]
        for _a, _n, mnem, ops in tracker.cs.disasm_lite(tracker.code(site, site + 160), site):
            if mnem == "lea" and "[rip" in ops:
                m = _RIP_DISP.search(ops)
                target = _a + _n + int(m.group(1), 0) if m and m.group(0)[0] != "-" else None
                if target is None or not rodata[0] <= target < rodata[0] + rodata[2]:
                    continue
                off = image.offset(target)
                data = lzss_decompress(bytes(image.data[off : off + 2 * size + 64]), size)
                if data is not None:
                    return site, data
    return None


_RIP_DISP = re.compile(r"rip \+ (0x[0-9a-f]+|\d+)")


def _args_at(tracker, site: int) -> dict:
    regs: dict = {}

    def grab(cs: CallSite):
        if cs.address == site:
            regs.update(cs.args)
        return None

    tracker.run(tracker.aligned_start(site, 2048), site + 6, grab)
    return regs


def index_from_code(image: _Image, tracker, site: int, total: int, imported=None) -> list[int] | None:
    """The length index when GCC built it on the stack, field by field.

    ``const struct { unsigned int length: 6; } index[] = {{1},{20},...}`` becomes
    ``mov al,[rsp+X]; and eax,0xffffffc0; or eax,0x14; mov [rsp+X],al`` per entry
    (the struct is 4 bytes); we replay those writes up to where the blob is used.
    Cython 3.3 has two arrays (text strings, then bytes): two runs adding up to the total.
    """
    import bisect

    starts = image.function_starts()
    i = bisect.bisect_right(starts, site) - 1
    if i < 0:
        return None
    begin = starts[i]
    values: dict[int, int] = {}
    mask, cur = 0xFFFFFFFF, 0
    # a short loop GCC unrolled passes the lengths as immediates: PyBytes_FromStringAndSize(p, 752)
    makers = set()
    for name in ("PyBytes_FromStringAndSize", "PyUnicode_DecodeUTF8"):
        makers |= (imported or {}).get(name, (set(), set()))[0]
    unrolled: list[int] = []
    esi = None
    for _a, _size, mnem, ops in tracker.cs.disasm_lite(tracker.code(begin, site + 4096), begin):
        if mnem == "mov" and ops.startswith("esi, "):
            try:
                esi = int(ops[5:], 0)
            except ValueError:
                esi = None
        elif mnem == "call":
            if _a > site and ops.startswith("0x") and int(ops, 16) in makers and esi is not None:
                unrolled.append(esi)
            esi = None
        if mnem in ("and", "or"):
            dst, _, imm = ops.partition(", ")
            width = _ACC.get(dst)
            if width:
                try:
                    value = int(imm, 0) & ((1 << width) - 1)
                except ValueError:
                    continue
                if mnem == "and":
                    mask, cur = ~value & ((1 << width) - 1), 0
                else:
                    cur |= value
        elif mnem == "mov":
            m = _STACK.match(ops)
            if m:
                off = int(m.group(2), 0) if m.group(2) else 0
                src = m.group(3)
                values[off] = cur & mask if src in ("al", "ax", "eax") else int(src, 0)
    # maximal runs of 4-byte slots
    runs: list[list[int]] = []
    for off in sorted(values):
        if runs and off == runs[-1][-1] + 4:
            runs[-1].append(off)
        elif not runs or off > runs[-1][-1]:
            runs.append([off])
    sums = [sum(values[o] for o in r) for r in runs]
    for r in runs:  # one array (3.2), or a sub-run of a longer one
        for j in range(len(r)):
            acc = 0
            for k in range(j, len(r)):
                acc += values[r[k]]
                if acc == total and k > j:
                    return [values[o] for o in r[j : k + 1]]
                if acc > total:
                    break
    for a in range(len(runs)):  # two arrays (3.3): text strings then bytes
        for b in range(len(runs)):
            if a != b and sums[a] + sums[b] == total:
                return [values[o] for o in runs[a]] + [values[o] for o in runs[b]]
        # text strings from an array, the few bytes strings unrolled
        for k in range(len(unrolled)):
            if sums[a] + sum(unrolled[k:]) == total:
                return [values[o] for o in runs[a]] + unrolled[k:]
    return None


def parse_table(text: bytes) -> list[tuple[str, str]] | None:
    """(name, signature) pairs of one import/export constant, or None if it is not one."""
    if b"\0" not in text:
        return None
    parts = text.split(b"\0")
    if len(parts) % 2:
        return None
    half = len(parts) // 2
    try:
        sigs = [p.decode("utf-8") for p in parts[:half]]
        names = [p.decode("utf-8") for p in parts[half:]]
    except UnicodeDecodeError:
        return None
    if not sigs[0] or not all(_IDENT.match(n) for n in names):
        return None
    out, last = [], ""
    for sig, name in zip(sigs, names):
        last = sig or last
        out.append((name, last))
    return out


_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")


def read(image: _Image, tracker, imported, module: str):
    """(exports, imports, type_imports, notes, has_capi, re-export candidates) of a Cython 3.2 module."""
    notes: list[str] = []
    loops: list[tuple] = []  # (module or None, slot address, signature-part length, "function"/"pointer")
    plain_imports, type_imports, more = _read_imports(image, tracker, imported, loops)
    notes += [n for n in more if not n.startswith("signature of")]
    # The export loop: calls of the helper that calls PyCapsule_New.
    stubs, slots = imported["PyCapsule_New"]
    capsule_sites = _call_sites(image, stubs, slots)
    helpers, _inline = _export_helpers(image, tracker, capsule_sites)
    capsule_targets = stubs | {-s for s in slots}

    def on_capsule(site: CallSite):
        # the export helper inlined: PyCapsule_New(f, signatures + i, 0) with the names
        # pointer (same constant, further on) in another register
        rsi = site.args.get("rsi")
        if site.target in capsule_targets and rsi and rsi[0] == "memoff":
            further = [v[2] for v in site.args.values() if v[0] == "memoff" and v[1] == rsi[1] and v[2] > rsi[2]]
            if further:
                loops.append((None, rsi[1], min(further) - rsi[2] - 1, "export"))
        return None

    tracker._loop_heads = {-1}  # any back-edge target: see _Tracker.run
    _scan_runs(tracker, capsule_sites, on_capsule, tail=4096, back=4096)
    tracker._loop_heads = set()
    if helpers:
        def on_export(site: CallSite):
            rsi, rcx = site.args.get("rsi"), site.args.get("rcx")
            if site.target in helpers and rsi and rcx and rsi[0] == "memoff" and rcx[0] == "memoff" and rsi[1] == rcx[1]:
                loops.append((None, rsi[1], rsi[2] - rcx[2] - 1, "export"))
            return None

        _scan_runs(tracker, _call_sites(image, helpers, set()), on_export, back=1024)
    located = locate(image, tracker, imported)
    if located is None:
        notes.append("Cython 3.2+ string table not found (uncompressed, bz2 or zstd tables are not read)")
        return [], plain_imports, type_imports, notes, False, ()
    site, blob = located
    found = (site, blob)
    strings = split_strings(image, blob)
    if strings is None and site is not None:
        lengths = index_from_code(image, tracker, site, len(blob), imported)
        if lengths is not None:
            strings, pos = [], 0
            for n in lengths:
                strings.append(found[1][pos : pos + n])
                pos += n
    if strings is None and b"\0" not in found[1]:
        # no table in the blob (they are NUL-separated): nothing was missed
        return [], plain_imports, type_imports, notes, b"__pyx_capi__" in found[1], ()
    if strings is None:
        notes.append("the length index of the Cython 3.2 string blob was not found")
        return [], plain_imports, type_imports, notes, False, ()
    has_capi = b"__pyx_capi__" in strings
    tables = {k: t for k, s in enumerate(strings) if (t := parse_table(s))}
    sig_len = {k: len(strings[k].split(b"\0")[: len(t)]) and len(b"\0".join(strings[k].split(b"\0")[: len(t)]))
               for k, t in tables.items()}
    # One base address of the string table explains every loop's constant.
    votes: Counter[int] = Counter()
    for _owner, x, length, _what in loops:
        votes.update({x - 8 * k for k in tables if sig_len[k] == length})
    imports: list[CImport] = list(plain_imports)
    exports: list[CExport] = []
    if votes:
        base, _score = votes.most_common(1)[0]
        for owner, x, length, what in loops:
            k, r = divmod(x - base, 8)
            if r or k not in tables or sig_len[k] != length:
                notes.append(f"a C-API table at {x:#x} was not found in the string blob")
                continue
            for name, sig in tables[k]:
                if owner is None and what == "export":
                    kind = "function" if "(" in sig else "variable"
                    exports.append(CExport(name, sig, kind))
                elif owner is not None:
                    kind = "variable" if what == "pointer" else "function" if what == "function" or "(" in sig else "variable"
                    imports.append(CImport(owner, name, sig, kind))
    elif tables:
        notes.append(f"{len(tables)} C-API tables in the string blob, but no helper loop found in the code")
    reexport: tuple[str, ...] = ()
    if has_capi and not exports and not any(i.kind for i in imports):
        reexport = reexport_candidates(strings)
    return exports, imports, type_imports, notes, has_capi, reexport


def reexport_candidates(strings: list[bytes]) -> tuple[str, ...]:
    dotted, idents = set(), set()
    for s in strings:
        try:
            t = s.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if len(t) > 200 or t.startswith("__pyx"):
            continue
        if _DOTTED.match(t):
            dotted.add(t)
        elif _IDENT.match(t):
            idents.add(t)
    out = set(dotted)
    if len(dotted) * len(idents) < 200_000:
        out |= {f"{d}.{i}" for d in dotted for i in idents}
    return tuple(sorted(out))
