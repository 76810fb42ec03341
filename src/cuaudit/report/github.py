"""GitHub Actions workflow commands (``::error file=...::message``).

Annotations need a file in the checked-out repository: source-tree findings
carry their path and line; findings inside wheels, installed distributions
and binaries are annotated without a file (they show on the run summary).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from cuaudit.model import ArtifactKind, Severity
from cuaudit.report import fix_text
from cuaudit.escape import printable

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.engine import Report

_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _escape_data(text: str) -> str:
    """The Actions toolkit's escaping of a command's data; what comes from an input is
    :func:`printable` before (no control or bidi character of it reaches the log)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_prop(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(report: "Report", *, color: bool = False) -> str:
    lines = []
    cwd = os.getcwd()
    for f in report.findings:
        loc = f.location
        props = []
        path = None
        if loc.artifact.kind is ArtifactKind.TREE and loc.member:
            path = os.path.join(loc.artifact.path, loc.member)
        elif loc.artifact.kind is ArtifactKind.FILE:
            path = loc.artifact.path
        if path:
            rel = os.path.relpath(path, cwd)
            props.append(f"file={_escape_prop(printable(rel if not rel.startswith('..') else path))}")
            if loc.line:
                props.append(f"line={loc.line}")
                if loc.end_line:
                    props.append(f"endLine={loc.end_line}")
                if loc.column:
                    props.append(f"col={loc.column}")
                    if loc.end_column:
                        props.append(f"endColumn={loc.end_column}")
        props.append(f"title={_escape_prop(f'{f.code} ' + _rule_name(f.code))}")
        where = "" if path else f"{printable(str(loc))}: "
        message = f"{where}{printable(f.message)}"
        if f.fix is not None:
            message += fix_text(f.fix)
        lines.append(f"::{_LEVEL[f.severity]} {','.join(props)}::{_escape_data(message)}")
    return "\n".join(lines) + ("\n" if lines else "")


def _rule_name(code: str) -> str:
    from cuaudit.rules import info

    return info(code).name
