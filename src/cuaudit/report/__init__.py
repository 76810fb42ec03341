"""Reports: renderers only, no analysis.  One module per format.

Each module has ``render(report, *, color=False) -> str``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.engine import Report
    from cuaudit.model import Fix

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


def fix_parts(fix: "Fix") -> list[tuple[str, str]]:
    """The lines of a fix as (label, text), the same in every format.

    Who does what: the user's workaround now and the maintainer's fix at the
    source when the rule gives them, else the one description.  The texts
    are printable (see ``escape.py``).
    """
    from cuaudit.escape import printable

    if fix.user or fix.maintainer:
        return [(label, printable(body)) for label, body in (("user fix", fix.user), ("maintainer fix", fix.maintainer))
                if body]
    return [("fix", printable(fix.description))]


def fix_text(fix: "Fix") -> str:
    """The fix as lines to append to a one-string message (SARIF, GitHub annotations)."""
    return "".join(f"\n{label[0].upper()}{label[1:]}: {body}" for label, body in fix_parts(fix))
