"""Environment inventory: ``cuaudit env`` vs ``pip inspect`` and ``pip list``.

Usage::

    python benchmarks/bench_env.py [--python PYTHON] [--repeat N]

``pip inspect`` is what pip itself offers to describe an environment (every
distribution with its metadata); ``pip list`` the quick look users run
first.  cuaudit does more than both (it lists every installed file, runs the
rule families on what they need) and is measured twice: with an empty fact
cache and with the cache the first run left.  Each tool runs as its own
process against the same interpreter; wall time and peak RSS (``wait4``),
best of ``--repeat`` runs.  Prints one line per tool and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def run(cmd: list[str], env: dict | None = None) -> tuple[float, int, str]:
    """(seconds, peak RSS in bytes, stdout) of one process."""
    out = tempfile.TemporaryFile()
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    out.seek(0)
    return seconds, usage.ru_maxrss * 1024, out.read().decode(errors="replace")


def best(cmd: list[str], repeat: int, env: dict | None = None, fresh=None) -> tuple[float, int, str]:
    results = []
    for _ in range(repeat):
        if fresh:
            fresh()
        results.append(run(cmd, env))
    return min(results, key=lambda r: r[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable, help="interpreter of the environment (default: this one)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    cache = tempfile.mkdtemp(prefix="cuaudit-bench-")
    env = {**os.environ, "CUAUDIT_CACHE_DIR": cache}
    env.pop("CI", None)

    def empty_cache() -> None:
        for name in os.listdir(cache):
            os.remove(os.path.join(cache, name))

    cuaudit = [sys.executable, "-m", "cuaudit", "env", "--python", args.python, "--format", "json", "--quiet",
               "--exit-zero"]
    rows = []
    t, rss, out = best([sys.executable, "-m", "pip", "--python", args.python, "inspect"], args.repeat)
    dists = len(json.loads(out)["installed"]) if out.strip() else "?"
    rows.append(("pip inspect", t, rss, f"{dists} distributions"))
    t, rss, out = best([sys.executable, "-m", "pip", "--python", args.python, "list", "--format", "json"], args.repeat)
    rows.append(("pip list", t, rss, f"{len(json.loads(out)) if out.strip() else '?'} distributions"))
    t, rss, out = best(cuaudit, args.repeat, env, fresh=empty_cache)
    report = json.loads(out)
    rows.append(("cuaudit env (cold cache)", t, rss, f"{report['stats']['artifacts']} distributions, "
                 f"{report['stats']['members']} files, {report['stats']['facts_extracted']} facts extracted, "
                 f"{len(report['findings'])} findings"))
    t, rss, out = best(cuaudit, args.repeat, env)
    report = json.loads(out)
    rows.append(("cuaudit env (warm cache)", t, rss, f"{report['stats']['facts_cached']} facts from the cache"))

    print(f"environment of {args.python}, best of {args.repeat}")
    for name, seconds, peak, what in rows:
        print(f"  {name:<26} {seconds:7.2f} s  {peak / 2**20:7.1f} MiB  {what}")
    base = {name: seconds for name, seconds, _, _ in rows}
    print(f"ratios: cuaudit cold / pip inspect = {base['cuaudit env (cold cache)'] / base['pip inspect']:.2f}; "
          f"cuaudit warm / pip inspect = {base['cuaudit env (warm cache)'] / base['pip inspect']:.2f}; "
          f"cuaudit warm / pip list = {base['cuaudit env (warm cache)'] / base['pip list']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
