"""Plug-in discovery: every public module of a package, imported in name order.

Rules, extractors and subcommands register themselves when their module is
imported, so adding one is adding a file; no central list to edit.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Iterable


def import_submodules(package: str, path: Iterable[str]) -> list[ModuleType]:
    """Import ``package.<name>`` for every module in ``path`` not starting with ``_``."""
    return [
        importlib.import_module(f"{package}.{info.name}")
        for info in sorted(pkgutil.iter_modules(list(path)), key=lambda i: i.name)
        if not info.name.startswith("_")
    ]
