"""The one escaping step between audited input and what a person reads.

Names inside audited artifacts are data the author of the artifact chose: a
member called ``x\\x1b[2J.so``, a ``DT_NEEDED`` entry with a carriage return,
a file name with a right-to-left override, or bytes that are not UTF-8 at all
(``os.fsdecode`` turns them into lone surrogates, which no UTF-8 stream can
encode).  Issue 13 saw terminal escape sequences from input reach the
terminal in 12 runs, and every report format crash on one undecodable name.

:func:`printable` is for text a person reads (the text report, GitHub
annotations, HTML, the human ``message`` of JSON and SARIF): every control
character, bidi control, invisible format character and undecodable byte is
written as a visible Python-style escape, so nothing from an input can move
the cursor, start a new line that looks like a finding, or reorder what is
shown.  :func:`valid_unicode` is for data fields of machine-readable reports:
only undecodable bytes are rewritten (as ``\\xNN``), so the document can be
written as UTF-8 and every other character stays what the input held.
"""

from __future__ import annotations

import re
from typing import Any

#: C0 and C1 controls and DEL; bidi embeddings, overrides, isolates and marks
#: (Trojan Source, CVE-2021-42574); zero-width and other invisible format
#: characters; line and paragraph separators; lone surrogates (undecodable bytes).
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb"
    "\ud800-\udfff]"
)
_UNSAFE_KEEP_LINES = re.compile(_UNSAFE.pattern.replace("\x00-\x1f", "\x00-\x08\x0b-\x1f"))
_SURROGATE = re.compile("[\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's surrogateescape: the original byte
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def printable(text: str, *, multiline: bool = False) -> str:
    """``text`` with everything that is not plainly visible written as an escape.

    ``multiline`` keeps newlines and tabs (code in a fix's edit, shown in a
    block of its own); a message or a name is always one line.
    """
    pattern = _UNSAFE_KEEP_LINES if multiline else _UNSAFE
    if pattern.search(text) is None:  # the common case costs one scan
        return text
    return pattern.sub(_escape_char, text)


def valid_unicode(text: str) -> str:
    """``text`` encodable as UTF-8: undecodable bytes (lone surrogates) become ``\\xNN``."""
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(_escape_char, text)


def valid_unicode_deep(value: Any) -> Any:
    """A JSON-able document (dicts, lists, strings, numbers) with :func:`valid_unicode` on every string and key."""
    if isinstance(value, str):
        return valid_unicode(value)
    if isinstance(value, dict):
        return {valid_unicode(k) if isinstance(k, str) else k: valid_unicode_deep(v) for k, v in value.items()}
    if isinstance(value, list):
        return [valid_unicode_deep(v) for v in value]
    return value
