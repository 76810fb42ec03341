#!/usr/bin/env bash
# One GPU-machine session of measurements (run from the repository root; no network there):
#   1. `cuaudit env` of the machine's CUDA Python environment: cold cache, cached (the snapshot reused),
#      cached facts without the snapshot, peak memory, findings per code;
#   2. `cuaudit libs --env --gpu-only` (every GPU library an import loads, with where it resolves).
# Set-up (wheels, the command line, timing) from _env.sh.
# Outputs under $OUT: env-cold.json, env-cached.json, env-facts-cached.json, env.txt, libs.txt, timings.txt.
set -u
OUT=${OUT:-/tmp/gpu_session_out}
. "$(dirname "$0")/_env.sh"
install_wheels || exit 1
export CUAUDIT_CACHE_DIR=/tmp/cuaudit-cache; rm -rf "$CUAUDIT_CACHE_DIR"
machine
t "${CU[@]}" env -q --format json -o "$OUT/env-cold.json" --exit-zero
t "${CU[@]}" env -q --format json -o "$OUT/env-cached.json" --exit-zero
t "${CU[@]}" env -q --format json -o "$OUT/env-cached.json" --exit-zero
t "${CU[@]}" env -q --format json -o "$OUT/env-cached.json" --exit-zero
drop_snapshot "$CUAUDIT_CACHE_DIR"
t "${CU[@]}" env -q --format json -o "$OUT/env-facts-cached.json" --exit-zero
t "${CU[@]}" env -q --color never --statistics --exit-zero > "$OUT/env.txt"
t "${CU[@]}" libs --env --gpu-only > "$OUT/libs.txt"
$PY scripts/device/compare_reports.py "$OUT/env-cold.json" "$OUT/env-cached.json" "$OUT/env-facts-cached.json"
head -c 3000 "$OUT/env.txt"; echo; tail -25 "$OUT/env.txt"
