"""What a worker process runs: one artifact's members through their extractors.

:func:`extract_group` runs the named extractors on a chunk of one artifact's members, each member
read (inflated) once for all of them, and finds by content what the fact cache already holds for
the same bytes (:class:`_ByContent`).  A forked worker runs :func:`extract_forked`: the artifacts
are inherited at the fork (:func:`hand_down`), and the facts go back as their pickles
(:class:`Pickled`).  Which chunks go to which worker, and when, is :mod:`cuaudit.extraction`'s.
"""

from __future__ import annotations

import gc
import os
import time
from dataclasses import dataclass
from typing import Any, Iterable

from cuaudit import facts as facts_registry
from cuaudit.compat import deep
from cuaudit.facts import MemberReader
from cuaudit.heap import give_back_free_memory
from cuaudit.inputs import Artifact
from cuaudit.model import Member, error_for
from cuaudit.store import FactStore, content_digest
from cuaudit.time_budget import ANALYSIS_SECONDS, cpu_budget


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
    """What :func:`extract_group` returns: (member, extractor, ok, value|error) items, and
    ``content``: (member, extractor) -> the cache key of its fact by content (:class:`_ByContent`),
    for the facts just extracted, which the parent may store so, and for those found so
    (:data:`REUSED`), whose row is there already: the parent's bundles name that row."""

    content: dict[tuple[str, str], str]

    def __init__(self, items: Iterable[Any] = (), content: dict[tuple[str, str], str] | None = None) -> None:
        super().__init__(items)
        self.content = content if content is not None else {}


def extract_group(artifact: Artifact, tasks: list[tuple[Member, tuple[str, ...]]], cas: str | None = None,
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
            # those that come last (Extractor.last) after the others, the rows in the order asked
            last = [ex.last(member) for ex in extractors]
            rows = {name: _extracted(member, name, ex, reader) for name, ex, z in zip(names, extractors, last) if not z}
            if len(rows) < len(names):
                rows.update({name: _extracted(member, name, ex, reader) for name, ex, z in zip(names, extractors, last) if z})
            out += [rows[name] for name in names]
            if digest is not None:
                for path, name, _ok, _value in out[start:]:
                    if name not in reader.beside:  # a fact resting on more than the bytes is never kept so
                        out.content[(path, name)] = FactStore.key(name, facts_registry.get(name).version, digest)
    finally:
        if by_content is not None and not keep_cas:
            by_content.store.close()
    return out


def _extracted(member: Member, name: str, ex: facts_registry.Extractor, reader: MemberReader) -> tuple[str, str, bool, Any]:
    """One extractor's result row for :func:`extract_group`: its fact, or the error it met.  A pass
    that recurses per level of a tree deeper than the recursion limit allows runs again with room
    for it (``compat.deep``): a valid source that deep is no CU011.  The retry reuses the reader's
    parse, made at the normal limit (the limit bounds ``ast.parse`` on 3.10 and 3.11: a source is
    valid or not whichever attempt reads it).  Each run has ``ANALYSIS_SECONDS`` of CPU time
    (:mod:`cuaudit.time_budget`): past them, CU004 for the member, not cached."""
    try:
        with cpu_budget(ANALYSIS_SECONDS, f"the {name} pass"):
            return member.path, name, True, deep(lambda: ex.extract(reader))
    except Exception as exc:  # noqa: BLE001 - one bad file never stops the scan
        return member.path, name, False, error_for(exc)


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

#: this process's kept connection to the fact cache (process id, folder, store): a worker's, opened
#: after the fork, or the parent's for what it extracts itself (see close_content_store)
_CONTENT_STORE: tuple[int, str, FactStore] | None = None
#: kept connections a forked process found open from its parent: held, never closed or freed here
#: (freeing one closes it, which is the parent's to do)
_INHERITED: list[tuple[int, str, FactStore]] = []
#: bytes of a chunk's members held between hashing and extracting them (more are read again)
_HELD_BYTES = 64 * 1024**2


def _content_store(folder: str, keep: bool) -> FactStore:
    global _CONTENT_STORE
    if not keep:
        return FactStore(folder)  # closed at the end of the call
    pid = os.getpid()
    if _CONTENT_STORE is None or _CONTENT_STORE[0] != pid or _CONTENT_STORE[1] != folder:
        close_content_store()
        _CONTENT_STORE = (pid, folder, FactStore(folder))
    return _CONTENT_STORE[2]


def close_content_store() -> None:
    """Close this process's kept connection to the cache by content (:func:`_content_store`): the
    parent keeps one for what it extracts itself, one member at a time, and closes it before a
    worker or a forked family's child may fork (``Extraction.close_stores``): no SQLite connection
    crosses a fork."""
    global _CONTENT_STORE
    if _CONTENT_STORE is not None:
        if _CONTENT_STORE[0] == os.getpid():
            _CONTENT_STORE[2].close()
        else:
            _INHERITED.append(_CONTENT_STORE)
    _CONTENT_STORE = None


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


_ABSENT = object()  # a key the cache does not hold


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


#: The artifacts of the extraction in progress, inherited by forked workers (:func:`hand_down`).
_FORKED: list[Artifact] | None = None


def hand_down(artifacts: list[Artifact] | None) -> None:
    """Name the artifacts the workers forked from now on inherit (None once they are forked: the
    running workers keep their copy)."""
    global _FORKED
    _FORKED = artifacts


def extract_forked(i: int, tasks: list[tuple[Member, tuple[str, ...]]], cas: str | None = None) -> list[tuple[str, str, bool | str, Any]]:
    art = _FORKED[i]  # type: ignore[index]
    if getattr(art, "_forked_in", None) != os.getpid():
        gc.enable()  # a worker makes and drops parse trees: it collects, whatever the parent paused
        # open handles came from the parent: a shared file offset is not safe to read through
        for key in list(vars(art)):
            if key.startswith("_h_"):
                setattr(art, key, None)
        art._forked_in = os.getpid()  # type: ignore[attr-defined]
    # facts travel as their pickle: the parent stores them, and decodes one only where it is read
    results = extract_group(art, tasks, cas, keep_cas=True)
    out = Results([(path, name, ok, as_pickle(value) if ok else value) for path, name, ok, value in results],
                  results.content)
    del results
    _trim_now_and_then()
    return out


#: the least time, in seconds, between two trims of a worker's heap (see _trim_now_and_then)
TRIM_EVERY = 1.0
#: when this process last trimmed its heap (``time.monotonic``; a worker inherits "never")
_trimmed_at = float("-inf")


def _trim_now_and_then() -> None:
    """Hand the worker's free heap back after a chunk, once per ``TRIM_EVERY`` seconds at most.

    The chunks' parse trees and copies are freed into heap pages glibc keeps: a worker grew to what
    its largest chunks once held, 16 of them 880-910 MB on the GPU machine when the import family
    forks beside them (the tree's peak); handed back after each chunk, 660-670 MB.  But each page
    handed back is faulted in again by the next chunk's allocations: after every chunk, that cost
    the 2-core accuracy-venv's cold run about a second of its 20."""
    global _trimmed_at
    now = time.monotonic()
    if now - _trimmed_at >= TRIM_EVERY:
        _trimmed_at = now
        give_back_free_memory(always=True)


def results_of(fut: Any, artifact: Artifact, chunk: list, cas: str | None = None) -> tuple[list[tuple[str, str, bool | str, Any]], bool]:
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
    return extract_group(artifact, chunk, cas), broken


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


def as_pickle(value: Any) -> Any:
    """``value`` as its :class:`Pickled` pickle; as it is when it is None, a problem, already
    pickled, or does not pickle (an extractor's bug: then used, and never cached)."""
    if value is None or type(value) is Pickled or isinstance(value, (facts_registry.WithProblems, CachedFailure)):
        return value
    import pickle

    try:
        return Pickled(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001 - FactStore.put_many skips it as it always did
        return value

