#!/usr/bin/env python3
"""How much CPU the forked workers spend, and on what, against the same extraction in one process.

    python scripts/worker_cpu.py OUT -- env --python /path/to/python ...     # workers as usual
    python scripts/worker_cpu.py --summary OUT

Runs cuaudit in this process (``src`` first on ``sys.path``; ``CUAUDIT_SRC`` puts more paths first)
with each forked worker's chunks measured on the thread's CPU clock and appended to
``OUT/worker-<pid>.txt`` after each chunk (a pool's workers end without running exit handlers): the
chunk's whole call (``workers.extract_forked``), the extraction proper (``extract_group``), the
parses in it (``formats.python.parse_python``), and the members.  The parent's own CPU and the
whole tree's (``RUSAGE_CHILDREN``, the forked family's child included) go to ``OUT/parent.txt``.
``--summary`` adds them up.  Compare with ``scripts/extractor_times.py -- env --jobs 1``: the
same facts extracted in one process.  A diagnostic for developers: it patches
``workers.extract_forked``, ``workers.extract_group`` and ``formats.python.parse_python``.
"""

from __future__ import annotations

import collections
import os
import resource
import sys
import time

from _in_process import run_cuaudit, use_source_tree


def record(out: str, argv: list[str]) -> None:
    use_source_tree()
    os.makedirs(out, exist_ok=True)
    import cuaudit.formats.python as python
    import cuaudit.workers as workers

    acc = {"parse": 0.0, "group": 0.0}
    forked, group, parse = workers.extract_forked, workers.extract_group, python.parse_python

    def timed_parse(data, path="<source>"):  # type: ignore[no-untyped-def]
        t = time.thread_time()
        try:
            return parse(data, path)
        finally:
            acc["parse"] += time.thread_time() - t

    def timed_group(*args, **kwargs):  # type: ignore[no-untyped-def]
        t = time.thread_time()
        try:
            return group(*args, **kwargs)
        finally:
            acc["group"] += time.thread_time() - t

    def timed_forked(i, tasks, *args):  # type: ignore[no-untyped-def]
        t, p0, g0 = time.thread_time(), acc["parse"], acc["group"]
        try:
            return forked(i, tasks, *args)
        finally:
            took = time.thread_time() - t
            with open(os.path.join(out, f"worker-{os.getpid()}.txt"), "a") as fh:
                fh.write(f"{took:.6f} {acc['group'] - g0:.6f} {acc['parse'] - p0:.6f} {len(tasks)}\n")

    python.parse_python = timed_parse
    workers.extract_group = timed_group
    # sent to the workers by reference (module and name), as the function it stands in for
    timed_forked.__module__, timed_forked.__qualname__ = forked.__module__, forked.__qualname__
    workers.extract_forked = timed_forked
    try:
        run_cuaudit(argv)
    finally:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(os.path.join(out, "parent.txt"), "w") as fh:
            fh.write(f"parent {me.ru_utime:.3f} {me.ru_stime:.3f}\nchildren {kids.ru_utime:.3f} {kids.ru_stime:.3f}\n"
                     f"parent-extracting {acc['group']:.3f} {acc['parse']:.3f}\n")


def summary(out: str) -> None:
    totals: dict[str, float] = collections.defaultdict(float)
    workers = chunks = 0
    for name in sorted(os.listdir(out)):
        if not name.startswith("worker-"):
            continue
        workers += 1
        with open(os.path.join(out, name)) as fh:
            for line in fh:
                whole, group, parse, n = line.split()
                chunks += 1
                totals["chunk"] += float(whole)
                totals["group"] += float(group)
                totals["parse"] += float(parse)
                totals["members"] += int(n)
    with open(os.path.join(out, "parent.txt")) as fh:
        rows = {k: (float(u), float(s)) for k, u, s in (line.split() for line in fh)}
    print(f"{workers} workers, {chunks} chunks, {int(totals['members'])} members (thread CPU, s)")
    print(f"  in chunks        {totals['chunk']:8.2f}")
    print(f"    extract_group  {totals['group']:8.2f}   (of which parse_python {totals['parse']:.2f})")
    print(f"    around it      {totals['chunk'] - totals['group']:8.2f}   (pickling the results, trimming the heap)")
    for k, (u, s) in rows.items():
        if k == "parent-extracting":
            print(f"  the parent's own extract_group {u:.2f} (of which parse_python {s:.2f})")
        else:
            print(f"  {k:15s}  {u:8.2f} user {s:8.2f} sys")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--summary"]:
        summary(sys.argv[2])
    else:
        args = sys.argv[2:]
        record(sys.argv[1], args[1:] if args[:1] == ["--"] else args)
