#!/usr/bin/env python3
"""Where a py-spy profile's samples are: each frame's own and inclusive share, per process.

    py-spy record --subprocesses -r 200 -f raw -o RAW -- python -m cuaudit env ...
    python scripts/spy_summary.py RAW                       # every sample
    python scripts/spy_summary.py RAW --only 'imports.py:109)' --top 40

``--only TEXT`` keeps the stacks that contain TEXT (a frame such as CU101's verdict loop,
``imports.py:109)``, picks the forked family's child out of a ``--subprocesses`` profile);
``--without TEXT`` drops those that do (the parent's waits: ``wait (threading``).  Frames are
printed as ``function (package/file.py:line)``, the folders before ``src``/``site-packages`` left
out.  py-spy's raw format is one stack per line, its sample count last; with ``--subprocesses``
the stack starts with ``process PID:"command line"`` (a forked process's with its parents' labels
first, then its own), whose command may hold ``;`` (``python -c``)
and, for a script passed with ``-c``, whole lines of its own: those lines carry no count and are
skipped.  A diagnostic for developers (the twenty-second session's GPU profile of the child).
"""

from __future__ import annotations

import argparse
import collections
import re
import sys

_PROCESS = re.compile(r'process (\d+):"[^"]*";?')
_FOLDERS = re.compile(r" \(/[^)]*/(?:src|site-packages|lib/python3\.\d+)/")


def summarise(path: str, only: str | None, without: str | None, top: int) -> str:
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    processes: collections.Counter[str] = collections.Counter()
    total = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not count.isdigit() or (only and only not in stack) or (without and without in stack):
                continue
            n = int(count)
            total += n
            # a forked process's stack starts with its parents' labels, then its own
            pid, at = "-", 0
            while m := _PROCESS.match(stack, at):
                pid, at = m.group(1), m.end()
            processes[pid] += n
            frames = [_FOLDERS.sub(" (", f) for f in stack[at:].split(";") if f]
            if not frames:
                continue
            own[frames[-1]] += n
            for f in set(frames):
                inclusive[f] += n
    if not total:
        return "no samples matched\n"
    out = [f"{total} samples; by process: " + ", ".join(f"{p} {n}" for p, n in processes.most_common(8))]
    for title, counts in (("own", own), ("inclusive", inclusive)):
        out.append(f"--- {title}")
        out += [f"{n / total * 100:5.1f}%  {frame}" for frame, n in counts.most_common(top)]
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", help="py-spy's output in its raw format (-f raw)")
    ap.add_argument("--only", help="keep the stacks that contain this text")
    ap.add_argument("--without", help="drop the stacks that contain this text")
    ap.add_argument("--top", type=int, default=40, help="frames listed in each table (40)")
    args = ap.parse_args(argv)
    sys.stdout.write(summarise(args.raw, args.only, args.without, args.top))


if __name__ == "__main__":
    main(sys.argv[1:])
