#!/usr/bin/env python3
"""How deep the import-time model's failure questions go, in one in-process cuaudit run.

    python scripts/failure_depth.py -- env --jobs 1 --python /path/to/python

``ImportTimeModel.failure`` follows a module's imports recursively and stops at 64 levels, keeping
"imports fine" for the module where it stopped: past that depth its answers would depend on the
order of the questions.  This prints the deepest level asked and the modules first asked at the
bound (none means the bound changed nothing in that run).  Runs cuaudit from ``src``
(``CUAUDIT_SRC`` puts more paths first).  A diagnostic for developers: it patches the model.
"""

from __future__ import annotations

import atexit
import sys

from _in_process import cuaudit_args, run_cuaudit, use_source_tree


def main(argv: list[str]) -> None:
    use_source_tree()
    import cuaudit.analysis.import_time as import_time

    deepest = [0]
    at_bound: set[str] = set()
    failure = import_time.ImportTimeModel.failure

    def counted(self, module: str, _depth: int = 0) -> str:  # type: ignore[no-untyped-def]
        deepest[0] = max(deepest[0], _depth)
        if _depth >= 64 and module not in self._failures:
            at_bound.add(module)
        return failure(self, module, _depth)

    import_time.ImportTimeModel.failure = counted  # type: ignore[method-assign]

    def report() -> None:
        print(f"deepest failure question: {deepest[0]} levels; first asked at the bound (64): {len(at_bound)}"
              + (f" ({', '.join(sorted(at_bound)[:10])}{', ...' if len(at_bound) > 10 else ''})" if at_bound else ""),
              file=sys.stderr)

    atexit.register(report)
    run_cuaudit(argv)


if __name__ == "__main__":
    main(cuaudit_args())
