"""Budgets: the most bytes, entries and nesting cuaudit spends on one input.

Each is documented in ``docs/security.md`` and can be changed with an
environment variable of the user's own, ``CUAUDIT_BUDGET_<NAME>`` (a whole
number, with an optional ``K``/``M``/``G`` suffix for powers of 1024), never
from a configuration file: a project must not choose the bounds its own
files are read with.  A value that is not a positive number is ignored, with
a warning.
"""

from __future__ import annotations

import os
import sys

KiB, MiB, GiB = 1024, 1024**2, 1024**3

#: name -> (default, what it bounds)
BUDGETS: dict[str, tuple[int, str]] = {
    "MEMBER_SIZE": (8 * GiB, "bytes a zip member may declare; and the bytes all members of a tar may declare"),
    "RATIO": (1000, "inflation ratio allowed to a member (or a tar) past RATIO_FROM bytes"),
    "RATIO_FROM": (64 * MiB, "size from which RATIO applies"),
    "ENTRIES": (400_000, "entries of a zip central directory (declared, or implied by its size), or members of a tar"),
    "TAR_MEMBER": (64 * MiB, "bytes of one tar member kept in memory (larger ones are skipped)"),
    "TAR_HELD": (512 * MiB, "bytes of all tar members kept in memory"),
    "TAR_HEADER": (1 * MiB, "bytes of one GNU long name/link or pax header"),
    "TAR_HEADER_CHAIN": (16, "extension headers in a row before one tar member"),
    "RECORD": (64 * MiB, "bytes of an installed distribution's RECORD"),
    "EDITABLE_FILES": (100_000, "files walked under one editable install's source folder"),
    "PROCESS_OUTPUT": (16 * MiB, "bytes of output read from a program cuaudit runs (interpreter, probe, nvidia-smi, pip)"),
    "ELF_NAME_FANOUT": (4, "names read from one ELF string table, as a multiple of its size (plus 64 KiB)"),
    "FATBIN_ENTRIES": (256 * KiB, "fat-binary entries listed from one member"),
    "ANALYSIS_SECONDS": (60, "CPU seconds one extractor's pass may spend on one member (time_budget.py)"),
    "RULE_SECONDS": (600, "CPU seconds one rule's check may spend; past them its family stops (time_budget.py)"),
}

_SUFFIX = {"K": KiB, "M": MiB, "G": GiB}


def budget(name: str) -> int:
    default = BUDGETS[name][0]
    var = f"CUAUDIT_BUDGET_{name}"
    raw = os.environ.get(var, "").strip().upper()
    if not raw:
        return default
    try:
        value = int(raw[:-1]) * _SUFFIX[raw[-1]] if raw[-1] in _SUFFIX else int(raw)
        if value <= 0:
            raise ValueError
    except ValueError:
        print(f"cuaudit: {var}={raw!r} is not a positive number; the default {default} applies", file=sys.stderr)
        return default
    return value
