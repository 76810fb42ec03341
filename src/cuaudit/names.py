"""Names of Python modules, as the import system sees them: one definition each.

Used from inputs to rules: which dotted module a relative import names,
whether a path is test code, and a distribution's normalised name.
"""

from __future__ import annotations

import functools
import re

#: folders whose files are a package's tests, never imported by the package itself
TEST_FOLDERS = ("tests", "test", "testing")
_TEST_FOLDERS = frozenset(TEST_FOLDERS)


def absolute_module(module: str, level: int, package: str) -> str | None:
    """The absolute module that ``from <level dots><module> import ...`` names.

    ``package`` is the importer's package (the module itself for an
    ``__init__``, else its parent).  None when the dots climb above the top
    (Python raises ImportError: "attempted relative import beyond top-level package").
    """
    if level == 0:
        return module
    base = package.split(".") if package else []
    if level - 1 > len(base) - 1 and level > 1:
        return None
    base = base[: len(base) - (level - 1)] if level > 1 else base
    if not base:
        return None
    return ".".join(base + ([module] if module else []))


def is_test_path(path: str) -> bool:
    """A test module or a file of a test folder (``tests/``, ``testing/``, ``test_*.py``, ``conftest.py``)."""
    parts = path.split("/")
    name = parts.pop()
    return (
        not _TEST_FOLDERS.isdisjoint(parts)
        or name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
    )


@functools.lru_cache(maxsize=1 << 16)
def dotted_prefixes(name: str) -> tuple[str, ...]:
    """``a``, ``a.b``, ``a.b.c`` for ``a.b.c``: the modules importing ``name`` imports, outermost first.

    Memoised: the package model asks for the same few thousand names again at every import
    that names them (129 k calls in a check of torch 2.8.0)."""
    parts = name.split(".")
    return tuple(".".join(parts[: i + 1]) for i in range(len(parts)))


_SEPARATORS = re.compile(r"[-_.]+")


def canonical_name(name: str) -> str:
    """A distribution's name as PEP 503 normalises it (what ``packaging.utils.canonicalize_name``
    gives), without importing packaging's tag machinery (platform, subprocess: start-up of ``env``)."""
    return _SEPARATORS.sub("-", name).lower()
