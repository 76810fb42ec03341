#!/usr/bin/env bash
# Issue 14 on the GPU machine, one batch: `cuaudit env` of the machine's CUDA Python environment
# cold (with the worker/parent timeline of scripts/timeline.py and peak memory), cached (snapshot),
# cached facts without the snapshot, and cold again with only the content-addressed facts of the
# first run (the rows keyed by identity, the bundles and the snapshot dropped: what a new virtual environment of
# the same packages finds).  cuaudit's dependencies travel as wheels in .whl/; cuaudit runs
# from src/ through sys.path (never PYTHONPATH: the audited interpreter sees its own environment).
# Outputs under $OUT: timings.txt, timeline.txt, env-*.json.
set -u
OUT=${OUT:-/tmp/speed_session_out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
fi
unset PYTHONPATH PYTHONDONTWRITEBYTECODE
export CUAUDIT_CACHE_DIR=/tmp/cuaudit-cache; rm -rf "$CUAUDIT_CACHE_DIR"
CU=($PY -c "import sys; sys.path[:0] = ['$PWD/src', '/tmp/site']; sys.argv[0] = 'cuaudit'; from cuaudit.cli import entry; entry()")
echo "== machine"; nvidia-smi -L; $PY -c 'import sys; print(sys.version.split()[0])'; nproc; date -u; git log -1 --format='%h %s' | cut -c1-100
t() { /usr/bin/time -f "%e s wall, %U s user, %S s sys, %M KB max RSS" -o "$OUT/t.txt" "$@"; local rc=$?; echo "$1 ${*: -3} -> rc=$rc $(cat "$OUT/t.txt")" | cut -c1-300 | tee -a "$OUT/timings.txt"; }
# warm the page cache and cuaudit's own bytecode (not measured)
"${CU[@]}" --version; find "$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" -type f -size -64M -print0 | xargs -0 cat > /dev/null 2>&1
echo "== cold, timeline"
CUAUDIT_SRC=/tmp/site t $PY scripts/timeline.py "$OUT/tl.log" -- env -q --format json -o "$OUT/env-cold.json" --exit-zero
$PY scripts/timeline.py --summary "$OUT/tl.log" > "$OUT/timeline.txt"; head -c 1500 "$OUT/timeline.txt"
echo "== cold, plain"; rm -rf "$CUAUDIT_CACHE_DIR"
t "${CU[@]}" env -q --format json -o "$OUT/env-cold2.json" --exit-zero
echo "== cached"
t "${CU[@]}" env -q --format json -o "$OUT/env-cached.json" --exit-zero
t "${CU[@]}" env -q --format json -o "$OUT/env-cached.json" --exit-zero
$PY -c "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute(\"DELETE FROM facts WHERE key LIKE 'snapshot:%'\"); db.commit()" "$CUAUDIT_CACHE_DIR/facts.sqlite3"
t "${CU[@]}" env -q --format json -o "$OUT/env-facts-cached.json" --exit-zero
if [ -n "${CAS:-}" ]; then
  echo "== content-addressed facts only (the rows keyed by stat and the bundles dropped)"
  $PY -c "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); print(db.execute(\"DELETE FROM facts WHERE key NOT LIKE '%:sha256:%'\").rowcount, 'rows dropped'); db.commit(); db.execute('VACUUM')" "$CUAUDIT_CACHE_DIR/facts.sqlite3"
  t "${CU[@]}" env -q --format json -o "$OUT/env-cas.json" --exit-zero
fi
$PY scripts/device/compare_reports.py "$OUT"/env-*.json
