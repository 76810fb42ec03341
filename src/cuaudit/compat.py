"""What differs between the Pythons cuaudit supports (3.10 to 3.13)."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10: the same parser, as the tomli package
    import tomli as tomllib

__all__ = ["tomllib"]
