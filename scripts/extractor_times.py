#!/usr/bin/env python3
"""CPU time of each extractor and of the shared Python parse, in one in-process cuaudit run.

    python scripts/extractor_times.py -- env --jobs 1 --python /path/to/python

Run with ``--jobs 1`` (or a cached run): the extraction must happen in this process for its time to
be counted.  Each extractor's ``extract`` is timed (process CPU time) with the time spent inside
``formats.python.parse_python`` taken out: the parse, shared by every pass of a member, is a row
of its own.  The rest of the run (discovery, the rules, the cache) is the last row.
``CUAUDIT_PARSED=FILE`` also writes the path of every source parsed, one per line: what
``scripts/parser_speed.py --files FILE`` parses again, to price CPython's parser alone.  Runs cuaudit
from ``src`` (``CUAUDIT_SRC`` puts more paths first).  A diagnostic for developers: it patches
``facts.get`` and ``formats.python.parse_python``.
"""

from __future__ import annotations

import atexit
import collections
import os
import resource
import sys

from _in_process import cuaudit_args, run_cuaudit, use_source_tree


def _cpu() -> float:
    """This process's CPU seconds from ``getrusage``.  Not ``time.process_time()``: under cuaudit's
    CPU-time budgets (an armed ``ITIMER_VIRTUAL``) its per-call differences came out at half the
    parse's time (5.2 s for 10.6 s of wall time, one thread, nothing else running), where
    ``getrusage`` read 10.5 s (benchmarks/RESULTS.md, eighteenth session)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv: list[str]) -> None:
    use_source_tree()
    import cuaudit.engine as engine
    import cuaudit.facts as facts
    import cuaudit.formats.python as python

    stats: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0])
    in_parse = [0.0]
    registry_get, wrapped = facts.get, {}

    def get(name: str) -> type:
        if name not in wrapped:
            cls = registry_get(name)

            def extract(self, reader, _n=name, _base=cls.extract):  # type: ignore[no-untyped-def]
                t, p = _cpu(), in_parse[0]
                try:
                    return _base(self, reader)
                finally:
                    s = stats[_n]
                    s[0] += 1
                    s[1] += _cpu() - t - (in_parse[0] - p)
                    s[2] += reader.member.size or 0

            wrapped[name] = type(cls.__name__, (cls,), {"extract": extract, "__module__": cls.__module__})
        return wrapped[name]

    facts.get = engine.facts_registry.get = get
    parse = python.parse_python

    parsed: list[str] = []

    def parse_python(data, path="<source>"):  # type: ignore[no-untyped-def]
        t = _cpu()
        try:
            return parse(data, path)
        finally:
            d = _cpu() - t
            in_parse[0] += d
            s = stats["(parse_python)"]
            s[0] += 1
            s[1] += d
            s[2] += len(data)
            parsed.append(path)

    python.parse_python = parse_python

    def report() -> None:
        r = resource.getrusage(resource.RUSAGE_SELF)
        total = r.ru_utime + r.ru_stime
        print(f"{'extractor':28s} {'members':>8s} {'CPU s':>8s} {'MB':>8s}", file=sys.stderr)
        for n, (c, t, b) in sorted(stats.items(), key=lambda kv: -kv[1][1]):
            print(f"{n:28s} {c:8d} {t:8.2f} {b / 1e6:8.1f}", file=sys.stderr)
        print(f"{'(everything else)':28s} {'':8s} {total - sum(s[1] for s in stats.values()):8.2f}", file=sys.stderr)
        print(f"{'(process total)':28s} {'':8s} {total:8.2f}", file=sys.stderr)
        out = os.environ.get("CUAUDIT_PARSED")
        if out:
            with open(out, "w", encoding="utf-8", errors="surrogateescape") as fh:
                fh.writelines(f"{p}\n" for p in parsed)

    atexit.register(report)
    run_cuaudit(argv)


if __name__ == "__main__":
    main(cuaudit_args())
