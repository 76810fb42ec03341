#!/usr/bin/env python3
"""One command's wall time, CPU and peak memory as the benchmarks take them (``benchmarks/harness.measure``):
the largest process's ``ru_maxrss`` and the sampled peak of the whole process tree's summed PSS (a forked
child's pages shared with the parent counted once).

    python scripts/peak.py LABEL -- cmd args...
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))

from harness import measure  # noqa: E402


def main(argv: list[str]) -> int:
    label, cmd = argv[0], argv[argv.index("--") + 1:]
    s = measure(cmd, dict(os.environ), 900, False)
    print(f"{label}: {s.wall:.2f} s wall, {s.cpu:.1f} s cpu, tree PSS peak {s.tree_mb:.0f} MB "
          f"(anon {s.anon_mb:.0f} MB), largest process {s.maxrss_mb:.0f} MB, rc {s.rc}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
