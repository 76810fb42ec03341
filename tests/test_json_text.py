"""report.json_text.dumps writes exactly the text of json.dumps(value, indent=2)."""

from __future__ import annotations

import enum
import json
import math

import pytest

from cuaudit.report.json_text import dumps


class Level(enum.IntEnum):
    LOW = 1


class Name(str, enum.Enum):
    A = "a\u2028"


class Items(dict):
    pass


HOSTILE = [
    "",
    "plain",
    "quote \" backslash \\ slash / controls \x00\x01\x1f\x7f tab\t nl\n cr\r",
    "bidi \u202e\u2066 zero-width \u200b bom \ufeff line sep \u2028\u2029",
    "lone surrogates \ud800 \udfff \udc80x",
    "astral \U0001f600 \U0010ffff and wide 漢字 é",
    "</script><!-- &amp;",
]


@pytest.mark.parametrize("value", [
    *HOSTILE,
    None, True, False, 0, -1, 2**100, -(2**70), 0.1, -0.0, 1e308, 5e-324, math.inf, -math.inf, math.nan,
    [], {}, (), [[]], [{}], {"a": []}, {"a": {}}, [[], {}, ()],
    Level.LOW, Name.A, [Level.LOW, Name.A], {Level.LOW: Name.A},
    {s: s for s in HOSTILE},
    {1: "int", 2.5: "float", True: "t", None: "n", -3: "neg", math.inf: "inf"},
    Items(b=[1, (2, 3)], a=Items()),
    {"findings": [{"code": "CU101", "line": 3, "fix": None, "evidence": {"k": [1.5, "x\ud800"], "e": {}},
                   "tags": ("a", "b"), "ok": True}] * 3, "stats": {"seconds": 0.25}},
    [[[[["deep"]]]]],
])
def test_same_text_as_json_dumps(value):
    assert dumps(value) == json.dumps(value, indent=2)
    assert dumps(value, indent=4) == json.dumps(value, indent=4)


@pytest.mark.parametrize("value, error", [
    ({"a": {1, 2}}, TypeError),     # a type JSON has no form for
    ({(1, 2): "tuple key"}, TypeError),
    (object(), TypeError),
])
def test_what_json_dumps_refuses_it_refuses_alike(value, error):
    with pytest.raises(error) as ours:
        dumps(value)
    with pytest.raises(error) as theirs:
        json.dumps(value, indent=2)
    assert str(ours.value) == str(theirs.value)


def test_cycle_is_reported_as_json_reports_it():
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps(cyclic)


def test_reports_are_json_dumps_text(cli, tmp_path):
    """The JSON and SARIF reports read back and written by json.dumps(indent=2) give the same text."""
    from conftest import make_tree

    tree = make_tree(tmp_path / "t", {"pkg/__init__.py": "", "pkg/m\u00e9.py": "import pkg\npkg.sub\n",
                                      "pkg/sub/__init__.py": "x = '\u202e'\n"})
    for fmt in ("json", "sarif"):
        rc, out, err = cli("check", str(tree), "--isolated", "--no-cache", "-f", fmt, "--exit-zero")
        assert rc == 0, err
        assert out == json.dumps(json.loads(out), indent=2) + "\n"
        assert json.loads(out)["findings" if fmt == "json" else "runs"]


@pytest.mark.parametrize("name", ["plain", "astral \U0001f600", "backslash \\ud800 as text", "lone \udcff byte"])
def test_json_report_is_the_valid_unicode_document(name):
    """The JSON report skips walking the document for surrogates when its text shows none: its text
    is still json.dumps of document() (valid_unicode_deep applied) for every kind of name."""
    from test_reports_human import f, hostile_report, make_report

    from cuaudit.model import ArtifactKind, ArtifactRef, Severity
    from cuaudit.report import json_report

    ref = ArtifactRef(ArtifactKind.WHEEL, f"/w/{name}.whl", name, "1.0")
    for report in (make_report([f("CU201", Severity.ERROR, ref, f"pkg/{name}.so", f"lib{name}.so", message=name)]),
                   hostile_report()):
        assert json_report.render(report) == json.dumps(json_report.document(report), indent=2) + "\n"
