"""A self-contained HTML report (one file: no scripts, no external styles or fonts).

Rendered with jinja2 from ``templates/report.html.j2`` with autoescaping on:
every value that comes from an audited artifact (member names, messages,
evidence, fix text) is escaped, because wheels and their file names are
untrusted input.  The report is deterministic for the same inputs except
for the run statistics in its footer.
"""

from __future__ import annotations

import json
from itertools import groupby
from typing import TYPE_CHECKING, Any

from cuaudit.model import ArtifactKind, ArtifactRef, Finding, Severity
from cuaudit.report.json_report import environment_dict

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.engine import Report

_KIND_LABEL = {
    ArtifactKind.WHEEL: "wheel",
    ArtifactKind.SDIST: "sdist",
    ArtifactKind.TREE: "source tree",
    ArtifactKind.FILE: "file",
    ArtifactKind.INSTALLED: "installed distribution",
}


def _template():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("cuaudit.report", "templates"),
        autoescape=True,  # all output is HTML; never trust artifact-controlled text
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    return env.get_template("report.html.j2")


def _artifact_title(ref: ArtifactRef) -> str:
    from cuaudit.report.text import _shown_path

    if ref.kind is ArtifactKind.INSTALLED:
        return f"{ref.name} {ref.version}".strip()
    return _shown_path(ref.path)


def _finding_view(f: Finding) -> dict[str, Any]:
    from cuaudit.report.json_report import _jsonable
    from cuaudit.rules import get

    loc = f.location
    pos = ""
    if loc.line is not None:
        pos = f"{loc.line}:{loc.column}" if loc.column is not None else str(loc.line)
    try:
        rule_name = get(f.code).name
    except KeyError:
        rule_name = ""
    fix = None
    if f.fix is not None:
        fix = {
            "description": f.fix.description,
            "applicability": str(f.fix.applicability),
            "edits": [
                {
                    "member": e.member,
                    "span": f"{e.start_line}:{e.start_column}-{e.end_line}:{e.end_column}",
                    "content": e.content,
                }
                for e in f.fix.edits
            ],
        }
    evidence = _jsonable(f.evidence)
    return {
        "code": f.code,
        "rule": rule_name,
        "severity": str(f.severity),
        "message": f.message,
        "position": pos,
        "symbol": loc.symbol or "",
        "origin": f.origin,
        "fix": fix,
        "evidence": json.dumps(evidence, indent=2, ensure_ascii=False, sort_keys=True) if evidence else "",
        "fingerprint": f.fingerprint(),
    }


def _groups(report: "Report") -> list[dict[str, Any]]:
    out = []
    for ref, items in groupby(report.findings, key=lambda f: f.location.artifact):
        findings = list(items)
        members = []
        for member, sub in groupby(findings, key=lambda f: f.location.member or ""):
            members.append({"member": member, "findings": [_finding_view(f) for f in sub]})
        worst = max(f.severity for f in findings)
        out.append(
            {
                "title": _artifact_title(ref),
                "kind": _KIND_LABEL[ref.kind],
                "path": ref.path,
                "name": ref.name,
                "version": ref.version,
                "count": len(findings),
                "worst": str(worst),
                "members": members,
            }
        )
    return out


def _rules(report: "Report") -> list[dict[str, Any]]:
    from cuaudit.rules import get

    out = []
    for code in sorted({f.code for f in report.findings}):
        try:
            doc = get(code).doc()
        except KeyError:
            continue
        out.append({"code": code, "name": doc.name, "summary": doc.summary, "severity": str(doc.severity),
                    "family": doc.family, "sections": list(doc.sections.items())})
    return out


def context(report: "Report") -> dict[str, Any]:
    """Everything the template shows, as plain data."""
    from cuaudit.report.text import summary_line

    counts = report.counts()
    env = report.environment
    return {
        "tool_version": report.tool_version,
        "command": report.command,
        "summary_line": summary_line(report, timing=False),  # timings only in the footer
        "counts": counts,
        "total": len(report.findings),
        "failing": bool(report.failing()),
        "fail_on": str(report.config.fail_on),
        "exit_code": report.exit_code(),
        "suppressed": report.suppressed,
        "baselined": report.baselined,
        "inputs": [
            {"kind": _KIND_LABEL[a.kind], "path": a.path, "label": f"{a.name} {a.version}".strip()}
            for a in report.artifacts
        ],
        "groups": _groups(report),
        "rules": _rules(report),
        "skipped": [{"where": str(s.location), "reason": s.reason, "code": s.code} for s in report.skipped],
        "probes": [
            {"what": p.what, "command": p.command, "seconds": f"{p.seconds:.2f}", "outcome": p.outcome}
            for p in report.probes
        ],
        "environment": None if env is None else {**environment_dict(env), "environ": sorted(env.environ.items())},
        "rules_run": len(report.rules),
        "stats": sorted((str(k), v) for k, v in report.stats.items()),
        "severities": [str(s) for s in sorted(Severity, reverse=True)],
    }


def render(report: "Report", *, color: bool = False) -> str:
    return _template().render(**context(report))
