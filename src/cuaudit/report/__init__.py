"""Reports: renderers only, no analysis.  One module per format.

Each module has ``render(report, *, color=False) -> str``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.engine import Report

#: format name -> module in this package
FORMATS = {
    "text": "text",
    "json": "json_report",
    "sarif": "sarif",
    "github": "github",
    "html": "html",
}


def render(report: "Report", fmt: str, *, color: bool = False) -> str:
    try:
        module = importlib.import_module(f"{__name__}.{FORMATS[fmt]}")
    except KeyError:
        raise ValueError(f"unknown output format {fmt!r} (choose from {', '.join(FORMATS)})") from None
    return module.render(report, color=color)
