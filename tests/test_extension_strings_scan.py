"""The dotted-name scan of extension modules (facts/extension_strings.py) finds what the expressions find.

The runs of name bytes that hold a dot are found from the dots, and ``_DOTTED`` is tried only where a
match can start (at most 65 bytes before a dot); whatever the bytes, the matches must be those of the
plain definitions: a look-behind expression for the runs, ``_DOTTED.finditer`` over each.
"""

from __future__ import annotations

import re

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cuaudit.facts.extension_strings import (  # noqa: E402
    _DOTTED, _dotted_matches, _dotted_runs, dotted_strings, import_evidence,
)

#: a whole run of the bytes a dotted name is made of, that holds a dot (the definition)
RUN = re.compile(rb"(?<![A-Za-z0-9_.])[A-Za-z0-9_]*\.[A-Za-z0-9_.]*")

#: pieces that make long parts (65 bytes is the longest a name part may be), digits, dots, prose
PIECES = st.sampled_from([
    b"a", b"Z_", b"9", b".", b"..", b"cupy.cuda", b"x" * 64, b"y" * 65, b"q" * 66, b"w" * 130, b"_" * 70,
    b"1abc", b" ", b"\0", b"import ", b">>> ", b" as ", b"'", b"(", b"\xff", b"\x80.", b"`",
])
BUFFERS = st.lists(PIECES | st.binary(max_size=4), max_size=40).map(b"".join)


def _definition_matches(data: bytes) -> list[tuple[int, int]]:
    return [m.span() for run in RUN.finditer(data) for m in _DOTTED.finditer(data, *run.span())]


@settings(max_examples=600, deadline=None)
@given(BUFFERS)
def test_runs_and_matches_are_the_expressions(data):
    assert _dotted_runs(data) == [m.span() for m in RUN.finditer(data)]
    found = [m.span() for start, end in _dotted_runs(data) for m in _dotted_matches(data, start, end)]
    assert found == _definition_matches(data)


@settings(max_examples=300, deadline=None)
@given(BUFFERS, st.lists(BUFFERS, max_size=3))
def test_dotted_strings_and_evidence_are_the_definitions(data, blobs):
    names = {m.group().decode() for buf in [data, *blobs] for m in
             (m for run in RUN.finditer(buf) for m in _DOTTED.finditer(buf, *run.span()))}
    assert dotted_strings(data, blobs) == tuple(sorted(names))
    # evidence from blobs: every match outside prose (the same occurrences, looked at in order)
    whole = {s for s in data.split(b"\0")[1:-1] if b"." in s and _DOTTED.fullmatch(s)}
    for out in blobs:
        for m in (m for run in RUN.finditer(out) for m in _DOTTED.finditer(out, *run.span())):
            before, after = out[max(0, m.start() - 8) : m.start()], out[m.end() : m.end() + 8]
            if m.group() in whole or before.endswith((b"import ", b"from ", b">>> ", b"`", b"'", b'"', b"... ")) \
                    or after.startswith((b" import", b" as ", b"`", b"(", b"'", b'"')):
                continue
            whole.add(m.group())
    assert import_evidence(data, blobs) == tuple(sorted(n.decode() for n in whole))


def test_a_long_part_is_cut_where_the_expression_cuts_it():
    # a part of 130 bytes: the name starts 65 bytes before the dot, and the last part stops at 65
    data = b"w" * 130 + b".mod." + b"z" * 100
    (start, end), = _dotted_runs(data)
    assert (start, end) == (0, len(data))
    assert [m.group() for m in _dotted_matches(data, start, end)] == [m.group() for m in _DOTTED.finditer(data)] \
        == [b"w" * 65 + b".mod." + b"z" * 65]
