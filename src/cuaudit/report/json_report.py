"""JSON report (schema: ``docs/schema/report-v1.json``).

The document is deterministic for the same inputs except under ``stats``
(timings, cache hits), which is the one place for run-dependent numbers.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from cuaudit.model import ArtifactRef, EnvironmentInfo, Finding, Fix, Location, Severity, Skipped
from cuaudit.escape import printable, valid_unicode_deep
from cuaudit.report.json_text import dumps

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.engine import Report

SCHEMA_VERSION = 1


def artifact_dict(ref: ArtifactRef) -> dict[str, Any]:
    return {"kind": str(ref.kind), "path": ref.path, "name": ref.name or None, "version": ref.version or None}


def location_dict(loc: Location, artifacts: dict[ArtifactRef, dict[str, Any]] | None = None) -> dict[str, Any]:
    """``artifacts``: the artifact dicts already made (a report has a few hundred artifacts and
    thousands of findings); they are shared, not copied."""
    artifact = artifacts.get(loc.artifact) if artifacts is not None else None
    if artifact is None:
        artifact = artifact_dict(loc.artifact)
        if artifacts is not None:
            artifacts[loc.artifact] = artifact
    return {
        "artifact": artifact,
        "member": loc.member,
        "line": loc.line,
        "column": loc.column,
        "end_line": loc.end_line,
        "end_column": loc.end_column,
        "symbol": loc.symbol,
    }


#: str() of each severity (an enum's name is a property: a lookup is a tenth of the time)
_SEVERITY = {s: str(s) for s in Severity}


def finding_dict(f: Finding, names: dict[str, str] | None = None,
                 artifacts: dict[ArtifactRef, dict[str, Any]] | None = None) -> dict[str, Any]:
    """``names``: rule names already looked up, by code (a report repeats a few codes thousands of times);
    ``artifacts``: see :func:`location_dict`."""
    name = names.get(f.code) if names is not None else None
    if name is None:
        from cuaudit.rules import info

        name = info(f.code).name
        if names is not None:
            names[f.code] = name
    return {
        "code": f.code,
        "rule": name,
        "severity": _SEVERITY[f.severity],
        "message": printable(f.message),
        "location": location_dict(f.location, artifacts),
        "fix": None if f.fix is None else fix_dict(f.fix),
        "evidence": _jsonable(f.evidence),
        "origin": f.origin,
        "fingerprint": f.fingerprint(),
    }


def fix_dict(fix: Fix) -> dict[str, Any]:
    """A fix as JSON (SARIF's result properties carry the same texts)."""
    return {
        "description": printable(fix.description),
        "user": printable(fix.user) if fix.user else None,
        "maintainer": printable(fix.maintainer) if fix.maintainer else None,
        "applicability": str(fix.applicability),
        "edits": [
            {
                "member": e.member,
                "start": {"line": e.start_line, "column": e.start_column},
                "end": {"line": e.end_line, "column": e.end_column},
                "content": e.content,
            }
            for e in fix.edits
        ],
    }


def skipped_dict(s: Skipped, artifacts: dict[ArtifactRef, dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"location": location_dict(s.location, artifacts), "reason": printable(s.reason), "code": s.code or None}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):  # a string, what evidence holds most, without a call
        return {k if type(k) is str else str(k): v if type(v) is str else _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_jsonable(v) for v in value]
        return sorted(items, key=str) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def environment_dict(env: EnvironmentInfo) -> dict[str, Any]:
    return {
        "python": env.python,
        "version": env.version,
        "implementation": env.implementation,
        "platform": env.platform,
        "prefix": env.prefix,
        "site_dirs": list(env.site_dirs),
        "sys_path": list(env.sys_path),
        "environ": dict(env.environ),
    }


def document(report: "Report") -> dict[str, Any]:
    """The report as JSON data.  Names that are not valid UTF-8 show their bytes as ``\\xNN``;
    messages and fix texts are display text, with controls and bidi characters escaped too."""
    return valid_unicode_deep(_document(report))


def _document(report: "Report") -> dict[str, Any]:
    """:func:`document` before :func:`~cuaudit.escape.valid_unicode_deep`."""
    env = report.environment
    counts = report.counts()
    rule_names: dict[str, str] = {}
    artifacts: dict[ArtifactRef, dict[str, Any]] = {}
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "cuaudit", "version": report.tool_version},
        "command": report.command,
        "inputs": [artifact_dict(a) for a in report.artifacts],
        "environment": None if env is None else environment_dict(env),
        "summary": {
            **counts,
            "total": len(report.findings),
            "suppressed": report.suppressed,
            "baselined": report.baselined,
            "skipped": len(report.skipped),
            "fail_on": str(report.config.fail_on),
            "exit_code": report.exit_code(),
        },
        "rules": report.rules,
        "findings": [finding_dict(f, rule_names, artifacts) for f in report.findings],
        "skipped": [skipped_dict(s, artifacts) for s in report.skipped],
        "probes": [
            {"what": p.what, "command": p.command, "seconds": p.seconds, "outcome": p.outcome} for p in report.probes
        ],
        "stats": dict(report.stats),
    }


def statistics_document(report: "Report") -> list[dict[str, Any]]:
    """``--statistics --format json``: one row per rule code, most frequent first (ruff's shape, plus severities)."""
    from cuaudit.report.grouping import statistics

    return [
        {"code": r.code, "name": r.name, "count": r.count, **r.by_severity, "fixable": r.fixable}
        for r in statistics(report.findings)
    ]


def render_statistics(report: "Report") -> str:
    return dumps(statistics_document(report)) + "\n"


#: how the ASCII JSON text shows a string's surrogate code point (an astral character is written as
#: a pair of them, and a backslash before "ud8" looks alike: those only take render the long way)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


def render(report: "Report", *, color: bool = False) -> str:
    # valid_unicode_deep changes only strings holding a surrogate, and the ASCII text shows each one
    # as a \ud8xx-\udfxx escape: without one, walking the document for it (a third of rendering
    # 3,266 findings) would change nothing
    doc = _document(report)
    text = dumps(doc)
    if _SURROGATE_ESCAPE.search(text):
        text = dumps(valid_unicode_deep(doc))
    return text + "\n"
