"""``cuaudit repair WHEEL|NAME==VERSION... [-w DIR]``: rewrite wheels without their unused DT_NEEDED entries (CU201).

The output is marked as cuaudit's in the PEP 427 build-tag slot (``1cuaudit``) and in WHEEL's
``Build:`` line, so a repaired wheel is never mistaken for the release it came from.
"""

from __future__ import annotations

import argparse
import sys


def configure_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "repair",
        help="rewrite wheels without the DT_NEEDED entries they do not use (CU201), as --as-needed would",
        description="For each WHEEL (a file, or NAME==VERSION fetched from the index like `check` does), find the "
        "needed libraries that supply none of a file's symbols (CU201) and write DIR/<name>-<version>-1cuaudit-"
        "<tags>.whl with those entries removed from the dynamic sections, WHEEL's Build line set and RECORD "
        "rewritten. Compatibility tags and every other member are unchanged. Nothing is imported or run.",
    )
    p.add_argument("wheels", nargs="+", metavar="WHEEL", help="a wheel file, or NAME==VERSION")
    p.add_argument("-w", "--wheel-dir", "-o", "--output-dir", dest="output_dir", metavar="DIR", default="wheelhouse",
                   help="where to write the repaired wheels (default: wheelhouse, as auditwheel)")
    p.add_argument("--dry-run", action="store_true", help="list the edits, write nothing")
    p.add_argument("--with", dest="with_", action="append", default=[], metavar="PATH",
                   help="extra wheels or library folders that supply needed libraries (evidence only)")
    p.add_argument("--config", metavar="PYPROJECT", help="read [tool.cuaudit] from this file (allow-lists)")
    p.add_argument("--isolated", action="store_true", help="ignore configuration files")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the fact cache")
    p.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from cuaudit import config as config_mod
    from cuaudit.repair.wheel import plan, rewrite_wheel

    overrides: dict = {}
    if args.no_cache:
        overrides["cache"] = False
    if args.with_:
        overrides["linkage"] = {"with": list(args.with_)}
    config = config_mod.load(config_file=args.config, isolated=args.isolated, overrides=overrides)
    status = 0
    for wheel in args.wheels:
        wheel = _wheel_file(wheel, config)
        if wheel is None:
            status = 2
            continue
        if not wheel.endswith(".whl"):
            print(f"cuaudit repair: {wheel}: not a wheel (.whl)", file=sys.stderr)
            status = 2
            continue
        try:
            removals = plan(wheel, config)
            result = rewrite_wheel(wheel, removals, args.output_dir, dry_run=args.dry_run)
        except (OSError, ValueError) as exc:
            print(f"cuaudit repair: {wheel}: {exc}", file=sys.stderr)
            status = 2
            continue
        n = sum(len(r.libraries) for r in result.removals)
        for r in result.removals:
            print(f"{r.member}: remove DT_NEEDED {', '.join(r.libraries)}")
        if args.dry_run:
            print(f"{wheel}: {n} DT_NEEDED entries in {len(result.removals)} files would be removed (dry run)")
        elif result.output:
            print(f"{wheel}: {n} DT_NEEDED entries removed from {len(result.removals)} files -> {result.output}")
        else:
            print(f"{wheel}: nothing to repair")
    return status


def _wheel_file(spec: str, config) -> str | None:
    """A wheel on disk for ``spec``: the path itself, or NAME==VERSION fetched (and cached) like `check` does."""
    import os

    from cuaudit.inputs.index import fetch_requirement, looks_like_requirement
    from cuaudit.inputs.wheel import WheelArtifact

    if os.path.lexists(spec) or not looks_like_requirement(spec):
        return spec
    art = fetch_requirement(spec, cache_dir=config.cache_dir)
    if not isinstance(art, WheelArtifact):
        why = art.problems[0].message if getattr(art, "problems", None) else "no wheel for this platform (sdist only)"
        print(f"cuaudit repair: {spec}: {why}", file=sys.stderr)
        return None
    return art.ref.path
