"""The human report: artifacts by worst finding, findings alike grouped, a summary line last.

Layout (``grouping.py`` decides what is one entry and the order)::

    cupy-cuda11x 12.3.0  (wheel, 622 findings)
      CU201 error [libcublas.so.11] in 52 files
        cupy/_core/_accelerator….so needs CUDA library libcublas.so.11 but uses …
        also in cupy/_core/_carray….so, … and 49 more (-v lists them)
        user fix: …
        maintainer fix: …
      cupy/__init__.py
        CU202 warning [libcuda.so.1] `import cupy` loads …
          fix: …

Lines are wrapped at word boundaries to ``width`` (the terminal's, when the
report goes to one) with a hanging indent; a word longer than the line (a
long path) is never cut.  Everything that comes from an audited artifact is
passed through :func:`cuaudit.escape.printable`.
"""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING, Any, Callable

from cuaudit.model import ArtifactKind, Finding, Fix, Severity
from cuaudit.report import fix_parts
from cuaudit.escape import printable
from cuaudit.report.grouping import Block, sections, shown_path, statistics

if TYPE_CHECKING:  # pragma: no cover
    from rich.text import Text as RichText

    from cuaudit.engine import Report

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
#: Past this many info entries, the text report tallies them instead of listing them
#: (a whole CUDA environment has hundreds; `cuaudit env` must fit the cause on one screen).
INFO_LIST_LIMIT = 10
#: Places of a group listed without -v.
PLACES_SHOWN = 3
_KIND = {ArtifactKind.INSTALLED: "installed", ArtifactKind.WHEEL: "wheel", ArtifactKind.SDIST: "sdist",
         ArtifactKind.TREE: "tree", ArtifactKind.FILE: "file"}
_WORD = re.compile(r"\S+")


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


#: the control codes rich's Text drops from what it is given (rich.control.strip_control_codes)
_DROPPED = dict.fromkeys((7, 8, 11, 12, 13))


class Text:
    """A report line: its text, a style for all of it, and styled ranges, as rich's ``Text``
    builds them (the same sanitising).  Made into a rich ``Text`` only for the console: an
    uncoloured report writes :attr:`plain` and never imports rich (7 ms of start-up)."""

    __slots__ = ("plain", "style", "spans")

    def __init__(self, text: str = "", style: str = "") -> None:
        self.plain = text.translate(_DROPPED)
        self.style = style
        self.spans: list[tuple[int, int, str]] = []

    @classmethod
    def assemble(cls, *parts: "str | tuple[str, str]") -> "Text":
        line = cls()
        for part in parts:
            if isinstance(part, str):
                line.append(part)
            else:
                line.append(*part)
        return line

    def append(self, text: str, style: str | None = None) -> "Text":
        if text:
            clean = text.translate(_DROPPED)
            start = len(self.plain)
            self.plain += clean
            if style:
                self.spans.append((start, start + len(clean), style))
        return self

    def rich(self) -> "RichText":
        from rich.text import Span
        from rich.text import Text as RichText

        return RichText(self.plain, style=self.style, spans=[Span(*span) for span in self.spans])


def _breaks(plain: str, width: int | None, hang: int) -> list[int]:
    """Where ``plain`` is cut into lines of at most ``width`` cells, later lines indented by ``hang``.

    A word wider than the line stays whole on a line of its own (the terminal
    may fold it, cuaudit never cuts it).  ``width=None``: no cut.
    """
    if width is None:
        return []
    from rich.cells import cell_len

    if cell_len(plain) <= width:
        return []
    breaks: list[int] = []
    start, room, words = 0, width, 0
    for m in _WORD.finditer(plain):
        if words and cell_len(plain[start:m.end()]) > room:
            breaks.append(m.start())
            start, room, words = m.start(), max(width - hang, 1), 0
        words += 1
    return breaks


def wrap(text: "RichText", width: int | None, hang: int) -> list["RichText"]:
    """``text`` cut into lines (:func:`_breaks`), each stripped at its end; later lines indented by ``hang``."""
    breaks = _breaks(text.plain, width, hang)
    if not breaks:
        return [text]
    lines = list(text.divide(breaks))
    out = [lines[0]]
    for line in lines[1:]:
        out[-1].rstrip()
        line.pad_left(hang)
        out.append(line)
    out[-1].rstrip()
    return out


def wrap_plain(plain: str, width: int | None, hang: int) -> list[str]:
    """:func:`wrap` of the plain text alone: the same lines, without styles."""
    breaks = _breaks(plain, width, hang)
    if not breaks:
        return [plain]
    cuts = [0, *breaks, len(plain)]
    return [(" " * hang if i else "") + plain[a:b].rstrip() for i, (a, b) in enumerate(zip(cuts, cuts[1:]))]


class _Writer:
    def __init__(self, console: Callable[[], Any], out: io.StringIO, width: int | None, *, plain: bool = False) -> None:
        #: the rich console, made on first use: without colour only a line holding a tab needs it
        self._console = console
        self._made: Any = None
        self.out = out
        self.width = width
        #: no colour: a line without a tab is its plain text (what the console prints for it, without
        #: rendering styles; 0.14 s of the 0.58 s of a cached env report of 3,239 findings)
        self.plain = plain

    @property
    def console(self) -> Any:
        if self._made is None:
            self._made = self._console()
        return self._made

    def line(self, text: Text, hang: int = 0) -> None:
        if not self.plain:
            for piece in wrap(text.rich(), self.width, hang):
                self.console.print(piece)
            return
        for piece in wrap_plain(text.plain, self.width, hang):
            if "\t" not in piece:
                self.out.write(piece + "\n")
            else:  # the console expands tabs; without colour no style shows: the plain piece is the line
                self.console.print(Text(piece).rich())

    def blank(self) -> None:
        if self.plain:
            self.out.write("\n")
        else:
            self.console.print()


def _head(f: Finding, indent: str, *, position: bool = True, symbol: bool = True) -> "Text":
    loc = f.location
    line = Text(indent)
    if position and loc.line is not None:
        line.append((f"{loc.line}:{loc.column}" if loc.column is not None else f"{loc.line}") + " ", style="dim")
    line.append(f.code, style=_STYLE[f.severity])
    line.append(f" {f.severity}", style=_STYLE[f.severity])
    if symbol and loc.symbol:
        line.append(f" [{printable(loc.symbol)}]", style="magenta")
    if f.origin != "static":
        line.append(f" ({printable(f.origin)})", style="green")
    return line


def _fix_lines(fix: Fix, indent: str) -> list["Text"]:
    out = [Text.assemble(indent, (f"{label}: ", "green"), body) for label, body in fix_parts(fix)]
    if fix.edits:
        out[-1].append(f" [{fix.applicability} autofix]", style="dim")
    return out


def _write_block(w: _Writer, block: Block, verbose: bool) -> None:
    if not block.grouped:
        if block.member:
            w.line(Text("  " + printable(block.member), style="bold"), 4)
        for f in block.findings:
            w.line(_head(f, "    ").append(" " + printable(f.message)), 6)
            for fl in _fix_lines(f.fix, "      ") if f.fix is not None else ():
                w.line(fl, 8)
        return
    first, places = block.first, block.places
    if block.member:  # one file, several symbols
        w.line(Text("  " + printable(block.member), style="bold"), 4)
        head, indent, label = _head(first, "    ", symbol=False).append(f" for {len(places)} symbols", style="bold"), "      ", "for"
    else:
        noun = "places" if any(f.location.line is not None for f in block.findings) else "files"
        head, indent, label = _head(first, "  ", position=False).append(f" in {len(places)} {noun}", style="bold"), "    ", "in"
    w.line(head, len(indent))
    w.line(Text(indent + "e.g. " + printable(first.message)), len(indent) + 2)
    if verbose:
        for p in places:
            w.line(Text(indent + "  " + printable(p), style="dim"), len(indent) + 4)
    else:
        more = len(places) - PLACES_SHOWN
        listed = ", ".join(printable(p) for p in places[:PLACES_SHOWN])
        tail = f" and {more} more (-v lists them)" if more > 0 else ""
        w.line(Text(f"{indent}{label} {listed}{tail}", style="dim"), len(indent) + 2)
    for fl in _fix_lines(first.fix, indent) if first.fix is not None else ():
        w.line(fl, len(indent) + 2)


def _info_entries(report: "Report") -> int:
    return sum(
        1 if b.grouped else sum(1 for f in b.findings if f.severity is Severity.INFO)
        for s in sections([f for f in report.findings if f.severity is Severity.INFO])
        for b in s.blocks
    )


def render(
    report: "Report", *, color: bool = False, verbose: bool = False, width: int | None = None,
    statistics_only: bool = False,
) -> str:
    """The report as text; ``width``: wrap lines to it (None: one line per entry, for pipes and files)."""
    buf = io.StringIO()

    def console() -> Any:
        from rich.console import Console  # 10 ms of start-up that an uncoloured report seldom needs

        return Console(
            file=buf, force_terminal=color, no_color=not color, width=10_000,
            highlight=False, soft_wrap=True, color_system="standard" if color else None, markup=False, emoji=False,
        )

    w = _Writer(console, buf, width, plain=not color)
    if report.environment is not None:
        env = report.environment
        w.line(Text.assemble(
            ("Environment", "bold"),
            f" {printable(env.python)} (Python {printable(env.version)}, {printable(env.platform)}); "
            f"{_plural(len(report.artifacts), 'distribution')} in "
            f"{', '.join(printable(d) for d in env.site_dirs) or '-'}",
        ), 2)
        w.blank()
    if statistics_only:
        _write_statistics(w, report)
    else:
        _write_findings(w, report, verbose)
    style = "bold red" if report.failing() else "bold green"
    w.line(Text(summary_line(report), style=style), 2)
    return buf.getvalue()


def _write_findings(w: _Writer, report: "Report", verbose: bool) -> None:
    infos = [f for f in report.findings if f.severity is Severity.INFO]
    hide_info = not verbose and _info_entries(report) > INFO_LIST_LIMIT
    shown = [f for f in report.findings if not (hide_info and f.severity is Severity.INFO)]
    totals: dict = {}
    for f in report.findings:
        totals[f.location.artifact] = totals.get(f.location.artifact, 0) + 1
    for section in sections(shown):
        ref = section.ref
        w.line(Text.assemble((printable(section.title), "bold underline"),
                             f"  ({_KIND[ref.kind]}, {_plural(totals[ref], 'finding')})"), 2)
        if verbose and section.title != shown_path(ref.path):
            w.line(Text("  " + printable(shown_path(ref.path)), style="dim"), 4)
        for block in section.blocks:
            _write_block(w, block, verbose)
        w.blank()
    if hide_info:
        tally: dict[str, int] = {}
        for f in infos:
            tally[f.code] = tally.get(f.code, 0) + 1
        parts = ", ".join(f"{code} \u00d7{n}" for code, n in sorted(tally.items()))
        w.line(Text(f"{_plural(len(infos), 'info finding')} not listed ({parts}); -v lists them.", style="cyan"), 2)
        w.blank()
    if report.skipped and verbose:
        w.line(Text("Skipped", style="bold"))
        for s in report.skipped:
            w.line(Text(f"  {printable(str(s.location))}: {printable(s.reason)}"), 4)
        w.blank()
    if report.probes:
        w.line(Text("Probes (audited code was imported in a subprocess)", style="bold"))
        for p in report.probes:
            w.line(Text(f"  {printable(p.what)}: {printable(p.outcome)} ({p.seconds:.2f}s) `{printable(p.command)}`"), 4)
        w.blank()


def _write_statistics(w: _Writer, report: "Report") -> None:
    rows = statistics(report.findings)
    if not rows:
        return
    count_w = max(len(str(r.count)) for r in rows)
    name_w = max(len(r.name) for r in rows)
    for r in rows:
        nonzero = [(s, n) for s, n in r.by_severity.items() if n]
        worst = Severity.parse(nonzero[0][0])
        sev = nonzero[0][0] if len(nonzero) == 1 else ", ".join(f"{n} {s}" for s, n in nonzero)
        line = Text(f"{r.count:>{count_w}}  ")
        line.append(r.code, style=_STYLE[worst])
        line.append(f"  {r.name:<{name_w}}  {sev}")
        if r.fixable:
            line.append(f"  [{r.fixable} autofixable]", style="dim")
        w.line(line, count_w + 2)
    w.blank()
