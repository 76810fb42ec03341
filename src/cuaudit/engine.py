"""The pipeline: inputs -> formats -> facts -> analysis -> rules -> finish -> report.

:func:`audit` is the library API; the CLI is a thin layer over it.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol, Sequence

from cuaudit import facts as facts_registry
from cuaudit import rules as rules_registry
from cuaudit.config import Config
from cuaudit.context import RuleContext
from cuaudit.facts import MemberReader
from cuaudit.facts.evidence import Evidence
from cuaudit.finish import Report, finish, lines_to_check
from cuaudit.inputs import Artifact
from cuaudit.inputs.artifact import MemberSubset
from cuaudit.model import (
    ArtifactKind,
    ArtifactRef,
    EnvironmentInfo,
    Finding,
    InputError,
    Location,
    Member,
    MemberKind,
    Problem,
    ProbeRecord,
)
from cuaudit.probe import Prober
from cuaudit import forked, snapshot
from cuaudit.heap import fewer_full_collections, gc_paused, give_back_free_memory
from cuaudit.store import FactStore, content_digest, default_cache_dir

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.inputs.environment import Environment

# Re-exported: these lived here before the finishing step and the rule context had modules of their own.
__all__ = ["audit", "gather", "audit_stats", "Report", "RuleContext", "ProbeRecord", "Extraction", "Gathered", "EvidenceInputs"]

#: Extraction is spread over processes once there is at least this much to do.
PARALLEL_MIN_TASKS = 24
PARALLEL_MIN_BYTES = 64 * 1024**2
#: the same once a pool runs (an audit's later batches): sending costs no fork, only the pickles
PARALLEL_WARM_MIN_TASKS = 8

#: the commands whose audits reuse a snapshot of their last run (`diff` and `explain` audit
#: two versions or a narrowed environment each run: they gain little)
SNAPSHOT_COMMANDS = ("env", "check")


class Progress(Protocol):
    """Bytes: ``total`` of the members to read (None: unknown), ``n`` read, the ``member`` just read."""

    def start(self, total: int | None, description: str) -> None: ...
    def advance(self, n: int = 1, member: str = "") -> None: ...
    def stop(self) -> None: ...


# -- extraction --------------------------------------------------------------


def _error_for(exc: BaseException) -> tuple[str, str, dict]:
    """(code, message, evidence) for an extractor's failure on one member."""
    if isinstance(exc, InputError):
        return exc.code, exc.message, dict(exc.detail)
    if isinstance(exc, OSError):
        return "CU001", f"cannot read: {exc.strerror or exc}", {}
    import traceback  # here, with zipfile: an audit of installed files never needs them
    import zipfile
    import zlib

    if isinstance(exc, (zipfile.BadZipFile, zlib.error, EOFError)):
        return "CU002", f"corrupt archive data: {exc}", {}
    tb = traceback.extract_tb(exc.__traceback__)
    where = f"{os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else "?"
    return "CU011", f"internal error while analysing this file: {type(exc).__name__}: {exc} (at {where})", {
        "exception": type(exc).__name__,
        "at": where,
    }


@dataclass(frozen=True)
class CachedFailure:
    """An extractor's InputError on one member, kept in the fact cache.

    A corrupt member stays corrupt until its content key changes, so the
    second audit reports it without reading it again.  Unreadable files
    (CU001: permissions change without touching mtime) and internal errors
    (CU011: cuaudit's bugs, not the file's) are never cached.
    """

    code: str
    message: str
    evidence: tuple[tuple[str, Any], ...]


#: the ``ok`` of a result that the fact cache held for the member's bytes (see :class:`_ByContent`):
#: its value is what was stored (a fact, a ``WithProblems``, None or a ``CachedFailure``)
REUSED = "reused"


class Results(list):  # type: ignore[type-arg]
    """What :func:`_extract_group` returns: (member, extractor, ok, value|error) items, and
    ``content``: (member, extractor) -> the cache key of its fact by content (:class:`_ByContent`),
    for the facts just extracted, which the parent may store so, and for those found so
    (:data:`REUSED`), whose row is there already: the parent's bundles name that row."""

    content: dict[tuple[str, str], str]

    def __init__(self, items: Iterable[Any] = (), content: dict[tuple[str, str], str] | None = None) -> None:
        super().__init__(items)
        self.content = content if content is not None else {}


def _extract_group(artifact: Artifact, tasks: list[tuple[Member, tuple[str, ...]]], cas: str | None = None,
                   *, keep_cas: bool = False) -> Results:
    """Run extractors on members of one artifact. Returns (member, extractor, ok, value|error).

    ``cas``: the fact cache's folder, where facts are also found by content (:class:`_ByContent`):
    a member read whole anyway is hashed, and what the cache holds for the same path and bytes
    comes back with ``ok`` :data:`REUSED` instead of being extracted again; the keys by content of
    what is extracted come back in ``Results.content`` (the parent, the cache's one writer, stores
    them).  ``keep_cas``: keep that cache's connection open for the next call (a worker's own)."""
    out = Results()
    instances: dict[str, facts_registry.Extractor] = {}
    by_content = _ByContent(_content_store(cas, keep_cas), artifact, tasks) if cas else None
    try:
        for t, (member, names) in enumerate(tasks):
            reader = digest = None
            if by_content is not None:
                reader, digest, names = by_content.take(t, out)
                if not names:
                    continue
            if reader is None:
                reader = MemberReader(artifact, member)
            if reader._data is None:
                reader._data = _shared_bytes(artifact, member, names)
            start = len(out)
            extractors = [instances.get(n) or instances.setdefault(n, facts_registry.get(n)()) for n in names]
            for ex in extractors:
                try:
                    ex.prepare(reader)
                except Exception:  # noqa: BLE001 - extract() meets (and reports) the same problem
                    pass
            for name, ex in zip(names, extractors):
                try:
                    out.append((member.path, name, True, ex.extract(reader)))
                except Exception as exc:  # noqa: BLE001 - one bad file never stops the scan
                    out.append((member.path, name, False, _error_for(exc)))
            if digest is not None:
                for path, name, _ok, _value in out[start:]:
                    if name not in reader.beside:  # a fact resting on more than the bytes is never kept so
                        out.content[(path, name)] = FactStore.key(name, facts_registry.get(name).version, digest)
    finally:
        if by_content is not None and not keep_cas:
            by_content.store.close()
    return out


# -- facts found by content ------------------------------------------------------------------------
#
# A fact depends only on its member's path and bytes (tests/test_cache_property.py), but the cache
# key a member is first looked up by names its bytes by identity (a file's inode and times, an
# archive's): a new virtual environment of the same packages, a wheel built again with most of its
# files unchanged, or a copied tree miss it everywhere.  A member that an extractor reads whole
# anyway (a Python source, an extension module) is therefore also hashed when it is extracted
# (SHA-256 of its path and bytes, about 2 GB/s), and its facts are kept under that digest too:
# the next miss by identity finds them there without parsing anything.  Members read only in part
# (a library's dynamic section, a fat binary streamed once) are not hashed: reading them whole
# would cost more than their facts.

#: how a key taken since a fork was counted (``Extraction.took``)
_EXTRACTED, _CACHED, _BY_CONTENT = 0, 1, 2

#: facts read on demand, by content, written once this many are kept (``Extraction._keep``)
_LOOSE_BATCH = 2048
#: how many of them a walk writes at a time while no chunk is back (``Extraction.walk``)
_LOOSE_SLICE = 256
#: the worker's own connection to the fact cache (process id, folder, store): opened after the fork
_CONTENT_STORE: tuple[int, str, FactStore] | None = None
#: bytes of a chunk's members held between hashing and extracting them (more are read again)
_HELD_BYTES = 64 * 1024**2


def _content_store(folder: str, keep: bool) -> FactStore:
    global _CONTENT_STORE
    if not keep:
        return FactStore(folder)  # the parent's: closed at the end of the call, so none crosses a fork
    pid = os.getpid()
    if _CONTENT_STORE is None or _CONTENT_STORE[0] != pid or _CONTENT_STORE[1] != folder:
        _CONTENT_STORE = (pid, folder, FactStore(folder))
    return _CONTENT_STORE[2]


#: files on disk from this size on are hashed through a map of their pages (not copied: an extension
#: module's extractors map it themselves), smaller ones are read (a Python source: its bytes are parsed)
_MAPPED_FROM = 1024**2


def _digest_of(artifact: Artifact, member: Member) -> tuple[bytes | None, str | None]:
    """(the member's bytes, or None when they were mapped, not read; its digest, or None when it is
    larger than SHARED_READ_MAX)."""
    fs_path = artifact.fs_path(member.path)
    if fs_path is not None and member.size >= _MAPPED_FROM:
        import mmap

        with open(fs_path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > SHARED_READ_MAX:
                return None, None
            if size:
                with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                    return None, content_digest(member.path, mapped)
    with artifact.open_member(member.path) as fh:
        data = fh.read(SHARED_READ_MAX + 1)
    return (data, content_digest(member.path, data)) if len(data) <= SHARED_READ_MAX else (None, None)


class _ByContent:
    """The facts the cache holds for a chunk's members by their path and bytes: every member read
    whole anyway is read and hashed first, then one query asks for all of them.

    A fact its extractor answers from beside the member (:meth:`Extractor.answers_beside`: the format
    check of an installed source that its ``__pycache__`` file vouches for) is not looked up, and a
    member with no other fact read whole is not even hashed."""

    def __init__(self, store: FactStore, artifact: Artifact, tasks: list[tuple[Member, tuple[str, ...]]]) -> None:
        self.store = store
        self.tasks = tasks
        #: task index -> (its reader, holding the bytes unless they are read again; digest; names looked up)
        self.entries: dict[int, tuple[MemberReader, str, tuple[str, ...]]] = {}
        held = 0
        for n, (member, names) in enumerate(tasks):
            if member.size > SHARED_READ_MAX:
                continue
            extractors = [facts_registry.get(x) for x in names]
            if not any(ex.reads_whole(member) for ex in extractors):
                continue
            reader = MemberReader(artifact, member)
            looked = [(x, ex) for x, ex in zip(names, extractors) if not ex.answers_beside(reader)]
            if not any(ex.reads_whole(member) for _x, ex in looked):
                continue
            try:
                data, digest = _digest_of(artifact, member)
            except Exception:  # noqa: BLE001 - each extractor then meets (and reports) the problem itself
                continue
            if digest is None:
                continue
            if data is not None:
                held += len(data)
                reader._data = data if held <= _HELD_BYTES else None
            self.entries[n] = (reader, digest, tuple(x for x, _ex in looked))
        self.found = store.get_many(FactStore.key(x, facts_registry.get(x).version, digest)
                                    for _reader, digest, looked in self.entries.values() for x in looked)

    def take(self, n: int, out: list) -> tuple[MemberReader | None, str | None, tuple[str, ...]]:
        """Task ``n``'s facts found by content, appended to ``out`` as :data:`REUSED` results; returns
        its reader (None: make one), its digest (None: not looked up by content) and the names left
        to extract."""
        member, names = self.tasks[n]
        got = self.entries.pop(n, None)
        if got is None:
            return None, None, names
        reader, digest, looked = got
        left = []
        for x in names:
            value = self.found.get(FactStore.key(x, facts_registry.get(x).version, digest), _ABSENT) \
                if x in looked else _ABSENT
            if value is _ABSENT:
                left.append(x)
            else:
                out.append((member.path, x, REUSED, value))
                out.content[(member.path, x)] = FactStore.key(x, facts_registry.get(x).version, digest)
        return reader, digest, tuple(left)


#: The interpreter's switch interval while a worker pool runs, in seconds (CPython's default: 5 ms).
#: The pool's own threads (one sends the chunks to the workers, one hands their results back)
#: need the interpreter's lock for every chunk, and a thread that wants it waits until the one
#: holding it is asked to let go, one switch interval later: with the parent's thread busy (an
#: environment's import walk follows each chunk as it comes back, thousands of them) each
#: hand-over waited up to 5 ms.  On the H200, cold: 18.30 / 18.96 s -> 17.17 / 16.19 s, alternating
#: on one host; the walk started 0.6-1.2 s sooner and ended about 2 s sooner.  The caller's value
#: comes back when the pool stops.
POOL_SWITCH_INTERVAL = 0.0005

#: Archive members up to this size are inflated once and shared by the extractors that
#: read them (ELF, device code, Cython C-API on one .so; four readers of one .py): a
#: profile of the cupy 14.2.0 wheel spent 4.0 s in zlib where one inflate costs 1.6 s.
#: Larger members stream to each extractor, which reads only what it needs.
SHARED_READ_MAX = 64 * 1024**2


def _shared_bytes(artifact: Artifact, member: Member, names: tuple[str, ...]) -> bytes | None:
    if member.size > SHARED_READ_MAX or artifact.fs_path(member.path) is not None:
        return None
    # ELF passes that read a prefix or stream once through the shared image do not count
    if sum(facts_registry.get(n).reads_whole(member) for n in names) < 2:
        return None
    try:
        with artifact.open_member(member.path) as fh:
            return fh.read(SHARED_READ_MAX + 1)
    except Exception:  # noqa: BLE001 - each extractor then meets (and reports) the problem itself
        return None


def _usable_cpus() -> int:
    """CPUs this process may run on (a container's limit, not the host's count)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: The artifacts of the extraction in progress, inherited by forked workers.
_FORKED: list[Artifact] | None = None


def _extract_forked(i: int, tasks: list[tuple[Member, tuple[str, ...]]], cas: str | None = None) -> list[tuple[str, str, bool | str, Any]]:
    art = _FORKED[i]  # type: ignore[index]
    if getattr(art, "_forked_in", None) != os.getpid():
        gc.enable()  # a worker makes and drops parse trees: it collects, whatever the parent paused
        # open handles came from the parent: a shared file offset is not safe to read through
        for key in list(vars(art)):
            if key.startswith("_h_"):
                setattr(art, key, None)
        art._forked_in = os.getpid()  # type: ignore[attr-defined]
    # facts travel as their pickle: the parent stores them, and decodes one only where it is read
    results = _extract_group(art, tasks, cas, keep_cas=True)
    return Results([(path, name, ok, _pickled(value) if ok else value) for path, name, ok, value in results],
                   results.content)


def _results_of(fut: Any, artifact: Artifact, chunk: list, cas: str | None = None) -> tuple[list[tuple[str, str, bool | str, Any]], bool]:
    """A chunk's results from its future, else extracted here; and whether the pool is broken
    (a worker died: memory, a signal; None: the pool took no more work when it was sent)."""
    if fut is not None:
        try:
            return fut.result(), False
        except Exception as exc:  # noqa: BLE001 - a worker died (memory, signal): redo it here
            from concurrent.futures import BrokenExecutor

            broken = isinstance(exc, BrokenExecutor)
    else:
        broken = True
    return _extract_group(artifact, chunk, cas), broken


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


class Pickled(bytes):
    """A fact kept as its pickle until something reads it (``Facts.get`` decodes it).

    Every fact a worker extracts travels back as its pickle, made there, and stays so in the
    parent: the worker pool's thread then hands the parent bytes instead of building objects
    under the interpreter's lock while the parent computes (the import verdicts), the cache and
    the bundles store those bytes as they are instead of pickling each fact again, and a fact
    no rule reads is never decoded.  (Only the import-time programs and Python-source facts
    were kept so until the tenth session.  Every fact so: the parent's peak 450 -> 423 MB on the
    88-distribution environment, 946 -> 883 MB on the GPU machine's; the cold runs' times did
    not move beyond noise, and a facts-cached run decodes its facts one at a time, 2.5 % slower.)"""


def _pickled(value: Any) -> Any:
    """``value`` as its :class:`Pickled` pickle; as it is when it is None, a problem, already
    pickled, or does not pickle (an extractor's bug: then used, and never cached)."""
    if value is None or type(value) is Pickled or isinstance(value, (facts_registry.WithProblems, CachedFailure)):
        return value
    import pickle

    try:
        return Pickled(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001 - FactStore.put_many skips it as it always did
        return value


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
        if self.later is not None:
            self.later([k for k in keys if k in self.pending])

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
        #: the artifacts the pool's forked workers inherited (``_FORKED`` at their fork)
        self._pool_artifacts: list[Artifact] = []
        #: worker pools started (one per audit, unless a worker died)
        self.pools_started = 0
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
        #: called at the end of every walk (``_RuleRun`` forks a family there: see :meth:`become_child`)
        self.after_walk: Callable[[], None] | None = None
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
        for i, art in enumerate(artifacts):
            deferring = _reads_on_demand(art)
            for m in art.members:
                names = wanted(m)
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
        self._close_stores()
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
        rows = [(stored[k], _pickled(v)) if k in stored else (k, v) for k, v in new if k not in found]
        for i, ks in per_art.items():
            if not isinstance(bundles.get(bundle_keys[i]), dict) and all(k in known for k in ks):
                rows.append((bundle_keys[i], {k: ByContent(stored[k]) if k in stored else _pickled(known[k]) for k in ks}))
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
        self._close_stores()
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
            bundle.values[k] = pickled = _pickled(value)
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
            self.store.close()  # no SQLite connection crosses a fork (see _close_stores)

    def _write_loose(self, most: int | None = None) -> None:
        """Write the facts read on demand kept for their keys by content (``_loose``): all of
        them, or the ``most`` kept first."""
        if self._loose and not self._child:  # a forked child writes nothing: the parent does (child_delta)
            if most is None or most >= len(self._loose):
                loose, self._loose = self._loose, []
            else:
                loose, self._loose = self._loose[:most], self._loose[most:]
            self.store.put_many(loose)

    # -- a forked child (see _RuleRun) ----------------------------------------------------------
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
            self.evidence_cached += 1
            value = bundle.values[key]
        else:
            self.evidence_extracted += 1
            if self.took is not None:
                self.took[("evidence", key, "")] = _EXTRACTED  # (see absorb)
            [(_path, _name, ok, value)] = _extract_group(artifact, [(member, (name,))])
            if not ok:
                code, message, evidence = value
                if code in ("CU001", "CU011"):  # not a property of the bytes: never cached (see _accept)
                    return None
                value = CachedFailure(code, message, ())
            bundle.values[key] = value
            bundle.dirty = True
        bundle.used.add(key)
        if isinstance(value, CachedFailure):
            return None
        return value.value if isinstance(value, facts_registry.WithProblems) else value

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
                identity = (kind, *identity, ref.version)
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
        self.store.close()

    def _close_stores(self) -> None:
        """Close both fact caches' connections before workers may fork: no SQLite connection
        crosses a fork (a child closing it releases the parent's file locks).  The next read or
        write reopens them."""
        self.store.close()
        self._machine_store.close()

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
        go on with those (the engine runs the rules whose facts are in: see :func:`audit`).
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
        jobs = self.config.jobs or _usable_cpus()
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
        global _FORKED
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
                            results, died = _results_of(feeder.wait(g), artifacts[i], chunk, self.cas)
                            broken = broken or died
                        else:
                            results = _extract_group(artifacts[i], chunk, self.cas)
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
            _FORKED = None  # noqa: F841 - see _submitter; running workers keep their copy
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

        Sets ``_FORKED`` for the workers forked meanwhile: the caller clears it when done."""
        global _FORKED
        fork = hasattr(os, "fork")
        _FORKED = list(artifacts) if fork else None
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
            call = lambda i, chunk: pool.submit(_extract_forked, i, chunk, cas)  # noqa: E731
        else:
            call = lambda i, chunk: pool.submit(_extract_group, artifacts[i], chunk, cas)  # noqa: E731

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
        global _FORKED
        from collections import deque
        from concurrent.futures import FIRST_COMPLETED
        from concurrent.futures import wait as wait_for

        artifacts = self._artifacts
        jobs = self.config.jobs or _usable_cpus()
        keys: dict[tuple[int, str, str], str] = {}
        queue: dict[int, list[tuple[Member, tuple[str, ...]]]] = {}  # artifact -> tasks not sent yet
        ready: deque[tuple[int, str, str]] = deque()  # keys whose facts are in, to follow
        asked: set[tuple[int, str, str]] = set()
        inflight: dict[Any, tuple[int, int, list]] = {}  # future -> (order sent, artifact, chunk)
        new: list[tuple[str, Any]] = []
        broken = False

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
                        arrived(i, chunk, _extract_group(artifacts[i], chunk, self.cas))
                        continue
                    if queued and len(inflight) < 2 * jobs:
                        # two chunks a worker: one running, one waiting, and what arrives meanwhile
                        # joins the next chunks instead of waiting for a level to end
                        self._close_stores()
                        submit = self._submitter(artifacts, jobs, 2 * jobs)
                        size = max(1, min(64, -(-queued // (2 * jobs))))
                        while queue and len(inflight) < 2 * jobs:
                            i, chunk = next_chunk(size)
                            fut = submit(i, chunk)
                            if fut is None:
                                broken = True
                                arrived(i, chunk, _extract_group(artifacts[i], chunk, self.cas))
                            else:
                                inflight[fut] = (sent, i, chunk)
                                sent += 1
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
                        results, died = _results_of(fut, artifacts[i], chunk, self.cas)
                        broken = broken or died
                        arrived(i, chunk, results)
            if broken or not self.keep_workers:
                self.stop_workers()  # a pool whose worker died takes no more work; the next batch starts one
        except BaseException:
            self.stop_workers()  # no worker outlives a failed (or interrupted) extraction
            raise
        finally:
            _FORKED = None  # noqa: F841 - see _submitter
            self._keep(new, keys, write=False)  # what is left is written when the audit next waits, or at its end
            if self._feeder is not None:
                self._feeder.reserved = 0
        self._send_later()  # first in the workers' queue: the family forked now may read them
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
        if (self.config.jobs or _usable_cpus()) > 1 and self.keep_workers:
            for i, path, name in wanted:
                self._later.setdefault((i, path), {})[name] = None

    def _send_later(self) -> None:
        """Send the keys kept by :meth:`ahead` to the workers, without waiting for them."""
        global _FORKED
        pending = self.facts.pending
        later = [k for (i, path), names in self._later.items() for n in names if (k := (i, path, n)) in pending]
        self._later = {}
        if not later or self._pool is None:
            return  # no pool running (nothing was sent to workers so far): they are read as usual
        tasks = self._take(later, self._sent_keys)
        groups = [(i, chunk) for i, t in tasks.items() for chunk in _chunks(t)]
        if not groups:
            return
        self._close_stores()
        try:
            submit = self._submitter(self._artifacts, self.config.jobs or _usable_cpus(), len(groups))
            # the costliest first, as any batch (see _extract)
            for g in sorted(range(len(groups)), key=lambda g: -_cost(groups[g][1])):
                i, chunk = groups[g]
                held = {(i, m.path, n) for m, names in chunk for n in names}
                self._sent.append((submit(i, chunk), i, chunk, held))
                self.facts.inflight.update(held)
        finally:
            _FORKED = None  # noqa: F841 - see _submitter

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
                    results, died = _results_of(fut, self._artifacts[i], chunk, self.cas)
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
        self.stop_workers()  # forked for other artifacts: its workers' _FORKED is not these
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
        # CU001 (permission, I/O error) may be gone next run without the content
        # key changing (chmod does not touch mtime), and CU011 is cuaudit's own bug.
        if new is not None and keys is not None and code not in ("CU001", "CU011"):
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


# -- the audit -----------------------------------------------------------------


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
             extraction: "Extraction | None" = None, rules: "_RuleRun | None" = None) -> Gathered:
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


#: the cores from which a family is forked beside workers still busy (see _RuleRun._fork_here): with
#: fewer, the workers' backlog takes every core while the child computes (2 cores, the accuracy-venv
#: cold: no faster, 250 MB more); on 16 (the H200) the workers are done long before the verdicts
FORK_BESIDE_WORKERS = 8


#: seconds the parent waits for a forked family's child once it has nothing else to do: past them
#: the child is ended and the family runs in the parent (a child that hangs never hangs the audit)
FORKED_FAMILY_TIMEOUT = 600.0


def _may_fork(config: Config) -> bool:
    """Whether an audit may finish a rule family in a forked child (see _RuleRun): with workers
    (where there are none, nothing runs beside the parent either), never with probes (a child
    would run them unrecorded), and only where processes fork."""
    return hasattr(os, "fork") and (config.jobs or _usable_cpus()) > 1 and not config.probe


class _FamilyForked(BaseException):
    """Unwinds, in the parent, the rule during whose walk its family was forked (see _RuleRun)."""


class _RuleRun:
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
        if extraction is not None and _may_fork(ctx.config):
            extraction.after_walk = self._fork_here
        #: the audit's facts, whose pending ones no rule reads are named ahead (see run_until)
        self.facts = facts
        self.runnable = runnable
        self.names = names
        self.findings: list[Finding] = []
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
        return [k for k in self.facts.pending if k[2] not in read] if self.facts is not None else []

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
        if extraction.workers_busy() and (self.ctx.config.jobs or _usable_cpus()) < FORK_BESIDE_WORKERS:  # type: ignore[union-attr]
            return  # the child would only take the workers' cores (2 cores, cold: no faster, 250 MB more)
        self._fork_tried = True
        # what the family reads and the workers still extract (named ahead, sent as its walk ended)
        # is collected first: the child would extract it again itself, one member at a time (the
        # GPU machine's cold run: 634 facts extracted, 1,674 read back from the cache in the child)
        reads = {n for rule in self.runnable if type(rule).__module__ == family for n in rule.needs}
        facts = extraction.facts  # type: ignore[union-attr]
        for key in [k for k in facts.inflight if k[2] in reads]:
            if key in facts.inflight and facts.settle is not None:
                facts.settle(key)
        extraction._close_stores()  # type: ignore[union-attr]
        child, send = forked.fork()
        if send is not None:
            self._baseline = extraction.become_child()  # type: ignore[union-attr]
            self._at, self._send = len(self.findings), send
            return
        if child is not None:
            self._forked = (child, family, len(self.findings))
            extraction.took = {}  # type: ignore[union-attr]
            raise _FamilyForked

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
            return list(rule.check(ctx))
        except _FamilyForked:
            raise
        except Exception as exc:  # noqa: BLE001 - one broken rule must not hide the others
            code, message, evidence = _error_for(exc)
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
        ctx, todo = self.ctx, self.runnable[self.ran:last + 1]
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
                    self.findings += self._check(rule)
                except _FamilyForked:
                    continue  # forked during this rule's walk: the child finishes the family
                finally:
                    self._checking = False
                if self._last_of[family] == k:
                    if self._send is not None:
                        self._send(self._result())  # the child ends here
                    ctx.release(family, self.names - self._needed_after[k])


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
        rules = _RuleRun(ctx, runnable, names, extraction.facts, extraction=extraction, evidence=evidence_inputs)
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
        stats = audit_stats(gathered, started)
        suppressions = suppressions_for(findings, artifacts, config)
        if slot is not None and content is not None and not any(f.code == "CU011" for f in findings):
            # a CU011 is cuaudit's own failure (or a worker that died): never kept for the next run
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


class EvidenceInputs:
    """The evidence-only inputs of one audit, resolved when a rule first asks for them.

    Rules reach them through ``ctx.evidence(name)``; every fact of theirs is
    extracted on demand through :meth:`Extraction.on_demand` (the fact cache,
    one bundle per input).  They are not audited: no rule iterates them, their
    problems are never findings, and reports list them apart (``Report.evidence``).
    """

    NAMES = ("stdlib", "system", "with")

    def __init__(self, config: Config, environment: EnvironmentInfo | None, extraction: Extraction,
                 *, record: bool = False) -> None:
        self.config = config
        self.environment = environment
        self.extraction = extraction
        self._views: dict[str, list[Evidence]] = {}
        #: with ``record``: name -> [(input's ref, the questions asked of it and their answers)], for a snapshot
        self.recorded: dict[str, list[tuple[ArtifactRef, snapshot.Questions]]] | None = {} if record else None

    def __call__(self, name: str) -> list[Evidence]:
        if name not in self._views:
            arts = self._resolve(name)
            if self.recorded is None:
                self._views[name] = [Evidence(a, self.extraction.on_demand) for a in arts]
            else:
                asked: list[snapshot.Questions] = [{} for _ in arts]
                self.recorded[name] = [(a.ref, q) for a, q in zip(arts, asked)]
                self._views[name] = [snapshot.RecordingEvidence(a, self.extraction.on_demand, q)
                                     for a, q in zip(arts, asked)]
        return self._views[name]

    def still_answers(self, recorded: dict[str, list[tuple[ArtifactRef, "snapshot.Questions"]]]) -> bool:
        """Whether the evidence inputs resolve as recorded and answer every recorded question alike."""
        for name, items in recorded.items():
            arts = self._resolve(name)
            if [a.ref for a in arts] != [ref for ref, _ in items]:
                return False
            if not all(snapshot.ask_again(a, q) for a, (_, q) in zip(arts, items)):
                return False
        return True

    def _resolve(self, name: str) -> list[Artifact]:
        from cuaudit.inputs import evidence as inputs

        if name == "stdlib":
            folder = inputs.stdlib_folder(self.environment)
            return [folder] if folder is not None else []
        if name == "system":
            return [inputs.SystemFiles()]
        if name == "with":
            paths = self.config.section("linkage").get("with", ())
            if isinstance(paths, str):  # `with = "a.whl,b.whl"` as well as a list
                paths = [p for p in paths.split(",") if p]
            return inputs.with_artifacts(paths)
        raise KeyError(f"unknown evidence {name!r} (one of {', '.join(self.NAMES)})")

    def asked(self) -> dict[str, list[Any]]:
        """By input name resolved here: the questions recorded of each of its inputs (None each,
        without recording), for a forked family's result (see :meth:`take_in`)."""
        recorded = self.recorded or {}
        return {name: [q for _ref, q in recorded.get(name, ())] if name in recorded else [None] * len(views)
                for name, views in self._views.items()}

    def take_in(self, asked: dict[str, list[Any]]) -> list[Artifact]:
        """Resolve the inputs a forked child asked for (:meth:`asked`) and add its recorded questions
        to this audit's; the inputs' artifacts (whose bundles the child may have read)."""
        out: list[Artifact] = []
        for name, questions in asked.items():
            views = self(name)
            out += [v.artifact for v in views]
            if self.recorded is None:
                continue
            for (_ref, mine), theirs in zip(self.recorded.get(name, ()), questions):
                if theirs:
                    mine.update(theirs)
        return out

    def refs(self) -> list[ArtifactRef]:
        """The evidence inputs this audit read (listed apart from the audited artifacts)."""
        return [v.ref for name in self.NAMES for v in self._views.get(name, ())]


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
        code, message, evidence = _error_for(exc)
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
