"""``pyproject.toml`` members, parsed once for every family that reads them.

The fact is the raw TOML table (``[build-system]``, ``[project]``,
``[tool.*]``) so that the build family (CU5xx), the device-code family and
anyone else read the same parse instead of re-reading the file.  A file that
does not parse is ``CU007`` for that member: every build front end would
stop on it too (``pip install`` of such an sdist fails before building).
"""

from __future__ import annotations

import re
from cuaudit.compat import tomllib
from dataclasses import dataclass
from typing import Any, Mapping

from cuaudit.facts import Extractor, InputError, MemberReader
from cuaudit.model import Member

_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


@dataclass(frozen=True)
class PyProject:
    """The parsed table of one ``pyproject.toml``."""

    table: Mapping[str, Any]

    @property
    def build_requires(self) -> tuple[str, ...]:
        req = self.table.get("build-system", {}).get("requires", ())
        return tuple(r for r in req if isinstance(r, str)) if isinstance(req, list) else ()

    @property
    def build_backend(self) -> str:
        backend = self.table.get("build-system", {}).get("build-backend", "")
        return backend if isinstance(backend, str) else ""

    @property
    def project(self) -> Mapping[str, Any]:
        project = self.table.get("project", {})
        return project if isinstance(project, Mapping) else {}

    def tool(self, name: str) -> Mapping[str, Any]:
        tools = self.table.get("tool", {})
        section = tools.get(name, {}) if isinstance(tools, Mapping) else {}
        return section if isinstance(section, Mapping) else {}


class PyProjectExtractor(Extractor):
    """Every ``pyproject.toml`` of a tree, an sdist or a wheel, parsed with ``tomllib``."""

    name = "pyproject"
    version = 1

    def applies(self, member: Member) -> bool:
        return member.path == "pyproject.toml" or member.path.endswith("/pyproject.toml")

    def extract(self, reader: MemberReader) -> PyProject:
        text = reader.text(limit=4 * 1024 * 1024)
        try:
            table = tomllib.loads(text)
        except RecursionError:
            raise InputError("CU007", f"{reader.path}: not valid TOML: nested too deeply") from None
        except tomllib.TOMLDecodeError as exc:
            detail: dict[str, Any] = {"error": str(exc)}
            m = _POSITION.search(str(exc))
            if m:
                detail["line"], detail["column"] = int(m.group(1)), int(m.group(2))
            raise InputError("CU007", f"{reader.path}: not valid TOML: {exc}", **detail) from None
        for key in ("project", "build-system", "tool"):
            if key in table and not isinstance(table[key], dict):
                # every build front end stops on it as it would on a syntax error
                raise InputError("CU007", f"{reader.path}: [{key}] must be a table, not a {type(table[key]).__name__}",
                                 key=key)
        return PyProject(table)
