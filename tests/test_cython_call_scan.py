"""The call-site scan of the Cython C-API readers (facts/cython_code.py) finds what a byte-by-byte scan finds.

``_scan_calls`` looks in C for the ``call rel32`` / ``call [rip+slot]`` opcodes whose displacement
can reach a wanted address from their part of .text, then works out each one's target.  Whatever
the bytes, its answer must be the plain definition's: every 0xE8 (or 0xFF 0x15) in .text whose
rel32 lands on a wanted address, including opcodes inside another call's displacement.
"""

from __future__ import annotations

import struct

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cuaudit.facts import cython_code  # noqa: E402
from cuaudit.facts.cython_code import _scan_calls  # noqa: E402


def _plain(text: bytes, taddr: int, targets: set[int], slots: set[int]) -> dict[int, list[int]]:
    """Every position, in order: the definition."""
    out: dict[int, list[int]] = {}
    for p in range(len(text)):
        if text[p] == 0xE8 and p + 5 <= len(text):
            t = taddr + p + 5 + struct.unpack_from("<i", text, p + 1)[0]
            if t in targets:
                out.setdefault(t, []).append(taddr + p)
        if text[p : p + 2] == b"\xff\x15" and p + 6 <= len(text):
            s = taddr + p + 6 + struct.unpack_from("<i", text, p + 2)[0]
            if s in slots:
                out.setdefault(-s, []).append(taddr + p)
    return out


class _Text:
    """What the scan reads of an image: its bytes and where .text lies in them."""

    def __init__(self, data: bytes, text: tuple[int, int, int]) -> None:
        self.data, self.text = data, text

    def section(self, name: str) -> tuple[int, int, int]:
        assert name == ".text"
        return self.text


def _sorted(found: dict[int, list[int]]) -> dict[int, list[int]]:
    return {k: sorted(v) for k, v in found.items()}


BYTES = st.sampled_from([0x00, 0xE8, 0xFF, 0x15, 0x7F, 0x80, 0xFE, 0x01])


@st.composite
def images(draw):
    text = bytearray(draw(st.lists(BYTES | st.integers(0, 255), max_size=400)))
    taddr = draw(st.sampled_from([0x1000, 0x40_0000, 0x7FFF_FF00, 0xFFFF_FFF0, 1 << 40]))
    targets: set[int] = set()
    slots: set[int] = set()
    for _ in range(draw(st.integers(0, 6))):
        # wanted addresses near .text (PLT stubs, GOT slots, functions in it) and anywhere at all
        where = draw(st.integers(-(1 << 17), 1 << 17) | st.integers(-(1 << 33), 1 << 33))
        want = max(0, taddr + where)
        if draw(st.booleans()):
            targets.add(want)
            size, opcode, into = 5, b"\xe8", targets
        else:
            slots.add(want)
            size, opcode, into = 6, b"\xff\x15", slots
        if len(text) >= size and draw(st.booleans()):  # a call that reaches it
            p = draw(st.integers(0, len(text) - size))
            disp = want - (taddr + p + size)
            if -(1 << 31) <= disp < 1 << 31:
                text[p : p + size] = opcode + struct.pack("<i", disp)
        into.add(want)
    head = draw(st.binary(max_size=12))
    tail = draw(st.binary(max_size=12))
    cut = draw(st.sampled_from([0, 0, 0, 1, 3]))  # .text running past the end of the file
    data = head + bytes(text) + tail
    size = len(text) + (len(tail) + cut if cut else 0)
    return data, (taddr, len(head), size), targets, slots


@pytest.mark.parametrize("window", [1, 7, 64, 1 << 16])
@settings(max_examples=300, deadline=None)
@given(images())
def test_call_scan_finds_what_a_byte_by_byte_scan_finds(window, image):
    data, (taddr, toff, tsize), targets, slots = image
    saved = cython_code._WINDOW
    cython_code._WINDOW = window
    try:
        got = _scan_calls(_Text(data, (taddr, toff, tsize)), targets, slots)
    finally:
        cython_code._WINDOW = saved
    assert _sorted(got) == _plain(data[toff : toff + tsize], taddr, targets, slots)


def test_calls_inside_another_calls_displacement_are_found():
    taddr = 0x10_0000
    stub = taddr - 0x40
    # a call whose rel32 holds 0xE8: the second call starts inside the first one's displacement
    second = 2
    text = bytearray(b"\x90" * 16)
    text[second : second + 5] = b"\xe8" + struct.pack("<i", stub - (taddr + second + 5))
    text[0:2] = b"\xe8\x00"  # a call at 0 too, somewhere else
    found = _scan_calls(_Text(bytes(text), (taddr, 0, len(text))), {stub}, set())
    assert found == _plain(bytes(text), taddr, {stub}, set()) and found[stub] == [taddr + second]
