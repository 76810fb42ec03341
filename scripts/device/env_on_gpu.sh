#!/usr/bin/env bash
# `cuaudit env` on a machine with an NVIDIA GPU and a CUDA Python stack
# (CuPy, PyTorch, cuda-bindings, nvidia-* wheels): the figures docs/inputs.md
# records for this machine, on a GPU machine.
#
# Usage (from the repository root):
#   bash scripts/device/env_on_gpu.sh [PYTHON_OF_THE_CUDA_ENVIRONMENT]
# cuaudit runs from this checkout (src/ on PYTHONPATH) with $CUAUDIT_PYTHON
# (default python3), which needs cuaudit's dependencies (packaging,
# platformdirs, rich, pyelftools, libcst, jinja2); the audited environment is
# only inspected, never imported.
#
# It prints: the GPU and driver, the audited interpreter, two timed runs
# (cold cache, warm cache) with wall time and peak memory, the summary line,
# the number of distributions and members, findings per code, and the report
# text's last 60 lines. Expected: exit status 0 or 1 (never 2), run 2 faster
# than run 1 with facts_cached > 0, and no CU008/CU011 finding.
set -u
PY=${1:-python3}
RUNNER=${CUAUDIT_PYTHON:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export CUAUDIT_CACHE_DIR
CUAUDIT_CACHE_DIR=$(mktemp -d)
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
echo "== GPU"; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>&1 || echo "no nvidia-smi"
echo "== audited interpreter"; "$PY" -S -c "import sys; print(sys.executable, sys.version.split()[0])"
for run in 1 2; do
  /usr/bin/time -f "run $run: %e s wall, %M KB max RSS" \
    "$RUNNER" -m cuaudit env --python "$PY" --format json --output "$OUT/env-$run.json" --quiet
  echo "run $run exit status: $?"
done
"$RUNNER" - "$OUT/env-2.json" "$OUT/env-1.json" <<'PY'
import collections, json, sys
for path in sys.argv[1:]:
    d = json.load(open(path))
    print(path, "stats:", d.get("stats"))
d = json.load(open(sys.argv[1]))
print("distributions:", len(d["inputs"]))
print("findings per code:", dict(sorted(collections.Counter(f["code"] for f in d["findings"]).items())))
PY
echo "== text report (last 60 lines)"
"$RUNNER" -m cuaudit env --python "$PY" --color never --quiet | tail -60
