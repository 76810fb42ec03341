"""Opt-in probes (``--probe``): subprocess runs that import audited code, with a timeout.

One entry point, owned by the engine: :class:`Prober`.  A rule asks for a
probe through ``ctx.probe(kind, **request)``; the prober runs it only when
the user asked for probes on the command line (``config.probe``), each command
in a process group of its own that is killed whole at the timeout
(:func:`cuaudit.inputs.process.run_bounded`), and records a :class:`~cuaudit.model.ProbeRecord` for
every run so reports say what was executed.  Rules never start a process.

Kinds: ``imports`` (``import parent; parent.sub`` in a clean interpreter,
:mod:`cuaudit.probe.imports`), ``capi`` (a Cython consumer imported against
stand-in providers, :mod:`cuaudit.probe.capi`), ``gpu`` (this machine's
compute capabilities from ``nvidia-smi``, :mod:`cuaudit.probe.gpu`).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from cuaudit.config import Config
from cuaudit.model import ProbeRecord


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
