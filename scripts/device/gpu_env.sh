#!/usr/bin/env bash
# cuaudit on a machine with an NVIDIA GPU and a real CUDA Python stack (the device tool's image:
# PyTorch, CuPy 14, cuda-bindings, numba-cuda, JAX, nvidia-* wheels).  Nothing can be fetched there:
# cuaudit's own missing dependencies travel as wheels in .whl/ (see docs/gpu-run.md).
# Writes under $OUT: env.txt / env.json (cold), env-cached.json, libs.txt, timings.txt.
set -u
OUT=${OUT:-/tmp/gpu_env_out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1
export CUAUDIT_CACHE_DIR=/tmp/cuaudit-cache; rm -rf "$CUAUDIT_CACHE_DIR"
CU="$PY -m cuaudit.cli"
echo "== machine"; nvidia-smi -L; $PY -c 'import sys; print(sys.version)'; nproc; date -u
$PY -m pip list 2>/dev/null | grep -iE "^(torch|cupy|cuda-|nvidia-|numba|jax|numpy) " | tr -s ' ' | paste -sd';' | tee "$OUT/versions.txt"
t() { local s=$(date +%s%N); "$@"; local rc=$?; local e=$(date +%s%N); printf "%s rc=%s %d ms\n" "$*" $rc $(( (e - s) / 1000000 )) | tee -a "$OUT/timings.txt" >&2; }
echo "== cuaudit env (cold: empty cache)"
t $CU env -q --format json -o "$OUT/env-cold.json"
echo "== cuaudit env (cached)"
t $CU env -q --format json -o "$OUT/env-cached.json"
t $CU env -q --color never > "$OUT/env.txt"
echo "== cuaudit libs --env --gpu-only"
t $CU libs --env --gpu-only --no-cache > "$OUT/libs.txt"
head -c 6000 "$OUT/env.txt"; echo; tail -5 "$OUT/env.txt"
cat "$OUT/timings.txt"
