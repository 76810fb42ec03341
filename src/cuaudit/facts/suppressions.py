"""Inline suppressions: ``# cuaudit: ignore[CU101]`` silences CU101 on its line.

``# cuaudit: ignore`` silences every code on its line.  Works in any text
member with ``#`` comments: Python, stubs, build scripts, CMake, Cython.
Findings in binaries are silenced with a baseline file instead
(``cuaudit.baseline``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from cuaudit.facts import Extractor, MemberReader
from cuaudit.model import Member, MemberKind

#: ``ignore`` must end there (``ignore[...]``, a space, the line's end): a
#: comment such as ``# cuaudit: ignored`` or ``ignore-foo`` silences nothing.
_INLINE = re.compile(r"#\s*cuaudit:\s*ignore(?:\[(?P<codes>[A-Za-z0-9_,\s]*)\]|(?![\w\[-]))", re.IGNORECASE)


@dataclass(frozen=True)
class Suppressions:
    """line -> codes silenced there (an empty tuple silences every code)."""

    lines: Mapping[int, tuple[str, ...]]

    def silences(self, line: int | None, code: str) -> bool:
        if line is None or line not in self.lines:
            return False
        codes = self.lines[line]
        return not codes or any(c == "ALL" or code.startswith(c) for c in codes)


def parse_suppressions(text: str) -> Suppressions:
    # imported here, as in extract: a snapshot's hit unpickles Suppressions and parses nothing
    from cuaudit.formats.python import source_lines

    return suppressions_in(source_lines(text))


def suppressions_in(source: tuple[str, ...]) -> Suppressions:
    """The suppressions of a text's lines, numbered as findings number them (Python's tokenizer)."""
    lines: dict[int, tuple[str, ...]] = {}
    for number, line in enumerate(source, start=1):
        if "cuaudit" not in line.lower():
            continue
        m = _INLINE.search(line)
        if m:
            codes = m.group("codes")
            lines[number] = tuple(c.strip().upper() for c in codes.split(",") if c.strip()) if codes else ()
    return Suppressions(lines)


class SuppressionExtractor(Extractor):
    """Inline suppression comments of text members (only read where findings are)."""

    name = "suppressions"
    version = 2  # 2: lines numbered as Python's tokenizer numbers them (a form feed ends no line)
    _TEXT = {MemberKind.PYTHON, MemberKind.STUB, MemberKind.BUILD, MemberKind.CYTHON, MemberKind.CUDA}

    def applies(self, member: Member) -> bool:
        return member.kind in self._TEXT

    def extract(self, reader: MemberReader) -> Suppressions:
        from cuaudit.facts.format_check import format_of

        if format_of(reader.member) == "python":
            # decoded as the parse decodes (a coding declaration), split as it splits: no parse needed
            return parse_suppressions(reader.python_text())
        return parse_suppressions(reader.text())  # CMake, Cython, CUDA: text without a parse of ours
