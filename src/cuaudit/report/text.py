"""The human report: findings grouped by artifact and file, a summary line last."""

from __future__ import annotations

import io
import os
from itertools import groupby
from typing import TYPE_CHECKING

from cuaudit.model import ArtifactKind, Severity

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.engine import Report

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
#: Past this many info findings, the text report tallies them instead of listing them
#: (a whole CUDA environment has hundreds; `cuaudit env` must fit the cause on one screen).
INFO_LIST_LIMIT = 10


def _shown_path(path: str) -> str:
    """A path as the user would type it: relative when under the working directory."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if rel.startswith("..") or os.path.isabs(rel) else rel


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary_line(report: "Report", *, timing: bool = True) -> str:
    c = report.counts()
    total = len(report.findings)
    if total == 0:
        head = "No findings"
    else:
        head = f"Found {_plural(total, 'finding')} ({c['error']} error, {c['warning']} warning, {c['info']} info)"
    head += f" in {_plural(len(report.artifacts), 'artifact')}"
    extra = []
    if report.suppressed:
        extra.append(f"{report.suppressed} suppressed inline")
    if report.baselined:
        extra.append(f"{report.baselined} in baseline")
    if report.skipped:
        extra.append(f"{len(report.skipped)} skipped")
    if report.probes:
        extra.append(f"{_plural(len(report.probes), 'probe')} ran audited code")
    if extra:
        head += f" [{', '.join(extra)}]"
    secs = report.stats.get("seconds") if timing else None
    if secs is not None:
        head += f" in {secs:.2f}s"
    return head + "."


def render(report: "Report", *, color: bool = False, verbose: bool = False) -> str:
    from rich.console import Console
    from rich.markup import escape
    from rich.text import Text

    buf = io.StringIO()
    console = Console(
        file=buf, force_terminal=color, no_color=not color, width=100 if not color else None,
        highlight=False, soft_wrap=True, color_system="standard" if color else None,
    )
    if report.environment is not None:
        env = report.environment
        console.print(
            f"[bold]Environment[/bold] {escape(env.python)} (Python {env.version}, {env.platform}); "
            f"{_plural(len(report.artifacts), 'distribution')} in {', '.join(map(escape, env.site_dirs)) or '-'}"
        )
        console.print()

    def artifact_key(f):
        return f.location.artifact

    infos = [f for f in report.findings if f.severity is Severity.INFO]
    hide_info = not verbose and len(infos) > INFO_LIST_LIMIT
    shown = [f for f in report.findings if not (hide_info and f.severity is Severity.INFO)]
    groups = [(ref, list(group)) for ref, group in groupby(shown, key=artifact_key)]
    # Artifacts with errors first: the cause of a broken import should be on the first screen.
    groups.sort(key=lambda g: -max(f.severity for f in g[1]))
    for ref, items in groups:
        title = _shown_path(ref.path) if ref.kind is not ArtifactKind.INSTALLED else f"{ref.name} {ref.version}"
        kind = {ArtifactKind.INSTALLED: "installed", ArtifactKind.WHEEL: "wheel", ArtifactKind.SDIST: "sdist",
                ArtifactKind.TREE: "tree", ArtifactKind.FILE: "file"}[ref.kind]
        console.print(Text.assemble((title, "bold underline"), f"  ({kind}, {_plural(len(items), 'finding')})"))
        for member, sub in groupby(items, key=lambda f: f.location.member or ""):
            if member:
                console.print(Text("  " + member, style="bold"))
            for f in sub:
                loc = f.location
                pos = ""
                if loc.line is not None:
                    pos = f"{loc.line}:{loc.column}" if loc.column is not None else f"{loc.line}"
                line = Text("    ")
                if pos:
                    line.append(pos + " ", style="dim")
                line.append(f.code, style=_STYLE[f.severity])
                line.append(f" {f.severity}", style=_STYLE[f.severity])
                if loc.symbol:
                    line.append(f" [{loc.symbol}]", style="magenta")
                if f.origin != "static":
                    line.append(f" ({f.origin})", style="green")
                # continuation lines of a message stay inside its finding
                line.append(" " + f.message.replace("\n", "\n      "))
                console.print(line)
                if f.fix is not None:
                    fix = Text("      fix: ", style="green")
                    fix.append(f.fix.description.replace("\n", "\n      "))
                    if f.fix.edits:
                        fix.append(f" [{f.fix.applicability} autofix]", style="dim")
                    console.print(fix)
        console.print()
    if hide_info:
        tally: dict[str, int] = {}
        for f in infos:
            tally[f.code] = tally.get(f.code, 0) + 1
        parts = ", ".join(f"{code} \u00d7{n}" for code, n in sorted(tally.items()))
        console.print(Text(f"{_plural(len(infos), 'info finding')} not listed ({parts}); -v lists them.", style="cyan"))
        console.print()
    if report.skipped and verbose:
        console.print(Text("Skipped", style="bold"))
        for s in report.skipped:
            console.print(f"  {escape(str(s.location))}: {escape(s.reason)}")
        console.print()
    if report.probes:
        console.print(Text("Probes (audited code was imported in a subprocess)", style="bold"))
        for p in report.probes:
            console.print(f"  {escape(p.what)}: {escape(p.outcome)} ({p.seconds:.2f}s) `{escape(p.command)}`")
        console.print()
    style = "bold red" if report.failing() else "bold green"
    console.print(Text(summary_line(report), style=style))
    return buf.getvalue()
