"""Submodule traps: the static audit (CU101/CU102) vs importing every package to find out.

Usage::

    python benchmarks/bench_imports.py [PYTHON]

The peer is what people do today: import each package in a fresh
interpreter and try its submodules (here: cuaudit's own ``--probe``, one
clean ``python -I -S`` per package).  Audits the environment of PYTHON
(default: this interpreter) three ways — static without cache, static with a
warm cache, probe only — and prints the times, the ratios and whether both
found the same traps.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time


def main() -> int:
    from cuaudit import audit
    from cuaudit.config import Config

    python = sys.argv[1] if len(sys.argv) > 1 else sys.executable
    os.environ["CUAUDIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="cuaudit-bench-")
    select = ("CU101", "CU102")
    t = time.perf_counter()
    cold = audit([], env=python, config=Config(select=select))
    t_cold = time.perf_counter() - t
    t = time.perf_counter()
    warm = audit([], env=python, config=Config(select=select))
    t_warm = time.perf_counter() - t
    t = time.perf_counter()
    probed = audit([], env=python, config=Config(select=select, probe=True))
    t_probe = time.perf_counter() - t
    probe_only = sum(p.seconds for p in probed.probes)
    static = {f.key for f in warm.findings}
    real = {f.key for f in probed.findings}
    print(f"environment: {python} ({len(cold.artifacts)} distributions, {cold.stats['members']} files)")
    print(f"static, cold cache : {t_cold:7.2f} s  {len(cold.findings)} findings")
    print(f"static, warm cache : {t_warm:7.2f} s")
    print(f"probe (imports)    : {probe_only:7.2f} s  in {len(probed.probes)} interpreters ({t_probe:.2f} s with the audit)")
    print(f"ratio probe/static : cold {probe_only / t_cold:.2f}x, warm {probe_only / t_warm:.2f}x")
    print(f"agreement          : {len(static & real)} both, {len(static - real)} static only, {len(real - static)} probe only")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
