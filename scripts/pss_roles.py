#!/usr/bin/env python3
"""The memory of one cuaudit run by process, over time: which processes make the tree's peak.

    python scripts/pss_roles.py LOG -- cuaudit env ...
    python scripts/pss_roles.py --summary LOG [ROWS]

Runs the command and samples the PSS (``/proc/PID/smaps_rollup``) of it and of every process below
it every 0.2 s, appending ``time pid ppid MB anon-MB`` lines to LOG (the anonymous part: the process's
own memory; the rest is mapped files, page cache the kernel maps in whole folios around a touched
byte).  ``--summary`` sorts the processes into
the parent, the children it started together (the worker pool's, at the first parallel extraction)
and those it started after the widest gap between two starts, when that gap is over a second (a
forked family's child); it prints the tree's peak with each group's share at that moment (and its anonymous part), each
group's own peak, the peak of the anonymous memory alone, and ROWS samples over the run (25; 0: none).  Linux only; the PSS of pages shared
after a fork is split between the processes that share them.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))

from harness import _children, _pss_kb  # noqa: E402 - the benchmarks' own reading of /proc


def _tree(pid: int) -> list[tuple[int, int]]:
    """(pid, its parent's pid; 0 for ``pid``) of ``pid`` and every process below it."""
    out = [(pid, 0)]
    i = 0
    while i < len(out):
        p = out[i][0]
        i += 1
        out += [(c, p) for c in _children(p)]
    return out


def record(log: str, cmd: list[str]) -> int:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    t0 = time.time()
    with open(log, "w") as out:
        while proc.poll() is None:
            t = time.time() - t0
            for pid, ppid in _tree(proc.pid):
                kb, anon = _pss_kb(pid)
                if kb:  # 0: gone meanwhile
                    out.write(f"{t:.2f} {pid} {ppid} {kb // 1024} {anon // 1024}\n")
            time.sleep(0.2)
    return proc.returncode


def summary(log: str, rows_shown: int = 25) -> None:
    rows = [line.split() for line in open(log)]
    samples: dict[float, dict[int, int]] = collections.defaultdict(dict)
    anons: dict[float, dict[int, int]] = collections.defaultdict(dict)
    first: dict[int, float] = {}
    parent_of: dict[int, int] = {}
    for t, pid, ppid, mb, *anon in rows:  # logs written before the anonymous column have none
        samples[float(t)][int(pid)] = int(mb)
        anons[float(t)][int(pid)] = int(anon[0]) if anon else int(mb)
        first.setdefault(int(pid), float(t))
        parent_of[int(pid)] = int(ppid)
    root = next(p for p, pp in parent_of.items() if pp == 0)
    children = sorted((first[p], p) for p, pp in parent_of.items() if pp == root)
    # the pool's workers start together, a forked family's child seconds later: the children after
    # the widest gap between two starts (if it is over a second) are the late ones
    gaps = [(b[0] - a[0], k + 1) for k, (a, b) in enumerate(zip(children, children[1:]))]
    widest, cut = max(gaps, default=(0.0, len(children)))
    cut = cut if widest > 1.0 else len(children)
    role = {root: "parent"}
    for k, (_t, p) in enumerate(children):
        role[p] = "workers" if k < cut else "late children"
    for p in parent_of:
        role.setdefault(p, "late children")

    def groups(at: dict[int, int]) -> dict[str, int]:
        g: dict[str, int] = collections.Counter()
        for p, mb in at.items():
            g[role[p]] += mb
        return dict(g)

    t_peak, at_peak = max(samples.items(), key=lambda kv: sum(kv[1].values()))
    print(f"tree peak {sum(at_peak.values())} MB at {t_peak:.1f} s: {groups(at_peak)}"
          f" ({sum(1 for p in at_peak if role[p] == 'workers')} workers); anonymous then: {groups(anons[t_peak])}")
    t_anon, anon_peak = max(anons.items(), key=lambda kv: sum(kv[1].values()))
    print(f"anonymous peak {sum(anon_peak.values())} MB at {t_anon:.1f} s: {groups(anon_peak)}")
    own: dict[str, int] = collections.Counter()
    for at in samples.values():
        for name, mb in groups(at).items():
            own[name] = max(own[name], mb)
    print("each group's own peak:", dict(own))
    for t in sorted(samples)[:: max(1, len(samples) // rows_shown)] if rows_shown else ():
        print(f"{t:6.1f} s  {sum(samples[t].values()):5d} MB  {groups(samples[t])}")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--summary"]:
        summary(args[1], int(args[2]) if len(args) > 2 else 25)
    else:
        sys.exit(record(args[0], args[args.index("--") + 1:]))
