"""``cuaudit check PATH...``: audit wheels, sdists, source trees, ELF files or NAME==VERSION."""

from __future__ import annotations

import argparse

from cuaudit.commands._common import add_audit_options, config_from_args, emit, make_progress


def configure_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="audit wheels, sdists, source trees, ELF files or NAME==VERSION (never runs them)",
        description="Audit what you are about to ship. Each PATH is a wheel, an sdist (.tar.gz/.zip), "
        "a source tree, a single file, or NAME==VERSION fetched from the configured index. "
        "Nothing is imported, built or run.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="what to audit (default: the current directory)")
    p.add_argument("--fix", action="store_true", help="apply safe automatic fixes to source files")
    p.add_argument("--unsafe-fixes", action="store_true", help="with --fix/--diff, also apply unsafe fixes")
    p.add_argument("--diff", action="store_true", help="print the automatic fixes as a diff, change nothing")
    p.add_argument("--with", dest="with_", action="append", default=[], metavar="PATH",
                   help="extra wheels or library folders that supply needed libraries: used as evidence "
                   "(linkage rules), not audited; also [tool.cuaudit.linkage] with = [...]")
    p.add_argument("--python", metavar="PYTHON",
                   help="also audit the installed distributions of this interpreter's environment; their versions "
                   "decide version-dependent severities (e.g. CU401: CuPy and NumPy versions). Nothing is imported")
    add_audit_options(p)
    p.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from cuaudit.engine import audit

    config = config_from_args(args)
    if getattr(args, "with_", None):
        import dataclasses

        options = dict(config.options)
        linkage = dict(options.get("linkage", {}))
        linkage["with"] = list(linkage.get("with", ())) + list(args.with_)
        options["linkage"] = linkage
        config = dataclasses.replace(config, options=options)
    report = audit(args.paths or ["."], env=args.python or None, config=config, progress=make_progress(args),
                   command="check")
    if args.fix or args.diff:
        from cuaudit.repair.source import apply_fixes

        result = apply_fixes(report, unsafe=args.unsafe_fixes, write=args.fix and not args.diff)
        for error in result.errors:
            print(f"cuaudit: not fixed: {error}", file=__import__("sys").stderr)
        if args.diff:
            import sys

            sys.stdout.write(result.diff)
            return 0 if args.exit_zero or not result.diff else 1
        report = result.remaining(report)
    return emit(report, args)
