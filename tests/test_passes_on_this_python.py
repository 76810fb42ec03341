"""Every Python pass runs without an internal error on the syntax of the interpreter under test.

The fact and findings goldens are written on one Python (3.11); CI runs 3.10 to 3.13, whose
``ast`` differs (3.12 added ``type_params`` to every ``def`` and ``class``, and ``TypeAlias``;
3.13 type-parameter defaults).  A pass that trips on another version's tree gives CU011 for the
module and loses its facts, which no golden shows: this audits a sample of the running
interpreter's own standard library, with the modules that exercise its newest grammar, and
requires no CU011.
"""

from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import make_tree

#: modules of the standard library's tests written to exercise the grammar (absent ones skipped)
GRAMMAR_MODULES = ("test_grammar.py", "test_type_params.py", "test_type_aliases.py", "test_patma.py",
                   "test_named_expressions.py", "test_positional_only_arg.py", "test_unparse.py",
                   "test_typing.py", "test_dataclasses/__init__.py", "test_fstring.py",
                   "test_exception_group.py", "test_except_star.py", "test_coroutines.py")


def _sample() -> dict[str, bytes]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts)
    chosen = files[::40] + [stdlib / "test" / name for name in GRAMMAR_MODULES]
    out: dict[str, bytes] = {}
    for p in chosen:
        try:
            data = p.read_bytes()
        except OSError:
            continue
        out["pkg/" + str(p.relative_to(stdlib)).replace("/", "_").replace("-", "_")] = data
    return out


def test_no_internal_error_on_this_pythons_own_sources(tmp_path: Path, cli) -> None:
    files = _sample()
    if len(files) < 20:
        pytest.skip(f"the standard library's sources are not installed with {sys.executable}")
    files["pkg/__init__.py"] = ""
    tree = make_tree(tmp_path / "tree", files)
    rc, out, _ = cli("check", tree, "--no-cache", "--isolated", "--format", "json", "--exit-zero")
    assert rc == 0
    report = json.loads(out)
    errors = [f["message"] for f in report["findings"] if f["code"] == "CU011"]
    assert errors == [], f"{len(errors)} internal errors on Python {sys.version.split()[0]}: {errors[:3]}"
    # the modules were really read: the sample's test modules bind names and import things
    assert report["stats"]["members"] >= len(files)


def test_the_promotion_pass_walks_this_pythons_own_sources() -> None:
    # through the audit, promotion parses only sources that mention numpy or cupy (may_have_facts),
    # which the standard library does not: its scope walk is run here on every sample directly
    from cuaudit.facts.promotion import analysed_facts
    from cuaudit.formats.python import parse_python_text

    files = _sample()
    if len(files) < 20:
        pytest.skip(f"the standard library's sources are not installed with {sys.executable}")
    walked = 0
    for path, data in files.items():
        module = parse_python_text(data.decode("utf-8", "surrogateescape"), path)
        if module.ok:
            analysed_facts(module)  # raises on a tree shape the walk does not know
            walked += 1
    assert walked >= 20
