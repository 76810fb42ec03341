"""The finishing step: one way from raw findings to a :class:`Report`.

``check``, ``env``, ``diff`` and ``trace`` all end here: selection, per-path
ignores, severity overrides, inline suppressions, the baseline, de-duplication
and sorting; :class:`Report` then knows the exit status.  Nothing here reads a
file: inline suppressions arrive as facts (the ``suppressions`` extractor),
gathered by the engine for the members that have findings with a line.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from cuaudit import __version__
from cuaudit import rules as rules_registry
from cuaudit.config import Config
from cuaudit.model import ArtifactRef, EnvironmentInfo, Finding, ProbeRecord, Severity, Skipped

__all__ = ["Report", "finish", "lines_to_check"]


@dataclass
class Report:
    """Everything one audit found, ready for any renderer."""

    findings: list[Finding]
    skipped: list[Skipped]
    artifacts: list[ArtifactRef]
    config: Config
    rules: list[str]
    environment: EnvironmentInfo | None = None
    probes: list[ProbeRecord] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    suppressed: int = 0
    baselined: int = 0
    command: str = "check"
    tool_version: str = __version__
    #: ``--exit-zero``: the process exits 0 whatever was found (reports state the real status)
    exit_zero: bool = False
    #: evidence-only inputs the audit read (standard library, system libraries, ``--with``): not audited
    evidence: list[ArtifactRef] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out = {str(s): 0 for s in (Severity.ERROR, Severity.WARNING, Severity.INFO)}
        for f in self.findings:
            out[str(f.severity)] += 1
        return out

    def failing(self, threshold: Severity | None = None) -> list[Finding]:
        t = self.config.fail_on if threshold is None else threshold
        return [f for f in self.findings if f.severity >= t]

    def exit_code(self, threshold: Severity | None = None) -> int:
        if self.exit_zero:
            return 0
        return 1 if self.failing(threshold) else 0



INTERNAL_ERROR = "CU011"


def select_and_adjust(findings: Iterable[Finding], config: Config, codes: set[str]) -> list[Finding]:
    """Selection, per-path ignores and severity overrides; unique, in input order."""
    out: list[Finding] = []
    seen: set = set()
    # cuaudit's own failure (a rule or extractor that crashed) is shown even when the selection
    # leaves CU011 out: `--select CU101` with a crashed CU101 must not read "No findings".
    # Only an explicit ignore that names it hides it.
    internal_hidden = rules_registry.matches(INTERNAL_ERROR, config.ignored)
    for f in findings:
        if f.code not in codes and (f.code != INTERNAL_ERROR or internal_hidden):
            continue
        member = f.location.member or ""
        if any(
            fnmatch.fnmatch(member, glob) and rules_registry.matches(f.code, prefixes)
            for glob, prefixes in config.per_path_ignores.items()
        ):
            continue
        sev = config.severity_for(f.code, f.severity)
        if sev != f.severity:
            f = dataclasses.replace(f, severity=sev)
        ident = (f.code, f.location, f.key, f.message)
        if ident in seen:
            continue
        seen.add(ident)
        out.append(f)
    return out


def lines_to_check(findings: Iterable[Finding]) -> dict[ArtifactRef, set[str]]:
    """The members whose inline suppressions matter: those with a finding at a line."""
    need: dict[ArtifactRef, set[str]] = {}
    for f in findings:
        if f.location.line is not None and f.location.member:
            need.setdefault(f.location.artifact, set()).add(f.location.member)
    return need


def finish(
    findings: Iterable[Finding],
    config: Config,
    codes: set[str],
    suppressions: Mapping[tuple[ArtifactRef, str], Any] | None = None,
) -> tuple[list[Finding], int, int]:
    """(kept findings sorted, suppressed count, baselined count).

    ``suppressions`` maps (artifact, member) to that member's suppression fact
    (anything with ``silences(line, code)``); see :func:`lines_to_check`.
    """
    from cuaudit.baseline import read_baseline

    out = select_and_adjust(findings, config, codes)
    kept: list[Finding] = []
    suppressed = 0
    for f in out:
        entry = (suppressions or {}).get((f.location.artifact, f.location.member or ""))
        if entry is not None and entry.silences(f.location.line, f.code):
            suppressed += 1
            continue
        kept.append(f)

    baselined = 0
    if config.baseline:
        accepted = read_baseline(config.baseline)
        before = len(kept)
        kept = [f for f in kept if f.fingerprint() not in accepted]
        baselined = before - len(kept)
    kept.sort(key=Finding.sort_key)
    return kept, suppressed, baselined
