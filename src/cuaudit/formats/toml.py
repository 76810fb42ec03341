"""TOML members (``pyproject.toml``): one table per member.

A table that does not parse is CU007 (every build front end stops on it too);
the object still exists, with an empty table, so extractors need no special case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from cuaudit.compat import tomllib
from cuaudit.formats import FormatError
from cuaudit.model import InputError

MAX_TOML_BYTES = 4 * 1024 * 1024
_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


@dataclass(frozen=True, eq=False)
class TomlDocument:
    path: str
    table: Mapping[str, Any] = field(default_factory=dict)
    error: FormatError | None = None
    #: the decoded text (positions of values: tomllib keeps none)
    text: str = field(default="", repr=False)


def loads(text: str) -> dict[str, Any]:
    """``tomllib.loads`` for any supported Python (3.10 has ``tomli``)."""
    return tomllib.loads(text)


def parse_toml(data: bytes, path: str) -> TomlDocument:
    if len(data) > MAX_TOML_BYTES:
        raise InputError("CU004", f"{path}: larger than {MAX_TOML_BYTES} bytes, not read as TOML")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError("CU006", f"{path}: not valid UTF-8 text ({exc})") from None
    try:
        return TomlDocument(path, tomllib.loads(text), None, text)
    except (tomllib.TOMLDecodeError, RecursionError, ValueError) as exc:
        m = _POSITION.search(str(exc))
        line, col = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        return TomlDocument(path, {}, FormatError("CU007", f"{path}: not valid TOML: {exc}", line, col), text)
