"""What a rule sees: :class:`RuleContext` (facts, artifacts, configuration).

It sits below ``rules/`` and above ``facts/`` and ``analysis/``: rules import
it, the engine builds it.  It holds no file handle and no store: evidence
(``evidence``) and probes (``probe``) are callables the engine hands in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

from cuaudit.config import Config
from cuaudit.heap import give_back_free_memory
from cuaudit.model import ArtifactKind, EnvironmentInfo, Member, ProbeRecord

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.facts.evidence import Evidence
    from cuaudit.inputs import Artifact


class RuleContext:
    """What a rule may see: facts, artifacts, configuration.  Never files."""

    def __init__(
        self,
        config: Config,
        artifacts: Sequence["Artifact"],
        facts: dict[tuple[int, str, str], Any],
        environment: EnvironmentInfo | None,
        probes: list[ProbeRecord],
        *,
        evidence: Callable[[str], Sequence["Evidence"]] | None = None,
        probe: Callable[..., Any] | None = None,
    ) -> None:
        self.config = config
        self.artifacts = list(artifacts)
        self.environment = environment
        self.probes = probes
        self._evidence = evidence
        self._probe = probe
        self._facts = facts
        self._index = {id(a): i for i, a in enumerate(self.artifacts)}
        self._memo: dict[Any, Any] = {}
        #: the family (rule module) of the rule running now, set by the engine: the memo entries
        #: it computes are its family's, dropped by :meth:`release` once the family has run
        self.family = ""
        self._memo_of: dict[str, list[Any]] = {}
        self._by_extractor: dict[str, list[tuple[int, Member, Any]]] = {}
        #: the ids of the artifacts in focus (``in_focus``), found when first asked
        self._focus: frozenset[int] | None = None

    def in_focus(self, artifact: "Artifact") -> bool:
        """Whether the report keeps this artifact's findings: always, except under ``env --package``
        (``config.focus``), which keeps those of the named distributions and of what they require.
        A rule may skip the work whose only outcome is findings of other artifacts; what it reads of
        them to judge the ones in focus (modules, libraries, providers) it reads as before."""
        if not self.config.focus:
            return True
        if self._focus is None:
            from packaging.utils import canonicalize_name

            from cuaudit.requirement import required_closure

            names = {id(a): canonicalize_name(a.ref.name) for a in self.artifacts
                     if a.ref.kind is ArtifactKind.INSTALLED and a.ref.name}
            installed = set(names.values())
            roots = set(self.config.focus) & installed
            sites = self.environment.site_dirs if self.environment is not None else ()
            wanted = required_closure(sites, roots, installed) if sites else roots
            self._focus = frozenset(i for i, name in names.items() if name in wanted)
        return id(artifact) in self._focus

    def _table(self, extractor: str) -> list[tuple[int, Member, Any]]:
        """[(artifact index, member, fact)] of one extractor in artifact and member order, built once.

        Per extractor: facts kept pickled (``extraction.Facts``) are decoded only for the
        extractors some rule walks whole, not for every extractor at once."""
        table = self._by_extractor.get(extractor)
        if table is None:
            self._prefetch((i, m.path, extractor) for i, art in enumerate(self.artifacts) for m in art.members)
            get = self._facts.get
            table = []
            for i, art in enumerate(self.artifacts):
                for m in art.members:
                    value = get((i, m.path, extractor))
                    if value is not None:
                        table.append((i, m, value))
            self._by_extractor[extractor] = table
        return table

    def subjects(self, extractor: str) -> Iterator[tuple["Artifact", Member, Any]]:
        """:meth:`facts` of the artifacts :meth:`in_focus`: what a rule judges, where :meth:`facts`
        (every artifact's) is also what it judges against."""
        if not self.config.focus:
            yield from self.facts(extractor)
            return
        for art in self.artifacts:
            if self.in_focus(art):
                yield from self.facts(extractor, art)

    def facts(self, extractor: str, artifact: "Artifact | None" = None) -> Iterator[tuple["Artifact", Member, Any]]:
        """(artifact, member, fact) for every member the extractor produced a fact for."""
        if artifact is not None:
            i = self._index[id(artifact)]
            self._prefetch((i, m.path, extractor) for m in artifact.members)
            for m in artifact.members:
                value = self._facts.get((i, m.path, extractor))
                if value is not None:
                    yield artifact, m, value
            return
        arts = self.artifacts
        for i, m, value in self._table(extractor):
            yield arts[i], m, value

    def fact(self, extractor: str, artifact: "Artifact", member: str) -> Any | None:
        return self._facts.get((self._index[id(artifact)], member, extractor))

    def has_fact(self, extractor: str, artifact: "Artifact", member: str) -> bool:
        """Whether :meth:`fact` may give a fact, extracting and decoding nothing.

        True for a fact extracted (or cached) as not None, and for one of an on-demand
        extractor that applies to the member and has not been read yet: :meth:`fact`
        then extracts it, and gives None where the member does not parse."""
        key = (self._index[id(artifact)], member, extractor)
        may_have = getattr(self._facts, "may_have", None)
        return may_have(key) if may_have is not None else key in self._facts

    def prefetch(self, extractors: str | tuple[str, ...], members: Iterable[tuple["Artifact", str]], *,
                 ahead: bool = False) -> None:
        """Extract at once the facts of ``extractors`` (a name or several) that :meth:`fact` will be
        asked for these (artifact, member path) pairs: facts of on-demand extractors not read yet
        are extracted in the worker processes, not one by one as each is read, and the facts of one
        member share its parse (nothing else changes).

        ``ahead``: not now, but when the workers would otherwise wait for the parent (see
        ``Rule.ahead``); :meth:`fact` then waits for them where they are not in yet."""
        index = self._index
        names = (extractors,) if isinstance(extractors, str) else extractors
        keys = ((index[id(art)], path, n) for art, path in members for n in names)
        if ahead:
            later = getattr(self._facts, "ahead", None)
            if later is not None:
                later(keys)
            return
        self._prefetch(keys)

    def walk(self, facts: Iterable[tuple["Artifact", str, str]],
             follow: Callable[["Artifact", str, str], Iterable[tuple["Artifact", str, str]]]) -> None:
        """Extract ahead these (artifact, member path, extractor) facts, and the ones ``follow``
        names: called with each once its fact is in (read it with :meth:`fact`), it names more
        to extract the same way.  A walk (an import closure) that the worker processes run ahead
        of: what a fact names is sent to them as soon as it is in, not one batch per level."""
        index, arts = self._index, self.artifacts
        keys = [(index[id(art)], path, n) for art, path, n in facts]
        walk = getattr(self._facts, "walk", None)
        if walk is None:
            return  # facts given whole: nothing to extract ahead
        if not getattr(self._facts, "pending", True):
            # nothing is left to extract (a wheel's facts all are, up front): following the
            # walk would only decode the facts it meets (a fifth of torch's rule phase)
            return

        def follow_key(key: tuple[int, str, str]) -> list[tuple[int, str, str]]:
            return [(index[id(a)], p, n) for a, p, n in follow(arts[key[0]], key[1], key[2])]

        walk(keys, follow_key)

    def _prefetch(self, keys: Iterable[tuple[int, str, str]]) -> None:
        prefetch = getattr(self._facts, "prefetch", None)
        if prefetch is not None:
            prefetch(keys)

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """Share a derived result between the rules of a family within one audit."""
        if key not in self._memo:
            self._memo[key] = compute()
            self._memo_of.setdefault(self.family, []).append(key)
        return self._memo[key]

    def release(self, family: str, extractors: Iterable[str]) -> None:
        """Drop what no rule still to run needs: the memo entries ``family`` computed (every rule
        of it has run: a family's models are its own) and the facts of ``extractors`` decoded
        so far (no rule still to run names them in ``needs``; a read decodes them again).

        A memo value with a ``release()`` method has it called (a model whose parts refer to one
        another).  The package model of an environment and the programs it read were held to the
        end of the audit, where a cold `env` of the accuracy-venv peaked (531 MB; 492 MB without)."""
        for key in self._memo_of.pop(family, ()):
            value = self._memo.pop(key, None)
            # a model whose parts refer to one another is never collected once frozen (heap.py): it lets go itself
            release_model = getattr(value, "release", None)
            if callable(release_model):
                release_model()
        names = set(extractors)
        for name in names:
            self._by_extractor.pop(name, None)
        release = getattr(self._facts, "release", None)
        if release is not None and names:
            release(names)
        give_back_free_memory()  # what was let go is handed back, not kept for the facts to come

    def evidence(self, name: str) -> Sequence["Evidence"]:
        """Evidence-only inputs, resolved by the engine on first request and read on demand.

        ``"stdlib"``: the audited interpreter's standard library (at most one);
        ``"system"``: this machine's files as the dynamic loader sees them (one);
        ``"with"``: the ``[tool.cuaudit.linkage] with`` / ``--with`` wheels and
        folders.  Their facts come through the fact cache; no finding is ever
        reported on them.
        """
        return self._evidence(name) if self._evidence is not None else ()

    def probe(self, kind: str, **request: Any) -> Any | None:
        """Run a probe through the engine's one entry point (:class:`cuaudit.probe.Prober`).

        None unless the user asked for probes (``--probe``); the engine records every run.
        """
        if self._probe is None or not self.config.probe:
            return None
        return self._probe(kind, **request)

    def record_probe(self, record: ProbeRecord) -> None:
        """Record a run by hand (a rule defined in a test; the engine's prober records its own)."""
        self.probes.append(record)
