"""Every program cuaudit starts runs here, with bounds (``tests/test_layering.py`` checks no other module starts one).

The programs: an interpreter named with ``--python``, a probe's interpreter
(``--probe``), ``nvidia-smi``, pip (``--index`` downloads), the program
``trace`` runs.  Any of them may hang, fork children that outlive it, or
print without end.  Each runs in a session (and so a process group) of its
own; at the deadline, past the output cap, or once it has exited, the whole
group is killed, so that no child (a ``sleep`` it started, a daemon holding
the pipe) survives cuaudit.  Its output is read as it comes, never more than
``max_output``.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from cuaudit.inputs.budgets import budget

#: the most bytes of stdout plus stderr read from one run
MAX_OUTPUT = budget("PROCESS_OUTPUT")
#: how often ``tick`` is called while a program runs
TICK_SECONDS = 0.2


class BoundExceeded(Exception):
    """The program ran past its deadline (``timed_out``) or printed more than allowed (it was killed)."""

    def __init__(self, message: str, *, timed_out: bool) -> None:
        super().__init__(message)
        self.timed_out = timed_out


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_bounded(argv: Sequence[str], *, timeout: float, max_output: int = MAX_OUTPUT, cwd: str | None = None,
                env: dict[str, str] | None = None, relay: tuple[int, int] | None = None,
                tick: Callable[[], None] | None = None) -> Completed:
    """Run ``argv`` with no stdin; its whole process group is gone when this returns or raises.

    ``relay``: file descriptors the program's stdout and stderr go to unread
    (``trace``: the program the user runs, printing to the user's terminal);
    the result's output is then empty.  ``tick`` is called every
    ``TICK_SECONDS`` while it runs (a progress bar).  OSError when it cannot
    start, :class:`BoundExceeded` past ``timeout`` seconds or ``max_output`` bytes.
    """
    pipe = subprocess.PIPE
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=relay[0] if relay else pipe,
                            stderr=relay[1] if relay else pipe, cwd=cwd, env=env, start_new_session=True)
    try:
        if relay:
            return Completed(_wait(proc, time.monotonic() + timeout, timeout, tick), b"", b"")
        return _read(proc, timeout, max_output, tick)
    finally:
        _kill_group(proc.pid)
        proc.kill()
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _wait(proc: subprocess.Popen[Any], deadline: float, timeout: float, tick: Callable[[], None] | None) -> int:
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise BoundExceeded(f"no answer within {timeout:g} s", timed_out=True)
        try:
            return proc.wait(timeout=min(left, TICK_SECONDS))
        except subprocess.TimeoutExpired:
            if tick is not None:
                tick()


def _read(proc: subprocess.Popen[Any], timeout: float, max_output: int, tick: Callable[[], None] | None) -> Completed:
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()  # type: ignore[union-attr]
    out = {out_fd: bytearray(), err_fd: bytearray()}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        for fd in out:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise BoundExceeded(f"no answer within {timeout:g} s", timed_out=True)
            for key, _ in sel.select(min(left, TICK_SECONDS)):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                out[key.fd] += chunk
                if sum(len(b) for b in out.values()) > max_output:
                    raise BoundExceeded(f"printed more than {max_output} bytes", timed_out=False)
            if proc.poll() is not None:
                _kill_group(proc.pid)  # children holding the pipes open end with it
            elif tick is not None:
                tick()
    returncode = _wait(proc, deadline, timeout, tick)
    return Completed(returncode, bytes(out[out_fd]), bytes(out[err_fd]))


def run_watched(argv: Sequence[str], *, cwd: str, progress: Any, label: str, timeout: float) -> Completed:
    """:func:`run_bounded` in ``cwd`` with ``TMPDIR`` = ``cwd``, showing the bytes written under ``cwd``.

    pip downloads into its temporary folder, so with ``TMPDIR`` pointing at a
    scratch folder of the caller, the folder's size is the download so far.
    """
    from cuaudit.store import tree_size

    seen = 0

    def advance() -> None:
        nonlocal seen
        now = tree_size(cwd)
        if now > seen:
            progress.advance(now - seen)
            seen = now

    progress.start(None, label)
    try:
        return run_bounded(argv, timeout=timeout, cwd=cwd, env={**os.environ, "TMPDIR": cwd}, tick=advance)
    finally:
        progress.stop()
