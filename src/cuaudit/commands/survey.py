"""``cuaudit survey SPEC.toml``: audit every release a spec names, on Dask, and report regressions."""

from __future__ import annotations

import argparse
import os
import sys


def configure_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "survey",
        help="audit every release of a set of packages (on Dask), then report regressions and compatibility",
        description="List the releases SPEC.toml names from the package index, fetch one wheel per release, "
        "audit each like `check` on a Dask cluster (a local one by default), store the results in a database, "
        "and report what each release broke relative to the previous one and to the survey's consumers. "
        "Re-running audits only releases not yet recorded. Exit 1 when there are regressions or failed releases.",
    )
    p.add_argument("spec", metavar="SPEC.toml", help="the packages and releases to survey (see docs/survey.md)")
    p.add_argument("--db", metavar="FILE", help="survey database (default: SPEC with the suffix .sqlite3)")
    p.add_argument("--workers", type=int, help="local Dask workers (default: usable CPUs)")
    p.add_argument("--scheduler", metavar="ADDR", help="use an existing Dask cluster, e.g. tcp://HOST:8786")
    p.add_argument("--platform", help="PYTAG-PLATFORM of the wheel to audit per release (default: the spec's, "
                   "else cp311-manylinux_x86_64)")
    p.add_argument("--index-url", help="package index (default: the spec's, else pip's configured index-url)")
    p.add_argument("--wheelhouse", metavar="DIR", help="take releases from the wheels in DIR instead of an index "
                   "(no network)")
    p.add_argument("--report-only", action="store_true", help="list and audit nothing: report from the database")
    p.add_argument("--format", "-f", choices=("text", "json", "html"), default="text")
    p.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    p.add_argument("--constraints", metavar="FILE", help="also write a pip constraints file excluding the "
                   "provider releases that break the consumers (--for, default: each consumer's newest release)")
    p.add_argument("--for", dest="for_", action="append", default=[], metavar="NAME==VERSION",
                   help="consumer release the constraints protect (repeatable)")
    p.add_argument("--cache-dir", help="where workers keep downloads and facts (env CUAUDIT_CACHE_DIR)")
    p.add_argument("--no-cache", action="store_true", help="workers neither read nor write the fact cache")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    p.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from cuaudit.survey.render import render
    from cuaudit.survey.report import build_report
    from cuaudit.survey.run import execute as run, plan
    from cuaudit.survey.spec import load_spec
    from cuaudit.survey.store import open_store
    from cuaudit.survey.work import TaskOptions

    spec = load_spec(args.spec)
    store = open_store(args.db or os.path.splitext(args.spec)[0] + ".sqlite3")
    try:
        run_stats = None
        unavailable: list = []
        if not args.report_only:
            todo = plan(spec, store, index_url=args.index_url, wheelhouse=args.wheelhouse, platform=args.platform)
            unavailable = todo.unavailable
            if not args.quiet:
                print(f"survey: {len(todo.selected)} releases selected, {len(todo.selected) - len(todo.todo)} already "
                      f"recorded, {len(todo.todo)} to audit", file=sys.stderr)
            options = TaskOptions(cache_dir=args.cache_dir or None, fact_cache=not args.no_cache)
            stats = run(todo.todo, store, workers=args.workers, scheduler=args.scheduler, options=options,
                        on_result=None if args.quiet else _progress)
            if stats.releases:
                run_stats = stats.as_dict()
        report = build_report(store, packages=[s.name for s in spec.packages])
        report.run, report.unavailable = run_stats, unavailable
        text = render(report, args.format)
        if args.output:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(text)
        else:
            sys.stdout.write(text)
        if args.constraints:
            with open(args.constraints, "w", encoding="utf-8") as fh:
                fh.write(report.constraints(args.for_))
        return report.exit_code
    finally:
        store.close()


def _progress(result, n: int, total: int, stats) -> None:
    f = result.file
    what = f"failed: {result.error}" if result.error else f"{len(result.findings)} findings"
    print(f"survey: [{n}/{total}] {f.package} {f.version}: {what} ({(f.size or 0) / 1e6:.1f} MB; download "
          f"{result.download_seconds:.1f} s, audit {result.audit_seconds:.1f} s; {stats.bytes_audited / 1e9:.2f} GB "
          f"audited so far)", file=sys.stderr, flush=True)
