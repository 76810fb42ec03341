#!/usr/bin/env python3
"""Run the whole test suite on every supported Python this machine has (3.10 to 3.13).

    python3 scripts/run_tests.py [PYTEST ARGS...]

For each interpreter: a virtual environment in ``.venv-3.X`` with
``pip install -e '.[test]'``, then ``python -m pytest -n 2``.  An interpreter
that is absent is skipped with a printed reason, never silently; at least one
must run.  pytest's exit 5 ("no tests collected") fails the run.  This is
exactly what CI runs (``.ci/run``).

Interpreters are found as ``python3.X`` on PATH, then under pyenv's
versions folder (``$PYENV_ROOT`` or ``~/.pyenv``).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

SUPPORTED = ("3.10", "3.11", "3.12", "3.13")
REPO = Path(__file__).resolve().parent.parent


def runs(python: str, version: str) -> bool:
    try:
        out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.strip() == version


def find_python(version: str) -> str | None:
    candidates = [shutil.which(f"python{version}")]
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates += sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", f"python{version}")), reverse=True)
    if sys.version_info[:2] == tuple(int(x) for x in version.split(".")):
        candidates.insert(0, sys.executable)
    for c in candidates:
        if c and runs(c, version):
            return c
    return None


def main(argv: list[str]) -> int:
    results: list[tuple[str, str]] = []
    for version in SUPPORTED:
        python = find_python(version)
        if python is None:
            print(f"== Python {version}: skipped, no python{version} on PATH or under pyenv", flush=True)
            results.append((version, "skipped (absent)"))
            continue
        venv = REPO / f".venv-{version}"
        print(f"== Python {version}: {python} -> {venv.name}", flush=True)
        started = time.monotonic()
        vpy = venv / "bin" / "python"
        if not vpy.exists():
            subprocess.run([python, "-m", "venv", str(venv)], check=True)
        install = subprocess.run([str(vpy), "-m", "pip", "install", "-q", "-e", f"{REPO}[test]"], cwd=REPO)
        if install.returncode != 0:
            results.append((version, f"FAILED: pip install exited {install.returncode}"))
            continue
        rc = subprocess.run([str(vpy), "-m", "pytest", "-n", "2", *argv], cwd=REPO).returncode
        took = time.monotonic() - started
        if rc == 5:
            results.append((version, "FAILED: pytest collected no tests (exit 5)"))
        else:
            results.append((version, "passed" if rc == 0 else f"FAILED: pytest exited {rc}") )
        results[-1] = (version, f"{results[-1][1]} in {took:.0f} s")
    print("== summary")
    for version, outcome in results:
        print(f"   Python {version}: {outcome}")
    ran = [o for _, o in results if not o.startswith("skipped")]
    if not ran:
        print("no supported Python found: nothing was tested", file=sys.stderr)
        return 1
    return 0 if all(o.startswith("passed") for o in ran) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
