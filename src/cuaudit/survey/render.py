"""Survey report renderers: text, JSON, HTML.  No analysis here (see ``report.py``)."""

from __future__ import annotations

import html
import json

from cuaudit.survey.report import KINDS, SurveyReport

#: JSON report format version (``"format"`` in the document).
JSON_FORMAT = 1


def render(report: SurveyReport, fmt: str) -> str:
    return {"text": render_text, "json": render_json, "html": render_html}[fmt](report)


def _matrix_tables(report: SurveyReport) -> dict[tuple[str, str], dict]:
    """(consumer, provider) -> {"rows": consumer versions, "cols": provider versions, "cells": {(c, p): Cell}}."""
    from cuaudit.survey.report import _v

    out: dict[tuple[str, str], dict] = {}
    for cell in report.matrix:
        t = out.setdefault((cell.consumer, cell.provider), {"rows": set(), "cols": set(), "cells": {}})
        t["rows"].add(cell.consumer_version)
        t["cols"].add(cell.provider_version)
        t["cells"][(cell.consumer_version, cell.provider_version)] = cell
    for t in out.values():
        t["rows"] = sorted(t["rows"], key=_v)
        t["cols"] = sorted(t["cols"], key=_v)
    return out


_MARK = {"ok": "ok", "breaks": "XX", "pinned-out": "--"}


def render_text(report: SurveyReport) -> str:
    lines = [f"cuaudit survey: {len(report.releases)} releases of {len({r.package for r in report.releases})} "
             f"packages recorded, {len(report.failed)} failed"]
    if report.run:
        r = report.run
        lines.append(f"this run: {r['releases']} releases on {r['workers']} workers in {r['wall_seconds']:.1f} s "
                     f"({r['releases_per_minute']:.1f} releases/min, {r['bytes_per_second'] / 1e6:.1f} MB/s audited; "
                     f"download {r['download_seconds']:.1f} s, audit {r['audit_seconds']:.1f} s summed over workers)")
    for name, version, why in report.unavailable:
        lines.append(f"  not surveyed: {name} {version} {why}".rstrip())
    for note in report.notes:
        lines.append(f"  note: {note}")
    for r in report.failed:
        lines.append(f"  failed: {r.package} {r.version} ({r.filename}): {r.error}")
    lines += ["", f"Regressions ({len(report.regressions)})"]
    for kind in KINDS:
        for g in (x for x in report.regressions if x.kind == kind):
            lines.append(f"  {g.package} {g.version}{' (yanked)' * g.yanked} (after {g.previous}) [{g.kind}] {g.summary}")
            lines += [f"      {d}" for d in g.details[:5]]
            if len(g.details) > 5:
                lines.append(f"      ... {len(g.details) - 5} more")
            for b in g.breaks:
                lines.append(f"      breaks {b}")
    if not report.regressions:
        lines.append("  none")
    tables = _matrix_tables(report)
    lines += ["", "Compatibility matrix (XX breaks, -- excluded by the consumer's Requires-Dist, ok)"]
    for (consumer, provider), t in sorted(tables.items()):
        lines.append(f"  {consumer} (rows) x {provider} (columns)")
        width = max(len(v) for v in t["rows"])
        lines.append("  " + " " * width + " " + " ".join(f"{c:>{max(len(c), 2)}}" for c in t["cols"]))
        for rv in t["rows"]:
            marks = []
            for cv in t["cols"]:
                cell = t["cells"].get((rv, cv))
                marks.append(f"{_MARK[cell.verdict] if cell else '':>{max(len(cv), 2)}}")
            lines.append(f"  {rv:>{width}} " + " ".join(marks))
        reasons = sorted({(c.consumer_version, c.provider_version, c.problems[0]) for c in t["cells"].values()
                          if c.problems}, key=lambda x: x[2])
        for cv, pv, why in reasons[:8]:
            lines.append(f"    {consumer} {cv} x {provider} {pv}: {why}")
        if len(reasons) > 8:
            lines.append(f"    ... {len(reasons) - 8} more pairs break")
    if not tables:
        lines.append("  no consumer/provider pairs in this survey")
    return "\n".join(lines) + "\n"


def render_json(report: SurveyReport) -> str:
    doc = {
        "format": JSON_FORMAT,
        "releases": [{"package": r.package, "version": r.version, "filename": r.filename, "upload_time": r.upload_time,
                      "size": r.size, "download_seconds": r.download_seconds, "audit_seconds": r.audit_seconds,
                      "worker": r.worker} for r in report.releases],
        "failed": [{"package": r.package, "version": r.version, "filename": r.filename, "error": r.error}
                   for r in report.failed],
        "unavailable": [{"package": n, "version": v, "reason": why} for n, v, why in report.unavailable],
        "regressions": [g.as_dict() for g in report.regressions],
        "matrix": [c.as_dict() for c in report.matrix],
        "constraints": report.constraints(),
        "run": report.run,
        "notes": report.notes,
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def render_html(report: SurveyReport) -> str:
    e = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>cuaudit survey</title><style>"
             "body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:2px 6px;font-size:90%}"
             "table{border-collapse:collapse;margin-bottom:1em}.breaks{background:#f4b6b6}.ok{background:#c8eec8}"
             ".pinned-out{background:#eee}li.d{color:#555;font-size:90%}</style></head><body>",
             f"<h1>cuaudit survey</h1><p>{len(report.releases)} releases recorded, {len(report.failed)} failed.</p>",
             f"<h2>Regressions ({len(report.regressions)})</h2><ul>"]
    for g in report.regressions:
        parts.append(f"<li><b>{e(g.package)} {e(g.version)}{' (yanked)' * g.yanked}</b> (after {e(g.previous)}) <code>{e(g.kind)}</code> "
                     f"{e(g.summary)}<ul>")
        parts += [f"<li class='d'>{e(d)}</li>" for d in g.details[:10]]
        parts += [f"<li>breaks <b>{e(b)}</b></li>" for b in g.breaks]
        parts.append("</ul></li>")
    parts.append("</ul><h2>Compatibility matrix</h2>")
    for (consumer, provider), t in sorted(_matrix_tables(report).items()):
        parts.append(f"<h3>{e(consumer)} × {e(provider)}</h3><table><tr><th></th>"
                     + "".join(f"<th>{e(c)}</th>" for c in t["cols"]) + "</tr>")
        for rv in t["rows"]:
            parts.append(f"<tr><th>{e(rv)}</th>")
            for cv in t["cols"]:
                cell = t["cells"].get((rv, cv))
                if cell is None:
                    parts.append("<td></td>")
                else:
                    parts.append(f"<td class='{cell.verdict}' title='{e('; '.join(cell.problems))}'>{cell.verdict}</td>")
            parts.append("</tr>")
        parts.append("</table>")
    parts.append(f"<h2>Constraints</h2><pre>{e(report.constraints())}</pre></body></html>\n")
    return "".join(parts)
