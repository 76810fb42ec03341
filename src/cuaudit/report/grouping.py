"""What the human reports (text, HTML) show as one entry, and in which order.

A whole CUDA environment gives hundreds of findings that say the same thing
in different files: issue 15 counted 364 CU201 lines from ``cuaudit env``,
one per extension module and library.  Findings of one artifact with the same
code, severity and cause (the symbol they are about, or else the message
without the file's name) in at least :data:`GROUP_MIN` places become one
:class:`Block` that lists the places; the rest stay one block per member.
Errors come first: artifacts by their worst finding, blocks likewise, and
within a member, findings by severity before line.  Machine-readable reports
keep every finding as it is.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

from cuaudit.model import ArtifactKind, ArtifactRef, Finding, Severity

#: Findings alike in this many places or more are shown once, with the list of places.
GROUP_MIN = 3


@dataclass(frozen=True)
class Block:
    """One entry of a human report.

    ``grouped``: ``findings`` are alike, shown as ``findings[0]`` with the
    others named in ``places``: the same cause in several files
    (``member`` empty, places are ``member[:line]``), or one code for
    several symbols of one member (places are the symbols).  Otherwise
    ``findings`` are those of one ``member``, each shown.
    """

    findings: tuple[Finding, ...]
    grouped: bool
    member: str = ""
    places: tuple[str, ...] = ()

    @property
    def severity(self) -> Severity:
        return max(f.severity for f in self.findings)

    @property
    def first(self) -> Finding:
        return self.findings[0]


@dataclass(frozen=True)
class Section:
    """The findings of one artifact, as blocks in the order they are shown."""

    ref: ArtifactRef
    title: str
    blocks: tuple[Block, ...]
    findings: tuple[Finding, ...]

    @property
    def severity(self) -> Severity:
        return max(f.severity for f in self.findings)

    def counts(self) -> dict[str, int]:
        c = Counter(str(f.severity) for f in self.findings)
        return {str(s): c.get(str(s), 0) for s in sorted(Severity, reverse=True)}


def cause(f: Finding) -> str:
    """What makes findings of one code "the same": the symbol, else the message without the file's name."""
    if f.location.symbol:
        return f.location.symbol
    member = f.location.member or ""
    return f.message.replace(member, "\0") if member else f.message


def place(f: Finding) -> str:
    """Where one finding of a group is: ``member[:line[:column]]``."""
    loc = f.location
    text = loc.member or ""
    if loc.line is not None:
        text += f":{loc.line}" + (f":{loc.column}" if loc.column is not None else "")
    return text


def shown_path(path: str) -> str:
    """A path as the user would type it: relative when under the working directory."""
    import os

    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if rel.startswith("..") or os.path.isabs(rel) else rel


def titles(refs: Iterable[ArtifactRef]) -> dict[ArtifactRef, str]:
    """``name version`` for what has one (not the download cache path), else the path as typed.

    Two artifacts of one name and version (the same release for two
    platforms) are told apart by their file names.
    """
    import os

    refs = list(dict.fromkeys(refs))
    base: dict[ArtifactRef, str] = {}
    for ref in refs:
        named = ref.name and ref.kind in (ArtifactKind.WHEEL, ArtifactKind.SDIST, ArtifactKind.INSTALLED)
        base[ref] = f"{ref.name} {ref.version}".strip() if named else shown_path(ref.path)
    seen = Counter(base.values())
    return {
        ref: f"{t} ({os.path.basename(ref.path)})" if seen[t] > 1 and ref.kind is not ArtifactKind.INSTALLED else t
        for ref, t in base.items()
    }


def sections(findings: Sequence[Finding]) -> list[Section]:
    """The findings as artifact sections of blocks, errors first at every level."""
    by_artifact: dict[ArtifactRef, list[Finding]] = {}
    for f in findings:
        by_artifact.setdefault(f.location.artifact, []).append(f)
    names = titles(by_artifact)
    out = []
    for ref, items in by_artifact.items():
        out.append(Section(ref, names[ref], tuple(_blocks(items)), tuple(items)))
    order = {ref: i for i, ref in enumerate(by_artifact)}
    out.sort(key=lambda s: (-s.severity, order[s.ref]))
    return out


def _blocks(items: list[Finding]) -> list[Block]:
    alike: dict[tuple, list[int]] = {}
    for i, f in enumerate(items):
        alike.setdefault((f.code, f.severity, cause(f)), []).append(i)
    blocks: list[tuple[int, Block]] = []
    grouped: set[int] = set()
    for indexes in alike.values():
        places = tuple(dict.fromkeys(place(items[i]) for i in indexes))
        if len(places) >= GROUP_MIN:
            grouped.update(indexes)
            blocks.append((indexes[0], Block(tuple(items[i] for i in indexes), True, places=places)))
    per_member: dict[str, list[int]] = {}
    for i, f in enumerate(items):
        if i not in grouped:
            per_member.setdefault(f.location.member or "", []).append(i)
    for member, indexes in per_member.items():
        # Info findings of one code for many symbols of one file, without lines (CU101:
        # ten submodules an __init__ does not bind) have one cause too: the file.  Errors
        # and warnings are never folded (each CU203 library needs its own wheel).
        same: dict[tuple, list[int]] = {}
        for i in indexes:
            f = items[i]
            if f.severity is Severity.INFO and f.location.line is None and f.location.symbol:
                same.setdefault((f.code, f.severity), []).append(i)
        for group in same.values():
            if len(group) >= GROUP_MIN:
                grouped.update(group)
                symbols = tuple(dict.fromkeys(items[i].location.symbol or "" for i in group))
                blocks.append((group[0], Block(tuple(items[i] for i in group), True, member, symbols)))
        rest = [i for i in indexes if i not in grouped]
        if rest:
            singles = sorted((items[i] for i in rest),
                             key=lambda f: (-f.severity, f.location.line or 0, f.location.column or 0))
            blocks.append((rest[0], Block(tuple(singles), False, member)))
    blocks.sort(key=lambda b: (-b[1].severity, b[0]))
    return [b for _, b in blocks]


@dataclass(frozen=True)
class CodeCount:
    """One row of ``--statistics``: how many findings one rule gave, by severity."""

    code: str
    name: str
    count: int
    by_severity: dict[str, int]
    fixable: int


def statistics(findings: Iterable[Finding]) -> list[CodeCount]:
    """Counts per rule code, most frequent first (ruff's ``--statistics``)."""
    from cuaudit.rules import info

    per: dict[str, list[Finding]] = {}
    for f in findings:
        per.setdefault(f.code, []).append(f)
    rows = []
    for code, items in per.items():
        try:
            name = info(code).name
        except KeyError:
            name = ""
        sev = Counter(str(f.severity) for f in items)
        rows.append(CodeCount(code, name, len(items), {str(s): sev.get(str(s), 0) for s in sorted(Severity, reverse=True)},
                              sum(1 for f in items if f.fix is not None and f.fix.edits)))
    rows.sort(key=lambda r: (-r.count, r.code))
    return rows
