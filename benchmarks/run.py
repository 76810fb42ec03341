#!/usr/bin/env python3
"""cuaudit side by side with the tools users run today, on the same inputs.

    python benchmarks/run.py                 # the full run (fetches the large corpus set)
    python benchmarks/run.py --quick         # small inputs only, a few seconds (CI)
    python benchmarks/run.py --cases 'check-*,dynsym-libtorch_cpu' --repeat 5 --json out.json
    python benchmarks/run.py --write-results cpu   # also update that section of RESULTS.md

Run it with the interpreter that has cuaudit and the ``bench`` extra
(``pip install -e '.[bench]'``).  Inputs come from the corpus
(``CUAUDIT_CORPUS``, default ``~/.cache/cuaudit/corpus``; fetched with
``scripts/fetch_corpus.py``, ``--large`` for the full run); members
extracted for peers that need files on disk and the environments built for
``cuaudit env`` are kept in ``CUAUDIT_BENCH_CACHE`` (``~/.cache/cuaudit/bench``).

For each case every command (cuaudit, each peer, the floor) runs as its own
process, alternating, ``--repeat`` times; the table gives the median wall time,
the peak memory (the larger of the child's ``ru_maxrss`` and the sampled
summed PSS of its process tree), and the time relative to cuaudit
(``× cuaudit`` > 1: cuaudit is faster).  The floor is the least work that
must be done in plain Python for the same answer (``floors.py``).
"""

from __future__ import annotations

import argparse
import importlib.util
import fnmatch
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from harness import (  # noqa: E402
    CASE_HEADER, SCALING_HEADER, TARGET_HEADER, Case, CaseResult, NotAvailable, Run, Runner, case_rows,
    machine_info, render_markdown, render_text, scaling_rows, scaling_summary, scaling_text, target_rows,
)

RESULTS = harness.BENCH / "RESULTS.md"


def select(cases: list[Case], quick: bool, names: str | None) -> list[Case]:
    if not names:
        return [c for c in cases if (c.quick if quick else c.full)]
    patterns = [n.strip() for n in names.split(",") if n.strip()]
    chosen = [c for c in cases if any(fnmatch.fnmatchcase(c.name, p) or c.name == p for p in patterns)]
    unknown = [p for p in patterns if not any(fnmatch.fnmatchcase(c.name, p) for c in cases)]
    if unknown:
        raise SystemExit(f"unknown case(s): {', '.join(unknown)} (see --list)")
    return chosen


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small inputs only (seconds; what CI runs)")
    p.add_argument("--cases", help="comma-separated case names or globs (default: every case of the mode)")
    p.add_argument("--repeat", type=int, help="runs of each command (default 3; 2 with --quick)")
    p.add_argument("--timeout", type=float, default=900, help="seconds one command may take (default 900)")
    p.add_argument("--json", metavar="FILE", help="also write every sample and figure as JSON")
    p.add_argument("--write-results", metavar="SECTION",
                   help="replace the generated block SECTION (e.g. cpu, gpu) of benchmarks/RESULTS.md")
    p.add_argument("--note", default="", help="a line to record with the results (e.g. 'machine shared, noisy')")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    return p.parse_args(argv)


def _fresh_bytecode(log: Callable[[str], None]) -> None:
    """Compile cuaudit's sources first: where ``PYTHONDONTWRITEBYTECODE`` is set (this machine's
    shell sets it) a module edited since its ``.pyc`` was written is compiled again by every
    command measured, 14 ms for ``engine.py``: a small wheel's check then lost to auditwheel's."""
    import compileall

    package = Path(importlib.util.find_spec("cuaudit").origin).parent  # type: ignore[arg-type, union-attr]
    if not compileall.compile_dir(str(package), quiet=1):
        log(f"could not compile everything under {package}: modules that did not compile are compiled per run")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if importlib.util.find_spec("cuaudit") is None:
        print(f"run.py: cuaudit is not importable from {sys.executable}; use the project's venv", file=sys.stderr)
        return 2
    from cases import CASES, SCALING, TOOLS

    if args.list:
        for c in CASES:
            mode = "quick+full" if c.quick and c.full else "quick" if c.quick else "full" if c.full else "on request"
            print(f"{c.name:<28} {mode:<10} {c.title}")
        return 0
    cases = select(CASES, args.quick, args.cases)
    repeat = args.repeat or (2 if args.quick else 3)
    started = time.perf_counter()

    def log(msg: str) -> None:
        if msg:
            print(f"[{time.perf_counter() - started:7.1f}s] {msg}", file=sys.stderr, flush=True)

    run = Run(large=not args.quick, log=log)
    _fresh_bytecode(log)
    work = Path(tempfile.mkdtemp(prefix="cuaudit-bench-"))
    results: list[CaseResult] = []
    try:
        runner = Runner(run, repeat, args.timeout, work)
        for i, case in enumerate(cases, 1):
            log(f"({i}/{len(cases)}) {case.name}: {case.title}")
            result = runner.run_case(case)
            results.append(result)
            if result.na:
                log(f"    n/a: {result.na}")
            for c in result.commands:
                state = c.na and f"n/a ({c.na})" or c.failed and f"FAILED ({c.failed})" or f"{c.median:.3f} s"
                log(f"    {c.role:<7} {c.label}: {state}")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    tools = dict(TOOLS)
    try:
        from cases import CUOBJDUMP

        tools["cuobjdump"] = [str(CUOBJDUMP.resolve(run)), "--version"]
    except NotAvailable:
        pass
    info = machine_info(tools)
    info["versions"] = {k: _short_version(v) for k, v in info["versions"].items()}
    by_name = {r.case.name: r for r in results}
    scaling = scaling_summary([by_name[n] for n in SCALING if n in by_name])
    doc = {
        "mode": ("selected cases" if args.cases else "quick" if args.quick else "full"),
        "repeat": repeat,
        "machine": info,
        "note": args.note,
        "cases": [r.to_json() for r in results],
        "scaling": scaling,
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(text_report(doc, results, scaling))
    # the results first: a bad --json path must not lose a 15-minute run
    if args.write_results:
        write_results(args.write_results, markdown_report(doc, results, scaling))
        log(f"updated section {args.write_results!r} of {RESULTS}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        log(f"wrote {args.json}")
    return 0


def _short_version(text: str) -> str:
    # "GNU readelf (GNU Binutils for Ubuntu) 2.42" -> keep it; cuobjdump prints a banner: keep the release line
    return text.strip()[:120]


def header_lines(doc: dict) -> list[str]:
    m = doc["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
    return [
        f"date: {m['date']}; mode: {doc['mode']}, {doc['repeat']} alternating runs per command, medians; "
        f"total {doc['seconds']} s",
        f"machine: {m['cpu']}, {m['nproc']} CPUs, {m['memory']}, Linux {m['kernel']}, GPU: {m['gpu']}; "
        f"load average at the end: {m['load_average']}",
        f"versions: {versions}",
    ] + ([f"note: {doc['note']}"] if doc.get("note") else [])


def text_report(doc: dict, results: list[CaseResult], scaling: dict) -> str:
    out = header_lines(doc) + ["", render_text(CASE_HEADER, case_rows(results))]
    trows = target_rows(results)
    if trows:
        out += ["", "targets:", render_text(TARGET_HEADER, trows)]
    if scaling["points"]:
        out += ["", "scaling of `cuaudit check --no-cache` with input size:",
                render_text(SCALING_HEADER, scaling_rows(scaling)), scaling_text(scaling)]
    return "\n".join(out)


def markdown_report(doc: dict, results: list[CaseResult], scaling: dict) -> str:
    out = [f"- {line}" for line in header_lines(doc)]
    out += ["", render_markdown(CASE_HEADER, case_rows(results))]
    trows = target_rows(results)
    if trows:
        out += ["", "Targets:", "", render_markdown(TARGET_HEADER, trows)]
    if scaling["points"]:
        out += ["", "Scaling of `cuaudit check --no-cache` with input size:", "",
                render_markdown(SCALING_HEADER, scaling_rows(scaling)), "", scaling_text(scaling)]
    return "\n".join(out)


def write_results(section: str, body: str) -> None:
    begin, end = f"<!-- BEGIN GENERATED: {section} -->", f"<!-- END GENERATED: {section} -->"
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    block = f"{begin}\n{body}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _m: block, text)
    else:
        text = text.rstrip("\n") + f"\n\n## Generated: {section}\n\n{block}\n"
    RESULTS.write_text(text)


if __name__ == "__main__":
    sys.exit(main())
