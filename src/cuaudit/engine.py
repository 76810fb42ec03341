"""The pipeline: inputs -> formats -> facts -> analysis -> rules -> finish -> report.

:func:`audit` is the library API; the CLI is a thin layer over it.  Its parts have modules of their
own: :mod:`cuaudit.extraction` (which facts, in which process, when), :mod:`cuaudit.workers` (what a
worker process runs), :mod:`cuaudit.rule_run` (the rules, run as their facts come in) and
:mod:`cuaudit.evidence_inputs` (what rules read beside the audited artifacts).
"""

from __future__ import annotations

import gc
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from cuaudit import facts as facts_registry
from cuaudit import rules as rules_registry
from cuaudit import snapshot
from cuaudit.config import Config
from cuaudit.context import RuleContext
from cuaudit.evidence_inputs import EvidenceInputs
from cuaudit.extraction import ByContent, Extraction, Progress
from cuaudit.finish import Report, finish, lines_to_check
from cuaudit.heap import fewer_full_collections
from cuaudit.inputs import Artifact
from cuaudit.inputs.artifact import MemberSubset
from cuaudit.model import (
    ArtifactKind, ArtifactRef, EnvironmentInfo, Finding, Location, Member, Problem, ProbeRecord, out_of_time,
)
from cuaudit.probe import Prober
from cuaudit.rule_run import RuleRun
from cuaudit.workers import CachedFailure, Pickled, error_for

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.inputs.environment import Environment

# Re-exported: these lived here before the finishing step, the rule context, the extraction and the
# evidence inputs had modules of their own.
__all__ = ["audit", "gather", "audit_stats", "Report", "RuleContext", "ProbeRecord", "Extraction", "Gathered", "EvidenceInputs",
           "ByContent", "CachedFailure", "Pickled"]
# ByContent, CachedFailure and Pickled stay reachable here for the fact caches written before they
# moved out (593075c, the split of this module): their pickles name them ``cuaudit.engine.*``, and a bundle that does
# not unpickle is a miss, so every fact of every artifact was extracted again once (40,046 of
# 41,236 on the accuracy-venv's first run after the split).


#: the commands whose audits reuse a snapshot of their last run (`diff` and `explain` audit
#: two versions or a narrowed environment each run: they gain little)
SNAPSHOT_COMMANDS = ("env", "check")


@dataclass
class Gathered:
    """Artifacts and their facts, before any rule runs (what `audit`, `archs` and `libs` share)."""

    artifacts: list[Artifact]
    environment: EnvironmentInfo | None
    extraction: "Extraction"
    #: CU0xx findings met on the way: an interpreter that does not run (CU008), listing and reading problems
    problems: list[Finding]
    #: how many of ``extraction.problems`` ``problems`` holds (later ones: facts read on demand)
    reported: int = 0


def gather(
    paths: Iterable[str | os.PathLike | Artifact] = (),
    *,
    env: "str | bool | Environment | None" = None,
    config: Config,
    extractors: Iterable[str],
    progress: Progress | None = None,
) -> Gathered:
    """Resolve inputs (and an environment), list them, and extract the named facts.

    ``env``: ``True`` for the current interpreter's environment, the path of another
    ``python``, or an :class:`~cuaudit.inputs.environment.Environment` already loaded.  Probe extractors run only with ``config.probe``.
    """
    artifacts, environment, problems = _collect(paths, env=env, config=config, progress=progress)
    return _extract(artifacts, environment, problems, config=config, extractors=extractors, progress=progress)


def _collect(
    paths: Iterable[str | os.PathLike | Artifact], *, env: "str | bool | Environment | None", config: Config,
    progress: Progress | None, listed: bool = True,
) -> tuple[list[Artifact], EnvironmentInfo | None, list[Finding]]:
    """Resolve inputs (and an environment) and, with ``listed``, list them: what a snapshot is keyed by."""
    from cuaudit.inputs import resolve

    paths = list(paths)
    specs = [os.fspath(p) for p in paths if isinstance(p, (str, os.PathLike))]
    artifacts: list[Artifact] = [p for p in paths if isinstance(p, Artifact)]
    artifacts += resolve(specs, exclude=config.exclude, cache_dir=config.cache_dir, progress=progress)
    environment: EnvironmentInfo | None = None
    problems: list[Finding] = []
    if env:
        from cuaudit.inputs.environment import Environment, InterpreterError, load_environment

        python = env if isinstance(env, str) else None
        try:
            # an Environment already loaded (and narrowed to some distributions: `explain`)
            loaded = env if isinstance(env, Environment) else load_environment(python)
            environment = loaded.info
            artifacts += loaded.distributions
        except InterpreterError as exc:
            ref = ArtifactRef(kind=ArtifactKind.FILE, path=str(python))
            problems.append(rules_registry.get("CU008").finding(Location(ref), str(exc)))
    for art in artifacts if listed else ():
        _list_safely(art)
    return artifacts, environment, problems


def _extract(artifacts: list[Artifact], environment: EnvironmentInfo | None, problems: list[Finding], *,
             config: Config, extractors: Iterable[str], progress: Progress | None, keep_workers: bool = False,
             extraction: "Extraction | None" = None, rules: "RuleRun | None" = None) -> Gathered:
    """The named facts of listed artifacts (cache, workers), with the problems met listing them
    (``keep_workers``: see :class:`Extraction`; the caller then stops them).  With ``rules``,
    their facts are extracted rule by rule and each rule runs once its facts are in."""
    chosen = {n: facts_registry.get(n)() for n in sorted(set(extractors))}
    if not config.probe:
        chosen = {n: e for n, e in chosen.items() if not type(e).probe}

    def wanted(member: Member) -> tuple[str, ...]:
        return tuple(n for n, e in chosen.items() if e.applies(member))

    extraction = extraction or Extraction(config, progress, keep_workers=keep_workers)
    with fewer_full_collections():
        if rules is None:
            extraction.run(artifacts, wanted)
        else:
            extraction.run(artifacts, wanted, stage=rules.stage, ready=rules.run_until, sent=rules.ahead)
        # The facts live until the audit ends and hold no cycle: later collections (the rules
        # build models, the report its document) need not walk them again.  Frozen before the
        # thresholds come back, whose first collection would walk them all (0.29 s of torch's check).
        gc.freeze()
    problems = list(problems)
    for art in artifacts:
        problems += [problem_finding(p) for p in art.problems]
    problems += extraction.problems
    return Gathered(artifacts, environment, extraction, problems, len(extraction.problems))


def audit(
    paths: Iterable[str | Artifact] = (),
    *,
    env: "str | bool | Environment | None" = None,
    config: Config | None = None,
    progress: Progress | None = None,
    command: str = "check",
) -> Report:
    """Audit wheels, sdists, trees, files, requirements and/or an environment.

    ``paths``: strings as on the command line (or ready Artifacts).
    ``env``: ``True`` for the current interpreter's environment, or the path
    of another ``python``.  Returns a :class:`Report`; never raises for bad
    input (that is a CU0xx finding), only for usage errors.
    """
    started = time.perf_counter()
    config = config or Config()
    rules_registry.validate_config(config)
    # codes, not classes: a snapshot's hit imports no rule module (rules.info reads the index)
    codes = rules_registry.selected_codes(config.selected, config.ignored)
    names = extractors_for(codes)
    artifacts, environment, early = _collect(paths, env=env, config=config, progress=progress, listed=False)
    # `env` and `check` reuse what their last run derived when nothing it depends on changed (snapshot.py)
    slot = content = None
    if command in SNAPSHOT_COMMANDS and snapshot.usable(config, codes, names):
        named = [a.ref for a in artifacts if a.ref.kind is not ArtifactKind.INSTALLED]
        slot = snapshot.slot_key(config, environment, codes, names, command, named)
        own_code = snapshot.code_identity()
        extraction = Extraction(config, None)
        evidence_inputs = EvidenceInputs(config, environment, extraction)
        hit = snapshot.load(extraction.store, slot)
        # the last run's hints (RECORDs already read) make the content key; its content is then compared
        hints = hit.hints if hit is not None and hit.code == own_code else {}
        new_hints: dict[ArtifactRef, Any] = {}
        content = snapshot.content_identity(artifacts, own_code, _list_safely, hints, new_hints)
        if hit is not None and hit.content == content and len(hit.skipped) == len(artifacts) \
                and evidence_inputs.still_answers(hit.evidence):
            extraction.store.close()
            for art, skipped in zip(artifacts, hit.skipped):
                art.skipped = list(skipped)
            return _report(config, codes, artifacts, environment, list(hit.findings), hit.suppressions, [],
                           [ref for name in EvidenceInputs.NAMES for ref, _ in hit.evidence.get(name, ())],
                           {**hit.stats, "snapshot_reused": True}, started, command)
        extraction.store.close()
    for art in artifacts:
        _list_safely(art)
    selected = [rules_registry.get(c) for c in codes]
    runnable = [cls() for cls in selected if not cls.emitted_by_engine]
    names = extractors_for(codes)  # from the classes now imported: what they need, even if the index is stale
    # the workers kept for the facts the rules read on demand end with the audit, however it ends
    extraction = Extraction(config, progress, keep_workers=True)
    try:
        probes: list[ProbeRecord] = []
        evidence_inputs = EvidenceInputs(config, environment, extraction, record=slot is not None)
        ctx = RuleContext(config, artifacts, extraction.facts, environment, probes,
                          evidence=evidence_inputs, probe=Prober(config, probes))
        extraction.facts.keeps_pickles = extraction.store.keeps
        if config.focus:
            extraction.in_focus = ctx.in_focus
        rules = RuleRun(ctx, runnable, names, extraction.facts, extraction=extraction, evidence=evidence_inputs)
        try:
            gathered = _extract(artifacts, environment, early, config=config, extractors=names, progress=progress,
                                extraction=extraction, rules=rules)
            rules.run_until(len(runnable) - 1)
            rules.finish()
        finally:
            rules.abandon()
        findings: list[Finding] = list(gathered.problems) + rules.findings
        # problems met extracting what the rules read on demand (the format check's own, as a rule)
        findings += extraction.problems[gathered.reported:]
        if environment is not None:
            from cuaudit.rules.input import ContentMismatch

            findings = ContentMismatch.under_a_newer_python(findings, environment)
        stats = audit_stats(gathered, started)
        suppressions = suppressions_for(findings, artifacts, config)
        if slot is not None and content is not None and not any(f.code == "CU011" or out_of_time(f.evidence)
                                                                for f in findings):
            # a CU011 is cuaudit's own failure (or a worker that died), a pass stopped by its CPU-time
            # budget may finish next time: never kept for the next run
            stats.pop("seconds")
            snapshot.save(extraction.store, slot, snapshot.Snapshot(
                content, findings, [list(a.skipped) for a in artifacts], suppressions, evidence_inputs.recorded,
                {**{k: v for k, v in stats.items() if k not in ("facts_extracted", "evidence_facts_extracted")},
                 "facts_extracted": 0, "evidence_facts_extracted": 0,
                 "facts_cached": stats["facts_cached"] + stats["facts_extracted"],
                 "evidence_facts_cached": stats["evidence_facts_cached"] + stats["evidence_facts_extracted"]},
                own_code, new_hints,
            ))
        extraction.close()
    finally:
        extraction.stop_workers()
        extraction.close_stores()  # however the audit ends: no connection outlives it
    return _report(config, codes, artifacts, environment, findings, suppressions, probes, evidence_inputs.refs(),
                   {**stats, "snapshot_reused": False}, started, command)


def _report(config: Config, codes: Sequence[str], artifacts: list[Artifact], environment: EnvironmentInfo | None,
            findings: list[Finding], suppressions: dict[tuple[ArtifactRef, str], Any], probes: list[ProbeRecord], evidence: list[ArtifactRef], stats: dict[str, Any],
            started: float, command: str) -> Report:
    """The finishing step over the rules' findings (with the inline suppressions of their members), and the report."""
    findings, suppressed, baselined = finish(findings, config, set(codes), suppressions)
    skipped = [s for a in artifacts for s in a.skipped]
    return Report(
        findings=findings,
        skipped=sorted(skipped, key=lambda s: (s.location.artifact.path, s.location.member or "")),
        artifacts=[a.ref for a in artifacts],
        evidence=evidence,
        config=config,
        rules=list(codes),
        environment=environment,
        probes=probes,
        stats={**stats, "seconds": round(time.perf_counter() - started, 3)},
        suppressed=suppressed,
        baselined=baselined,
        command=command,
    )


def audit_stats(gathered: Gathered, started: float) -> dict[str, Any]:
    """The figures every report gives (check, env and diff count alike)."""
    artifacts, extraction = gathered.artifacts, gathered.extraction
    return {
        "artifacts": len(artifacts),
        "members": sum(len(a.members) for a in artifacts),
        "facts_extracted": extraction.extracted,
        "facts_cached": extraction.cached,
        "facts_by_content": extraction.by_content,
        "evidence_facts_extracted": extraction.evidence_extracted,
        "evidence_facts_cached": extraction.evidence_cached,
        "seconds": round(time.perf_counter() - started, 3),
    }


def extractors_for(codes: Sequence[str]) -> set[str]:
    """The extractors an audit with these rules runs: what the selected rules need,
    and the format check whenever any CU0xx rule is selected.

    The format check parses every member that has a format (sharing that one
    parse with the other extractors of the pass), so whether a member is
    reported unreadable never depends on which other rules were selected.
    (CU009, "not supported by an analysis", is reported for the analyses that
    ran, whichever rule asked for them.)
    """
    names = {n for code in codes for n in rules_registry.info(code).needs}
    if any(code.startswith("CU0") for code in codes):
        names.add("format")
    return names


def _list_safely(art: Artifact) -> None:
    """List an artifact's members once; a bug while listing is CU011 for it, not a crash."""
    try:
        art.members  # noqa: B018 - list each artifact once, collecting its CU0xx problems
    except Exception as exc:  # noqa: BLE001 - one bad input never stops the scan
        art._members = []
        code, message, evidence = error_for(exc)
        art.problems.append(Problem(code, f"{art.ref.display}: {message}", Location(art.ref), evidence))


def problem_finding(problem: Problem) -> Finding:
    """The CU0xx finding for a problem an input recorded (the framework's one conversion)."""
    try:
        rule = rules_registry.get(problem.code)
    except KeyError:
        rule = rules_registry.get("CU011")
        return rule.finding(problem.location, f"{problem.message} (unknown input problem code {problem.code})",
                            evidence=problem.evidence, key=problem.key)
    return rule.finding(problem.location, problem.message, evidence=problem.evidence, key=problem.key)


def suppressions_for(
    findings: Sequence[Finding], artifacts: Sequence[Artifact], config: Config
) -> dict[tuple[ArtifactRef, str], Any]:
    """Inline-suppression facts of the members that have findings at a line (read only those)."""
    import dataclasses

    need = lines_to_check(findings)
    if not need:
        return {}
    by_ref = {a.ref: a for a in artifacts}
    restricted = [MemberSubset(by_ref[ref], paths) for ref, paths in need.items() if ref in by_ref]
    sub = Extraction(dataclasses.replace(config, jobs=1), None)
    ex = facts_registry.get("suppressions")()

    def wanted(m: Member) -> tuple[str, ...]:
        return ("suppressions",) if ex.applies(m) else ()

    sub.run(restricted, wanted)
    out: dict[tuple[ArtifactRef, str], Any] = {}
    for (i, path, _), value in sub.facts.items():
        # keyed by the whole ref: installed distributions share their site dir as path
        out[(restricted[i].ref, path)] = value
    sub.store.close()
    return out
