"""cuaudit: find, explain and repair the compatibility failures of GPU Python packages."""

from __future__ import annotations

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.engine import Report


def audit(*args: Any, **kwargs: Any) -> "Report":
    """Audit inputs and return the :class:`~cuaudit.engine.Report`; see :func:`cuaudit.engine.audit`."""
    from cuaudit.engine import audit as _audit

    return _audit(*args, **kwargs)


__all__ = ["audit", "__version__"]
