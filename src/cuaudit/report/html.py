"""A self-contained HTML report: one file, inline CSS, no script, nothing fetched.

Rendered with jinja2 from ``templates/report.html.j2`` with autoescaping on,
after every value from an audited artifact went through
:func:`cuaudit.escape.printable` (wheels and their file names are
untrusted input: markup, control and bidi characters, undecodable bytes).

What a reader sees first is the verdict and a summary per package and per
rule; findings follow by artifact, errors first, with findings alike grouped
(``grouping.py``) and their places behind a disclosure.  The severity filter
is a row of checkboxes that CSS alone acts on (info is off at first: on
cupy the first screen used to be info-level ``libpthread … harmless``).
Large environments stay quick to open: artifacts are ``<details>`` (closed
past :data:`OPEN_ARTIFACTS`), long place lists and evidence are closed, and
``content-visibility`` lets the browser skip laying out what is off screen.
The report is deterministic for the same inputs except for the run
statistics in its footer.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from cuaudit.model import ArtifactKind, Finding, Severity
from cuaudit.report import fix_parts
from cuaudit.escape import printable
from cuaudit.report.grouping import Block, Section, sections, shown_path, statistics
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
#: Artifacts with errors or warnings shown open; past this many, the rest start closed.
OPEN_ARTIFACTS = 25
#: Places of a group shown before the rest is folded away.
PLACES_SHOWN = 5
#: Evidence (JSON) is shown for at most this many findings per report: beyond, it is in the JSON report.
EVIDENCE_LIMIT = 500
#: Past this many findings, info findings show without their fix (a large environment has
#: thousands; their fixes are in the rule's documentation and the JSON report).
LARGE_REPORT = 3000
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_SEVERITIES = [str(s) for s in sorted(Severity, reverse=True)]


def code_spans(text: str) -> Any:
    """Escaped ``text`` with its `backtick` spans as <code> (the filter the template calls ``code``)."""
    from markupsafe import Markup, escape

    return Markup(_CODE_SPAN.sub(r"<code>\1</code>", str(escape(printable(text)))))


def _template():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("cuaudit.report", "templates"),
        autoescape=True,  # all output is HTML; never trust artifact-controlled text
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["code"] = code_spans
    return env.get_template("report.html.j2")


def _sevset(findings) -> str:
    """``sevset-ew``: the severities present, for the CSS filter (hidden when all of them are off)."""
    present = {str(f.severity) for f in findings}
    return "sevset-" + "".join(s[0] for s in _SEVERITIES if s in present)


class _Views:
    def __init__(self, large: bool) -> None:
        self.evidence_left = EVIDENCE_LIMIT
        self.large = large

    def finding(self, f: Finding) -> dict[str, Any]:
        from cuaudit.report.json_report import _jsonable
        from cuaudit.rules import info

        loc = f.location
        pos = ""
        if loc.line is not None:
            pos = f"{loc.line}:{loc.column}" if loc.column is not None else str(loc.line)
        try:
            rule_name = info(f.code).name
        except KeyError:
            rule_name = ""
        fix = None
        if f.fix is not None and not (self.large and f.severity is Severity.INFO):
            fix = {
                "parts": fix_parts(f.fix),
                "applicability": str(f.fix.applicability),
                "edits": [
                    {
                        "member": printable(e.member),
                        "span": f"{e.start_line}:{e.start_column}-{e.end_line}:{e.end_column}",
                        "content": printable(e.content, multiline=True),
                    }
                    for e in f.fix.edits
                ],
            }
        evidence = ""
        if f.evidence and self.evidence_left > 0 and f.severity > Severity.INFO:
            self.evidence_left -= 1
            evidence = printable(json.dumps(_jsonable(f.evidence), indent=1, ensure_ascii=False, sort_keys=True),
                                 multiline=True)
        return {
            "code": f.code,
            "rule": rule_name,
            "severity": str(f.severity),
            "message": f.message,  # the template's `code` filter escapes it
            "position": pos,
            "symbol": printable(loc.symbol or ""),
            "origin": printable(f.origin),
            "fix": fix,
            "evidence": evidence,
        }

    def block(self, b: Block) -> dict[str, Any]:
        view: dict[str, Any] = {
            "grouped": b.grouped,
            "member": printable(b.member),
            "severity": str(b.severity),
            "sevset": _sevset(b.findings),
        }
        if b.grouped:
            noun = ("symbols" if b.member else
                    "places" if any(f.location.line is not None for f in b.findings) else "files")
            places = [printable(p) for p in b.places]
            view.update(first=self.finding(b.first), noun=noun, count=len(places),
                        places=places[:PLACES_SHOWN], more=places[PLACES_SHOWN:])
        else:
            view["findings"] = [self.finding(f) for f in b.findings]
        return view

    def section(self, i: int, s: Section, open_: bool) -> dict[str, Any]:
        ref = s.ref
        return {
            "id": f"a{i}",
            "title": printable(s.title),
            "kind": _KIND_LABEL[ref.kind],
            "short_kind": str(ref.kind),
            "path": printable(shown_path(ref.path)),
            "count": len(s.findings),
            "counts": s.counts(),
            "worst": str(s.severity),
            "sevset": _sevset(s.findings),
            "open": open_,
            "blocks": [self.block(b) for b in s.blocks],
        }


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
    """Everything the template shows, as plain data (strings from inputs already printable)."""
    from cuaudit.report.text import summary_line

    counts = report.counts()
    env = report.environment
    views = _Views(large=len(report.findings) > LARGE_REPORT)
    secs = sections(report.findings)
    groups = []
    opened = 0
    for i, s in enumerate(secs):
        open_ = s.severity > Severity.INFO and opened < OPEN_ARTIFACTS
        opened += open_
        groups.append(views.section(i, s, open_))
    by_rule = [
        {"code": r.code, "name": r.name, "count": r.count, "counts": r.by_severity,
         "worst": next(s for s in _SEVERITIES if r.by_severity[s]),
         "sevset": "sevset-" + "".join(s[0] for s in _SEVERITIES if r.by_severity[s])}
        for r in statistics(report.findings)
    ]
    environment = None
    if env is not None:
        raw = environment_dict(env)
        environment = {k: printable(v) if isinstance(v, str) else [printable(x) for x in v]
                       for k, v in raw.items() if k != "environ"}
        environment["environ"] = sorted((printable(k), printable(v)) for k, v in env.environ.items())
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
            {"kind": _KIND_LABEL[a.kind], "path": printable(a.path), "label": printable(f"{a.name} {a.version}".strip())}
            for a in report.artifacts
        ],
        "groups": groups,
        "by_rule": by_rule,
        "rules": _rules(report),
        "skipped": [{"where": printable(str(s.location)), "reason": printable(s.reason), "code": s.code}
                    for s in report.skipped],
        "probes": [
            {"what": printable(p.what), "command": printable(p.command), "seconds": f"{p.seconds:.2f}",
             "outcome": printable(p.outcome)}
            for p in report.probes
        ],
        "environment": environment,
        "rules_run": len(report.rules),
        "stats": sorted((str(k), v) for k, v in report.stats.items()),
        "severities": _SEVERITIES,
        "evidence_omitted": views.evidence_left <= 0,
        "large": views.large,
    }


def render(report: "Report", *, color: bool = False) -> str:
    return _template().render(**context(report))
