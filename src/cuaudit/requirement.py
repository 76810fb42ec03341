"""One parsed dependency requirement (PEP 508): the one parser every layer uses.

``Requires-Dist`` lines of wheel and sdist metadata, ``pyproject.toml``
dependencies and requirements files all go through :func:`parse_requirement`
(``packaging`` underneath), so "which distribution, which versions, only
under an extra?" has one answer everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Requirement:
    """A requirement as the rules need it."""

    text: str
    #: canonical distribution name (PEP 503)
    name: str
    #: the version specifier, e.g. ">=13.4.1" ("" for any version)
    specifier: str
    extras: frozenset[str]
    #: the environment marker, e.g. 'python_version < "3.11"' ("" for none)
    marker: str
    #: a direct reference (``name @ https://...``), "" for a release of an index
    url: str = ""

    def applies_here(self) -> bool:
        """The marker holds for this interpreter (pip would install it here)."""
        if not self.marker:
            return True
        from packaging.markers import Marker

        return Marker(self.marker).evaluate({"extra": ""})

    def pinned(self) -> str | None:
        """The one exact version (``==1.2.3``, no wildcard) it pins, else None."""
        from packaging.specifiers import SpecifierSet

        exact = [s for s in SpecifierSet(self.specifier) if s.operator in ("==", "===") and "*" not in s.version]
        return exact[0].version if len(exact) == 1 else None

    def admits(self, version: str) -> bool:
        from packaging.specifiers import SpecifierSet

        return SpecifierSet(self.specifier).contains(version, prereleases=True)

    def __str__(self) -> str:
        return self.text

    @property
    def optional(self) -> bool:
        """Only installed with an extra (``; extra == "cuda"``)."""
        return "extra" in self.marker

    @property
    def without_marker(self) -> str:
        return self.text.split(";", 1)[0].strip()


def parse_requirement(text: str) -> Requirement | None:
    """The requirement in ``text``, or None when it is not a valid PEP 508 requirement."""
    from packaging.requirements import InvalidRequirement
    from packaging.requirements import Requirement as Parsed
    from packaging.utils import canonicalize_name

    try:
        req = Parsed(text)
    except InvalidRequirement:
        return None
    return Requirement(text.strip(), canonicalize_name(req.name), str(req.specifier), frozenset(req.extras),
                       str(req.marker) if req.marker is not None else "", req.url or "")


def required_closure(site_dirs: "list[str] | tuple[str, ...]", roots: set[str], installed: set[str]) -> set[str]:
    """``roots`` and the installed distributions they require, transitively (canonical names, read
    from the METADATA of the distributions in ``site_dirs``; extras left out)."""
    from importlib import metadata

    from packaging.utils import canonicalize_name

    requires: dict[str, list[str]] = {}
    for dist in metadata.distributions(path=list(site_dirs)):
        name = canonicalize_name(dist.metadata.get("Name") or "")
        requires.setdefault(name, list(dist.requires or ()))
    seen, todo = set(roots), list(roots)
    while todo:
        for req in filter(None, map(parse_requirement, requires.get(todo.pop(), ()))):
            if req.optional:
                continue
            name = req.name
            if name in installed and name not in seen:
                seen.add(name)
                todo.append(name)
    return seen
