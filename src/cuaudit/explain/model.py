"""The answer ``cuaudit explain`` gives: a few lines, each for one reader."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from cuaudit.model import Finding


@dataclass(frozen=True)
class Explanation:
    """What happened, why, what to do now (user) and at the source (maintainer).

    ``kind`` is the failure kind of :mod:`cuaudit.explain.patterns`
    (``unrecognised`` when no pattern matched); ``codes`` are the rules that
    hold the details (``cuaudit rule CODE``); ``next`` the commands to run
    when the audit could not tell; ``findings`` the audit's findings the
    answer rests on (none: the answer comes from the message alone).
    """

    kind: str
    summary: str
    why: tuple[str, ...] = ()
    user: tuple[str, ...] = ()
    maintainer: tuple[str, ...] = ()
    codes: tuple[str, ...] = ()
    next: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()
    #: what was read: distributions ("cupy-cuda12x 13.3.0"), files, the interpreter
    audited: tuple[str, ...] = ()
    #: what was recognised in the text (a module, a library, a symbol)
    evidence: Mapping[str, str] = field(default_factory=dict)

    @property
    def confirmed(self) -> bool:
        """The audit found the cause (findings), not only the message."""
        return bool(self.findings)
