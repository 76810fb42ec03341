"""docs/rules/ is generated from the rule docstrings and must be up to date.

If this fails after you added or changed a rule: ``python scripts/gen_rule_docs.py``.
"""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

from conftest import REPO

SCRIPT = REPO / "scripts" / "gen_rule_docs.py"


def test_committed_rule_docs_are_up_to_date(tmp_path):
    # A subprocess: a clean registry, without rules other tests define.
    subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], check=True, capture_output=True)
    committed = REPO / "docs" / "rules"
    fresh = sorted(p.name for p in tmp_path.glob("*.md"))
    assert fresh == sorted(p.name for p in committed.glob("*.md")), "run: python scripts/gen_rule_docs.py"
    stale = [n for n in fresh if not filecmp.cmp(tmp_path / n, committed / n, shallow=False)]
    assert stale == [], f"stale rule docs {stale}: run python scripts/gen_rule_docs.py"


def test_each_page_is_the_text_of_cuaudit_rule(tmp_path):
    subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], check=True, capture_output=True)
    page = (tmp_path / "CU007.md").read_text()
    cli = subprocess.run([sys.executable, "-m", "cuaudit", "rule", "CU007", "--format", "markdown"],
                         check=True, capture_output=True, text=True).stdout
    assert page.endswith(cli) and "## What it does" in page and "## Fix safety" in page
    assert "[CU007](CU007.md)" in (tmp_path / "index.md").read_text()


def test_check_mode_reports_stale_files(tmp_path):
    subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], check=True, capture_output=True)
    assert subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--check"]).returncode == 0
    (tmp_path / "CU001.md").write_text("edited by hand\n")
    (tmp_path / "CU999.md").write_text("a rule that no longer exists\n")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--check"], capture_output=True,
                          text=True)
    assert proc.returncode == 1 and "CU001.md" in proc.stdout and "CU999.md" in proc.stdout
    subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], check=True, capture_output=True)
    assert not (tmp_path / "CU999.md").exists()


def test_declared_options_and_references_are_rendered_and_exist():
    """A rule's options are data: each names an option its family declares, and its doc lists it."""
    from cuaudit.rules import all_rules, allow_lists, family_options

    families, lists = family_options(), allow_lists()
    with_options = [cls for cls in all_rules() if cls.options]
    assert {c.code for c in with_options} >= {"CU101", "CU102", "CU201", "CU203"}
    for cls in with_options:
        text = cls.doc().markdown()
        assert "## Options" in text
        for opt in cls.options:
            table, _, key = opt.partition(".")
            assert (key in lists) if table == "allow" else (key in families[table]), (cls.code, opt)
            assert f"[tool.cuaudit.{table}] {key}" in text
    assert "<https://github.com/cupy/cupy/issues/8536>" in next(c for c in all_rules() if c.code == "CU401").doc().markdown()
