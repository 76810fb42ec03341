#!/usr/bin/env python3
"""What the forked family's child (``rule_run.RuleRun._fork_here``) extracts itself, and for whom.

    python scripts/child_reads.py -- env --python /path/to/python --cache-dir DIR

Runs cuaudit in this process (``src`` first on ``sys.path``; ``CUAUDIT_SRC`` puts more paths first)
and prints to stderr, when the child hands its result back: its wall time since the fork, the time
it spent extracting in process (``workers.extract_group``), how many modules it parsed, the facts it
took by extractor, and the call paths that made it extract most often.  ``FORK_BESIDE_WORKERS=N``
sets ``rule_run.FORK_BESIDE_WORKERS`` (1: fork beside busy workers on any machine).  A diagnostic for
developers: it patches engine internals, and a change there may need it changed too.
"""

from __future__ import annotations

import collections
import os
import sys
import time
import traceback

from _in_process import cuaudit_args, run_cuaudit, use_source_tree


def main(argv: list[str]) -> None:
    use_source_tree()
    import cuaudit.extraction as extraction
    import cuaudit.rule_run as rule_run
    import cuaudit.workers as workers
    import cuaudit.formats.python as python

    if os.environ.get("FORK_BESIDE_WORKERS"):
        rule_run.FORK_BESIDE_WORKERS = int(os.environ["FORK_BESIDE_WORKERS"])
    state: dict = {}

    extract_group = workers.extract_group

    def timed_group(*args, **kwargs):  # type: ignore[no-untyped-def]
        if "t0" not in state:
            return extract_group(*args, **kwargs)
        t = time.perf_counter()
        where = tuple(f"{os.path.basename(f.filename)}:{f.name}:{f.lineno}" for f in traceback.extract_stack()[-16:-1])
        state["paths"][where] += 1
        try:
            return extract_group(*args, **kwargs)
        finally:
            state["extracting"] += time.perf_counter() - t

    workers.extract_group = timed_group
    parse = python.parse_python

    def counted_parse(data, path="<source>"):  # type: ignore[no-untyped-def]
        if "t0" in state:
            state["parsed"] += 1
            state["parsed_bytes"] += len(data)
        return parse(data, path)

    python.parse_python = counted_parse
    become, delta = extraction.Extraction.become_child, extraction.Extraction.child_delta

    def become_child(self):  # type: ignore[no-untyped-def]
        state.update(t0=time.perf_counter(), paths=collections.Counter(), extracting=0.0, parsed=0, parsed_bytes=0)
        return become(self)

    def child_delta(self, baseline):  # type: ignore[no-untyped-def]
        got = delta(self, baseline)
        by = collections.Counter(k[2] if len(k) > 2 else k[0] for k in got["took"])
        out = sys.stderr
        print(f"child: {time.perf_counter() - state['t0']:.2f} s since the fork, {state['extracting']:.2f} s extracting "
              f"in process; {state['parsed']} modules parsed ({state['parsed_bytes'] / 1e6:.1f} MB); counts "
              f"(extracted, cached, by content, evidence extracted, evidence cached) {got['counts']}", file=out)
        print("child took: " + ", ".join(f"{n} {c}" for n, c in by.most_common()), file=out)
        for where, n in state["paths"].most_common(8):
            print(f"  {n:5d} x " + " < ".join(reversed(where)), file=out)
        return got

    extraction.Extraction.become_child = become_child
    extraction.Extraction.child_delta = child_delta
    run_cuaudit(argv)


if __name__ == "__main__":
    main(cuaudit_args())
