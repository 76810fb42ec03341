"""Running a program cuaudit was told to run (an interpreter named with ``--python``), with bounds.

The program may hang, fork children that outlive it, or print without end.
It runs in a session (and so a process group) of its own; at the deadline,
past the output cap, or once it has exited, the whole group is killed, so
that no child (a ``sleep`` it started, a daemon holding the pipe) survives
cuaudit.  Its output is read as it comes, never more than ``max_output``.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass

from cuaudit.inputs.budgets import budget

#: the most bytes of stdout plus stderr read from one run
MAX_OUTPUT = budget("PROCESS_OUTPUT")


class BoundExceeded(Exception):
    """The program ran past its deadline or printed more than allowed (it was killed)."""


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: bytes
    stderr: bytes


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_bounded(argv: list[str], *, timeout: float, max_output: int = MAX_OUTPUT, cwd: str | None = None,
                env: dict[str, str] | None = None) -> Completed:
    """Run ``argv`` with no stdin; its whole process group is gone when this returns or raises."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=cwd, env=env, start_new_session=True)
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    out = {out_fd: bytearray(), err_fd: bytearray()}
    deadline = time.monotonic() + timeout
    try:
        with selectors.DefaultSelector() as sel:
            for fd in out:
                sel.register(fd, selectors.EVENT_READ)
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BoundExceeded(f"no answer within {timeout:g} s")
                for key, _ in sel.select(min(left, 0.2)):
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        sel.unregister(key.fd)
                        continue
                    out[key.fd] += chunk
                    if sum(len(b) for b in out.values()) > max_output:
                        raise BoundExceeded(f"printed more than {max_output} bytes")
                if proc.poll() is not None:
                    _kill_group(proc.pid)  # children holding the pipes open end with it
        returncode = proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
    except subprocess.TimeoutExpired:
        raise BoundExceeded(f"no answer within {timeout:g} s") from None
    finally:
        _kill_group(proc.pid)
        proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    return Completed(returncode, bytes(out[out_fd]), bytes(out[err_fd]))
