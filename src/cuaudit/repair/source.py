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
import io
import os
import stat
import tempfile
from dataclasses import dataclass, field

from cuaudit.model import Applicability, ArtifactKind, Edit, Finding


@dataclass
class FixResult:
    fixed: list[Finding] = field(default_factory=list)
    diff: str = ""
    files: list[str] = field(default_factory=list)
    #: files left unchanged, and why (not text, not a regular file, a write that failed)
    errors: list[str] = field(default_factory=list)

    def remaining(self, report):
        fixed = {id(f) for f in self.fixed}
        return dataclasses.replace(report, findings=[f for f in report.findings if id(f) not in fixed])


def source_lines(text: str) -> list[str]:
    """Lines as Python's tokenizer counts them (ends kept): only ``\n``, ``\r\n`` and ``\r`` end one.

    ``str.splitlines`` also breaks at form feed, vertical tab, ``\x1c-\x1e``,
    ``\x85`` and U+2028/2029: a comment holding one would then shift every
    line after it, and an edit meant for the next line would land after that
    character, inside the comment, turning the rest of it into live code.
    """
    return io.StringIO(text, newline="").readlines()


def _offset(lines: list[str], line: int, column: int) -> int:
    return sum(len(x) for x in lines[: line - 1]) + column - 1


def apply_edits(text: str, edits: list[Edit]) -> str:
    lines = source_lines(text)
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
    base_of: dict[str, str] = {}  # file to fix -> the folder it must stay inside
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
            base_of[path] = base
        path = os.path.join(base, *f.fix.edits[0].member.split("/")) if art.kind is ArtifactKind.TREE else art.path
        per_file[path].append(f)
    result = FixResult()
    pending: list[tuple[str, bytes, int]] = []
    for path, findings in sorted(per_file.items()):
        if not findings:
            continue
        if path in archived:
            before = _archived_text(*archived[path])
            if before is None:
                continue
        else:
            read = _read_source(path, base_of[path])
            if isinstance(read, str):
                result.errors.append(read)
                continue
            before, encoding, mode = read
        taken: list[tuple[int, int]] = []
        edits: list[Edit] = []
        lines = source_lines(before)
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
        try:
            data = after.encode(encoding)
        except UnicodeEncodeError as exc:
            result.errors.append(f"{path}: the fixed text cannot be written as {encoding} ({exc.reason}); left unchanged")
            result.fixed = [f for f in result.fixed if f not in findings]
            continue
        result.files.append(path)
        pending.append((path, data, mode))
    if write and pending:
        _write_all(pending, result)
    return result


def _read_source(path: str, base: str) -> tuple[str, str, int] | str:
    """(text, encoding, mode) of a source file to fix, or why it is left alone.

    Only a regular file inside ``base``, not a link: a symlink, or a path
    through a linked folder, may lead out of the tree.  (A hard link cannot
    be told from the file itself; writing a new file in its place leaves the
    other names of the inode as they were.)
    """
    import tokenize

    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            return f"{path}: not a regular file; left unchanged"
        real_base = os.path.realpath(base)
        if not os.path.realpath(path).startswith(real_base.rstrip(os.sep) + os.sep) and os.path.realpath(path) != real_base:
            return f"{path}: outside {base}; left unchanged"
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        return f"{path}: cannot read it ({exc.strerror or exc}); left unchanged"
    try:
        # as the extractors read it: a PEP 263 declaration or a BOM decides, else UTF-8
        encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0] if path.endswith((".py", ".pyi")) else "utf-8"
        return data.decode(encoding), encoding, stat.S_IMODE(st.st_mode)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        return f"{path}: not valid text ({exc}); left unchanged"


def _write_all(pending: list[tuple[str, bytes, int]], result: FixResult) -> None:
    """Write every fixed file or none: each to a new file beside it first, then
    all renamed over the originals (a rename is atomic: a reader sees the old
    file or the new one, never half of either)."""
    temps: list[tuple[str, str]] = []
    try:
        for path, data, mode in pending:
            fd, tmp = tempfile.mkstemp(prefix=".cuaudit-fix-", dir=os.path.dirname(path))
            temps.append((tmp, path))
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, mode)
    except OSError as exc:
        for tmp, _ in temps:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        result.errors.append(f"cannot write the fixes ({exc}); no file was changed")
        result.files.clear()
        result.fixed.clear()
        return
    for tmp, path in temps:
        os.replace(tmp, path)


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
