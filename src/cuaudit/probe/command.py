"""How every probe starts a process: its own process group, stdin closed, a timeout."""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: bytes
    stderr: bytes


def run_command(argv: Sequence[str], *, timeout: float, env: dict[str, str] | None = None) -> Completed:
    """Run one probe command, stdin closed, in a new process group.

    On timeout the whole group is killed (an imported package may have started
    helpers of its own) and :class:`subprocess.TimeoutExpired` is raised.
    """
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        raise
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    return Completed(proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        proc.kill()
