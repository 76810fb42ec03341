"""The plug-in registries: defining a rule or extractor registers it, mistakes are caught at definition."""

from __future__ import annotations

import pytest
from marker_rules import marker_rules  # noqa: F401 - fixture

from cuaudit import facts as facts_registry
from cuaudit import rules as rules_registry
from cuaudit.facts import Extractor
from cuaudit.rules import Rule

DOC = """## What it does
x

## Why is this bad?
y

## Example
z
"""


def test_a_second_rule_with_a_taken_code_is_refused(marker_rules):
    with pytest.raises(TypeError, match="CU098 registered twice"):
        type("Impostor", (Rule,), {"__doc__": DOC, "code": "CU098", "name": "impostor", "summary": "s"})
    assert rules_registry.get("CU098").name == "test-marker-warning"


def test_rule_docs_need_their_sections_and_codes_their_shape():
    with pytest.raises(TypeError, match="lacks sections"):
        type("NoDoc", (Rule,), {"__doc__": "## What it does\nonly this", "code": "CU096", "name": "n", "summary": "s"})
    with pytest.raises(TypeError, match="code must look like CU123"):
        type("BadCode", (Rule,), {"__doc__": DOC, "code": "X1", "name": "n", "summary": "s"})
    assert "CU096" not in rules_registry._REGISTRY


def test_extractors_need_a_name():
    with pytest.raises(TypeError, match="need a name"):
        type("Nameless", (Extractor,), {})


def test_every_registered_rule_has_complete_docs_and_every_need_exists():
    for cls in rules_registry.all_rules():
        doc = cls.doc()
        assert doc.summary and doc.name and all(doc.sections.get(s) for s in rules_registry.DOC_SECTIONS[:3]), cls.code
        for need in cls.needs:
            facts_registry.get(need)  # raises KeyError for a missing extractor
