#!/usr/bin/env python3
"""Overhead of ``cuaudit trace`` on NumPy-heavy scripts (one run, ratios printed; best of --repeat runs).

Each workload is a script that times its own compute section and prints it.
First columns: the compute section, plain vs rewritten by the tracer, run
alternately in this interpreter (the tracer's own cost, without process
start-up noise).  Last columns: whole processes, ``python script.py`` vs
``cuaudit trace -- python script.py`` (adds cuaudit's start-up, the
subprocess and the report).  Target: under 2x when no scalar operands occur.

    python benchmarks/bench_trace.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

WORKLOADS = {
    # array-array arithmetic on mid-size arrays: what numerical code mostly does
    "arrays-1e4": """
import numpy as np, time
rng = np.random.default_rng(0)
a = rng.random(10_000, dtype=np.float32); b = rng.random(10_000, dtype=np.float32)
t = time.perf_counter()
for i in range(3000):
    c = a * b + a - b
    d = np.sqrt(c * c + b * b) / (a + b)
    a, b = d, c
print("compute", time.perf_counter() - t)
""",
    # the worst case for per-operation overhead: tiny arrays, no scalars
    "arrays-10": """
import numpy as np, time
a = np.ones(10, np.float64); b = np.ones(10, np.float64)
t = time.perf_counter()
for i in range(100_000):
    c = a * b + a - b
print("compute", time.perf_counter() - t)
""",
    # scalar operands everywhere: every operation goes through the legacy model
    "scalars-1e4": """
import numpy as np, time
a = np.ones(10_000, np.float32)
t = time.perf_counter()
for i in range(3000):
    c = a * 2.0 + 1
    d = (c - 0.5) / 3
print("compute", time.perf_counter() - t)
""",
    # pure-Python arithmetic in the traced module (not NumPy)
    "python-ints": """
import time
t = time.perf_counter()
s = 0
for i in range(1_000_000):
    s = s + i * 2 - 1
print("compute", time.perf_counter() - t)
""",
}


def run(cmd: list[str], cwd: str) -> tuple[float, float]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    out = proc.stdout + proc.stderr
    m = re.search(r"compute ([0-9.eE+-]+)", out)
    if proc.returncode not in (0, 1) or not m:
        raise RuntimeError(f"{cmd} failed: {out[-500:]}")
    return float(m.group(1)), wall


def in_process(source: str, name: str, repeat: int) -> tuple[float, float]:
    """Best compute time of the plain and the rewritten code, alternating, in this interpreter."""
    import contextlib
    import io

    from cuaudit.trace import runtime
    from cuaudit.trace.rewrite import compile_traced

    runtime.install_builtins()
    plain = compile(source, name, "exec")
    traced = compile_traced(source, name, runtime.SITES)
    best = {"plain": float("inf"), "traced": float("inf")}
    for _ in range(repeat):
        for key, code in (("plain", plain), ("traced", traced)):
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                exec(code, {"__name__": "__main__"})
            best[key] = min(best[key], float(buf.getvalue().split()[1]))
    return best["plain"], best["traced"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    cuaudit = [sys.executable, "-c", "import sys; from cuaudit.cli import main; sys.exit(main(sys.argv[1:]))"]
    import numpy

    print(f"NumPy {numpy.__version__}, Python {sys.version.split()[0]}, best of {args.repeat}")
    print(f"{'workload':<14}{'plain s':>10}{'traced s':>10}{'ratio':>8}   {'process: plain s':>16}{'traced s':>10}{'ratio':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, source in WORKLOADS.items():
            path = os.path.join(tmp, f"{name.replace('-', '_')}.py")
            with open(path, "w") as fh:
                fh.write(source)
            plain = [run([sys.executable, path], tmp) for _ in range(args.repeat)]
            traced = [run([*cuaudit, "trace", "--no-cache", "-q", "-f", "json", "-o", os.devnull, "--exit-zero", "--",
                           sys.executable, path], tmp) for _ in range(args.repeat)]
            p, t = in_process(source, name, args.repeat)
            pw = min(x[1] for x in plain)
            tw = min(x[1] for x in traced)
            print(f"{name:<14}{p:>10.3f}{t:>10.3f}{t / p:>7.2f}x   {pw:>16.2f}{tw:>10.2f}{tw / pw:>7.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
