#!/usr/bin/env bash
# One GPU-machine session of measurements (run from the repository root; no network there):
#   1. `cuaudit env` of the machine's CUDA Python environment: cold cache, cached (the snapshot reused),
#      cached facts without the snapshot, peak memory, findings per code;
#   2. `cuaudit libs --env --gpu-only` (every GPU library an import loads, with where it resolves).
# cuaudit's own dependencies travel as wheels in .whl/ (installed into /tmp/site); cuaudit runs from src/
# through sys.path, never PYTHONPATH, so the audited interpreter sees its own environment only.
# Outputs under $OUT: env-cold.json, env-cached.json, env-facts-cached.json, env.txt, libs.txt, timings.txt.
set -u
OUT=${OUT:-/tmp/gpu_session_out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
fi
unset PYTHONPATH
# The device sets PYTHONDONTWRITEBYTECODE=1: every run would compile cuaudit's modules from source
# (about 0.1 s of a cached run) where an installed cuaudit has its bytecode.  Users' runs write it.
unset PYTHONDONTWRITEBYTECODE
export CUAUDIT_CACHE_DIR=/tmp/cuaudit-cache; rm -rf "$CUAUDIT_CACHE_DIR"
CU=($PY -c "import sys; sys.path[:0] = ['$PWD/src', '/tmp/site']; sys.argv[0] = 'cuaudit'; from cuaudit.cli import entry; entry()")
echo "== machine"; nvidia-smi -L; $PY -c 'import sys; print(sys.version.split()[0])'; nproc; date -u
t() { /usr/bin/time -f "%e s wall, %U s user, %S s sys, %M KB max RSS" -o "$OUT/t.txt" "$@"; local rc=$?; echo "$* -> rc=$rc $(cat "$OUT/t.txt")" | sed "s|$PWD|.|g" | cut -c1-400 | tee -a "$OUT/timings.txt"; }
t "${CU[@]}" env -q --format json -o "$OUT/env-cold.json" --exit-zero
t "${CU[@]}" env -q --format json -o "$OUT/env-cached.json" --exit-zero
t "${CU[@]}" env -q --format json -o "$OUT/env-cached.json" --exit-zero
t "${CU[@]}" env -q --format json -o "$OUT/env-cached.json" --exit-zero
# the same with the fact cache only: the environment snapshot (src/cuaudit/snapshot.py) dropped,
# as after any change to one installed file
$PY -c "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute(\"DELETE FROM facts WHERE key LIKE 'snapshot:%'\"); db.commit()" "$CUAUDIT_CACHE_DIR/facts.sqlite3"
t "${CU[@]}" env -q --format json -o "$OUT/env-facts-cached.json" --exit-zero
t "${CU[@]}" env -q --color never --statistics --exit-zero > "$OUT/env.txt"
t "${CU[@]}" libs --env --gpu-only > "$OUT/libs.txt"
$PY scripts/device/compare_reports.py "$OUT/env-cold.json" "$OUT/env-cached.json" "$OUT/env-facts-cached.json"
head -c 3000 "$OUT/env.txt"; echo; tail -25 "$OUT/env.txt"
