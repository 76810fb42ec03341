"""The register tracker of the Cython C-API readers (facts/cython_code.py): ranges decoded once.

The readers pass over overlapping ranges of a module's code (import sites,
capsule sites, helpers); an instruction already decoded by an earlier range is
reused, and each instruction's operand text is worked out once.  What a pass
sees must be exactly what a fresh linear sweep of the range gives.
"""

from __future__ import annotations

from pathlib import Path

from cuaudit.facts import cython_code
from cuaudit.facts.cython import read_module
from cuaudit.facts.cython_code import _Image, _op, _Tracker
from cuaudit.formats.elf import image_of_bytes
from tests.conftest import compile_so

SOURCE = """
#include <string.h>
static volatile int sink;
int step(int x) { for (int i = 0; i < x; i++) sink += i * x; return sink; }
const char *pick(int i) { return i ? "first" : "second"; }
int many(int a, int b, int c) {
    int t = 0;
    for (int i = 0; i < a; i++) { if (i & 1) t += step(b); else t -= (int)strlen(pick(c)); }
    return t;
}
"""


def _tracker(tmp_path: Path) -> _Tracker:
    so = compile_so(tmp_path, "libtrack.so", SOURCE, flags=["-O1"])
    return _Tracker(_Image(image_of_bytes(so.read_bytes(), "libtrack.so")))


def _sweep(tracker: _Tracker, start: int, end: int) -> list:
    return [(a, a + n, _op(m, o, a + n)) for a, n, m, o in tracker.cs.disasm_lite(tracker.code(start, end), start)]


def test_overlapping_ranges_decode_as_fresh_sweeps(tmp_path: Path) -> None:
    tracker = _tracker(tmp_path)
    taddr, _off, size = tracker.text
    assert size > 64
    starts = [s for s in tracker.image.function_starts() if taddr <= s < taddr + size] or [taddr]
    # short ranges (ending mid-instruction: a truncated instruction is a skipped byte in that range
    # only), then the whole text over them, then the short ones again over the whole
    short = [(s, min(s + n, taddr + size)) for s in starts for n in (7, 40)] + [(s + 1, s + 23) for s in starts]
    ranges = short + [(taddr, taddr + size)] + [(s, taddr + size) for s in starts] + short
    fresh = _Tracker(tracker.image)
    decoded: list[int] = []  # bytes decoded fresh for each range
    sweep = tracker._fresh

    def counted(s: int, e: int):
        decoded[-1] += e - s
        return sweep(s, e)

    tracker._fresh = counted  # type: ignore[method-assign]
    for start, end in ranges:
        decoded.append(0)
        assert tracker._decode(start, end) == _sweep(fresh, start, end), (hex(start), hex(end))
    # after the whole text, ranges ending where it ended were taken from it; the short ones decoded
    # at most their cut-off last instruction (15 bytes, x86's longest) or a range off the boundaries
    # up to where it meets the whole text's instructions
    whole = len(short)
    after_whole = decoded[whole + 1:]
    assert len(starts) > 1 and decoded[whole] <= size
    assert not any(decoded[whole + 1 : whole + 1 + len(starts)]), decoded
    assert all(n <= 22 for n in after_whole) and sum(after_whole) < sum(decoded[:whole]) // 2, decoded


def test_a_range_off_the_boundaries_is_decoded_until_it_meets_known_instructions(tmp_path: Path) -> None:
    source = SOURCE + "".join(
        f"int f{i}(int a, int b) {{ return many(a + {i}, b * {i}, a ^ b) + step(b - {i}) * (int)strlen(pick(a)); }}\n"
        for i in range(60))
    so = compile_so(tmp_path, "libbig.so", source, flags=["-O1"])
    tracker = _Tracker(_Image(image_of_bytes(so.read_bytes(), "libbig.so")))
    taddr, _off, size = tracker.text
    assert size > 2048
    tracker._decode(taddr, taddr + size)
    decoded: list[int] = []
    sweep = tracker._fresh
    tracker._fresh = lambda s, e: decoded.append(e - s) or sweep(s, e)  # type: ignore[method-assign]
    fresh = _Tracker(tracker.image)
    for start in range(taddr + 1, taddr + 40):  # most of them inside an instruction
        assert tracker._decode(start, taddr + size) == _sweep(fresh, start, taddr + size), hex(start)
    # each decoded one piece fresh (x86 resynchronises within a few instructions), not the rest of .text
    assert decoded and all(n <= 256 for n in decoded), decoded
    # and a range past every known instruction decodes in growing pieces, as one sweep would
    fresh_text = _Tracker(tracker.image)
    assert fresh_text._decode(taddr + 3, taddr + size) == _sweep(fresh, taddr + 3, taddr + size)


def test_range_outside_text_is_decoded_as_code_clamps_it(tmp_path: Path) -> None:
    tracker = _tracker(tmp_path)
    taddr, _off, size = tracker.text
    start, end = taddr - 16, taddr + min(size, 64)
    assert tracker._decode(start, end) == _sweep(_Tracker(tracker.image), start, end)


def test_operand_meaning_is_worked_out_once_per_text() -> None:
    # register moves, immediates, spills: address-free, shared by every instruction with that text
    assert _op("mov", "rdi, rbx", 0x1000) == (cython_code._COPY, "rdi", "rbx")
    assert _op("mov", "esi, 0x10", 0x1000) == (cython_code._SET, "rsi", ("imm", 16))
    assert _op("xor", "edx, edx", 0x1000) == (cython_code._SET, "rdx", ("imm", 0))
    assert _op("mov", "qword ptr [rsp + 0x18], rax", 0) == (cython_code._SPILL, "[rsp+24]", "rax")
    assert _op("mov", "rcx, qword ptr [rsp + 8]", 0) == (cython_code._RELOAD, "rcx", "[rsp+8]")
    assert _op("jne", "0x2040", 0) == (cython_code._JUMP, 0x2040, False)
    assert _op("jmp", "rax", 0) == (cython_code._JUMP, None, True)
    # rip-relative operands name an address relative to the next instruction
    assert _op("lea", "rdi, [rip + 0x100]", 0x1000) == (cython_code._SET, "rdi", ("addr", 0x1100))
    assert _op("mov", "rax, qword ptr [rip - 0x10]", 0x1000) == (cython_code._LOAD, "rax", 0xFF0)
    assert _op("call", "qword ptr [rip + 0x20]", 0x1000) == (cython_code._CALL, -0x1020, None)
    assert _op("mov", "eax, dword ptr [rip + 0x20]", 0x1000) == (cython_code._KILL, "rax", None)


def test_module_facts_do_not_depend_on_what_was_decoded_before(tmp_path: Path) -> None:
    so = compile_so(tmp_path, "libtrack.so", SOURCE, flags=["-O1"])
    data = so.read_bytes()
    first = read_module(data, "pkg/track.so")
    cython_code._OPS.clear()
    assert read_module(data, "pkg/track.so") == first


def test_what_a_pass_sees_does_not_depend_on_how_often_the_operand_memo_starts_afresh(tmp_path: Path, monkeypatch) -> None:
    so = compile_so(tmp_path, "libtrack.so", SOURCE, flags=["-O1"])
    image = _Image(image_of_bytes(so.read_bytes(), "libtrack.so"))

    def calls() -> list:
        taddr, _off, size = _Tracker(image).text
        seen: list = []
        # one tracker per function's range: each sweeps fresh, and may start the memo afresh first
        for start in [s for s in image.function_starts() if taddr <= s < taddr + size] or [taddr]:
            _Tracker(image).run(start, taddr + size, lambda site: seen.append((site.address, site.target, sorted(site.args.items()))) or None)
        return seen

    cython_code._OPS.clear()
    first = calls()
    unbounded = len(cython_code._OPS)
    monkeypatch.setattr(cython_code, "_OPS_MAX", 2)  # started afresh at nearly every sweep
    cython_code._OPS.clear()
    assert calls() == first and first
    assert len(cython_code._OPS) < unbounded


def _passes_as_before(tracker: _Tracker, start: int, end: int, on_call) -> dict:
    """_Tracker.run as it was: every pass walked, up to three more while a pass leaves seeds."""
    back: dict = {}
    arrivals: set = set()
    out = tracker._run(start, end, on_call, None, None, back, arrivals, {})
    for _ in range(3 if tracker._loop_heads else 1):
        seeds = {a: back[a] for a in back if a in arrivals or tracker._loop_heads}
        if not seeds:
            break
        back, arrivals = {}, set()
        out = tracker._run(start, end, on_call, None, None, back, arrivals, seeds)
    return out


def test_a_pass_that_would_repeat_the_last_one_makes_the_same_calls(tmp_path: Path) -> None:
    source = SOURCE + "".join(
        f"int g{i}(int n) {{ int t = 0; while (n > {i}) {{ t += step(n) + (int)strlen(pick(t)); n -= 1 + (t & 3); }} return t; }}\n"
        for i in range(12))
    so = compile_so(tmp_path, "libloops.so", source, flags=["-O2"])
    image = _Image(image_of_bytes(so.read_bytes(), "libloops.so"))
    taddr, _off, size = _Tracker(image).text
    starts = [s for s in image.function_starts() if taddr <= s < taddr + size]
    walked = {"plain": 0, "new": 0}
    for heads in (set(), {-1}):
        for start in [taddr, *starts]:
            seen: list = []
            got: list = []

            def record(into: list):
                return lambda site: into.append((site.address, site.target, sorted(site.args.items()))) or None

            plain, new = _Tracker(image), _Tracker(image)
            for name, tracker in (("plain", plain), ("new", new)):
                tracker._loop_heads = set(heads)
                run_once = tracker._run
                tracker._run = (lambda *a, run_once=run_once, name=name, **k:  # type: ignore[method-assign]
                                walked.__setitem__(name, walked[name] + 1) or run_once(*a, **k))
            expected = _passes_as_before(plain, start, taddr + size, record(seen))
            assert new.run(start, taddr + size, record(got)) == expected
            assert got == seen and seen, hex(start)
    # the export loops' four passes: some ranges' last passes repeated the one before and were not walked
    assert walked["new"] < walked["plain"], walked


def test_a_type_object_cut_off_by_the_end_of_the_file_is_left_out():
    # a relocated tp_name near the end of a file whose data segment claims more than the file
    # holds: tp_basicsize would lie past the last byte (struct.error, an internal failure, before)
    from cuaudit.facts.cython_tables import _read_typedefs

    data = bytes(32) + b"mod.Kind\0" + bytes(7)  # 48 bytes; tp_name at 32

    class Image:
        def __init__(self) -> None:
            self.data = data

        def offset(self, vaddr: int) -> int | None:
            return vaddr if 0 <= vaddr < len(data) else None

        def in_section(self, vaddr: int, *names: str) -> bool:
            return True  # the slot lies in .data

        def rela_relative(self) -> dict[int, int]:
            return {len(data) - 12: 32}  # where: its tp_basicsize pair would start 4 bytes before the end

        def cstr(self, vaddr: int, limit: int = 8192) -> str | None:
            end = data.find(b"\0", vaddr, vaddr + limit)
            return data[vaddr:end].decode() if end >= 0 else None

    assert _read_typedefs(Image(), "mod") == []
