#!/usr/bin/env python3
"""Where the time of one cuaudit run goes: worker and parent intervals, as a log and a summary.

    python scripts/timeline.py LOG -- check --no-cache torch-2.8.0-...whl
    python scripts/timeline.py LOG -- env --python /path/to/python
    python scripts/timeline.py --summary LOG

Runs cuaudit in this process (``src`` first on ``sys.path``; add more with ``CUAUDIT_SRC``) with
three things logged to LOG, in seconds since start:

- ``W<pid> start end n first-member (extractors)``: each chunk a forked worker extracted;
- ``R start end CODE``: each rule's ``check``;
- ``P start end rules a..b``: each batch of rules the staged extraction ran (``rule_run.RuleRun``);
- ``S start end name``: each call of the parent's other phases (``PHASES``: listing, extraction,
  settling, the cache's writes, the snapshot, the report), and ``WAIT`` lines for the parent's
  waits on the worker pool (``concurrent.futures.wait``: the walk's and the feeder's);
- ``M time parent-MB max-worker-MB parent-CPU-s``: the resident memory of the parent and of its
  largest child, and the parent's CPU time so far, every 50 ms (``--summary`` prints the peak of
  each memory and the parent's CPU in each second).

``--summary`` prints how many workers were busy in each second, then the rules' lines: idle workers
while the parent computes alone, or a parent waiting on a tail of work, show at a glance (this is
how the sixth session found that held stages were not fed while CU101's verdicts ran).  A
diagnostic for developers: it patches engine internals, and a change there may need it changed too.
"""

from __future__ import annotations

import os
import sys
import time

from _in_process import use_source_tree


def record(log: str, argv: list[str]) -> None:
    use_source_tree()
    t0 = time.time()

    def write(line: str) -> None:
        with open(log, "a") as fh:  # appended by the forked workers too
            fh.write(line + "\n")

    import cuaudit.rule_run as rule_run
    import cuaudit.workers as workers
    from cuaudit import rules
    from cuaudit.config import Config

    forked = workers.extract_forked

    def extract_forked(i, tasks, *args):
        start = time.time()
        out = forked(i, tasks, *args)
        write(f"W{os.getpid()} {start - t0:.3f} {time.time() - t0:.3f} {len(tasks)} {tasks[0][0].path} {','.join(tasks[0][1])}")
        return out

    # sent to the workers by reference (module and name), as the function it stands in for
    extract_forked.__module__, extract_forked.__qualname__ = forked.__module__, forked.__qualname__
    workers.extract_forked = extract_forked
    run_until = rule_run.RuleRun.run_until

    def staged(self, last):
        start, first = time.time(), self.ran
        run_until(self, last)
        write(f"P {start - t0:.3f} {time.time() - t0:.3f} rules {first}..{self.ran}")

    rule_run.RuleRun.run_until = staged
    _sample_memory(write, t0)
    import importlib

    for dotted in PHASES:
        module_name, _, attr = dotted.rpartition(":")
        owner_path, _, name = attr.rpartition(".")
        owner = importlib.import_module(module_name)
        for part in filter(None, owner_path.split(".")):
            owner = getattr(owner, part)
        setattr(owner, name, _spanned(getattr(owner, name), "WAIT" if name == "wait" else f"S {attr}", write, t0))
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


#: the parent's phases logged as ``S`` lines (module:qualified name)
PHASES = (
    "cuaudit.engine:_collect", "cuaudit.engine:_list_safely", "cuaudit.extraction:Extraction.run",
    "cuaudit.extraction:Extraction.walk", "cuaudit.extraction:Extraction.settle", "cuaudit.extraction:Extraction._write_loose",
    "cuaudit.extraction:Extraction.flush", "cuaudit.extraction:Extraction.close", "cuaudit.rule_run:RuleRun.finish",
    "cuaudit.engine:suppressions_for", "cuaudit.engine:_report", "cuaudit.snapshot:save", "cuaudit.extraction:_Feeder.wait",
    "cuaudit.extraction:Extraction.stop_workers", "cuaudit.engine:audit_stats", "cuaudit.commands.env:emit",
    "cuaudit.extraction:Extraction._bundle_up",
    # every wait of the parent on the pool's futures: the walk's and the feeder's (imported where
    # they wait, so the patched function is the one they call)
    "concurrent.futures:wait",
)


def _spanned(fn, label: str, write, t0: float):  # type: ignore[no-untyped-def]
    def spanned(*args, **kwargs):  # type: ignore[no-untyped-def]
        start = time.time()
        try:
            return fn(*args, **kwargs)
        finally:
            if os.getpid() == pid:
                write(f"{label.split()[0]} {start - t0:.3f} {time.time() - t0:.3f} {' '.join(label.split()[1:])}")

    pid = os.getpid()
    return spanned


def _rss_mb(pid: str) -> float:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def _sample_memory(write, t0: float) -> None:  # type: ignore[no-untyped-def]
    """A daemon thread that logs the parent's resident memory and its largest child's (Linux)."""
    import threading

    me = str(os.getpid())

    def children() -> list[str]:
        out: list[str] = []
        try:
            for tid in os.listdir(f"/proc/{me}/task"):
                with open(f"/proc/{me}/task/{tid}/children") as fh:
                    out += fh.read().split()
        except OSError:
            pass
        return out

    def loop() -> None:
        while True:
            # the parent process's CPU time: its main thread and the pool's threads (this one sleeps)
            write(f"M {time.time() - t0:.3f} {_rss_mb(me):.0f} {max(map(_rss_mb, children()), default=0.0):.0f} "
                  f"{time.process_time():.3f}")
            time.sleep(0.05)

    threading.Thread(target=loop, daemon=True).start()


def _merged(spans) -> list[tuple[float, float]]:  # type: ignore[no-untyped-def]
    """Overlapping spans as one (a wait inside a wait: the feeder's, called by the walk)."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def summary(log: str) -> None:
    lines = open(log).read().splitlines()
    # (W<pid> lines, not WAIT lines: counted as workers, the parent's waits made the workers look busier)
    spans = [(float(a), float(b)) for a, b in (line.split()[1:3] for line in lines if line[:1] == "W" and line[1:2].isdigit())]
    end = max((b for _a, b in spans), default=0.0)
    busy = [sum(max(0.0, min(b, t + 1) - max(a, t)) for a, b in spans) for t in range(int(end) + 1)]
    print("busy workers per second: " + " ".join(f"{t}:{n:.1f}" for t, n in enumerate(busy)))
    waits = _merged((float(a), float(b)) for a, b in (line.split()[1:3] for line in lines if line.startswith("WAIT")))
    waited = [sum(max(0.0, min(b, t + 1) - max(a, t)) for a, b in waits) for t in range(int(end) + 1)]
    print("parent waiting on workers per second: " + " ".join(f"{t}:{n:.1f}" for t, n in enumerate(waited)))
    samples = [tuple(map(float, line.split()[1:])) for line in lines if line.startswith("M ")]
    cpu = [(m[0], m[3]) for m in samples if len(m) > 3]
    if cpu:
        # the parent's CPU in each second (a parent near 1.0 while workers idle is the critical path)
        used = [0.0] * (int(end) + 1)
        for (a, ca), (b, cb) in zip(cpu, cpu[1:]):
            if int(a) < len(used) and b > a:
                used[int(a)] += cb - ca
        print("parent CPU per second: " + " ".join(f"{t}:{n:.1f}" for t, n in enumerate(used)))
    for col, who in ((1, "parent"), (2, "largest worker")):
        if samples:
            top = max(samples, key=lambda m: m[col])
            print(f"peak resident memory, {who}: {top[col]:.0f} MB at {top[0]:.1f} s")
    for line in lines:
        if line.startswith(("P", "R", "END")) or (line.startswith("S ") and float(line.split()[2]) - float(line.split()[1]) >= 0.05):
            print(line)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--summary":
        summary(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[2] == "--":
        record(sys.argv[1], sys.argv[3:])
    else:
        raise SystemExit(__doc__)
