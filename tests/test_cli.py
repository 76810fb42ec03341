"""The command line: exit codes, usage errors, output, progress bar only on a terminal."""

from __future__ import annotations

import argparse
import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import make_tree
from marker_rules import INFO, WARN, marker_rules  # noqa: F401 - fixture

from cuaudit.commands import _common


def run_cuaudit(*args: str, cwd: Path | None = None, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "CI"}
    return subprocess.run([sys.executable, "-m", "cuaudit.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env={**base, **(env or {})}, timeout=120, **kw)


@pytest.fixture
def marked(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "t", {"a.py": f"# {WARN}\n", "b.py": f"# {INFO}\n"})


def test_exit_codes(cli, tmp_path, marked, marker_rules):
    clean = make_tree(tmp_path / "clean", {"a.py": "a = 1\n"})
    assert cli("check", str(clean), "--isolated", "--no-cache")[0] == 0
    assert cli("check", str(marked), "--isolated", "--no-cache")[0] == 1
    assert cli("check", str(marked), "--isolated", "--no-cache", "--exit-zero")[0] == 0
    # below the threshold: 0
    assert cli("check", str(marked), "--isolated", "--no-cache", "--select", "CU097")[0] == 0
    assert cli("check", str(marked), "--isolated", "--no-cache", "--select", "CU097", "--fail-on", "info")[0] == 1
    assert cli("check", str(marked), "--isolated", "--no-cache", "--fail-on", "error")[0] == 0


@pytest.mark.parametrize("args", [
    ("check", "--no-such-flag"),
    ("check", "--fail-on", "fatal"),
    ("check", "--format", "yaml"),
    ("check", "--select", "X1"),
    ("nosuchcommand",),
    (),
    ("rule", "CU999"),
])
def test_usage_errors_exit_2(cli, tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli(*args)
    assert rc == 2 and err


def test_help_and_version_exit_0(cli):
    assert cli("--version")[0] == 0
    assert cli("check", "--help")[0] == 0


def test_internal_error_is_exit_2_with_a_message(cli, monkeypatch, tmp_path):
    from cuaudit import engine

    def broken(*a, **k):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(engine, "audit", broken)
    rc, out, err = cli("check", str(tmp_path), "--isolated")
    assert rc == 2 and "internal error: RuntimeError: simulated bug" in err


def test_output_file_and_summary_on_stderr(cli, tmp_path, marked, marker_rules):
    out_file = tmp_path / "report.json"
    rc, out, err = cli("check", str(marked), "--isolated", "--no-cache", "-f", "json", "-o", str(out_file))
    assert rc == 1 and out == ""
    assert "Found 2 findings" in err
    data = json.loads(out_file.read_text())
    assert sorted(f["code"] for f in data["findings"]) == ["CU097", "CU098"]


def test_text_report_has_no_colour_when_piped_and_colour_when_asked(cli, marked, marker_rules):
    _, out, _ = cli("check", str(marked), "--isolated", "--no-cache")
    assert "\x1b[" not in out and "CU098" in out and out.rstrip().endswith(".")
    _, out, _ = cli("check", str(marked), "--isolated", "--no-cache", "--color", "always")
    assert "\x1b[" in out


def test_rules_and_rule_share_the_docstring_text(cli):
    rc, out, _ = cli("rules", "--format", "json")
    docs = {d["code"]: d for d in json.loads(out)}
    assert rc == 0 and {"CU001", "CU007", "CU011"} <= set(docs)
    rc, out, _ = cli("rule", "CU007", "--format", "markdown")
    from cuaudit.rules import get

    assert rc == 0 and out == get("CU007").doc().markdown()
    rc, out, _ = cli("rule", "invalid-project-file", "--format", "json")
    assert json.loads(out)["sections"]["What it does"] == docs["CU007"]["sections"]["What it does"]


# -- progress bar: only on a terminal --------------------------------------------------------------


def _args(**kw) -> argparse.Namespace:
    return argparse.Namespace(quiet=kw.get("quiet", False))


def test_progress_only_when_stderr_is_a_tty(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert isinstance(_common.make_progress(_args()), _common.RichProgress)
    assert _common.make_progress(_args(quiet=True)) is None
    monkeypatch.setenv("CI", "true")
    assert _common.make_progress(_args()) is None
    monkeypatch.setenv("CI", "false")  # some runners export CI=false outside CI
    assert isinstance(_common.make_progress(_args()), _common.RichProgress)
    monkeypatch.delenv("CI")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert _common.make_progress(_args()) is None


@pytest.fixture
def many_projects(tmp_path: Path) -> Path:
    # enough work for the bar: 40 pyproject.toml files for the pyproject extractor
    return make_tree(tmp_path / "mono", {f"p{i}/pyproject.toml": f'[project]\nname = "p{i}"\n' for i in range(40)})


def test_no_progress_bar_in_a_pipe(many_projects):
    proc = run_cuaudit("check", str(many_projects), "--isolated", "--no-cache")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" not in proc.stderr and "Extracting" not in proc.stderr


def _run_on_pty(args: list[str], env: dict) -> str:
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "cuaudit.cli", *args], stdout=subprocess.DEVNULL,
                            stderr=slave, stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks = []
    deadline = time.time() + 60
    while time.time() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)
    return b"".join(chunks).decode(errors="replace")


def test_progress_bar_on_a_terminal_but_not_in_ci(many_projects):
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["TERM"] = "xterm"
    shown = _run_on_pty(["check", str(many_projects), "--isolated", "--no-cache"], env)
    assert "Extracting facts" in shown
    hidden = _run_on_pty(["check", str(many_projects), "--isolated", "--no-cache"], {**env, "CI": "true"})
    assert "Extracting facts" not in hidden
    quiet = _run_on_pty(["check", str(many_projects), "--isolated", "--no-cache", "--quiet"], env)
    assert "Extracting facts" not in quiet


def test_unwritable_output_or_baseline_is_a_usage_error(cli, tmp_path):
    missing = tmp_path / "no" / "such" / "dir"
    rc, _, err = cli("check", str(tmp_path), "--isolated", "--no-cache", "-o", str(missing / "r.json"))
    assert rc == 2 and err.startswith("cuaudit: error: cannot write the report to")
    rc, _, err = cli("check", str(tmp_path), "--isolated", "--no-cache", "--write-baseline", str(missing / "b.json"))
    assert rc == 2 and "cannot write the baseline" in err


def test_syntax_warnings_of_audited_sources_are_not_printed(tmp_path):
    # ast.parse of `"\s"` in audited code warns; a user saw those lines from `cuaudit env`
    import subprocess
    import sys

    (tmp_path / "mod.py").write_text('import numpy as np\npattern = "\\s+"\n')
    proc = subprocess.run([sys.executable, "-W", "default", "-m", "cuaudit", "check", str(tmp_path), "--no-cache"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    assert "invalid escape sequence" not in proc.stderr and "SyntaxWarning" not in proc.stderr
