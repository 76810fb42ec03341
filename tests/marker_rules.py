"""Test-only rules and extractor, to get findings without any rule family.

``marker_rules`` (a fixture: import it into a test module) defines

- the extractor ``test-marker``: reads Python and build members, records the
  lines holding ``CUAUDIT-TEST-WARN`` / ``CUAUDIT-TEST-INFO``, raises
  ``RuntimeError`` on a member holding ``CUAUDIT-TEST-CRASH`` and, when
  ``CUAUDIT_TEST_CALLS`` names a file, appends each member it reads to it
  (counts calls across worker processes);
- CU098 (warning) for each WARN line and CU097 (info) for each INFO line.

They only fire on inputs that carry the marks, and are removed from the
registries when the fixture ends, so other tests never see them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from cuaudit import facts as facts_registry
from cuaudit import rules as rules_registry
from cuaudit.model import Location, MemberKind, Severity

WARN = "CUAUDIT-TEST-WARN"
INFO = "CUAUDIT-TEST-INFO"
CRASH = "CUAUDIT-TEST-CRASH"
#: kills the process reading it, unless its pid is CUAUDIT_TEST_PARENT (a worker dies)
DIE = "CUAUDIT-TEST-DIE"


@dataclass(frozen=True)
class MarkedLines:
    warn: tuple[tuple[int, int], ...]
    info: tuple[tuple[int, int], ...]
    path: str = ""  # where it was read: a fact that depends on the member's path


def _define() -> None:
    from cuaudit.facts import Extractor, MemberReader
    from cuaudit.rules import Rule

    class MarkerExtractor(Extractor):
        name = "test-marker"
        version = 1

        def applies(self, member) -> bool:
            return member.kind in (MemberKind.PYTHON, MemberKind.BUILD)

        def extract(self, reader: MemberReader) -> MarkedLines | None:
            calls = os.environ.get("CUAUDIT_TEST_CALLS")
            if calls:
                with open(calls, "a", encoding="utf-8") as fh:
                    fh.write(f"{os.getpid()} {reader.path}\n")
            text = reader.text()
            if CRASH in text:
                raise RuntimeError("test extractor crashed on purpose")
            if DIE in text and os.environ.get("CUAUDIT_TEST_PARENT") != str(os.getpid()):
                os._exit(9)  # as if killed by the OOM killer
            warn, info = [], []
            for n, line in enumerate(text.splitlines(), start=1):
                if WARN in line:
                    warn.append((n, line.index(WARN) + 1))
                if INFO in line:
                    info.append((n, line.index(INFO) + 1))
            return MarkedLines(tuple(warn), tuple(info), reader.path) if warn or info else None

    class MarkerWarning(Rule):
        """## What it does
        Test only: a warning on each line holding the warning mark.

        ## Why is this bad?
        It is not; it exercises the engine.

        ## Example
        `x = 1  # CUAUDIT-TEST-WARN`
        """

        code = "CU098"
        name = "test-marker-warning"
        summary = "test only"
        severity = Severity.WARNING
        needs = ("test-marker",)

        def check(self, ctx):
            for art, member, fact in ctx.facts("test-marker"):
                for line, col in fact.warn:
                    yield self.finding(Location(art.ref, member.path, line=line, column=col),
                                       f"warning mark in {member.path}", key=f"warn:{line}", fix="remove the mark")

    class MarkerInfo(Rule):
        """## What it does
        Test only: an info finding on each line holding the info mark.

        ## Why is this bad?
        It is not; it exercises the engine.

        ## Example
        `x = 1  # CUAUDIT-TEST-INFO`
        """

        code = "CU097"
        name = "test-marker-info"
        summary = "test only"
        severity = Severity.INFO
        needs = ("test-marker",)

        def check(self, ctx):
            for art, member, fact in ctx.facts("test-marker"):
                for line, col in fact.info:
                    yield self.finding(Location(art.ref, member.path, line=line, column=col),
                                       f"info mark in {member.path}", key=f"info:{line}")


def _undefine() -> None:
    rules_registry._REGISTRY.pop("CU098", None)
    rules_registry._REGISTRY.pop("CU097", None)
    facts_registry._REGISTRY.pop("test-marker", None)


@pytest.fixture
def marker_rules():
    rules_registry.load_all()
    facts_registry.load_all()
    _define()
    try:
        yield
    finally:
        _undefine()


def only_cu0(**kw):
    """A Config with only CU0xx and the test rules (CU097/CU098): other families'
    findings on the same fixtures do not change what these tests assert."""
    from cuaudit.config import Config

    kw.setdefault("select", ("CU0",))
    return Config(**kw)
