"""Apply the automatic fixes of findings to source files (``check --fix`` / ``--diff``).

Only files of source trees and single files named on the command line are
ever changed: wheels, sdists and installed distributions are not sources.
For an sdist, ``--diff`` still shows the edits (against the member as it is
in the archive, ``a/<sdist>/<member>``); ``--fix`` leaves the archive alone.
Edits of one file are applied from the end backwards; an edit that overlaps
one already taken is left for the next run (as ruff does).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass, field

from cuaudit.model import Applicability, ArtifactKind, Edit, Finding


@dataclass
class FixResult:
    fixed: list[Finding] = field(default_factory=list)
    diff: str = ""
    files: list[str] = field(default_factory=list)

    def remaining(self, report):
        fixed = {id(f) for f in self.fixed}
        return dataclasses.replace(report, findings=[f for f in report.findings if id(f) not in fixed])


def _offset(lines: list[str], line: int, column: int) -> int:
    return sum(len(x) for x in lines[: line - 1]) + column - 1


def apply_edits(text: str, edits: list[Edit]) -> str:
    lines = text.splitlines(keepends=True)
    spans = sorted(
        ((_offset(lines, e.start_line, e.start_column), _offset(lines, e.end_line, e.end_column), e.content) for e in edits),
        reverse=True,
    )
    for start, end, content in spans:
        text = text[:start] + content + text[end:]
    return text


def apply_fixes(report, *, unsafe: bool = False, write: bool = True) -> FixResult:
    allowed = {Applicability.SAFE} | ({Applicability.UNSAFE} if unsafe else set())
    per_file: dict[str, list[Finding]] = {}
    archived: dict[str, tuple[str, str]] = {}  # display path -> (sdist path, member)
    for f in report.findings:
        if f.fix is None or not f.fix.edits or f.fix.applicability not in allowed:
            continue
        art = f.location.artifact
        if art.kind is ArtifactKind.TREE:
            base = art.path
        elif art.kind is ArtifactKind.FILE:
            base = os.path.dirname(art.path)
        elif art.kind is ArtifactKind.SDIST:
            member = f.fix.edits[0].member
            display = f"{os.path.basename(art.path)}/{member}"
            archived[display] = (art.path, member)
            per_file.setdefault(display, []).append(f)
            continue
        else:
            continue
        for e in f.fix.edits:
            path = os.path.join(base, *e.member.split("/")) if art.kind is ArtifactKind.TREE else art.path
            per_file.setdefault(path, [])
        path = os.path.join(base, *f.fix.edits[0].member.split("/")) if art.kind is ArtifactKind.TREE else art.path
        per_file[path].append(f)
    result = FixResult()
    for path, findings in sorted(per_file.items()):
        if not findings:
            continue
        if path in archived:
            before = _archived_text(*archived[path])
            if before is None:
                continue
        else:
            with open(path, encoding="utf-8", newline="") as fh:
                before = fh.read()
        taken: list[tuple[int, int]] = []
        edits: list[Edit] = []
        lines = before.splitlines(keepends=True)
        for f in sorted(findings, key=Finding.sort_key):
            spans = [(_offset(lines, e.start_line, e.start_column), _offset(lines, e.end_line, e.end_column)) for e in f.fix.edits]
            if all(e in edits for e in f.fix.edits):
                result.fixed.append(f)  # the same edit (one import added for two findings)
                continue
            if any(s < te and ts < e or (s == e == ts == te) for s, e in spans for ts, te in taken):
                continue
            taken += spans
            edits += f.fix.edits
            result.fixed.append(f)
        after = apply_edits(before, edits)
        if after == before:
            continue
        rel = path if path in archived else os.path.relpath(path)
        result.diff += "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{rel}", f"b/{rel}"))
        if path in archived:
            # An archive is not a source: its fixes are shown, never written (nor counted as fixed).
            result.fixed = [f for f in result.fixed if f not in findings]
            continue
        result.files.append(path)
        if write:
            with open(path, "w", encoding="utf-8", newline="") as fh:
                fh.write(after)
    return result


def _archived_text(archive: str, member: str) -> str | None:
    """A member of an sdist as text, read in place (None when it cannot be read)."""
    from cuaudit.inputs import resolve

    try:
        art = resolve([archive])[0]
        with art.open_member(member) as fh:
            data = fh.read()
        return data.decode("utf-8")
    except (OSError, KeyError, UnicodeDecodeError, ValueError):
        return None
