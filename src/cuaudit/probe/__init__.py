"""Opt-in probes (``--probe``): subprocess runs that import audited code, with a timeout.

One entry point, owned by the engine: :class:`Prober`.  A rule asks for a
probe through ``ctx.probe(kind, **request)``; the prober runs it only when
the user asked for probes on the command line (``config.probe``), each command
in a process group of its own that is killed whole at the timeout
(:func:`run_command`), and records a :class:`~cuaudit.model.ProbeRecord` for
every run so reports say what was executed.  Rules never start a process.

Kinds: ``imports`` (``import parent; parent.sub`` in a clean interpreter,
:mod:`cuaudit.probe.imports`), ``capi`` (a Cython consumer imported against
stand-in providers, :mod:`cuaudit.probe.capi`), ``gpu`` (this machine's
compute capabilities from ``nvidia-smi``, :mod:`cuaudit.probe.gpu`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from cuaudit.config import Config
from cuaudit.model import ProbeRecord


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


#: kind -> handler(timeout=..., **request) -> (result, [ProbeRecord])
Handler = Callable[..., "tuple[Any, list[ProbeRecord]]"]


def _handlers() -> dict[str, Handler]:
    from cuaudit.probe import capi, gpu, imports

    return {"imports": imports.probe_request, "capi": capi.probe_request, "gpu": gpu.probe_request}


class Prober:
    """The engine's one entry point for probes (see the module docstring)."""

    def __init__(self, config: Config, records: list[ProbeRecord]) -> None:
        self.config = config
        self.records = records

    @property
    def enabled(self) -> bool:
        return bool(self.config.probe)

    def __call__(self, kind: str, **request: Any) -> Any | None:
        """The probe's result, or None when probes are off (the default)."""
        if not self.enabled:
            return None
        handler = _handlers()[kind]
        started = time.perf_counter()
        result, records = handler(timeout=self.config.probe_timeout, **request)
        if not records:
            records = [ProbeRecord(kind, "", round(time.perf_counter() - started, 3), "nothing run")]
        self.records.extend(records)
        return result
