"""The evidence-only inputs of one audit (``ctx.evidence("stdlib" | "system" | "with")``): resolved
when a rule first asks for them, their facts extracted on demand, never audited themselves."""

from __future__ import annotations

from typing import Any

from cuaudit import snapshot
from cuaudit.config import Config
from cuaudit.extraction import Extraction
from cuaudit.facts.evidence import Evidence
from cuaudit.inputs import Artifact
from cuaudit.model import ArtifactRef, EnvironmentInfo


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
            read, ahead = self.extraction.on_demand, self.extraction.prefetch_evidence
            if self.recorded is None:
                self._views[name] = [Evidence(a, read, ahead) for a in arts]
            else:
                asked: list[snapshot.Questions] = [{} for _ in arts]
                self.recorded[name] = [(a.ref, q) for a, q in zip(arts, asked)]
                self._views[name] = [snapshot.RecordingEvidence(a, read, q, ahead) for a, q in zip(arts, asked)]
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
