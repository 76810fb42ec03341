#!/usr/bin/env python3
"""Where the worker processes' time goes in one cuaudit run: a CPU profile of every chunk they extract.

    python scripts/profile_workers.py OUT_DIR -- env --python /path/to/python
    python scripts/profile_workers.py --summary OUT_DIR [N]

Runs cuaudit in this process (``src`` first on ``sys.path``; add more with ``CUAUDIT_SRC``) with each
forked worker's chunks profiled (``cProfile`` on the thread's CPU clock: the process's clock
undercounted short calls while cuaudit's CPU-time budgets run, benchmarks/RESULTS.md, eighteenth
session) into ``OUT_DIR/worker-<pid>.prof``, rewritten after each chunk (a pool's workers end without running exit handlers), and the parent's
own run into ``OUT_DIR/parent.prof``.  ``--summary`` merges the workers' profiles and prints the N
costliest functions by their own time and by cumulative time.  A diagnostic for developers: it
patches ``workers.extract_forked``, and a change there may need it changed too.
"""

from __future__ import annotations

import os
import sys
import time


def record(out: str, argv: list[str]) -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [p for p in os.environ.get("CUAUDIT_SRC", "").split(os.pathsep) if p] + [os.path.join(here, "..", "src")]
    os.makedirs(out, exist_ok=True)
    import cProfile

    import cuaudit.workers as workers

    forked = workers.extract_forked
    state: dict[str, object] = {}

    def extract_forked(i, tasks, *args):
        prof = state.get("prof") if state.get("pid") == os.getpid() else None
        if prof is None:
            prof = state["prof"] = cProfile.Profile(time.thread_time)
            state["pid"] = os.getpid()
        prof.enable()
        try:
            return forked(i, tasks, *args)
        finally:
            prof.disable()
            prof.dump_stats(os.path.join(out, f"worker-{os.getpid()}.prof"))

    # sent to the workers by reference (module and name), as the function it stands in for
    extract_forked.__module__, extract_forked.__qualname__ = forked.__module__, forked.__qualname__
    workers.extract_forked = extract_forked
    from cuaudit.cli import main

    parent = cProfile.Profile(time.thread_time)
    try:
        parent.runcall(main, argv)
    finally:
        parent.dump_stats(os.path.join(out, "parent.prof"))


def summary(out: str, n: int) -> None:
    import pstats

    files = sorted(os.path.join(out, f) for f in os.listdir(out) if f.startswith("worker-"))
    if not files:
        print("no worker profiles")
        return
    stats = pstats.Stats(*files)
    print(f"{len(files)} workers, {stats.total_tt:.1f} s of CPU in their profiled chunks")
    stats.sort_stats("tottime").print_stats(n)
    stats.sort_stats("cumulative").print_stats(n)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--summary"]:
        summary(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 30)
    else:
        sep = sys.argv.index("--")
        record(sys.argv[1], sys.argv[sep + 1:])
