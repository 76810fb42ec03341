"""The extraction: which facts of which members, in which process, and when.

:class:`Extraction` reads what the fact cache holds (bundles per artifact, rows by content),
sends the rest to a pool of forked workers (:mod:`cuaudit.workers`) in chunks, the costliest
first, stage by stage for the rules (:class:`_Feeder` holds the later stages back), and extracts
on demand what a rule reads of an installed distribution: one fact at a time, many ahead, or a
walk over them (the import closures) as one stream.  :class:`Facts` is what the rules read: a
fact is kept as its pickle until read, and a read waits for one still in flight.
"""

from __future__ import annotations

import gc
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Protocol, Sequence

from cuaudit import facts as facts_registry
from cuaudit import rules as rules_registry
from cuaudit import workers
from cuaudit.config import Config
from cuaudit.heap import gc_paused, give_back_free_memory
from cuaudit.inputs import Artifact
from cuaudit.model import ArtifactKind, ArtifactRef, Finding, Location, Member, MemberKind, lasting_failure
from cuaudit.store import GRAMMAR, FactStore, default_cache_dir
from cuaudit.workers import REUSED, CachedFailure, Pickled


class Progress(Protocol):
    """Bytes: ``total`` of the members to read (None: unknown), ``n`` read, the ``member`` just read."""

    def start(self, total: int | None, description: str) -> None: ...
    def advance(self, n: int = 1, member: str = "") -> None: ...
    def stop(self) -> None: ...


#: Extraction is spread over processes once there is at least this much to do.
PARALLEL_MIN_TASKS = 24
#: evidence facts extracted ahead in the worker pool once there are at least this many (prefetch_evidence):
#: a standard-library module takes ~4 ms to parse and read, a round trip through the pool ~1 ms
EVIDENCE_PARALLEL_MIN = 8
PARALLEL_MIN_BYTES = 64 * 1024**2
#: the same once a pool runs (an audit's later batches): sending costs no fork, only the pickles
PARALLEL_WARM_MIN_TASKS = 8

#: The interpreter's switch interval while a worker pool runs, in seconds (CPython's default: 5 ms).
#: The pool's own threads (one sends the chunks to the workers, one hands their results back)
#: need the interpreter's lock for every chunk, and a thread that wants it waits until the one
#: holding it is asked to let go, one switch interval later: with the parent's thread busy (an
#: environment's import walk follows each chunk as it comes back, thousands of them) each
#: hand-over waited up to 5 ms.  On the H200, cold: 18.30 / 18.96 s -> 17.17 / 16.19 s, alternating
#: on one host; the walk started 0.6-1.2 s sooner and ended about 2 s sooner.  The caller's value
#: comes back when the pool stops.
POOL_SWITCH_INTERVAL = 0.0005

#: how a key taken since a fork was counted (``Extraction.took``)
_EXTRACTED, _CACHED, _BY_CONTENT = 0, 1, 2
#: what Extraction._keep_evidence returns for a failure it does not keep
_NOT_KEPT = object()

#: facts read on demand, by content, written once this many are kept (``Extraction._keep``)
_LOOSE_BATCH = 2048
#: how many of them a walk writes at a time while no chunk is back (``Extraction.walk``)
_LOOSE_SLICE = 256


def usable_cpus() -> int:
    """CPUs this process may run on (a container's limit, not the host's count)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class FactNotReady(RuntimeError):
    """A fact read while the extraction that brings it is still under way (see ``Facts.coming``)."""


class ByContent(str):
    """A bundle's entry for a fact also stored on its own by content: the key of that row.

    A fact of a member read whole is written once, under its key by content (a new environment
    of the same packages finds it there), and the bundles that serve the same environment's
    next audit name that row instead of holding the value a second time: a cold audit wrote
    every such fact twice (half of the accuracy-venv's 154 MB).  Resolved when the bundle is
    read (:func:`_resolved`); an entry whose row is gone (pruned) is a miss."""

    __slots__ = ()


def _resolved(store: FactStore, bundles: Iterable[dict[str, Any]]) -> None:
    """Replace the :class:`ByContent` entries of these bundles by the rows they name, in one
    read; an entry whose row is gone is dropped (its fact is extracted again)."""
    bundles = [b for b in bundles if any(type(v) is ByContent for v in b.values())]
    if not bundles:
        return
    rows = store.get_many({v for b in bundles for v in b.values() if type(v) is ByContent})
    for b in bundles:
        for k, v in list(b.items()):
            if type(v) is ByContent:
                if v in rows:
                    b[k] = rows[v]
                else:
                    del b[k]


class Facts(dict):
    """(artifact index, member path, extractor) -> fact; a :class:`Pickled` one is decoded when read.

    Facts from the workers, the cache and the bundles arrive pickled (:class:`Pickled`) and
    are decoded one by one as rules read them: the import-time programs of an environment are
    two thirds of its cached facts (158 of 243 MB on the 88-distribution accuracy-venv), and
    the model reads the programs of the modules an import reaches, not all of them.

    Facts of on-demand extractors (:attr:`Extractor.on_demand`) are ``pending`` until
    read: the first read extracts it (``load``: the fact cache, else the extractor),
    and :meth:`prefetch` extracts many at once, in the worker processes.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: key -> member, for the on-demand facts not extracted yet
        self.pending: dict[tuple[int, str, str], Member] = {}
        #: extracts pending keys (removing them from ``pending``) and stores their facts here
        self.load: Callable[[list[tuple[int, str, str]]], None] | None = None
        #: runs :meth:`walk` as a stream (``Extraction.walk``); None: level by level
        self.stream: Callable[[list[tuple[int, str, str]], Callable], None] | None = None
        #: keeps keys for later (``Extraction.ahead``); None: :meth:`ahead` does nothing
        self.later: Callable[[list[tuple[int, str, str]]], None] | None = None
        #: keys sent to the workers ahead of their reading, not collected yet (``settle(key)`` collects
        #: the chunk that holds one, and what else is back; ``settle(None)`` all of them)
        self.inflight: set[tuple[int, str, str]] = set()
        self.settle: Callable[[tuple[int, str, str] | None], None] | None = None
        #: whether a decoded fact keeps its pickle, for :meth:`release` (the engine sets it where
        #: the open bundles hold those pickles anyway: they cost nothing more here)
        self.keeps_pickles = False
        self._pickles: dict[tuple[int, str, str], Pickled] = {}
        #: keys an extraction in stages has still to collect (``Extraction._extract``): reading one
        #: is a rule reading a fact it does not name in ``needs``, an error rather than a silent None
        self.coming: set[tuple[int, str, str]] = set()
        #: keys a rule's ``ahead`` hook named while pending (:meth:`ahead`): what a rule that reads
        #: only those (``Rule.ahead_reads``) will read, where they are still pending
        self.named_ahead: set[tuple[int, str, str]] = set()

    def get(self, key: Any, default: Any = None) -> Any:
        value = dict.get(self, key, _ABSENT)
        if value is _ABSENT:
            if key in self.inflight and self.settle is not None:
                self.settle(key)
            elif key in self.coming:
                raise FactNotReady(f"{key[2]} fact of {key[1]} read before it was extracted: "
                                   "a rule reads an extractor it does not name in `needs`")
            elif key not in self.pending or self.load is None:
                return default
            else:
                self.load([key])
            value = dict.get(self, key, _ABSENT)
            if value is _ABSENT:
                return default
        if type(value) is Pickled:
            import pickle

            # decoded facts live on (see heap.gc_paused): 12,029 programs decoded with the
            # collector on cost 19 s of a profiled cached run on the accuracy-venv
            pickled = value
            with gc_paused():
                value = pickle.loads(value)
            self[key] = value
            if self.keeps_pickles:
                self._pickles[key] = pickled
        return value

    def release(self, extractors: Iterable[str]) -> None:
        """Hold the decoded facts of ``extractors`` as their pickles again (see :attr:`keeps_pickles`):
        what no reader keeps is freed; a later read decodes it again."""
        names = set(extractors)
        for key, pickled in self._pickles.items():
            if key[2] in names:
                dict.__setitem__(self, key, pickled)

    def may_have(self, key: Any) -> bool:
        """Whether :meth:`get` may give a fact, extracting and decoding nothing (True for a pending one)."""
        return dict.__contains__(self, key) or key in self.pending or key in self.inflight

    def ahead(self, keys: Iterable[tuple[int, str, str]]) -> None:
        """Have the pending ones of ``keys`` extracted when the workers would otherwise wait for the
        parent (``later``); they are read as any other (:meth:`get` waits for them)."""
        named = [k for k in keys if k in self.pending]
        self.named_ahead.update(named)
        if self.later is not None:
            self.later(named)

    def prefetch(self, keys: Iterable[tuple[int, str, str]]) -> None:
        """Extract the pending ones of ``keys`` at once (in parallel when they are many)."""
        wanted = [k for k in keys if k in self.pending]
        if wanted and self.load is not None:
            self.load(wanted)

    def walk(self, keys: Iterable[tuple[int, str, str]], follow: Callable[[tuple[int, str, str]], Iterable[tuple[int, str, str]]]) -> None:
        """Extract ``keys``, and the keys ``follow(key)`` names once ``key``'s fact is in (read it
        with :meth:`get`), until nothing new is named: a walk over the facts (an import closure).

        With ``stream`` (an extraction's) the workers extract what is named while the parent
        follows what arrived; else level by level, each level one :meth:`prefetch`."""
        if self.stream is not None:
            self.stream(list(keys), follow)
            return
        seen: set[tuple[int, str, str]] = set()
        level = [k for k in keys if not (k in seen or seen.add(k))]  # type: ignore[func-returns-value]
        while level:
            self.prefetch(level)
            level = [n for k in level for n in follow(k) if not (n in seen or seen.add(n))]  # type: ignore[func-returns-value]

    def __getitem__(self, key: Any) -> Any:
        value = self.get(key, _ABSENT)
        if value is _ABSENT:
            raise KeyError(key)
        return value

    def _all(self) -> None:
        if self.inflight and self.settle is not None:
            self.settle(None)
        if self.pending:
            self.prefetch(list(self.pending))

    def keys(self):  # type: ignore[override]
        self._all()
        return dict.keys(self)

    def items(self):  # type: ignore[override]
        return [(k, self.get(k)) for k in list(self.keys())]

    def values(self):  # type: ignore[override]
        return [self.get(k) for k in list(self.keys())]


_ABSENT = object()


def _chunks(tasks: list[tuple[Member, tuple[str, ...]]], target_bytes: int = 16 * 1024**2, max_items: int = 64):
    chunk: list = []
    size = 0
    for task in tasks:
        chunk.append(task)
        size += task[0].size
        if size >= target_bytes or len(chunk) >= max_items:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


#: CPU per byte of parsing Python against inflating and walking other members (a cold check of
#: torch 2.8.0: ~10 s for 2,075 sources of 37 MB, ~6 s for 1.5 GB of shared libraries)
_PYTHON_COST = 50


def _cost(chunk: list[tuple[Member, tuple[str, ...]]]) -> int:
    """A rough CPU estimate of extracting a group, to start the longest ones first."""
    return sum(m.size * (_PYTHON_COST if m.path.endswith((".py", ".pyi")) else 1) for m, _ in chunk)


def _send_order(groups: list[tuple[int, int, list]], jobs: int) -> list[int]:
    """The order to send (stage, artifact, chunk) groups to ``jobs`` workers in: stage by stage,
    the costliest first within a stage (torch's 968 MB libtorch_cuda.so, listed late, otherwise
    ran alone at the end).  A group costlier than a worker's share of the work from its stage on
    (and than a quarter of a worker's share of all of it) goes first, whatever its stage: sent
    after the earlier stages, it would end alone."""
    cost = [_cost(chunk) for _s, _i, chunk in groups]
    from_stage: dict[int, int] = {}
    for (s, _i, _c), c in zip(groups, cost):
        from_stage[s] = from_stage.get(s, 0) + c
    running = 0
    for s in sorted(from_stage, reverse=True):
        running = from_stage[s] = from_stage[s] + running
    total = sum(cost)
    first = [c * jobs > from_stage[groups[g][0]] and c * 4 * jobs > total for g, c in enumerate(cost)]
    return sorted(range(len(groups)), key=lambda g: (not first[g], groups[g][0], -cost[g]))


def _bundle_key(member_keys: list[str]) -> str:
    import hashlib

    digest = hashlib.blake2b("\n".join(sorted(member_keys)).encode(), digest_size=20).hexdigest()
    return f"bundle:{digest}"


def _reads_on_demand(artifact: Artifact) -> bool:
    """Whether the facts of on-demand extractors wait to be read for this artifact: an installed
    distribution's.  An environment is what audited code resolves against, and its rules read a
    third of its modules' programs; a wheel, sdist or tree is the code under audit, whose sources
    the format check parses anyway and whose python_source facts the rules read whole (an installed
    source with valid bytecode is not parsed by the format check: see facts/format_check.py)."""
    return artifact.ref.kind is ArtifactKind.INSTALLED


class _Feeder:
    """Sends one extraction's groups to the workers: some at once, the ``held`` ones (later stages,
    in send order) at most one per worker in flight beyond what else the workers have queued.

    A held group that comes back sends the next one (a done-callback, in the pool's own thread):
    while the parent computes the rules alone (an environment's import verdicts, seconds on end),
    the workers go on with the later stages instead of waiting for the parent's next walk."""

    def __init__(self, extraction: "Extraction", submit: Callable[[int, list], Any], groups: list[tuple[int, int, list]],
                 jobs: int, held: list[int]) -> None:
        import threading
        from collections import deque

        # one submitter for the whole extraction: its workers were forked at its first submit (a pool
        # stopped meanwhile, a worker having died, takes no more: those groups are extracted here)
        self.extraction, self.submit, self.groups, self.jobs = extraction, submit, groups, jobs
        self.held = deque(held)
        self.futures: dict[int, Any] = {}
        self.inflight: list[Any] = []  # futures of held groups sent, not known to be done
        #: workers a walk keeps busy (``Extraction.walk``): held groups fill only the others
        self.reserved = 0
        self._lock = threading.RLock()  # the parent's thread and the pool's (done-callbacks) both feed

    def send(self, gs: Iterable[int]) -> list[Any]:
        sent = []
        with self._lock:
            for g in gs:
                if g not in self.futures:
                    fut = self.futures[g] = self.submit(self.groups[g][1], self.groups[g][2])
                    sent.append(fut)
        return sent

    def feed(self) -> None:
        with self._lock:
            self.inflight = [f for f in self.inflight if f is not None and not f.done()]
            want = []
            while self.held and len(self.inflight) + len(want) < self.jobs - self.reserved:
                g = self.held.popleft()
                if g not in self.futures:
                    want.append(g)
            fresh = [f for f in self.send(want) if f is not None]
            self.inflight += fresh
        for f in fresh:
            f.add_done_callback(self._came_back)

    def _came_back(self, fut: Any) -> None:
        # Only a group that came back whole sends the next.  A future failed or cancelled is the pool
        # breaking or shutting down: the pool's thread fails its futures holding the pool's own lock
        # (3.12), and a submit from here would wait for that lock forever.  The parent then sends (or
        # extracts) what is left.
        if fut.cancelled() or fut.exception() is not None:
            return
        try:
            self.feed()
        except Exception:  # noqa: BLE001 - a pool shut down meanwhile: the parent sends (or extracts) what is left
            pass

    def wait(self, g: int) -> Any:
        """Group ``g``'s future, sent now if it was held, once done; the workers are kept fed meanwhile."""
        from concurrent.futures import FIRST_COMPLETED
        from concurrent.futures import wait as wait_for

        self.send([g])
        fut = self.futures[g]
        while fut is not None and not fut.done():
            self.feed()
            if self.extraction._feeder is not self:
                self.extraction.feed()  # facts read on demand while an up-front extraction holds stages back
            with self._lock:
                others = list(self.inflight)
            wait_for([fut, *others], return_when=FIRST_COMPLETED)
        return fut


class Extraction:
    """Facts for every (member, extractor) pair, from the cache or extracted now."""

    def __init__(self, config: Config, progress: Progress | None, *, keep_workers: bool = False) -> None:
        self.config = config
        self.progress = progress
        #: whether the worker pool outlives one extraction, for the batches read on demand later
        #: (an audit: :meth:`close` stops it); else each parallel extraction has its own
        self.keep_workers = keep_workers
        self._pool: Any = None
        #: the artifacts the pool's forked workers inherited (``workers.hand_down`` at their fork)
        self._pool_artifacts: list[Artifact] = []
        #: worker pools started (one per audit, unless a worker died)
        self.pools_started = 0
        #: ``env --package``: whether an artifact's findings are wanted (``RuleContext.in_focus``, set
        #: by the engine); every fact of the others waits to be read, as the rules' context
        self.in_focus: Callable[[Artifact], bool] | None = None
        self.store = FactStore((config.cache_dir or default_cache_dir()) if config.cache else None)
        # The standard library is the machine's, not the audited input: `--no-cache` does not
        # parse it again each run (177 modules: a third of a cold cupy 14.2.0 check's sources).
        self._machine_store = self.store if config.cache else FactStore(config.cache_dir or default_cache_dir())
        self.facts: dict[tuple[int, str, str], Any] = Facts()
        self.problems: list[Finding] = []
        self._problem_at: dict[tuple[int, str, str], int] = {}
        self.extracted = 0
        #: (artifact, member, extractor) facts taken from the cache; one cached
        #: value can serve several members (the same file in two wheels)
        self.cached = 0
        #: of ``cached``: the facts found by their member's path and bytes (see _ByContent)
        self.by_content = 0
        #: a fact's key by identity -> its key by content, for the facts extracted here that a
        #: member of the same path and bytes may be served, and those found so (``Results.content``)
        self._by_digest: dict[str, str] = {}
        #: of ``_by_digest``: the facts found by content, whose row is there already: the bundles
        #: name it and nothing is written again (a new venv's bundles held every such fact by value)
        self._found_by_content: set[str] = set()
        #: facts read on demand, by their keys by content, written as they come (``_keep``, ``flush``)
        self._loose: list[tuple[str, Any]] = []
        #: the same two counts for evidence members, extracted on demand (see on_demand)
        self.evidence_extracted = 0
        self.evidence_cached = 0
        #: evidence facts extracted ahead (prefetch_evidence) and not read yet: counted once, as extracted
        self._prefetched: set[str] = set()
        #: keys named ahead (``Facts.ahead``), by member: (artifact index, path) -> extractors; sent at
        #: the end of the next walk, or along with the member's parse before then (see _take)
        self._later: dict[tuple[int, str], dict[str, None]] = {}
        #: what was sent ahead and is not collected: [(future or None, artifact index, chunk, its keys)], and their cache keys
        self._sent: list[tuple[Any, int, list, set[tuple[int, str, str]]]] = []
        self._sent_keys: dict[tuple[int, str, str], str] = {}
        #: open bundles (evidence inputs', audited artifacts' on-demand facts) by (kind, ref)
        self._bundles: dict[tuple[str, ArtifactRef], _OpenBundle] = {}
        self._artifacts: list[Artifact] = []
        #: the later stages of the extraction in progress, held back while rules read on demand
        self._feeder: _Feeder | None = None
        #: the interpreter's switch interval before the worker pool started (see POOL_SWITCH_INTERVAL)
        self._switch_interval: float | None = None
        #: called at the end of every walk (``RuleRun`` forks a family there: see :meth:`become_child`)
        self.after_walk: Callable[[], None] | None = None
        #: the extractors the walking family reads next (``RuleRun``): what was named ahead for them
        #: is sent behind the walk's first chunks, the rest as the walk ends (see :meth:`_send_later`)
        self.reads_next: Callable[[], Iterable[str]] | None = None
        #: whether this is a forked child (:meth:`become_child`), which writes nothing; what each open
        #: bundle held (values', used and rows' keys) at the fork, or when the child opened it
        self._child = False
        self._bundles_before: dict[tuple[str, ArtifactRef], tuple[set[str], set[str], set[str]]] = {}
        #: since a fork (in the child and in the parent): each key taken and how it was counted, so that
        #: a key both took (a fact that comes along with another) is counted once (:meth:`absorb`)
        self.took: dict[tuple[Any, str, str], int] | None = None  # (artifact index or "evidence", path or key, extractor)

    def run(self, artifacts: Sequence[Artifact], wanted: Callable[[Member], tuple[str, ...]], *,
            stage: Callable[[tuple[str, ...]], int] | None = None, ready: Callable[[int], None] | None = None,
            sent: Callable[[], None] | None = None) -> None:
        """Extract (or take from the cache) the facts ``wanted`` names; on-demand ones wait to be read.

        ``stage``, ``ready`` and ``sent``: see :meth:`_extract`; with facts read on demand (an
        environment's), the later stages go to the workers a few at a time (its ``background``)."""
        pending: list[tuple[int, Member, tuple[str, ...]]] = []
        keys: dict[tuple[int, str, str], str] = {}
        deferred = self.facts.pending
        may_defer = {ex.name for ex in facts_registry.deferring()}
        self._artifacts = list(artifacts)
        self.facts.load = self._load
        self.facts.stream = self.walk
        self.facts.later = self.ahead
        self.facts.settle = self.settle
        in_focus = self.in_focus
        for i, art in enumerate(artifacts):
            deferring = _reads_on_demand(art)
            aside = in_focus is not None and deferring and not in_focus(art)
            for m in art.members:
                names = wanted(m)
                if aside and names:  # no finding of this artifact is wanted: what the others read of it, when read
                    for n in names:
                        deferred[(i, m.path, n)] = m
                    continue
                if deferring and names and may_defer.intersection(names):
                    later = [n for n in names if facts_registry.get(n).deferred(m)]
                    if later:
                        for n in later:
                            deferred[(i, m.path, n)] = m
                        names = tuple(n for n in names if n not in later)
                if names:
                    pending.append((i, m, names))
                    for n in names:
                        keys[(i, m.path, n)] = FactStore.key(n, facts_registry.get(n).version, m.content_key)
        # One bundle per artifact holds the facts of all its members under a key made of
        # every member's key: a cached audit of an environment then costs one read and
        # one unpickle per distribution, not per file (200 distributions, 50 k files on the
        # GPU machine: 3.2 s cached before bundles).
        per_art: dict[int, list[str]] = {}
        for (i, _path, _n), k in keys.items():
            per_art.setdefault(i, []).append(k)
        bundle_keys = {i: _bundle_key(ks) for i, ks in per_art.items()}
        bundles = self.store.get_many(set(bundle_keys.values()))
        _resolved(self.store, (b for b in bundles.values() if isinstance(b, dict)))
        cached: dict[str, Any] = {}
        for i, bk in bundle_keys.items():
            if isinstance(bundles.get(bk), dict):
                cached.update(bundles[bk])
        rest = {k for i, ks in per_art.items() if not isinstance(bundles.get(bundle_keys[i]), dict) for k in ks}
        cached.update(self.store.get_many(rest))
        self.close_stores()
        todo: dict[int, list[tuple[Member, tuple[str, ...]]]] = {}
        for i, m, names in pending:
            missing = []
            for n in names:
                k = keys[(i, m.path, n)]
                if k in cached:
                    self.cached += 1
                    value = cached[k]
                    if isinstance(value, CachedFailure):
                        self._accept(artifacts, i, m.path, n, False, (value.code, value.message, dict(value.evidence)), None)
                    else:
                        self._accept(artifacts, i, m.path, n, True, value, None)
                else:
                    missing.append(n)
            if missing:
                todo.setdefault(i, []).append((m, tuple(missing)))
        total_tasks = sum(len(v) for v in todo.values())
        total_bytes = sum(m.size for v in todo.values() for m, _ in v)
        new: list[tuple[str, Any]] = []
        try:
            self._extract(artifacts, todo, keys, new, total_tasks, total_bytes, stage=stage, ready=ready, sent=sent,
                          background=bool(deferred))
        finally:
            # --no-cache keeps nothing: a bundle would pickle every fact for nothing (1.4 s of a torch 2.8.0 check)
            if self.store.keeps:
                self._bundle_up(per_art, bundles, bundle_keys, keys, cached, new)

    def _bundle_up(self, per_art, bundles, bundle_keys, keys, cached, new) -> None:
        """Store the new facts, with a bundle for each artifact that had none once every fact of theirs is known."""
        known = {**cached, **dict(new)}
        # a fact of a member read whole is kept by its content (a new venv of the same packages
        # finds it), the rest by identity; every artifact's bundle, by identity, is read first
        by_digest = self._by_digest
        stored = {k: by_digest.pop(k) for k, _v in new if k in by_digest}
        found = self._found_by_content
        # a row by content is what a bundle's entry resolves to: held pickled, as a bundle's own values
        # are (a fact stays so when read through it); one found by content is there
        rows = [(stored[k], workers.as_pickle(v)) if k in stored else (k, v) for k, v in new if k not in found]
        for i, ks in per_art.items():
            if not isinstance(bundles.get(bundle_keys[i]), dict) and all(k in known for k in ks):
                rows.append((bundle_keys[i], {k: ByContent(stored[k]) if k in stored else workers.as_pickle(known[k]) for k in ks}))
        self.store.put_many(rows)

    # -- facts read on demand ------------------------------------------------------------------
    def _load(self, wanted: list[tuple[int, str, str]]) -> None:
        """Extract pending on-demand facts of the audited artifacts (``Facts.load``).

        Each artifact keeps the on-demand facts its audits read in one open bundle (see
        :meth:`_bundle`), beside the bundle of its facts extracted up front: a second audit
        finds them in one read.  What is still missing is extracted as any fact is, in the
        worker processes once there is enough of it.
        """
        keys: dict[tuple[int, str, str], str] = {}
        tasks = self._take(wanted, keys)
        if not tasks:
            return
        self.feed()
        # (the stores stay open unless this batch goes to the workers: _extract closes them before
        # a worker may fork; a forked family's child reading 132 modules one at a time closed and
        # opened SQLite again for each: 0.13 s of its 3.7 s on the GPU machine, py-spy)
        new: list[tuple[str, Any]] = []
        try:
            self._extract(self._artifacts, tasks, keys, new, sum(len(v) for v in tasks.values()),
                          sum(m.size for v in tasks.values() for m, _ in v), progress=None)
        finally:
            self._keep(new, keys)

    def _take(self, wanted: Iterable[tuple[int, str, str]], keys: dict[tuple[int, str, str], str]
              ) -> dict[int, list[tuple[Member, tuple[str, ...]]]]:
        """Take ``wanted`` out of ``pending``: what the artifacts' bundles hold is accepted now; the
        rest comes back as tasks to extract, per artifact (``keys``: their cache keys, filled in)."""
        artifacts = self._artifacts
        pending = self.facts.pending
        todo: dict[int, dict[str, tuple[Member, list[str]]]] = {}
        bundles: dict[int, _OpenBundle] = {}
        along = facts_registry.flagged("extracted_along")
        later = self._later
        # what comes along with another on-demand fact of a member shares its parse: the extractors
        # that always do (Extractor.extracted_along), and what a rule named ahead for that member
        # (a package's python_source, CU103's, with the program the import closures' walk reads:
        # extracted before the family is forked, in the same parse, instead of a second parse after)
        wanted = list(wanted)
        wanted += [(i, path, n) for i, path, name in wanted if facts_registry.get(name).parses
                   for n in (*along, *later.get((i, path), ())) if n != name and (i, path, n) in pending
                   and (n not in along or facts_registry.get(n).comes_along(pending[(i, path, n)]))]
        for key in wanted:
            member = pending.pop(key, None)
            if member is None:
                continue
            i, path, name = key
            bundle = bundles.get(i)
            if bundle is None:
                bundle = bundles[i] = self._bundle(artifacts[i], "facts")
            k = keys[key] = FactStore.key(name, facts_registry.get(name).version, member.content_key)
            bundle.used.add(k)
            if k in bundle.values:
                self.cached += 1
                if self.took is not None:
                    self.took[key] = _CACHED
                value = bundle.values[k]
                if isinstance(value, CachedFailure):
                    self._accept(artifacts, i, path, name, False, (value.code, value.message, dict(value.evidence)), None)
                else:
                    self._accept(artifacts, i, path, name, True, value, None)
            else:
                todo.setdefault(i, {}).setdefault(path, (member, []))[1].append(name)
        return {i: [(m, tuple(names)) for m, names in by_path.values()] for i, by_path in todo.items()}

    def _keep(self, new: list[tuple[str, Any]], keys: dict[tuple[int, str, str], str], *, write: bool = True) -> None:
        """Put facts extracted on demand (``new``, by cache key) into their artifacts' bundles
        (``write``: and write those kept by content once there are enough; a walk writes them
        itself, while it waits)."""
        if not self.store.keeps:
            return
        owner = {k: i for (i, _p, _n), k in keys.items()}
        for k, value in new:
            i = owner[k]
            bundle = self._bundle(self._artifacts[i], "facts")
            bundle.values[k] = pickled = workers.as_pickle(value)
            bundle.dirty = True
            digest_key = self._by_digest.pop(k, None)
            if digest_key is not None:
                if k not in self._found_by_content:
                    self._loose.append((digest_key, pickled))
                bundle.rows[k] = digest_key
        if write and len(self._loose) >= _LOOSE_BATCH:
            # written as they come, while the workers extract (the parent mostly waits on them
            # then), not all at the end of the audit: half a second of its tail on 2 cores
            self._write_loose()
            self.store.close()  # no SQLite connection crosses a fork (see close_stores)

    def _write_loose(self, most: int | None = None) -> None:
        """Write the facts read on demand kept for their keys by content (``_loose``): all of
        them, or the ``most`` kept first."""
        if self._loose and not self._child:  # a forked child writes nothing: the parent does (child_delta)
            if most is None or most >= len(self._loose):
                loose, self._loose = self._loose, []
            else:
                loose, self._loose = self._loose[:most], self._loose[most:]
            self.store.put_many(loose)

    # -- a forked child (see RuleRun) ----------------------------------------------------------
    def become_child(self) -> dict[str, Any]:
        """Turn this extraction, in a process just forked from the audit's, into one that extracts
        what it reads here, one member at a time, and writes nothing: the worker pool, the stages
        held back and what was sent to the workers are the parent's (a key in flight there is
        pending again here).  Returns what :meth:`child_delta` compares with."""
        # the parent's pool stays referenced, never used nor shut down here (its threads are not in this process)
        self._pool_kept, self._pool, self._pool_artifacts, self._feeder = self._pool, None, [], None
        self._switch_interval = None
        import dataclasses

        self.config = dataclasses.replace(self.config, jobs=1)
        self.keep_workers = False
        facts = self.facts
        for _fut, i, chunk, _held in self._sent:
            for m, names in chunk:
                for n in names:
                    if (i, m.path, n) in facts.inflight:
                        facts.pending[(i, m.path, n)] = m
        self._sent, self._sent_keys, self._later = [], {}, {}
        facts.inflight.clear()
        self._child, self.took = True, {}
        self._bundles_before = {bk: (set(b.values), set(b.used), set(b.rows)) for bk, b in self._bundles.items()}
        return {
            "counts": self._counts(),
            "problems": {slot: self.problems[at] for slot, at in self._problem_at.items()},
            "loose": len(self._loose),
        }

    def workers_busy(self) -> bool:
        """Whether the workers have work sent or still to send: facts in flight (what :meth:`_send_later`
        sent, until :meth:`settle`), stages coming or held back."""
        feeder = self._feeder
        return bool(self.facts.inflight or self.facts.coming or (feeder is not None and feeder.held))

    def workers_running(self) -> bool:
        """Whether a worker pool runs (started at the first parallel extraction, until :meth:`stop_workers`)."""
        return self._pool is not None

    def workers_idle(self) -> bool:
        """Whether the workers have nothing left to do, though the parent may not have collected it
        all yet: no group held back, every group of the staged extraction sent, and every chunk sent
        to them back.  A pool stopped then loses nothing: a done future keeps its result."""
        feeder = self._feeder
        if feeder is not None:
            if feeder.held or len(feeder.futures) < len(feeder.groups):
                return False
            if any(f is not None and not f.done() for f in feeder.futures.values()):
                return False
        return all(fut is None or fut.done() for fut, *_rest in self._sent)

    def _counts(self) -> tuple[int, int, int, int, int]:
        return self.extracted, self.cached, self.by_content, self.evidence_extracted, self.evidence_cached

    def child_delta(self, baseline: dict[str, Any]) -> dict[str, Any]:
        """What this child read and extracted since :meth:`become_child`, for the parent's
        :meth:`absorb`: the counts, the keys taken, the problems met, the open bundles' new values
        and the facts kept by content."""
        counts = [now - then for now, then in zip(self._counts(), baseline["counts"])]
        before = baseline["problems"]
        problems = [(slot, self.problems[at]) for slot, at in self._problem_at.items()
                    if before.get(slot) is not self.problems[at]]
        bundles = []
        for (kind, ref), b in self._bundles.items():
            values, used, rows = self._bundles_before[(kind, ref)]
            new = {k: v for k, v in b.values.items() if k not in values}
            if new or b.used - used:
                bundles.append((kind, ref, new, b.used - used, {k: r for k, r in b.rows.items() if k not in rows}))
        return {"counts": counts, "took": self.took or {}, "problems": problems, "bundles": bundles,
                "loose": self._loose[baseline["loose"]:]}

    def absorb(self, delta: dict[str, Any], artifacts: Iterable[Artifact] = ()) -> None:
        """Take in a child's :meth:`child_delta`: its counts, problems, new bundle values (written with
        the parent's at :meth:`flush`) and facts kept by content.  ``artifacts``: the evidence inputs
        (the audited artifacts are this extraction's) whose bundles the child may have opened.
        A key both took (since the fork: :attr:`took`) is counted once: a key the parent's workers
        were extracting when it forked, or one that came along with another fact in both."""
        counts = list(delta["counts"])
        mine = self.took or {}
        for key, how in delta["took"].items():
            if key not in mine:
                continue
            if key[0] == "evidence":
                # an evidence fact both extracted: one process extracts it, then finds it cached
                counts[3] -= 1
                counts[4] += 1
                continue
            counts[0 if how == _EXTRACTED else 1] -= 1
            counts[2] -= how == _BY_CONTENT
        self.took = None
        self.extracted, self.cached, self.by_content, self.evidence_extracted, self.evidence_cached = (
            a + b for a, b in zip(self._counts(), counts))
        for slot, finding in delta["problems"]:
            at = self._problem_at.get(slot)
            if at is None:
                self._problem_at[slot] = len(self.problems)
                self.problems.append(finding)
            elif self.problems[at].location.line is None and finding.location.line is not None:
                self.problems[at] = finding
        by_ref = {a.ref: a for a in [*self._artifacts, *artifacts]}
        for kind, ref, new, used, rows in delta["bundles"]:
            art = by_ref.get(ref)
            if art is None:
                continue  # an input the parent does not know: its facts are read again next time
            bundle = self._bundle(art, kind)
            bundle.values.update(new)
            bundle.used |= used
            bundle.rows.update(rows)
            bundle.dirty = bundle.dirty or bool(new)
        self._loose += delta["loose"]

    def on_demand(self, artifact: Artifact, member: Member, name: str) -> Any:
        """One fact of an evidence member: from the cache, or extracted now, here.

        Evidence (the standard library, system libraries, ``--with``) is read
        only where an analysis asks, so it cannot be extracted up front with
        the audited artifacts.  Its facts are cached under the same keys as any
        other member's, and kept per evidence input in one bundle (the
        standard-library modules one audit reaches: ~300 files, one read when
        warm).  Problems are never findings: the fact is then None.
        """
        key = FactStore.key(name, facts_registry.get(name).version, member.content_key)
        bundle = self._bundle(artifact, "evidence")
        if key in bundle.values:
            if key in self._prefetched:
                self._prefetched.discard(key)  # counted as extracted when it was (prefetch_evidence)
            else:
                self.evidence_cached += 1
            value = bundle.values[key]
        else:
            self.evidence_extracted += 1
            if self.took is not None:
                self.took[("evidence", key, "")] = _EXTRACTED  # (see absorb)
            [(_path, _name, ok, value)] = workers.extract_group(artifact, [(member, (name,))])
            value = self._keep_evidence(bundle, key, ok, value)
            if value is _NOT_KEPT:
                return None
        bundle.used.add(key)
        if isinstance(value, CachedFailure):
            return None
        return value.value if isinstance(value, facts_registry.WithProblems) else value

    def prefetch_evidence(self, artifact: Artifact, wanted: Iterable[tuple[Member, str]]) -> None:
        """Extract in the worker pool, at once, the facts of evidence members that :meth:`on_demand`
        will be asked for one by one (the standard-library modules an import closure reaches:
        ~200 parsed one at a time in the parent, a quarter of a cold cupy-cuda12x 14.2.0 check).

        They go into the input's bundle as :meth:`on_demand` puts them, which then reads them
        there.  Nothing is sent without workers to send it to (``--jobs 1``, a forked child) or
        when there are too few to be worth a round trip: :meth:`on_demand` extracts them as before.
        """
        if self._child or (self.config.jobs or usable_cpus()) <= 1:
            return
        bundle = self._bundle(artifact, "evidence")
        tasks: dict[str, tuple[Member, list[str]]] = {}
        keys: dict[tuple[str, str], str] = {}
        for member, name in wanted:
            key = FactStore.key(name, facts_registry.get(name).version, member.content_key)
            if key in bundle.values or (member.path, name) in keys:
                continue
            keys[(member.path, name)] = key
            tasks.setdefault(member.path, (member, []))[1].append(name)
        if len(keys) < EVIDENCE_PARALLEL_MIN:
            return
        jobs = self.config.jobs or usable_cpus()
        todo = [(m, tuple(names)) for m, names in tasks.values()]
        size = -(-len(todo) // (2 * jobs))
        chunks = [todo[s:s + size] for s in range(0, len(todo), size)]
        self.close_stores()
        self._submitter(self._artifacts, jobs, jobs)  # the running pool, or one started now
        try:
            # the input travels pickled: the pool's workers were forked before it was resolved
            futures = [self._pool.submit(workers.extract_group, artifact, chunk) for chunk in chunks]
        except Exception:  # noqa: BLE001 - a worker died between batches: on_demand does them here
            futures = []
        finally:
            workers.hand_down(None)  # see _submitter
        broken = False
        for fut, chunk in zip(futures, chunks):
            results, died = workers.results_of(fut, artifact, chunk)
            broken = broken or died
            for path, name, ok, value in results:
                key = keys[(path, name)]
                if self._keep_evidence(bundle, key, ok, value) is _NOT_KEPT:
                    continue  # on_demand meets it again, and counts it then
                self.evidence_extracted += 1
                if self.took is not None:
                    self.took[("evidence", key, "")] = _EXTRACTED
                self._prefetched.add(key)
        if broken:
            self.stop_workers()

    @staticmethod
    def _keep_evidence(bundle: "_OpenBundle", key: str, ok: bool | str, value: Any) -> Any:
        """Put one extracted evidence fact into its input's bundle (a lasting failure as a
        :class:`CachedFailure`) and return what was put; :data:`_NOT_KEPT` for a failure that is not
        a property of the bytes, never cached (see :meth:`_accept`)."""
        if not ok:
            code, message, evidence = value
            if not lasting_failure(code, evidence):
                return _NOT_KEPT
            value = CachedFailure(code, message, ())
        bundle.values[key] = value
        bundle.dirty = True
        return value

    def _bundle(self, artifact: Artifact, kind: str) -> "_OpenBundle":
        """The open bundle of an input's facts read on demand: ``kind`` "evidence" (an evidence
        input's) or "facts" (an audited artifact's on-demand facts).

        It is named by the input, not by its content: its values are keyed like any fact
        (extractor, version, the member's content key), so a value is never taken for a
        changed member, and a bundle never claims to hold every fact of its input.
        """
        ref = artifact.ref
        bundle = self._bundles.get((kind, ref))
        if bundle is None:
            import hashlib

            identity = (ref.kind.value, ref.path, ref.name)
            store = self.store
            if kind == "facts":
                # one bundle per grammar (store.GRAMMAR), as the facts' keys: two interpreters sharing
                # a cache do not drop each other's facts from one bundle, run after run
                identity = (kind, *identity, ref.version, GRAMMAR)
            if artifact.machine:
                # kept across --no-cache runs: the audited interpreter (its stdlib folder and
                # version) and the one parsing it name the bundle; each fact's key holds its file's stat
                identity += (ref.version, *_running_interpreter())
                store = self._machine_store
            digest = hashlib.blake2b(repr(identity).encode(), digest_size=20).hexdigest()
            key = f"{kind}:{digest}"
            stored = store.get_many([key]).get(key)
            values = dict(stored) if isinstance(stored, dict) else {}
            rows = {k: str(v) for k, v in values.items() if type(v) is ByContent}
            _resolved(store, [values])
            bundle = _OpenBundle(key, values, store, rows={k: r for k, r in rows.items() if k in values})
            if kind == "facts":
                # stale values (members changed since) are dropped when the bundle is written
                bundle.current = lambda: {FactStore.key(ex.name, ex.version, m.content_key) for m in artifact.members
                                          for ex in facts_registry.deferring() if ex.deferred(m)}
            self._bundles[(kind, ref)] = bundle
            if self._child:  # what child_delta need not send back
                self._bundles_before[(kind, ref)] = (set(values), set(), set(bundle.rows))
        return bundle

    def close(self) -> None:
        """Write the open bundles that gained facts (facts read on demand, evidence) and close
        the fact cache: once, when nothing more will be read (the end of an audit)."""
        self.stop_workers()
        give_back_free_memory()  # the bundles are pickled next: the peak of a cold audit
        self.flush()
        self.close_stores()

    def close_stores(self) -> None:
        """Close the fact caches' connections (both stores, and this process's kept connection by
        content, ``workers.close_content_store``) before workers or a forked family's child may
        fork: no SQLite connection crosses a fork (a child closing it releases the parent's file
        locks).  The next read or write reopens them.  The engine calls it too however an audit ends."""
        self.store.close()
        self._machine_store.close()
        workers.close_content_store()

    def stop_workers(self) -> None:
        """End the worker pool, if one runs (idempotent: every way out of an audit calls it)."""
        pool, self._pool, self._pool_artifacts = self._pool, None, []
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if self._switch_interval is not None:
            sys.setswitchinterval(self._switch_interval)  # the caller's, once no pool thread runs
            self._switch_interval = None

    def flush(self) -> None:
        """Write the open bundles that gained facts, and the facts read on demand by their content
        (see :meth:`close`)."""
        self._write_loose()
        for bundle in self._bundles.values():
            if bundle.dirty:
                values = bundle.values
                if bundle.current is not None:
                    current = bundle.current()
                    values = {k: v for k, v in values.items() if k in current}
                elif len(values) > 4 * len(bundle.used) + 2048:  # stale keys pile up: keep what this audit used
                    values = {k: v for k, v in values.items() if k in bundle.used}
                rows = bundle.rows
                if rows:
                    values = {k: ByContent(rows[k]) if k in rows else v for k, v in values.items()}
                bundle.store.put_many([(bundle.key, values)])
                bundle.dirty = False
        if self._machine_store is not self.store:
            self._machine_store.close()

    def _extract(self, artifacts, todo, keys, new, total_tasks: int, total_bytes: int, *,
                 progress: Progress | None | bool = True, stage: Callable[[tuple[str, ...]], int] | None = None,
                 ready: Callable[[int], None] | None = None, background: bool = False,
                 sent: Callable[[], None] | None = None) -> None:
        """Extract ``todo`` (artifact index -> tasks), in the workers when there is enough of it.

        ``stage`` (a task's extractor names -> a number) orders the work: every task of a stage
        is sent before the next stage's, and once a stage is all collected ``ready(n)`` is called
        with the last stage before the next one that still has tasks to come, while the workers
        go on with those (the engine runs the rules whose facts are in: see :func:`cuaudit.engine.audit`).
        Until then a read of a fact still to come raises :class:`FactNotReady`.  ``sent()`` is
        called once the first stage is with the workers, before anything is collected (the rules'
        ``ahead`` hooks: the package model is built while the workers extract).  An ELF file
        on disk (an installed library) is read once per stage of its facts, not once for all.

        ``background``: the rules extract facts on demand through the same workers, and would
        queue behind every later stage sent at once: those are kept in the parent and sent a few
        at a time (one per worker in flight: :class:`_Feeder`), topped up whenever the parent
        waits on the workers."""
        if not total_tasks:
            return
        progress = self.progress if progress is True else progress
        jobs = self.config.jobs or usable_cpus()
        stage_of = stage or (lambda names: 0)
        staged: dict[int, dict[int, list[tuple[Member, tuple[str, ...]]]]] = {}
        for i, tasks in todo.items():
            art = artifacts[i]
            for m, names in tasks:
                if stage is not None and len(names) > 1 and m.kind is MemberKind.ELF and art.fs_path(m.path) is not None:
                    by: dict[int, list[str]] = {}
                    for n in names:
                        by.setdefault(stage_of((n,)), []).append(n)
                    for s, part in by.items():
                        staged.setdefault(s, {}).setdefault(i, []).append((m, tuple(part)))
                else:
                    staged.setdefault(stage_of(names), {}).setdefault(i, []).append((m, names))
        stages = sorted(staged)

        def grouped(**kw: int) -> list[tuple[int, int, list]]:
            return [(s, i, chunk) for s in stages for i, tasks in staged[s].items() for chunk in _chunks(tasks, **kw)]

        groups = grouped()
        # a running pool forks nothing more: a smaller batch (one artifact's, one chunk) is worth sending to it
        warm = self._pool is not None
        least = PARALLEL_WARM_MIN_TASKS if warm else PARALLEL_MIN_TASKS
        parallel = jobs > 1 and (len(groups) > 1 or (warm and total_tasks > 1)) \
            and (total_tasks >= least or total_bytes >= PARALLEL_MIN_BYTES)
        coming = self.facts.coming
        guarded = ready is not None and len(stages) > 1
        if guarded:
            coming.update((i, m.path, n) for _s, i, chunk in groups for m, names in chunk for n in names)
        feeder: _Feeder | None = None
        outer = self._feeder
        try:
            if parallel:
                if len(groups) < 4 * jobs:
                    # a small batch (a level of the import closure) in small chunks keeps every worker busy
                    groups = grouped(max_items=max(1, -(-total_tasks // (4 * jobs))))
                self.close_stores()  # a worker may fork at any submit (see close_stores)
                with gc_paused():  # the parent only gathers results (see heap.gc_paused)
                    order = _send_order(groups, jobs)
                    held = [g for g in order if groups[g][0] != stages[0]] if background and guarded else []
                    feeder = _Feeder(self, self._submitter(artifacts, jobs, len(groups)), groups, jobs, held)
                    feeder.send([g for g in order if not held or groups[g][0] == stages[0]])
                    if held:
                        self._feeder = feeder
            # The workers are forked by now (at the pool's first submit; later batches fork
            # nothing): the progress bar's refresh thread starts after, so no child inherits its locks.
            if progress:
                # what the chunks will advance it by: an installed ELF read once per stage of its facts
                # counts once per stage (a total of each member once overran: 2,565 of 680 MB)
                progress.start(sum(m.size for _s, _i, chunk in groups for m, _ in chunk), "Extracting facts")
            if sent is not None:
                sent()
            broken = False
            g = 0
            while g < len(groups):
                now = groups[g][0]
                with gc_paused():  # (see heap.gc_paused)
                    while g < len(groups) and groups[g][0] == now:
                        _s, i, chunk = groups[g]
                        if feeder is not None:
                            results, died = workers.results_of(feeder.wait(g), artifacts[i], chunk, self.cas)
                            broken = broken or died
                        else:
                            results = workers.extract_group(artifacts[i], chunk, self.cas, keep_cas=True)
                        self._collect(artifacts, i, results, keys, new)
                        if guarded:
                            coming.difference_update((i, m.path, n) for m, names in chunk for n in names)
                        if progress:
                            progress.advance(sum(m.size for m, _ in chunk), chunk[-1][0].path)
                        g += 1
                if ready is not None and g < len(groups):
                    ready(groups[g][0] - 1)
            if parallel and (broken or not self.keep_workers):
                self.stop_workers()  # a pool whose worker died takes no more work; the next batch starts one
        except BaseException:
            self.stop_workers()  # no worker outlives a failed (or interrupted) extraction
            raise
        finally:
            self._feeder = outer
            if guarded:
                coming.clear()
            workers.hand_down(None)  # see _submitter: running workers keep their copy
            if progress:
                progress.stop()

    def feed(self) -> None:
        """Top up the workers with the later stages held back (see :meth:`_extract`'s ``background``):
        called wherever the parent is about to wait on the workers for facts it reads on demand."""
        if self._feeder is not None:
            self._feeder.feed()

    def _submitter(self, artifacts: Sequence[Artifact], jobs: int, groups: int) -> Callable[[int, list], Any]:
        """``submit(i, chunk)``: a future of the chunk's extraction in the worker pool (started if
        none runs), or None when the pool no longer takes work (a worker died: do it here).

        Hands the artifacts down to the workers forked meanwhile (``workers.hand_down``): the
        caller takes them back when done."""
        fork = hasattr(os, "fork")
        workers.hand_down(list(artifacts) if fork else None)
        # What the parent holds now is never collected in a worker: its pages stay shared with
        # the parent instead of being copied when a collection touches them.  Done at every
        # batch, not only at the fork: the parent's own collections then skip the models built
        # since (a cold env of the accuracy-venv, 2 cores: 3 to 9 s more wall in 3 A/B pairs when frozen only at the fork).
        gc.freeze()
        pool = self._workers(artifacts, jobs, groups, fork)
        cas = self.cas
        if fork:
            # Forked workers inherit the artifacts: send indexes, not a pickled artifact
            # per group (torch's wheel: 11 499 members, 1.5 MB and a re-read of its zip
            # directory for each of 37 groups, ~5 s of CPU).
            call = lambda i, chunk: pool.submit(workers.extract_forked, i, chunk, cas)  # noqa: E731
        else:
            call = lambda i, chunk: pool.submit(workers.extract_group, artifacts[i], chunk, cas)  # noqa: E731

        def submit(i: int, chunk: list) -> Any:
            try:
                return call(i, chunk)
            except Exception:  # noqa: BLE001 - a worker died between batches: the parent does it
                return None

        return submit

    def walk(self, wanted: list[tuple[int, str, str]],
             follow: Callable[[tuple[int, str, str]], Iterable[tuple[int, str, str]]]) -> None:
        """``Facts.walk`` as one stream: keys are sent to the workers as soon as they are named,
        and each chunk's keys are followed as soon as it comes back, while the workers extract
        the others.  Level by level, the workers waited for the parent between levels, and
        the parent for the slowest chunk of each level (the accuracy-venv's import closures:
        eight levels).

        A key is followed once its fact is in: at once when it is cached, already read, or
        has none to extract.  Without workers (``--jobs 1``, or too little to send) the queue
        is extracted here, one artifact's tasks at a time."""
        from collections import deque
        from concurrent.futures import FIRST_COMPLETED
        from concurrent.futures import wait as wait_for

        artifacts = self._artifacts
        jobs = self.config.jobs or usable_cpus()
        keys: dict[tuple[int, str, str], str] = {}
        queue: dict[int, list[tuple[Member, tuple[str, ...]]]] = {}  # artifact -> tasks not sent yet
        ready: deque[tuple[int, str, str]] = deque()  # keys whose facts are in, to follow
        asked: set[tuple[int, str, str]] = set()
        inflight: dict[Any, tuple[int, int, list]] = {}  # future -> (order sent, artifact, chunk)
        new: list[tuple[str, Any]] = []
        broken = False
        # what the walking family reads next, named ahead (CU103's packages): sent behind the walk's
        # first chunks, so that it is in when the walk ends and the family is forked
        first = frozenset(self.reads_next() if self.reads_next is not None else ())
        first_sent = not first

        def ask(batch: Iterable[tuple[int, str, str]]) -> None:
            fresh = [k for k in batch if k not in asked]
            asked.update(fresh)
            sent = set()
            for i, tasks in self._take(fresh, keys).items():
                queue.setdefault(i, []).extend(tasks)
                sent.update((i, m.path, n) for m, names in tasks for n in names)
            ready.extend(k for k in fresh if k not in sent)

        def arrived(i: int, chunk: list, results: list) -> None:
            self._collect(artifacts, i, results, keys, new)
            ready.extend(k for m, names in chunk for n in names if (k := (i, m.path, n)) in asked)

        def next_chunk(size: int) -> tuple[int, list]:
            i = next(iter(queue))
            chunk = next(_chunks(queue[i], max_items=size))
            del queue[i][:len(chunk)]
            if not queue[i]:
                del queue[i]
            return i, chunk

        sent = 0
        try:
            with gc_paused():  # the parent gathers results and follows them (see heap.gc_paused)
                ask(wanted)
                while True:
                    while ready:
                        named: list[tuple[int, str, str]] = []
                        while ready:
                            named += follow(ready.popleft())
                        ask(named)
                    queued = sum(len(t) for t in queue.values())
                    if not queued and not inflight:
                        break
                    parallel = jobs > 1 and (bool(inflight) or self._pool is not None or queued >= PARALLEL_MIN_TASKS)
                    if queued and not parallel:
                        i, chunk = next_chunk(queued)
                        arrived(i, chunk, workers.extract_group(artifacts[i], chunk, self.cas, keep_cas=True))
                        continue
                    if queued and len(inflight) < 2 * jobs:
                        # two chunks a worker: one running, one waiting, and what arrives meanwhile
                        # joins the next chunks instead of waiting for a level to end
                        self.close_stores()
                        submit = self._submitter(artifacts, jobs, 2 * jobs)
                        size = max(1, min(64, -(-queued // (2 * jobs))))
                        while queue and len(inflight) < 2 * jobs:
                            i, chunk = next_chunk(size)
                            fut = submit(i, chunk)
                            if fut is None:
                                broken = True
                                arrived(i, chunk, workers.extract_group(artifacts[i], chunk, self.cas, keep_cas=True))
                            else:
                                inflight[fut] = (sent, i, chunk)
                                sent += 1
                        if not first_sent:
                            first_sent = True
                            self._send_later(first, rest=False)
                        if ready:
                            continue
                    if not inflight:
                        continue
                    if self._feeder is not None:
                        # the walk first: what it names is what the family forked at its end (or its
                        # verdicts) waits for; the later stages fill the workers it leaves idle
                        self._feeder.reserved = min(jobs, len(inflight))
                    self.feed()  # the later stages of the up-front extraction, a few at a time
                    if len(new) >= _LOOSE_BATCH and self.store.keeps:
                        self._keep(new, keys, write=False)  # into the bundles, a batch at a time
                        new.clear()
                    # what is kept by content is written while no chunk is back, a slice at a time:
                    # written in batches as they filled, it held back the following of what had
                    # come (17 batches, 2 s of the H200's walk, with workers idle meanwhile)
                    while self._loose and self.store.keeps and not any(f.done() for f in inflight):
                        self._write_loose(_LOOSE_SLICE)
                    done, _ = wait_for(list(inflight), return_when=FIRST_COMPLETED)
                    for fut in sorted(done, key=lambda f: inflight[f][0]):
                        _n, i, chunk = inflight.pop(fut)
                        results, died = workers.results_of(fut, artifacts[i], chunk, self.cas)
                        broken = broken or died
                        arrived(i, chunk, results)
            if broken or not self.keep_workers:
                self.stop_workers()  # a pool whose worker died takes no more work; the next batch starts one
        except BaseException:
            self.stop_workers()  # no worker outlives a failed (or interrupted) extraction
            raise
        finally:
            workers.hand_down(None)  # see _submitter: running workers keep their copy
            self._keep(new, keys, write=False)  # what is left is written when the audit next waits, or at its end
            if self._feeder is not None:
                self._feeder.reserved = 0
        # first in the workers' queue: the family forked now may read them
        self._send_later(first)
        self.feed()  # the walk's workers back to the later stages
        if self.after_walk is not None:
            self.after_walk()

    # -- facts named ahead ------------------------------------------------------------------
    def ahead(self, wanted: list[tuple[int, str, str]]) -> None:
        """``Facts.ahead``: keep these keys for the end of the next walk. A walk (an import closure)
        is followed by the rules' longest stretch of computing alone (the verdicts over the
        closures): the workers then extract what later rules will read in bulk.  A key whose member
        another fact parses before then comes along with it (:meth:`_take`).  With one job
        there is no one to send them to: they stay pending, and are read as usual."""
        if (self.config.jobs or usable_cpus()) > 1 and self.keep_workers:
            for i, path, name in wanted:
                self._later.setdefault((i, path), {})[name] = None

    def _send_later(self, first: Iterable[str] = (), *, rest: bool = True) -> None:
        """Send the keys kept by :meth:`ahead` to the workers, without waiting for them.

        The members with a fact of ``first`` (what the walking family reads next: CU103's packages)
        go first, in chunks of their own; ``rest=False`` sends only those, each with every pending
        fact of ``first`` (:meth:`walk` does as it starts: a package it reaches later is not parsed
        a second time for its program).  The family, forked as its walk ends
        (``RuleRun._fork_here`` collects what it reads first) or run here, then waits for those
        chunks only, not for the later families' sources and the format checks that shared chunks
        with them and came after the walk's last chunks (1.5-2.3 s of a cold run on the GPU
        machine, every worker busy while the fork waited)."""
        first = frozenset(first)
        pending = self.facts.pending
        later: list[tuple[int, str, str]] = []
        kept: dict[tuple[int, str], dict[str, None]] = {}
        for (i, path), names in self._later.items():
            if rest:
                later += [k for n in names if (k := (i, path, n)) in pending]
            elif not first.isdisjoint(names):
                # sent before the walk reaches the member: what else the family reads of it (a
                # package's program) comes in the same parse, where the walk would parse it again
                later += [k for n in (*names, *first) if (k := (i, path, n)) in pending]
            else:
                kept[(i, path)] = names
        self._later = kept
        if not later or self._pool is None:
            return  # no pool running (nothing was sent to workers so far): they are read as usual
        tasks = self._take(later, self._sent_keys)
        groups: list[tuple[int, list]] = []
        for urgent in (True, False):
            part = [(i, chunk) for i, t in tasks.items()
                    for chunk in _chunks([task for task in t if first.isdisjoint(task[1]) is not urgent])]
            groups += sorted(part, key=lambda g: -_cost(g[1]))  # the costliest first, as any batch (see _extract)
        if not groups:
            return
        self.close_stores()
        try:
            submit = self._submitter(self._artifacts, self.config.jobs or usable_cpus(), len(groups))
            for i, chunk in groups:
                held = {(i, m.path, n) for m, names in chunk for n in names}
                self._sent.append((submit(i, chunk), i, chunk, held))
                self.facts.inflight.update(held)
        finally:
            workers.hand_down(None)  # see _submitter: running workers keep their copy

    def settle(self, key: tuple[int, str, str] | None) -> None:
        """Collect facts sent ahead (``Facts.settle``): the chunk that holds ``key``, waiting for it,
        and every chunk already back (None: all of them); a worker that died has its chunk
        extracted here."""
        taken = [s for s in self._sent if key is None or key in s[3] or s[0] is None or s[0].done()]
        ids = {id(s) for s in taken}
        self._sent = [s for s in self._sent if id(s) not in ids]
        keys = {k: self._sent_keys.pop(k) for *_rest, held in taken for k in held if k in self._sent_keys}
        for *_rest, held in taken:
            self.facts.inflight.difference_update(held)
        new: list[tuple[str, Any]] = []
        broken = False
        try:
            with gc_paused():
                for fut, i, chunk, _held in taken:
                    results, died = workers.results_of(fut, self._artifacts[i], chunk, self.cas)
                    broken = broken or died
                    self._collect(self._artifacts, i, results, keys, new)
        finally:
            self._keep(new, keys)
        if broken:
            self.stop_workers()

    def _workers(self, artifacts, jobs: int, groups: int, fork: bool):
        """The worker pool: the running one, else a new one (its workers fork at the first submit)."""
        if self._pool is not None and len(self._pool_artifacts) == len(artifacts) \
                and all(a is b for a, b in zip(self._pool_artifacts, artifacts)):
            return self._pool
        self.stop_workers()  # forked for other artifacts: its workers inherited those
        # imported here: a cached or small audit never starts workers (about 20 ms of start-up)
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # A kept pool is sized for the batches to come (levels of import closures), not this one.
        workers = jobs if self.keep_workers else min(jobs, groups)
        self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork") if fork else None)
        self._pool_artifacts = list(artifacts)
        self.pools_started += 1
        if self._switch_interval is None:
            self._switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(self._switch_interval, POOL_SWITCH_INTERVAL))
        return self._pool

    def _collect(self, artifacts, i, results, keys, new) -> None:
        content = getattr(results, "content", None)
        if content:
            # stored by content rather than by identity (see _bundle_up, _keep)
            self._by_digest.update((keys[(i, path, name)], k) for (path, name), k in content.items() if (i, path, name) in keys)
        took = self.took
        for path, name, ok, value in results:
            if ok == REUSED:  # found by content (see _ByContent): its bundle names the row it came from
                if content and (path, name) in content and (i, path, name) in keys:
                    self._found_by_content.add(keys[(i, path, name)])
                self.cached += 1
                self.by_content += 1
                if took is not None:
                    took[(i, path, name)] = _BY_CONTENT
                if isinstance(value, CachedFailure):
                    ok, value = False, (value.code, value.message, dict(value.evidence))
                else:
                    ok = True
            else:
                self.extracted += 1
                if took is not None:
                    took[(i, path, name)] = _EXTRACTED
            self._accept(artifacts, i, path, name, ok, value, new, keys)

    @property
    def cas(self) -> str | None:
        """The fact cache's folder, where the workers also find facts by content (None: no cache)."""
        return os.path.dirname(self.store.path) if self.store.path else None

    def _accept(self, artifacts, i, path, name, ok, value, new, keys=None) -> None:
        if ok and isinstance(value, facts_registry.WithProblems):
            if new is not None and keys is not None:
                new.append((keys[(i, path, name)], value))  # cached with its problems
            for code, message, evidence in value.problems:
                self._accept(artifacts, i, path, name, False, (code, message, dict(evidence)), None)
            value, new = value.value, None
            if value is not None:
                self.facts[(i, path, name)] = value
            return
        if ok:
            if value is not None:
                self.facts[(i, path, name)] = value
            if new is not None and keys is not None:
                # None ("nothing here for me") is cached too: a second audit reads nothing.
                new.append((keys[(i, path, name)], value))
            return
        code, message, evidence = value
        try:
            rule = rules_registry.get(code)
        except KeyError:  # an extractor raised InputError with a code no rule documents
            rule = rules_registry.get("CU011")
            message = f"{message} (unknown input problem code {code})"
            code = "CU011"
        # CU001 (permission, I/O error) may be gone next run without the content key changing (chmod
        # does not touch mtime), CU011 is cuaudit's own bug, a pass out of CPU time may finish next time.
        if new is not None and keys is not None and lasting_failure(code, evidence):
            try:
                import pickle

                failure = CachedFailure(code, message, tuple(sorted(evidence.items())))
                pickle.dumps(failure)
                new.append((keys[(i, path, name)], failure))
            except Exception:  # noqa: BLE001 - evidence that does not pickle is simply not cached
                pass
        art = artifacts[i]
        line = evidence.get("line") if isinstance(evidence.get("line"), int) else None
        column = evidence.get("column") if line is not None and isinstance(evidence.get("column"), int) else None
        finding = rule.finding(
            Location(art.ref, path, line=line, column=column),
            f"{path}: {message}" if not message.startswith(path) else message,
            evidence={**evidence, "extractor": name}, key=path,
        )
        # Several extractors may read one member and fail on it alike (two
        # parsers of one broken pyproject.toml): one finding per member and
        # code, the one that knows the position if any.
        slot = (i, path, code)
        if slot in self._problem_at:
            at = self._problem_at[slot]
            if self.problems[at].location.line is None and line is not None:
                self.problems[at] = finding
            return
        self._problem_at[slot] = len(self.problems)
        self.problems.append(finding)


def _running_interpreter() -> tuple[str, str]:
    """The interpreter that parses evidence (its ``ast`` decides the facts), for cache keys."""
    return sys.version, sys.executable


@dataclass
class _OpenBundle:
    """Cached facts of one input read on demand, keyed like any fact (extractor, version, content)."""

    key: str
    values: dict[str, Any]
    store: FactStore
    used: set[str] = field(default_factory=set)
    dirty: bool = False
    #: the keys its input's members have now, computed when it is written (None: not known, an
    #: evidence input listed lazily)
    current: Callable[[], set[str]] | None = None
    #: fact key -> the key of the row that holds its value by content (written as a ByContent)
    rows: dict[str, str] = field(default_factory=dict)
