#!/usr/bin/env bash
# Survey throughput against the number of Dask workers, from wheels already on disk
# (issue 16: "throughput (releases/min, bytes/s) against the number of workers").
# No network: the releases come from WHEELDIR (`cuaudit survey --wheelhouse`), so this
# runs on the GPU machine, which has none.
#
#   bash scripts/device/survey_scale.sh WHEELDIR [WORKER_COUNTS]
#
# WHEELDIR: a folder of wheels, e.g. a copy of ~/.cache/cuaudit/survey/wheels after
#   `cuaudit survey docs/survey-cuda.toml` (every package found there is surveyed,
#   every release of it).
# WORKER_COUNTS: space-separated, default "1 2 4 8 16" (capped at the CPUs).
# cuaudit runs from this checkout (src/ on PYTHONPATH) with $CUAUDIT_PYTHON (default
# python3), which needs cuaudit's dependencies and dask[distributed] (`pip install
# -e '.[survey]'`).
#
# Each count runs cold: a fresh fact cache and a fresh survey database, so every
# release is audited (reading the wheel, not the cache).  It prints one markdown row
# per count: workers, releases, GB, wall s, releases/min, MB/s, CPU s (user+sys of
# the whole process tree) and CPU use (CPU s / wall s: near the worker count when
# CPU-bound), and writes the rows and each run's JSON report to $OUT (default a
# temporary folder).
set -euo pipefail
WHEELDIR=$(cd "${1:?usage: survey_scale.sh WHEELDIR [WORKER_COUNTS]}" && pwd)
COUNTS=${2:-"1 2 4 8 16"}
PY=${CUAUDIT_PYTHON:-python3}
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
CPUS=$("$PY" -c "import os; print(len(os.sched_getaffinity(0)))")
SPEC="$OUT/spec.toml"
"$PY" - "$WHEELDIR" > "$SPEC" <<'EOF'
import os, sys
from packaging.utils import canonicalize_name, parse_wheel_filename
names = sorted({canonicalize_name(parse_wheel_filename(f)[0]) for f in os.listdir(sys.argv[1]) if f.endswith(".whl")})
print("[packages]")
for n in names:
    print(f'"{n}" = {{ versions = ">=0", prereleases = true }}')
EOF
echo "machine: $(uname -n), $CPUS CPUs, $(nproc --all) online; wheels: $(ls "$WHEELDIR"/*.whl | wc -l) in $WHEELDIR ($(du -shL "$WHEELDIR" | cut -f1))"
echo "| workers | releases | GB | wall s | releases/min | MB/s | CPU s | CPU use |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in $COUNTS; do
  if [ "$n" -gt "$CPUS" ]; then continue; fi
  run="$OUT/w$n"
  rm -rf "$run"; mkdir -p "$run"
  # a cold run: its own fact cache and database
  CUAUDIT_CACHE_DIR="$run/cache" /usr/bin/time -f "%e %U %S" -o "$run/time" \
    "$PY" -m cuaudit survey "$SPEC" --wheelhouse "$WHEELDIR" --workers "$n" --db "$run/survey.sqlite3" \
    --format json -q -o "$run/report.json" || true
  "$PY" - "$run" "$n" <<'EOF' | tee -a "$OUT/rows.md"
import json, sys
run, n = sys.argv[1], sys.argv[2]
doc = json.load(open(f"{run}/report.json"))
r = doc["run"] or {}
wall, user, sys_ = (float(x) for x in open(f"{run}/time").read().split()[-3:])
gb = r.get("bytes_audited", 0) / 1e9
print(f"| {n} | {r.get('releases', 0)} | {gb:.2f} | {r.get('wall_seconds', 0):.1f} | {r.get('releases_per_minute', 0):.1f} "
      f"| {r.get('bytes_per_second', 0) / 1e6:.1f} | {user + sys_:.0f} | {(user + sys_) / max(wall, 1e-9):.2f} |")
EOF
done
echo "rows and reports: $OUT"
