"""``pyproject.toml`` members, parsed once for every family that reads them.

The fact is the raw TOML table (``[build-system]``, ``[project]``,
``[tool.*]``) of the member's one parse (``MemberReader.toml()``), so that the
build family (CU5xx), the device-code family and anyone else read the same
table.  A file that does not parse gives an empty table here; the format check
reports it as ``CU007`` for that member: every build front end would stop on
it too (``pip install`` of such an sdist fails before building).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from cuaudit.facts import Extractor, MemberReader
from cuaudit.model import InputError, Member


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
    """Every ``pyproject.toml`` of a tree, an sdist or a wheel (its shared TOML parse)."""

    name = "pyproject"
    version = 2  # 2: the shared parse; a TOML error is the format check's CU007

    def applies(self, member: Member) -> bool:
        return member.path == "pyproject.toml" or member.path.endswith("/pyproject.toml")

    def extract(self, reader: MemberReader) -> PyProject:
        table = dict(reader.toml().table)
        for key in ("project", "build-system", "tool"):
            if key in table and not isinstance(table[key], dict):
                # every build front end stops on it as it would on a syntax error
                raise InputError("CU007", f"{reader.path}: [{key}] must be a table, not a {type(table[key]).__name__}",
                                 key=key)
        return PyProject(table)
