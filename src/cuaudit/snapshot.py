"""The environment snapshot: an unchanged audit reuses the findings its last run produced.

A cached ``cuaudit env`` of a large environment spent its time re-deriving the
same answers from cached facts (the CU1xx package model, the import-time
model, unpickling every fact): 48 s on the GPU machine's 197 distributions.
What the rules answer depends only on

* the content keys of every member of every audited artifact (the ``stat`` of
  every file each RECORD lists), with what listing met (problems, skips).  An
  installed distribution is not listed for it: its key is made from ``stat``
  calls alone (``InstalledDistribution.listing_key``), and a RECORD whose own
  ``stat`` is unchanged is not read again (the snapshot keeps each one's paths
  as a hint for the next run of the same code);
* cuaudit itself (its version and the ``stat`` of its own source files, so a
  development checkout never reuses what older code derived; the Python running
  it), the selected rules and extractors, the configuration that reaches rules,
  and the audited interpreter (:class:`~cuaudit.model.EnvironmentInfo`);
* the evidence the rules read on demand (standard library, system
  libraries, ``--with``): every question asked of it and its answer is
  recorded in the snapshot (:class:`RecordingEvidence`) and asked again
  before reuse, a few hundred ``stat`` calls.

When all of it is unchanged, the findings the rules produced last time (before
the finishing step, which still runs: baselines, suppressions and severities
apply as usual) are reused; anything else falls back to the full audit over
the fact cache, which re-extracts only the members whose content changed.
Probes (``--probe``) run real code and are never snapshotted; neither are rules
or extractors defined outside cuaudit (a test's rule: its code has no ``stat``).

One slot per (inputs, interpreter, configuration, selection) in the fact store holds
the latest snapshot, so an environment or a wheel that keeps changing does not pile
them up (the cache's size cap prunes the slots of inputs no longer checked).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from cuaudit import __version__
from cuaudit.facts.evidence import Evidence
from cuaudit.model import EnvironmentInfo, Finding, Skipped

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.config import Config
    from cuaudit.inputs import Artifact
    from cuaudit.store import FactStore

#: bump when what a snapshot holds, or how its key is made, changes
SCHEMA = 3

#: configuration fields that never reach a rule: where the cache is, how many workers
_NOT_KEYED = frozenset({"jobs", "cache", "cache_dir", "cache_max_size", "probe_timeout", "source", "option_sources"})


def code_identity(root: str | None = None) -> str:
    """cuaudit's version and the ``stat`` of every file of the package (its rules, models and data)."""
    root = root or os.path.dirname(os.path.abspath(__file__))
    h = hashlib.blake2b(__version__.encode(), digest_size=16)
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith((".pyc", ".pyo")):
                continue
            try:
                st = os.stat(os.path.join(dirpath, f))
            except OSError:
                continue
            h.update(f"{os.path.relpath(dirpath, root)}/{f}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def config_identity(config: "Config") -> str:
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in _NOT_KEYED}
    return json.dumps(fields, sort_keys=True, default=repr)


def usable(config: "Config", codes: Sequence[str], extractors: Sequence[str]) -> bool:
    """Whether this audit may use a snapshot: cached, no probes, only cuaudit's own rules and extractors.

    Read from the rule index and the extractors registered so far, importing neither: an
    extractor registered from elsewhere under a name the rules need is already registered."""
    from cuaudit import facts, rules

    if not config.cache or config.probe:
        return False
    if not all(rules.info(c).module.startswith("cuaudit.") for c in codes):
        return False
    return all(facts.registered(n) is None or facts.registered(n).__module__.startswith("cuaudit.") for n in extractors)


def slot_key(config: "Config", environment: EnvironmentInfo | None, codes: Sequence[str],
             extractors: Sequence[str], command: str, inputs: Sequence[Any] = ()) -> str:
    """Where this (inputs, interpreter, configuration, selection)'s latest snapshot lives in the store.

    ``inputs``: the refs of what was named to audit (wheels, trees: not an environment's
    distributions, which the environment names), so that checks of several wheels in turn
    each keep their own.  Extractor versions are not part of it: they are cuaudit's code,
    which the content (:func:`code_identity`) holds."""
    from cuaudit import rules

    parts = [
        # the interpreter running cuaudit too: its ast and its stdlib module names shape the model
        str(SCHEMA), command, sys.executable, sys.version, repr(environment), config_identity(config), repr(list(inputs)),
        ",".join(sorted(f"{rules.info(c).module}.{rules.info(c).qualname}" for c in codes)),
        ",".join(sorted(extractors)),
        # the bounds inputs and extractors are read with (docs/security.md) come from the environment
        repr(sorted((k, v) for k, v in os.environ.items() if k.startswith("CUAUDIT_BUDGET_"))),
        _loader_identity(),
    ]
    return "snapshot:" + hashlib.blake2b("\n".join(parts).encode(), digest_size=20).hexdigest()


def listing_identity(artifact: "Artifact") -> str | None:
    """The identity of the one regular file an artifact's listing follows from (``single_file``), or None."""
    import stat

    from cuaudit.inputs.identity import file_identity

    if not artifact.single_file:
        return None
    try:
        st = os.stat(artifact.ref.path)
    except OSError:
        return None  # listed, then: the listing reports why it cannot be read
    return file_identity(st) if stat.S_ISREG(st.st_mode) else None


def _loader_identity() -> str:
    """The machine's dynamic loader, whose built-in search folders the loader model reads from the file
    itself (``analysis.libraries.default_dirs``), not through a recorded evidence question."""
    from cuaudit.inputs.evidence import LOADERS
    from cuaudit.inputs.identity import file_identity

    out = []
    for path in LOADERS:
        try:
            out.append(f"{path}:{file_identity(os.stat(path))}")
        except OSError:
            out.append(f"{path}:-")
    return ",".join(out)


def content_identity(artifacts: Sequence["Artifact"], code: str, list_members: Callable[["Artifact"], None],
                     hints: Mapping[Any, Any] | None = None, new_hints: dict[Any, Any] | None = None) -> str:
    """Every audited member's content key, and what listing each artifact met.

    ``hints``: by artifact ref, what the last run's listing keys left (:attr:`Snapshot.hints`, of the
    same ``code``); ``new_hints`` receives this run's.

    A single-file artifact (a wheel, an sdist, a file) stands by its file's identity,
    unlisted: the identity (device, inode, size, mtime, ctime) changes with any rewrite,
    and the member keys are made from it.  An artifact with a :meth:`~cuaudit.inputs.Artifact.listing_key`
    (an installed distribution: the ``stat`` of every file its RECORD lists) stands by that key,
    unlisted too.  The others are listed (``list_members``)."""
    h = hashlib.blake2b(code.encode(), digest_size=20)
    for art in artifacts:
        ident = listing_identity(art)
        if ident is not None:
            h.update(f"\0{type(art).__name__}\0{art.ref!r}\0file\0{ident}\0{art.problems!r}\n"
                     .encode("utf-8", "surrogateescape"))
            continue
        try:
            got = art.listing_key((hints or {}).get(art.ref))
        except Exception:  # noqa: BLE001 - whatever went wrong, the listing meets it too and reports it
            got = None
        if got is not None:
            key, hint = got
            if new_hints is not None:
                new_hints[art.ref] = hint
            h.update(f"\0{type(art).__name__}\0{art.ref!r}\0stat\n".encode("utf-8", "surrogateescape"))
            h.update(key.encode("utf-8", "surrogateescape"))
            continue
        list_members(art)
        h.update(f"\0{type(art).__name__}\0{art.ref!r}\0{art.problems!r}\0{art.skipped!r}\n".encode("utf-8", "surrogateescape"))
        h.update("\n".join(f"{m.path}\t{m.kind.value}\t{m.size}\t{m.content_key}" for m in art.members)
                 .encode("utf-8", "surrogateescape"))
    return h.hexdigest()


# -- evidence: the questions the rules asked, and the answers -------------------------------------


#: (operation, argument) -> answer; operations: member, is_dir, listdir, glob, members
Questions = dict[tuple[str, str], Any]


class RecordingEvidence(Evidence):
    """An evidence view that records every question asked of the input and its answer.

    Facts are recorded through the member they come from: a fact depends only on
    its member's content key, so the key stands for the fact.
    """

    def __init__(self, artifact: "Artifact", provider: Callable | None, questions: Questions,
                 prefetcher: Callable | None = None) -> None:
        super().__init__(artifact, provider, prefetcher)
        self.questions = questions

    @property
    def members(self):
        got = self.artifact.members
        self.questions[("members", "")] = tuple((m.path, m.content_key) for m in got)
        return got

    def member(self, path: str):
        got = self.artifact.member(path)
        self.questions[("member", path)] = got.content_key if got is not None else None
        return got

    def exists(self, path: str) -> bool:
        return self.member(path) is not None

    def is_dir(self, path: str) -> bool:
        got = super().is_dir(path)
        self.questions[("is_dir", path)] = got
        return got

    def listdir(self, path: str) -> tuple[str, ...]:
        got = super().listdir(path)
        self.questions[("listdir", path)] = got
        return got

    def glob(self, pattern: str) -> list[str]:
        got = super().glob(pattern)
        self.questions[("glob", pattern)] = tuple(got)
        return got

    def fact(self, extractor: str, path: str) -> Any | None:
        self.member(path)
        return super().fact(extractor, path)


def ask_again(artifact: "Artifact", questions: Questions) -> bool:
    """Whether the input still answers every recorded question the same way."""
    view = RecordingEvidence(artifact, None, {})
    for (op, arg), answer in questions.items():
        if op == "members":
            got: Any = tuple((m.path, m.content_key) for m in artifact.members)
        elif op == "member":
            m = artifact.member(arg)
            got = m.content_key if m is not None else None
        elif op == "is_dir":
            got = view.is_dir(arg)
        elif op == "listdir":
            got = view.listdir(arg)
        elif op == "glob":
            got = tuple(view.glob(arg))
        else:
            return False
        if got != answer:
            return False
    return True


# -- the snapshot -------------------------------------------------------------------------------------


@dataclass
class Snapshot:
    """What one audit's rules produced, and what it depended on beyond its key."""

    content: str
    #: the rules' findings with the input problems, before the finishing step
    findings: list[Finding]
    #: per artifact (in order): everything skipped, listing's and the rules' own
    skipped: list[list[Skipped]]
    #: the inline suppressions of the members the findings are in (facts of their content)
    suppressions: dict[tuple[Any, str], Any]
    #: evidence name -> [(its input's ref, the questions asked of it)]
    evidence: dict[str, list[tuple[Any, Questions]]] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)
    #: :func:`code_identity` of the cuaudit that made it: its hints are good only for the same code
    code: str = ""
    #: artifact ref -> what its listing key left for the next one (``Artifact.listing_key``)
    hints: dict[Any, Any] = field(default_factory=dict)


def load(store: "FactStore", slot: str) -> Snapshot | None:
    """The slot's snapshot, whatever its content: the caller compares (its hints help make the content)."""
    got = store.get_many([slot]).get(slot)
    return got if isinstance(got, Snapshot) else None


def save(store: "FactStore", slot: str, snapshot: Snapshot) -> None:
    store.put_many([(slot, snapshot)])
