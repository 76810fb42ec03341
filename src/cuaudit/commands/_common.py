"""Options shared by the auditing commands (check, env, diff), and their output."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from cuaudit.progress import RichProgress
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
    out.add_argument("--progress", action="store_true",
                     help="show the progress bar on stderr even when it is not a terminal, or in CI")
    out.add_argument("--verbose", "-v", action="store_true",
                     help="list every place of grouped findings, info findings and skipped items")
    out.add_argument("--statistics", action="store_true",
                     help="show counts per rule code instead of the findings (text or json)")
    gate = p.add_argument_group("exit status")
    gate.add_argument("--fail-on", choices=("error", "warning", "info"),
                      help="lowest severity that makes the exit status 1 (default: warning)")
    gate.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    gate.add_argument("--baseline", metavar="FILE", help="ignore findings recorded in this baseline file")
    gate.add_argument("--write-baseline", metavar="FILE", help="record the current findings in FILE and exit 0")
    cfg = p.add_argument_group("configuration")
    cfg.add_argument("--config", metavar="PYPROJECT", help="read [tool.cuaudit] from this file")
    cfg.add_argument("--isolated", action="store_true", help="ignore configuration files")
    cfg.add_argument("--no-cache", action="store_true", help="neither read nor write the fact cache of what is audited "
                     "(the standard library's facts stay cached)")
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


def text_width(args: argparse.Namespace, stream: Any) -> int | None:
    """Columns to wrap the text report to: the terminal's, or ``COLUMNS``; None (no wrapping) for files and pipes."""
    if args.output:
        return None
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if not getattr(stream, "isatty", lambda: False)():
        return None
    import shutil

    return shutil.get_terminal_size((100, 24)).columns


def make_progress(args: argparse.Namespace) -> Any:
    """A progress bar on stderr: on a terminal outside CI, or wherever ``--progress`` asks for it."""
    if getattr(args, "progress", False):
        from rich.console import Console

        return RichProgress(Console(stderr=True, force_terminal=True))
    in_ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    if args.quiet or in_ci or not sys.stderr.isatty():
        return None
    return RichProgress()


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
    if getattr(args, "statistics", False) and args.format not in ("text", "json"):
        from cuaudit.config import ConfigError

        raise ConfigError(f"--statistics works with --format text or json, not {args.format}")
    if args.format == "text":
        from cuaudit.report.text import render as render_text

        text = render_text(report, color=color, verbose=args.verbose, width=text_width(args, stream),
                           statistics_only=getattr(args, "statistics", False))
    elif args.format == "json" and getattr(args, "statistics", False):
        from cuaudit.report.json_report import render_statistics

        text = render_statistics(report)
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
