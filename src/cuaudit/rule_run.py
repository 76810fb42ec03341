"""The selected rules of one audit, run in order as their facts come in (:class:`RuleRun`).

A rule runs as soon as every stage of the extraction up to its own is collected, while the workers
go on with the later ones; a family whose rule walks facts (the import closures) is finished in a
forked child once its walk ends (:mod:`cuaudit.forked`), while the parent goes on.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

from cuaudit import facts as facts_registry
from cuaudit import forked
from cuaudit import rules as rules_registry
from cuaudit.config import Config
from cuaudit.context import RuleContext
from cuaudit.extraction import Extraction, Facts, usable_cpus
from cuaudit.heap import fewer_full_collections
from cuaudit.inputs import Artifact
from cuaudit.model import ArtifactKind, ArtifactRef, Finding, Location
from cuaudit.time_budget import RULE_SECONDS, CPUBudgetExceeded, cpu_budget
from cuaudit.workers import error_for

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.evidence_inputs import EvidenceInputs

#: the cores from which a family is forked beside workers still busy (see RuleRun._fork_here): with
#: fewer, the workers' backlog takes every core while the child computes (2 cores, the accuracy-venv
#: cold: no faster, 250 MB more); on 16 (the H200) the workers are done long before the verdicts
FORK_BESIDE_WORKERS = 8


#: seconds the parent waits for a forked family's child once it has nothing else to do: past them
#: the child is ended and the family runs in the parent (a child that hangs never hangs the audit)
FORKED_FAMILY_TIMEOUT = 600.0


def _may_fork(config: Config) -> bool:
    """Whether an audit may finish a rule family in a forked child (see RuleRun): with workers
    (where there are none, nothing runs beside the parent either), never with probes (a child
    would run them unrecorded), and only where processes fork."""
    return hasattr(os, "fork") and (config.jobs or usable_cpus()) > 1 and not config.probe


class _FamilyForked(BaseException):
    """Unwinds, in the parent, the rule during whose walk its family was forked (see RuleRun)."""


class RuleRun:
    """The selected rules of one audit, run in order, each once the facts it needs are in.

    A rule's stage is its place in the order; a member's extraction, the first rule that needs
    one of its facts.  The extraction sends the stages in order and calls :meth:`run_until`
    as each is collected, so the parent computes the import rules (CU1xx, the longest serial
    stretch) while the workers inflate the libraries only the later rules read (a cold check
    of torch 2.8.0: 1.4 s of rules after the last fact, on one core).

    A family whose rule walks facts (the import closures: the workers extract what the walk
    names) is finished in a forked child once its walk ends (``extraction``: see
    :meth:`_fork_here`): the child computes the rest of the family (CU101's verdicts) while the
    parent runs the later families, writes the cache's bundles and waits for the stages still
    coming; the child's findings, counts and the facts it read come back at :meth:`finish`."""

    def __init__(self, ctx: RuleContext, runnable: "list[rules_registry.Rule]", names: set[str],
                 facts: "Facts | None" = None, *, extraction: "Extraction | None" = None,
                 evidence: "EvidenceInputs | None" = None) -> None:
        self.ctx = ctx
        self._extraction = extraction
        self._evidence = evidence
        #: in the parent: (the child, its family, where its findings go in ``findings``)
        self._forked: tuple[forked.Forked, str, int] | None = None
        #: in the child: ends it with the family's result (see forked.fork), and what it compares with
        self._send: Callable[[Any], None] | None = None
        self._baseline: dict[str, Any] = {}
        self._at = 0
        self._fork_tried = False
        self._aheads_done = False
        #: the last rule the run in progress runs, and whether a rule's check is running
        self._bound = -1
        self._checking = False
        if extraction is not None:
            extraction.reads_next = self._family_reads
            if _may_fork(ctx.config):
                extraction.after_walk = self._fork_here
        #: the audit's facts, whose pending ones no rule reads are named ahead (see run_until)
        self.facts = facts
        self.runnable = runnable
        self.names = names
        self.findings: list[Finding] = []
        #: families whose rule ran out of its CPU-time budget (``RULE_SECONDS``): their later rules do not run
        self._out_of_time: set[str] = set()
        self.ran = 0
        self._first: dict[str, int] = {}
        for k, rule in enumerate(runnable):
            for n in rule.needs:
                self._first.setdefault(n, k)
        # once a family's rules have run, its models and the facts no later rule needs are let go
        self._last_of = {type(rule).__module__: k for k, rule in enumerate(runnable)}
        self._needed_after = [set(n for later in runnable[k + 1:] for n in later.needs) for k in range(len(runnable))]

    def _unread(self) -> list[tuple[int, str, str]]:
        """The pending facts no selected rule names in ``needs``: extracted for their problems alone
        (the format check of installed sources, ``Extractor.deferred``)."""
        read = {n for rule in self.runnable for n in rule.needs}
        if self.facts is None:
            return []
        # (under env --package only the problems of the distributions in focus are reported)
        arts, in_focus = self.ctx.artifacts, self.ctx.in_focus
        return [k for k in self.facts.pending if k[2] not in read and in_focus(arts[k[0]])]

    def ahead(self) -> None:
        """Every rule's ``ahead`` hook, once: before the first rule runs, or as soon as the workers
        have the first stage (``Extraction.run``'s ``sent``: the import family builds the package
        model while the workers extract what its rules read first).  A hook that reads a fact still
        to come fails, and only loses its head start."""
        if self._aheads_done:
            return
        self._aheads_done = True
        ctx = self.ctx
        with fewer_full_collections():  # the rules' models are large too (evidence parsed on demand)
            for rule in self.runnable:
                ctx.family = type(rule).__module__
                try:
                    rule.ahead(ctx)
                except Exception:  # noqa: BLE001 - naming facts ahead only saves time: check() says what fails
                    pass
            if self.facts is not None:
                # what waits to be read for its problems alone goes with them: in the same batch as a
                # member's CU4xx source, one parse (see finish)
                self.facts.ahead(self._unread())

    def _fork_here(self) -> None:
        """At the end of a walk: fork the family of the rule that walked, if a later family is left
        to run and all of this one runs in the run in progress.  The parent unwinds the rule
        (:class:`_FamilyForked`) and skips the family; the child goes on with it, and ends when
        its last rule has run (:meth:`run_until`)."""
        family = self.ctx.family
        last = self._last_of.get(family, -1)
        if self._fork_tried or not self._checking or last >= len(self.runnable) - 1 or last > self._bound:
            return
        extraction = self._extraction
        if extraction.workers_busy() and (self.ctx.config.jobs or usable_cpus()) < FORK_BESIDE_WORKERS:  # type: ignore[union-attr]
            return  # the child would only take the workers' cores (2 cores, cold: no faster, 250 MB more)
        self._fork_tried = True
        # what the family reads and the workers still extract (named ahead, sent behind the walk's
        # first chunks) is collected first: the child would extract it again itself, one member at
        # a time (the GPU machine's cold run: 634 facts extracted, 1,674 read back from the cache in
        # the child).  Those chunks hold nothing the later families alone read (Extraction._send_later).
        reads = self._family_reads()
        facts = extraction.facts  # type: ignore[union-attr]
        for key in [k for k in facts.inflight if k[2] in reads]:
            if key in facts.inflight and facts.settle is not None:
                facts.settle(key)
        extraction.close_stores()  # type: ignore[union-attr]
        child, send = forked.fork()
        if send is not None:
            self._baseline = extraction.become_child()  # type: ignore[union-attr]
            self._at, self._send = len(self.findings), send
            return
        if child is not None:
            self._forked = (child, family, len(self.findings))
            extraction.took = {}  # type: ignore[union-attr]
            raise _FamilyForked

    def _family_reads(self) -> set[str]:
        """The extractors the rules of the family now running read (``Rule.needs``)."""
        family = self.ctx.family
        return {n for rule in self.runnable if type(rule).__module__ == family for n in rule.needs}

    def _let_idle_workers_go(self, k: int) -> None:
        """In the parent, after rule ``k``, while a forked family's child computes: stop the workers
        once they have nothing left to do and no later rule may read a fact still to extract on
        demand (CU202's import walks would start a pool again).  Idle workers beside the parent and
        the child made the GPU machine's peak (see :meth:`finish`).

        A pending fact of an extractor that every later reader reads only where its ``ahead`` hook
        named it (``Rule.ahead_reads``: CU4xx's sources) keeps the workers only if it was named:
        the CU4xx sources of installed tests, never read, kept the GPU machine's idle workers to
        the last CU4xx rule (1.2 s, 16 workers, 920 MB, the tree's peak with the child beside them)."""
        extraction = self._extraction
        if extraction is None or not extraction.workers_running() or not extraction.workers_idle():
            return
        # extractor -> whether every later rule that reads it reads only what was named ahead
        later: dict[str, bool] = {}
        for rule in self.runnable[k + 1:]:
            for n in rule.needs:
                if facts_registry.get(n).on_demand:
                    later[n] = later.get(n, True) and n in rule.ahead_reads
        if later:
            facts = extraction.facts
            named = facts.named_ahead
            if any(key[2] in later and (not later[key[2]] or key in named) for key in facts.pending):
                return
        extraction.stop_workers()

    def _result(self) -> dict[str, Any]:
        """The child's result (see :meth:`_join`)."""
        return {"findings": self.findings[self._at:],
                "extraction": self._extraction.child_delta(self._baseline),  # type: ignore[union-attr]
                "evidence": self._evidence.asked() if self._evidence is not None else {}}

    def _join(self) -> None:
        """Take in the forked family's result; where the child failed, run the family here."""
        if self._forked is None:
            return
        child, family, at = self._forked
        self._forked = None
        got = child.result(FORKED_FAMILY_TIMEOUT)
        if got is not None:
            extra: list[Artifact] = []
            if self._evidence is not None:
                extra = self._evidence.take_in(got["evidence"])
            self._extraction.absorb(got["extraction"], extra)  # type: ignore[union-attr]
            found = got["findings"]
        else:
            found = []
            for rule in self.runnable:
                if type(rule).__module__ == family:
                    self.ctx.family = family
                    found += self._check(rule)
        self.findings[at:at] = found
        self.ctx.release(family, self.names - self._needed_after[self._last_of[family]])

    def abandon(self) -> None:
        """End a forked child the audit will not wait for (it failed, or was interrupted)."""
        if self._forked is not None:
            self._forked[0].kill()
            self._forked = None

    def _check(self, rule: "rules_registry.Rule") -> list[Finding]:
        """The rule's findings; a rule that fails gives CU011 instead (one broken rule must not hide the others)."""
        ctx = self.ctx
        try:
            with cpu_budget(RULE_SECONDS, f"rule {rule.code}", "RULE_SECONDS",
                            f"the rules of its family ({type(rule).__module__.rsplit('.', 1)[-1]}) were stopped"):
                return list(rule.check(ctx))
        except _FamilyForked:
            raise
        except Exception as exc:  # noqa: BLE001 - one broken rule must not hide the others
            if isinstance(exc, CPUBudgetExceeded):
                # stopped anywhere: the models its family shares may be half built, so the rest of
                # the family does not run on them (the other families do)
                self._out_of_time.add(type(rule).__module__)
            code, message, evidence = error_for(exc)
            arts = ctx.artifacts
            ref = arts[0].ref if arts else ArtifactRef(kind=ArtifactKind.FILE, path=".")
            return [rules_registry.get("CU011").finding(
                Location(ref), f"rule {rule.code} failed: {message}", evidence={**evidence, "rule": rule.code}, key=rule.code
            )]

    def finish(self) -> None:
        """Extract what is still pending for its problems alone (what no pass parsed, the rest came
        along with the passes), collect what was sent ahead, read by a rule or not, and take in
        the forked family's result."""
        if self.facts is not None:
            leftover = self._unread()
            if leftover:
                self.facts.prefetch(leftover)
            if self.facts.inflight and self.facts.settle is not None:
                self.facts.settle(None)
        if self._extraction is not None:
            # Every rule has run and what they read is in: the audit extracts nothing more (a forked
            # child that failed has its family run here, whose reads start a pool again if they are
            # many).  The idle workers' memory goes now, not after the wait for the child and the
            # cache's writes, when the parent and the child are at their largest.
            self._extraction.stop_workers()
        if self._forked is not None and self._extraction is not None:
            # what the parent read is written while the child computes; what the child read, after
            self._extraction.flush()
        # last: what the parent took since the fork is known, and counted once with the child's
        self._join()

    def stage(self, names: tuple[str, ...]) -> int:
        """The first rule that reads one of these facts (the rule count: none does, e.g. ``format``)."""
        first, late = self._first, len(self.runnable)
        return min((first.get(n, late) for n in names), default=late)

    def run_until(self, last: int) -> None:
        """Run the rules not run yet up to index ``last`` (the first time, every rule's ``ahead``
        hook before any check: the CU4xx sources of an environment are then extracted while the
        parent computes the import verdicts; a hook that reads a fact still to come fails, and
        only loses its head start)."""
        todo = self.runnable[self.ran:last + 1]
        if not todo:
            return
        start = self.ran
        self.ran += len(todo)
        self._bound = last
        try:
            self._run(todo, start)
        except BaseException:
            if self._send is not None:
                self._send(None)  # a child never unwinds the parent's audit: it ends, failed
            raise

    def _run(self, todo: "list[rules_registry.Rule]", start: int) -> None:
        ctx = self.ctx
        if start == 0:
            self.ahead()
        with fewer_full_collections():  # the rules' models are large too (evidence parsed on demand)
            for k, rule in enumerate(todo, start):
                family = type(rule).__module__
                if self._forked is not None and self._forked[1] == family:
                    continue  # the child runs it
                ctx.family = family
                self._checking = True
                try:
                    # (a family out of time may have left its models half built: its rule's CU011 says so)
                    if family not in self._out_of_time:
                        self.findings += self._check(rule)
                except _FamilyForked:
                    continue  # forked during this rule's walk: the child finishes the family
                finally:
                    self._checking = False
                if self._last_of[family] == k:
                    if self._send is not None:
                        self._send(self._result())  # the child ends here
                    ctx.release(family, self.names - self._needed_after[k])
                if self._forked is not None:
                    self._let_idle_workers_go(k)
