"""Property tests (hypothesis) for the fixers: ``--fix`` edits and ``repair``'s ELF edit."""

from __future__ import annotations

import ast
import struct

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cuaudit.model import Edit, InputError  # noqa: E402
from cuaudit.repair.source import apply_edits, source_lines  # noqa: E402
from cuaudit.repair.wheel import remove_needed  # noqa: E402

#: characters str.splitlines breaks at and Python's tokenizer does not, and some others
TRICKY = "\x0c\x0b\x1c\x1d\x1e\x85\u2028\u2029\t #'\"\\x(){}"
comment_text = st.text(alphabet=st.sampled_from(TRICKY) | st.characters(blacklist_characters="\r\n\0", blacklist_categories=("Cs",)), max_size=40)
line_end = st.sampled_from(["\n", "\r\n", "\r"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(comment_text, line_end), min_size=1, max_size=8), st.data())
def test_an_inserted_line_never_turns_a_comment_into_code(comments, data):
    text = "".join(f"#{c}{end}" for c, end in comments)
    assert ast.parse(text).body == []
    lines = source_lines(text)
    assert "".join(lines) == text and len(lines) == len(comments)
    at = data.draw(st.integers(1, len(lines) + 1))
    fixed = apply_edits(text, [Edit("m.py", at, 1, at, 1, "x = 1\n")])
    tree = ast.parse(fixed)
    # exactly the inserted statement, on the line asked for: every comment is still a comment
    assert [ast.unparse(n) for n in tree.body] == ["x = 1"] and tree.body[0].lineno == at


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.data())
def test_lines_are_split_as_python_counts_them(text, data):
    lines = source_lines(text)
    assert "".join(lines) == text
    for i, line in enumerate(lines):
        body = line[: len(line) - (2 if line.endswith("\r\n") else 1 if line.endswith(("\r", "\n")) else 0)]
        assert "\r" not in body and "\n" not in body  # only \r, \n, \r\n end a line...
        assert i == len(lines) - 1 or line != body  # ...and every line but the last ends with one
    # an empty replacement at any line start changes nothing
    at = data.draw(st.integers(1, max(len(lines), 1)))
    assert apply_edits(text, [Edit("m.py", at, 1, at, 1, "")]) == text


def _elf_with_needed(names: list[str]) -> bytes:
    """A 64-bit ELF holding only what remove_needed reads: one PT_LOAD, one PT_DYNAMIC, DT_NEEDED strings."""
    strtab = b"\0" + b"".join(n.encode() + b"\0" for n in names)
    dyn = b"".join(struct.pack("<qQ", 1, strtab.index(n.encode() + b"\0")) for n in names)
    dyn += struct.pack("<qQ", 5, 0x1000) + struct.pack("<qQ", 10, len(strtab)) + struct.pack("<qQ", 0, 0)
    phoff, ph = 64, 56
    str_off = phoff + 2 * ph
    dyn_off = str_off + len(strtab) + (-(str_off + len(strtab)) % 8)
    phdrs = struct.pack("<IIQQQQQQ", 1, 4, str_off, 0x1000, 0x1000, len(strtab), len(strtab), 8)
    phdrs += struct.pack("<IIQQQQQQ", 2, 4, dyn_off, 0, 0, len(dyn), len(dyn), 8)
    head = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, phoff, 0, 0, 64, ph, 2, 64, 0, 0)
    body = head + phdrs + strtab
    return body + b"\0" * (dyn_off - len(body)) + dyn


lib = st.from_regex(r"lib[a-z]{1,6}\.so(\.[0-9])?", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(lib, min_size=1, max_size=6, unique=True), st.data())
def test_remove_needed_removes_exactly_what_is_asked_and_keeps_the_size(names, data):
    from cuaudit.facts.elf import read_elf_bytes

    elf = _elf_with_needed(names)
    assert list(read_elf_bytes(elf).needed) == names
    drop = set(data.draw(st.lists(st.sampled_from(names), unique=True)))
    out, removed = remove_needed(elf, drop | {"libnot-there.so"})
    assert sorted(removed) == sorted(drop) and len(out) == len(elf)
    assert list(read_elf_bytes(out).needed) == [n for n in names if n not in drop]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400), st.data())
def test_remove_needed_on_any_bytes_is_an_edit_or_an_input_error(noise, data):
    base = _elf_with_needed(["liba.so", "libb.so"])
    at = data.draw(st.integers(0, len(base)))
    mutated = (base[:at] + noise + base[at + len(noise):])[: data.draw(st.integers(0, len(base) + len(noise)))]
    try:
        out, removed = remove_needed(mutated, {"liba.so"})
    except InputError as exc:
        assert exc.code in ("CU005", "CU006")
    else:
        assert len(out) == len(mutated)
