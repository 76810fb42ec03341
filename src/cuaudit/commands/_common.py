"""Options shared by the auditing commands (check, env, diff), and their output."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from cuaudit.report import FORMATS


def add_audit_options(p: argparse.ArgumentParser) -> None:
    sel = p.add_argument_group("rule selection")
    sel.add_argument("--select", help="comma-separated rule codes or prefixes to enable (default: ALL)")
    sel.add_argument("--ignore", help="comma-separated rule codes or prefixes to disable")
    sel.add_argument("--extend-select", help="add to the selection from the configuration")
    sel.add_argument("--extend-ignore", help="add to the ignores from the configuration")
    sel.add_argument("--target-arch", dest="target_archs", help="GPU architectures to cover, e.g. sm_80,sm_90")
    sel.add_argument("--exclude", help="comma-separated globs of source-tree paths never read (replaces the configured list)")
    out = p.add_argument_group("output")
    out.add_argument("--format", "-f", choices=sorted(FORMATS), default=os.environ.get("CUAUDIT_FORMAT", "text"),
                     help="report format (env CUAUDIT_FORMAT; default text)")
    out.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    out.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    out.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    out.add_argument("--verbose", "-v", action="store_true", help="also list skipped items")
    gate = p.add_argument_group("exit status")
    gate.add_argument("--fail-on", choices=("error", "warning", "info"),
                      help="lowest severity that makes the exit status 1 (default: warning)")
    gate.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    gate.add_argument("--baseline", metavar="FILE", help="ignore findings recorded in this baseline file")
    gate.add_argument("--write-baseline", metavar="FILE", help="record the current findings in FILE and exit 0")
    cfg = p.add_argument_group("configuration")
    cfg.add_argument("--config", metavar="PYPROJECT", help="read [tool.cuaudit] from this file")
    cfg.add_argument("--isolated", action="store_true", help="ignore configuration files")
    cfg.add_argument("--no-cache", action="store_true", help="neither read nor write the fact cache")
    cfg.add_argument("--cache-dir", help="fact cache directory (env CUAUDIT_CACHE_DIR)")
    cfg.add_argument("--jobs", "-j", type=int, help="worker processes for fact extraction (default: CPUs)")
    cfg.add_argument("--probe", action="store_true",
                     help="also import audited code in a subprocess to confirm findings (never by default)")
    cfg.add_argument("--probe-timeout", type=float, help="seconds per probe subprocess (default 60)")


def config_from_args(args: argparse.Namespace) -> Any:
    from cuaudit import config

    overrides: dict[str, Any] = {
        "select": args.select,
        "ignore": args.ignore,
        "extend-select": args.extend_select,
        "extend-ignore": args.extend_ignore,
        "target-archs": args.target_archs,
        "exclude": args.exclude,
        "fail-on": args.fail_on,
        "baseline": args.baseline,
        "jobs": args.jobs,
        "cache-dir": args.cache_dir,
        "probe-timeout": args.probe_timeout,
    }
    if getattr(args, "write_baseline", None):
        # Writing a baseline records every current finding, including those the
        # configured baseline already accepts (or refreshing it would drop them).
        overrides["baseline"] = ""
    if args.no_cache:
        overrides["cache"] = False
    if args.probe:
        overrides["probe"] = True
    loaded = config.load(config_file=args.config, isolated=args.isolated, overrides=overrides)
    from cuaudit.rules import validate_config

    validate_config(loaded)  # a selector that matches no rule, an unknown option: exit 2 before any work
    return loaded


def use_color(args: argparse.Namespace, stream: Any) -> bool:
    if args.color == "always":
        return True
    if args.color == "never" or args.output or os.environ.get("NO_COLOR"):
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


def make_progress(args: argparse.Namespace) -> Any:
    in_ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    if args.quiet or in_ci or not sys.stderr.isatty():
        return None
    return RichProgress()


class RichProgress:
    """A progress bar on stderr (only created when stderr is a terminal)."""

    def __init__(self) -> None:
        self._progress = None
        self._task = None

    def start(self, total: int, description: str) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
            console=Console(stderr=True), transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task(description, total=total)

    def advance(self, n: int = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, n)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def emit(report: Any, args: argparse.Namespace) -> int:
    """Write the report as asked; return the exit status."""
    from cuaudit.baseline import write_baseline
    from cuaudit.report import render

    if args.write_baseline:
        try:
            n = write_baseline(args.write_baseline, report.findings)
        except OSError as exc:
            from cuaudit.config import ConfigError

            raise ConfigError(f"cannot write the baseline to {args.write_baseline}: {exc.strerror or exc}") from None
        print(f"cuaudit: wrote {n} findings to baseline {args.write_baseline}", file=sys.stderr)
        return 0
    from cuaudit.commands.cache import enforce_cap

    enforce_cap(report.config)
    # Reports state the exit status (SARIF invocation.exitCode, JSON summary.exit_code).
    report.exit_zero = bool(args.exit_zero)
    stream = sys.stdout
    color = use_color(args, stream)
    if args.format == "text":
        from cuaudit.report.text import render as render_text

        text = render_text(report, color=color, verbose=args.verbose)
    else:
        text = render(report, args.format, color=color)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            from cuaudit.config import ConfigError

            raise ConfigError(f"cannot write the report to {args.output}: {exc.strerror or exc}") from None
        from cuaudit.report.text import summary_line

        print(summary_line(report), file=sys.stderr)
    else:
        stream.write(text)
        stream.flush()
    return report.exit_code()
