"""A part of the audit finished in a forked child while the parent goes on (``rule_run.RuleRun``).

The parent forks at a point where the child has everything it needs in memory; the child
computes, sends back one pickled result through a pipe and ends with ``os._exit`` (nothing of
the parent's stack unwinds in it: no ``finally`` of the audit, no worker pool shut down, no
cache written).  The parent reads the result when it needs it (:meth:`Forked.result`); a
child that failed or died gives None, and the parent computes the part itself.  Nothing here
knows what the part is.
"""

from __future__ import annotations

import os
import pickle
import signal
import warnings
from typing import Any, Callable


class Forked:
    """One forked child and the pipe its result comes through (the parent's side)."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid = pid
        self._fd = fd

    def result(self, timeout: float = 600.0) -> Any | None:
        """The child's result (waiting for it), or None if it failed, died, sent nothing whole or
        sent nothing for ``timeout`` seconds (it is then ended: a child that hangs never hangs the audit)."""
        import select

        chunks = []
        try:
            while True:
                ready, _, _ = select.select([self._fd], [], [], timeout)
                if not ready:
                    self.kill()
                    return None
                chunk = os.read(self._fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            try:
                os.close(self._fd)
            except OSError:
                pass
        try:
            _pid, status = os.waitpid(self.pid, 0)
        except ChildProcessError:  # reaped already (a host application that ignores SIGCHLD): what came is whole or not
            status = 0
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0 or not chunks:
            return None
        try:
            return pickle.loads(b"".join(chunks))
        except Exception:  # noqa: BLE001 - a result cut short: computed again by the parent
            return None

    def kill(self) -> None:
        """End the child now (the audit failed or was interrupted): no child outlives it."""
        try:
            os.close(self._fd)
        except OSError:
            pass
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except OSError:  # gone already (ChildProcessError: reaped)
            pass


def fork() -> tuple[Forked | None, Callable[[Any], None] | None]:
    """Fork: (the child's handle, None) in the parent; (None, ``send``) in the child, where
    ``send(result)`` pickles the result to the parent and ends the child (``send(None)`` ends it
    as failed).  (None, None) where the platform cannot fork."""
    if not hasattr(os, "fork"):
        return None, None
    read, write = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns on every fork of a process that runs threads: the audit's worker pool
        # runs its manager thread (and a progress bar its own).  The child uses nothing those threads
        # hold (no pool, no queue, no output, its own cache connection) and ends with os._exit.
        warnings.filterwarnings("ignore", message=r"This process .* is multi-threaded", category=DeprecationWarning)
        pid = os.fork()
    if pid:
        os.close(write)
        return Forked(pid, read), None
    os.close(read)

    def send(result: Any) -> None:
        code = 1
        try:
            if result is not None:
                data = memoryview(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
                while data:
                    data = data[os.write(write, data):]
                code = 0
        except BaseException:  # noqa: BLE001 - the parent then computes it itself
            code = 1
        finally:
            os._exit(code)

    return None, send
