"""What the in-process diagnostics of ``scripts/`` share: cuaudit from this checkout, run as its
command line in the diagnostic's own process (after the diagnostic has patched what it measures).

    use_source_tree()          ``src`` first on ``sys.path`` (``CUAUDIT_SRC``'s paths before it)
    run_cuaudit(cuaudit_args())  ``cuaudit ARGS`` here, from ``script.py -- ARGS`` (or ``script.py ARGS``)
"""

from __future__ import annotations

import os
import sys


def use_source_tree() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [p for p in os.environ.get("CUAUDIT_SRC", "").split(os.pathsep) if p] + [os.path.join(here, "..", "src")]


def cuaudit_args() -> list[str]:
    args = sys.argv[1:]
    return args[1:] if args[:1] == ["--"] else args


def run_cuaudit(argv: list[str]) -> None:
    from cuaudit.cli import entry

    sys.argv = ["cuaudit", *argv]
    entry()
