"""Python source: the decoded text and one ``ast`` per member.

Decoding follows the interpreter (PEP 263 coding declarations, a UTF-8 BOM);
the tree is parsed once with ``ast.parse`` and shared by every extractor.  A
syntax error is not an exception here: :class:`PythonModule` carries it in
``error`` (CU006 from the engine's format check) with an empty tree, so every
extractor sees the same thing for a broken file.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field

from cuaudit.formats import FormatError
from cuaudit.model import InputError

#: Larger sources are not parsed (nothing real comes close; a generated 16 MB
#: module would cost seconds and hundreds of MB of AST).
MAX_SOURCE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, eq=False)
class PythonModule:
    """One Python source member, decoded and parsed."""

    path: str
    text: str
    tree: ast.Module
    error: FormatError | None = None
    #: the source's lines (as Python's tokenizer sees them: ``\\f`` does not end a line)
    lines: tuple[str, ...] = field(default=(), repr=False)

    @property
    def ok(self) -> bool:
        return self.error is None

    def column(self, line: int, byte_offset: int) -> int:
        """The 1-based character column of an ``ast`` position (a 0-based UTF-8 byte offset)."""
        if 1 <= line <= len(self.lines):
            return len(self.lines[line - 1].encode("utf-8")[:byte_offset].decode("utf-8", "replace")) + 1
        return byte_offset + 1

    def offset(self, line: int, column: int) -> int:
        """The index in ``text`` of a 1-based line and 0-based character column (libcst's positions)."""
        return line_starts(self.text)[line - 1] + column


def decode_source(data: bytes, path: str) -> str:
    """The text of a Python source as the interpreter decodes it; InputError CU006 if it cannot."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        raise InputError("CU006", f"{path}: not valid text ({exc})") from None


def source_lines(text: str) -> tuple[str, ...]:
    """Lines split where Python's tokenizer splits them (``\\n``, ``\\r\\n``, ``\\r`` only).

    ``str.splitlines`` also breaks on form feeds, vertical tabs and other
    separators that Python keeps inside a line (a comment with ``\\x0c`` in
    it): positions computed from those lines would point at the wrong place.
    """
    if not text:
        return ()
    lines = io.StringIO(text, newline=None).read().split("\n")
    if lines[-1] == "":
        lines.pop()  # the text ends with a newline: no line after it
    return tuple(lines)


def line_starts(text: str) -> list[int]:
    """Where each line of ``text`` starts, lines ending where ``source_lines`` ends them."""
    return [0] + [m.end() for m in _LINE_END.finditer(text)]


_LINE_END = re.compile(r"\r\n|\r|\n")


def parse_python(data: bytes, path: str) -> PythonModule:
    """Decode and parse; raises InputError for what is not Python text at all."""
    if len(data) > MAX_SOURCE_BYTES:
        raise InputError("CU004", f"{path}: larger than {MAX_SOURCE_BYTES} bytes, not read as Python source")
    return parse_python_text(decode_source(data, path), path)


def parse_python_text(text: str, path: str = "<source>") -> PythonModule:
    """Parse source that is already text (what ``parse_python`` does after decoding)."""
    lines = source_lines(text)
    try:
        tree = ast.parse(text, filename=path, type_comments=False)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:  # ValueError: NUL bytes
        line = getattr(exc, "lineno", None) or None
        col = getattr(exc, "offset", None) or None
        msg = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
        where = f" (line {line})" if line else ""
        return PythonModule(path, text, ast.Module(body=[], type_ignores=[]),
                            FormatError("CU006", f"{path}: not valid Python: {msg}{where}", line, col), lines)
    return PythonModule(path, text, tree, None, lines)
