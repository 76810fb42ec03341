"""The ``gpu`` probe: this machine's GPUs' compute capabilities, from ``nvidia-smi``."""

from __future__ import annotations

import re
import shutil
import time

from cuaudit.model import ProbeRecord
from cuaudit.inputs.process import BoundExceeded, run_bounded

COMMAND = ("--query-gpu=compute_cap", "--format=csv,noheader")


def probe_request(*, timeout: float) -> tuple[list[str], list[ProbeRecord]]:
    """Compute capabilities as ``nvidia-smi`` prints them (``8.0``), one per GPU."""
    shown = "nvidia-smi " + " ".join(COMMAND)
    started = time.perf_counter()
    smi = shutil.which("nvidia-smi")
    found: list[str] = []
    if smi is None:
        outcome = "nvidia-smi not found: no GPU to check against"
    else:
        try:
            proc = run_bounded([smi, *COMMAND], timeout=timeout)
            found = [line.strip() for line in proc.out.splitlines() if line.strip()]
            names = ["sm_" + c.replace(".", "") for c in found if re.fullmatch(r"\d+\.\d+", c)]
            outcome = f"exit {proc.returncode}: {', '.join(names) or 'no GPU'}"
        except (OSError, BoundExceeded) as exc:
            outcome = f"failed: {exc}"
    record = ProbeRecord("local GPU compute capability (CU6xx targets)", shown, round(time.perf_counter() - started, 3), outcome)
    return found, [record]
