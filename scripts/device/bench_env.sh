#!/usr/bin/env bash
# `cuaudit env` on a machine with an NVIDIA GPU and the full CUDA Python stack
# (issue 8: "one run on a machine with an NVIDIA GPU ... cuaudit env there,
# cold and cached").  Writes the `gpu` section of benchmarks/RESULTS.md and
# benchmarks/out/gpu.json.
#
#   scripts/device/bench_env.sh [PYTHON_OF_THE_CUDA_ENVIRONMENT]
#
# PYTHON_OF_THE_CUDA_ENVIRONMENT: the interpreter whose environment holds the
# CUDA Python packages (torch, cupy, cuda-python/cuda-bindings, nvidia-* ...);
# default: python3 on PATH.  cuaudit itself runs from CUAUDIT_PY (default
# .venv/bin/python, which needs `pip install -e '.[bench]'`).  Nothing here
# imports the audited packages: `cuaudit env` reads them from disk.
#
# What it prints: the machine header (the GPU name and driver from nvidia-smi),
# then rows `env-here-cold` and `env-here-cached` with the median wall time of
# `cuaudit env` over 5 alternating runs, its peak memory, and the floors (raw
# read of the environment's ELF/Python/metadata files; stat of every file);
# then the targets: cold <= 10 s, cached <= 1 s, each "met" or "MISSED".
#
# The working tree's code is what runs (PYTHONPATH=src).  PROFILE=1 also writes a
# CPU profile of one cached run to benchmarks/out/gpu-env-cached.prof and prints its
# top functions (read it with `python -m pstats`).
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGET_PY=${1:-$(command -v python3)}
CUAUDIT_PY=${CUAUDIT_PY:-.venv/bin/python}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p benchmarks/out
echo "environment audited: $TARGET_PY ($("$TARGET_PY" -c 'import sys; print(sys.prefix)'))"
"$TARGET_PY" -m pip list --format=freeze 2>/dev/null | grep -iE '^(torch|cupy|cuda|nvidia|numpy|rmm|jax)' || true
CUAUDIT_BENCH_PYTHON="$TARGET_PY" "$CUAUDIT_PY" benchmarks/run.py --cases "env-here-*" --repeat "${REPEAT:-5}" \
  --json benchmarks/out/gpu.json --write-results gpu --note "GPU machine, environment of $TARGET_PY"
if [ "${PROFILE:-0}" = 1 ]; then
  "$CUAUDIT_PY" -m cuaudit env --python "$TARGET_PY" --isolated -q --exit-zero >/dev/null  # fills the cache
  "$CUAUDIT_PY" -c 'import cProfile, pstats, sys, time
from cuaudit.cli import main
p = cProfile.Profile(time.thread_time)
p.runcall(main, ["env", "--python", sys.argv[1], "--isolated", "-q", "--exit-zero"])
p.dump_stats("benchmarks/out/gpu-env-cached.prof")
pstats.Stats(p, stream=sys.stderr).sort_stats("cumulative").print_stats(30)' "$TARGET_PY" >/dev/null
fi
