#!/usr/bin/env python3
"""Where the time of one cuaudit run goes: worker and parent intervals, as a log and a summary.

    python scripts/timeline.py LOG -- check --no-cache torch-2.8.0-...whl
    python scripts/timeline.py LOG -- env --python /path/to/python
    python scripts/timeline.py --summary LOG

Runs cuaudit in this process (``src`` first on ``sys.path``; add more with ``CUAUDIT_SRC``) with
three things logged to LOG, in seconds since start:

- ``W<pid> start end n first-member (extractors)``: each chunk a forked worker extracted;
- ``R start end CODE``: each rule's ``check``;
- ``P start end rules a..b``: each batch of rules the staged extraction ran (``engine._RuleRun``).

``--summary`` prints how many workers were busy in each second, then the rules' lines: idle workers
while the parent computes alone, or a parent waiting on a tail of work, show at a glance (this is
how the sixth session found that held stages were not fed while CU101's verdicts ran).  A
diagnostic for developers: it patches engine internals, and a change there may need it changed too.
"""

from __future__ import annotations

import os
import sys
import time


def record(log: str, argv: list[str]) -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [p for p in os.environ.get("CUAUDIT_SRC", "").split(os.pathsep) if p] + [os.path.join(here, "..", "src")]
    t0 = time.time()

    def write(line: str) -> None:
        with open(log, "a") as fh:  # appended by the forked workers too
            fh.write(line + "\n")

    import cuaudit.engine as engine
    from cuaudit import rules
    from cuaudit.config import Config

    forked = engine._extract_forked

    def extract_forked(i, tasks, *args):
        start = time.time()
        out = forked(i, tasks, *args)
        write(f"W{os.getpid()} {start - t0:.3f} {time.time() - t0:.3f} {len(tasks)} {tasks[0][0].path} {','.join(tasks[0][1])}")
        return out

    # sent to the workers by reference (module and name), as the function it stands in for
    extract_forked.__module__, extract_forked.__qualname__ = forked.__module__, forked.__qualname__
    engine._extract_forked = extract_forked
    run_until = engine._RuleRun.run_until

    def staged(self, last):
        start, first = time.time(), self.ran
        run_until(self, last)
        write(f"P {start - t0:.3f} {time.time() - t0:.3f} rules {first}..{self.ran}")

    engine._RuleRun.run_until = staged
    config = Config()
    for code in rules.selected_codes(config.selected, config.ignored):
        cls = rules.get(code)
        if cls.emitted_by_engine or "check" not in cls.__dict__:
            continue

        def timed(self, ctx, _check=cls.check, _code=code):
            start = time.time()
            out = list(_check(self, ctx))
            write(f"R {start - t0:.3f} {time.time() - t0:.3f} {_code}")
            return out

        cls.check = timed
    from cuaudit.cli import main

    sys.argv = ["cuaudit", *argv]
    try:
        main()
    except SystemExit:
        pass
    write(f"END {time.time() - t0:.3f}")


def summary(log: str) -> None:
    lines = open(log).read().splitlines()
    spans = [(float(a), float(b)) for a, b in (line.split()[1:3] for line in lines if line.startswith("W"))]
    end = max((b for _a, b in spans), default=0.0)
    busy = [sum(max(0.0, min(b, t + 1) - max(a, t)) for a, b in spans) for t in range(int(end) + 1)]
    print("busy workers per second: " + " ".join(f"{t}:{n:.1f}" for t, n in enumerate(busy)))
    for line in lines:
        if line.startswith(("P", "R", "END")):
            print(line)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--summary":
        summary(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[2] == "--":
        record(sys.argv[1], sys.argv[3:])
    else:
        raise SystemExit(__doc__)
