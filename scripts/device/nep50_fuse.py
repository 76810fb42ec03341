#!/usr/bin/env python3
"""Run the NEP 50 seed kernel on a GPU and print what cuaudit says about it.

For the lead, on a machine with an NVIDIA GPU, once per CuPy version::

    python -m venv /tmp/v133 && /tmp/v133/bin/pip install --no-deps \\
        cupy_cuda12x-13.3.0-*.whl numpy-2.0.2-*.whl fastrlock-0.8.3-*.whl
    /tmp/v133/bin/pip install packaging            # all cuaudit's CU401 path needs besides the stdlib
    /tmp/v133/bin/python scripts/device/nep50_fuse.py

    (the same with cupy_cuda12x-13.4.1-*.whl in /tmp/v1341)

Run from the repository root (cuaudit is imported from ./src).  It prints, one
``KEY: value`` per line:

* ``python``, ``numpy``, ``cupy``, ``cuda_runtime``, ``gpu``;
* ``seed_kernel``: ``RAISED TypeError: ...`` (expected with 13.3.0 + NumPy 2) or
  ``OK dtype=float32 value=1.0000000...`` (expected with 13.4.1);
* ``cspline1d``: the same for ``cupyx.scipy.signal.cspline1d(x, lamb=0.5)``, whose
  fused helpers in CuPy itself (``_coeff_smooth``, ``_hc``, ``_hs``) cuaudit flags;
* ``cuaudit_seed``: cuaudit's CU401 finding on the seed file with this interpreter's
  environment (expected ``error`` with 13.3.0, ``info`` with 13.4.1), then
  ``cuaudit_cupy_internal``: how many CU401 findings in the installed CuPy itself.

Exit status 0 whatever happened (the outcome is the output).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEED = """\
import cupy


@cupy.fuse()
def f(mu, dt, delta_phi):
    return 1 + mu * dt * delta_phi
"""


def line(key: str, value: object) -> None:
    print(f"{key}: {value}", flush=True)


def run_seed() -> None:
    import cupy as cp

    # the reproducer of cupy/cupy#8536 (found by cuCIM's test suite)
    delta_phi = cp.full((10, 10), 9.999999e-7, dtype=cp.float32)
    dt = cp.asarray(0.5, dtype=cp.float32)
    mu = cp.asarray(0.1, dtype=cp.float32)

    @cp.fuse()
    def f(mu, dt, delta_phi):
        return 1 + mu * dt * delta_phi

    try:
        out = f(mu, dt, delta_phi)
        cp.cuda.Device().synchronize()
        line("seed_kernel", f"OK dtype={out.dtype} value={float(out[0, 0])!r}")
    except Exception as exc:  # noqa: BLE001 - the outcome is what we report
        line("seed_kernel", f"RAISED {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        tb = traceback.extract_tb(exc.__traceback__)
        line("seed_kernel_raised_at", " <- ".join(f"{os.path.basename(t.filename)}:{t.lineno}" for t in tb[-3:]))


def run_cspline() -> None:
    import cupy as cp

    try:
        from cupyx.scipy.signal import cspline1d

        out = cspline1d(cp.arange(16, dtype=cp.float32), 0.5)
        cp.cuda.Device().synchronize()
        line("cspline1d", f"OK dtype={out.dtype}")
    except Exception as exc:  # noqa: BLE001
        line("cspline1d", f"RAISED {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")


def run_cuaudit() -> None:
    sys.path.insert(0, os.path.join(REPO, "src"))
    try:
        from cuaudit import audit
        from cuaudit.config import Config
        from cuaudit.model import ArtifactKind
    except Exception as exc:  # noqa: BLE001
        line("cuaudit_seed", f"cuaudit not importable ({exc}); pip install packaging rich platformdirs pyelftools")
        return
    with tempfile.TemporaryDirectory() as tmp:
        seed = os.path.join(tmp, "seed_kernel.py")
        with open(seed, "w") as fh:
            fh.write(SEED)
        started = time.perf_counter()
        report = audit([seed], env=sys.executable,
                       config=Config(select=("CU401",), cache_dir=os.path.join(tmp, "cache")))
        seconds = time.perf_counter() - started
    mine = [f for f in report.findings if f.location.artifact.kind is ArtifactKind.FILE]
    for f in mine:
        line("cuaudit_seed", f"{f.code} {f.severity} line {f.location.line}:{f.location.column} {f.message}")
    if not mine:
        line("cuaudit_seed", "no finding (unexpected)")
    internal = [f for f in report.findings if f.location.artifact.name.startswith("cupy")]
    members = sorted({f.location.member for f in internal})
    line("cuaudit_cupy_internal", f"{len(internal)} CU401 findings in {members} "
         f"({', '.join(sorted({str(f.severity) for f in internal})) or '-'})")
    line("cuaudit_seconds", f"{seconds:.1f}")
    line("cuaudit_json", json.dumps([{"code": f.code, "severity": str(f.severity), "line": f.location.line,
                                      "message": f.message} for f in mine]))


def main() -> int:
    line("python", sys.version.split()[0])
    try:
        import numpy

        line("numpy", numpy.__version__)
    except Exception as exc:  # noqa: BLE001
        line("numpy", f"not importable: {exc}")
    try:
        import cupy

        line("cupy", cupy.__version__)
        try:
            line("cuda_runtime", cupy.cuda.runtime.runtimeGetVersion())
            props = cupy.cuda.runtime.getDeviceProperties(0)
            line("gpu", props["name"].decode() if isinstance(props["name"], bytes) else props["name"])
        except Exception as exc:  # noqa: BLE001
            line("gpu", f"unavailable: {exc}")
        run_seed()
        run_cspline()
    except Exception as exc:  # noqa: BLE001
        line("cupy", f"not importable: {type(exc).__name__}: {exc}")
    run_cuaudit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
