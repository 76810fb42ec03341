"""Progress on long work: bytes, speed, the member just read; downloads measured while pip writes.

A recording console stands in for the terminal; the download watcher runs a
real subprocess that writes into its TMPDIR the way pip does.  Then the CLI on
a pseudo-terminal (``test_cli``'s harness).
"""

from __future__ import annotations

import io
import os
import sys

from conftest import make_tree
from test_cli import _run_on_pty

from cuaudit.inputs.process import run_watched
from cuaudit.progress import RichProgress


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def start(self, total, description):
        self.events.append(("start", total, description))

    def advance(self, n=1, member=""):
        self.events.append(("advance", n, member))

    def stop(self):
        self.events.append(("stop",))


def shown_by_bar(total: int, n: int, member: str) -> tuple[RichProgress, str]:
    """What a bar on a 160-column terminal prints after ``start(total)`` and ``advance(n, member)``."""
    from rich.console import Console

    buf = io.StringIO()
    bar = RichProgress(Console(file=buf, force_terminal=True, width=160, color_system=None))
    bar.start(total, "Extracting facts")
    bar.advance(n, member)
    bar._progress.refresh()
    bar.stop()
    return bar, buf.getvalue()


def test_extraction_bar_counts_bytes_and_names_the_member():
    bar, shown = shown_by_bar(3_000_000, 1_500_000, "torch/lib/libtorch_cuda.so")
    assert "Extracting facts" in shown and "1.5/3.0 MB" in shown and "libtorch_cuda.so" in shown
    bar.advance(10)  # after stop: nothing, no error


def test_member_names_in_the_bar_are_escaped():
    _, shown = shown_by_bar(10, 1, "pkg/[bold]x\x1b[2J.so")
    assert "[bold]x\\x1b[2J.so" in shown and "\x1b[2J" not in shown


def test_download_is_measured_while_it_runs(tmp_path):
    writer = ("import os, time\n"
              "with open(os.path.join(os.environ['TMPDIR'], 'pkg.whl.part'), 'wb') as f:\n"
              "    for _ in range(6):\n"
              "        f.write(b'x' * 100_000); f.flush(); time.sleep(0.25)\n"
              "print('done')\n")
    rec = Recorder()
    done = run_watched([sys.executable, "-c", writer], cwd=str(tmp_path), progress=rec, label="Downloading x==1",
                       timeout=60)
    assert done.returncode == 0 and done.out == "done\n"
    assert rec.events[0] == ("start", None, "Downloading x==1") and rec.events[-1] == ("stop",)
    steps = [e[1] for e in rec.events if e[0] == "advance"]
    assert len(steps) >= 3  # seen growing, not only at the end
    assert sum(steps) <= 600_000 and sum(steps) >= 300_000


def test_download_timeout_kills_the_command(tmp_path):
    import pytest

    from cuaudit.inputs.process import BoundExceeded

    rec = Recorder()
    with pytest.raises(BoundExceeded):
        run_watched([sys.executable, "-c", "import time; time.sleep(30)"], cwd=str(tmp_path), progress=rec,
                    label="x", timeout=0.5)
    assert rec.events[-1] == ("stop",)


def test_cli_bar_on_a_terminal_shows_bytes(tmp_path):
    tree = make_tree(tmp_path / "mono", {f"p{i}/pyproject.toml": f'[project]\nname = "p{i}"\n' + "#" * 2000
                                         for i in range(40)})
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["TERM"] = "xterm"
    shown = _run_on_pty(["check", str(tree), "--isolated", "--no-cache", "-j", "1"], env)
    assert "Extracting facts" in shown and "kB" in shown


def test_progress_flag_forces_the_bar_in_ci(tmp_path):
    import subprocess

    tree = make_tree(tmp_path / "mono", {f"p{i}/pyproject.toml": f'[project]\nname = "p{i}"\n' for i in range(40)})
    env = {**os.environ, "CI": "true"}
    quiet = subprocess.run([sys.executable, "-m", "cuaudit", "check", str(tree), "--isolated", "--no-cache"],
                           capture_output=True, text=True, env=env)
    assert "Extracting" not in quiet.stderr
    forced = subprocess.run([sys.executable, "-m", "cuaudit", "check", str(tree), "--isolated", "--no-cache", "--progress"],
                            capture_output=True, text=True, env=env)
    assert "Extracting facts" in forced.stderr
