"""Evidence: a read-only view of an evidence-only input and of its facts.

Analyses (the module tree's standard library, the loader's system libraries
and ``--with`` extras) read evidence through this view and never open a file:
``exists``/``listdir`` ask the input (see :mod:`cuaudit.inputs.evidence`),
``fact`` asks a provider.  In an audit the provider is the engine, which
extracts the member on demand through the fact cache
(:meth:`cuaudit.extraction.Extraction.on_demand`); without one (a test, a library
caller) the extractor runs here, uncached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable

from cuaudit.facts import MemberReader, WithProblems, get
from cuaudit.model import ArtifactRef, InputError, Member

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.inputs import Artifact

#: (artifact, member, extractor name) -> the fact, or None when it has none or cannot be read
FactProvider = Callable[["Artifact", Member, str], Any]
#: (artifact, [(member, extractor name)]) -> None: extract those facts at once, ahead of the provider's reads
FactPrefetcher = Callable[["Artifact", list[tuple[Member, str]]], None]


def extract_uncached(artifact: "Artifact", member: Member, extractor: str) -> Any:
    """Run one extractor on one member here and now (no engine, no cache); None if unreadable."""
    try:
        value = get(extractor)().extract(MemberReader(artifact, member))
    except (InputError, OSError, ValueError):
        return None
    return value.value if isinstance(value, WithProblems) else value


class Evidence:
    """One evidence input (the standard library, this machine's libraries, a ``--with`` wheel)."""

    def __init__(self, artifact: "Artifact", provider: FactProvider | None = None,
                 prefetcher: FactPrefetcher | None = None) -> None:
        self.artifact = artifact
        self._provider = provider or extract_uncached
        self._prefetcher = prefetcher
        self._memo: dict[tuple[str, str], Any] = {}

    @property
    def ref(self) -> ArtifactRef:
        return self.artifact.ref

    @property
    def members(self) -> list[Member]:
        """The members listed so far (all of them for a wheel or ``--with`` folder)."""
        return self.artifact.members

    def member(self, path: str) -> Member | None:
        return self.artifact.member(path)

    def exists(self, path: str) -> bool:
        return self.artifact.member(path) is not None

    def is_dir(self, path: str) -> bool:
        return bool(getattr(self.artifact, "is_dir", lambda p: False)(path))

    def listdir(self, path: str) -> tuple[str, ...]:
        return tuple(getattr(self.artifact, "listdir", lambda p: ())(path))

    def glob(self, pattern: str) -> list[str]:
        return list(getattr(self.artifact, "glob", lambda p: [])(pattern))

    def fs_path(self, path: str) -> str | None:
        return self.artifact.fs_path(path)

    @property
    def prefetches(self) -> bool:
        """Whether :meth:`prefetch` does anything (an engine's view)."""
        return self._prefetcher is not None

    def prefetch(self, extractor: str, paths: "Iterable[str]") -> None:
        """Have ``extractor``'s facts of the members at ``paths`` extracted at once (in the engine's
        worker pool), ahead of :meth:`fact` asking for them one by one; a prediction that changes
        no answer.  Nothing happens without an engine (a test, a library caller)."""
        if self._prefetcher is None:
            return
        wanted = []
        for path in paths:
            member = self.artifact.member(path)  # not a question a recording view keeps: nothing is read yet
            if member is not None and (extractor, path) not in self._memo:
                wanted.append((member, extractor))
        if wanted:
            self._prefetcher(self.artifact, wanted)

    def fact(self, extractor: str, path: str) -> Any | None:
        """The fact ``extractor`` gives for the member at ``path``; None when absent or unreadable."""
        key = (extractor, path)
        if key not in self._memo:
            member = self.artifact.member(path)
            self._memo[key] = None if member is None else self._provider(self.artifact, member, extractor)
        return self._memo[key]
