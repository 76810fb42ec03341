#!/usr/bin/env bash
# Issue 14 on the GPU machine, one batch: `cuaudit env` of the machine's CUDA Python environment
# cold (with the worker/parent timeline of scripts/timeline.py and peak memory), cached (snapshot),
# cached facts without the snapshot, and (CAS=1) cold again with only the content-addressed facts of
# the first run (what a new virtual environment of the same packages finds).  Set-up from _env.sh.
# Outputs under $OUT: timings.txt, timeline.txt, env-*.json.
set -u
OUT=${OUT:-/tmp/speed_session_out}
. "$(dirname "$0")/_env.sh"
install_wheels || exit 1
export CUAUDIT_CACHE_DIR=/tmp/cuaudit-cache; rm -rf "$CUAUDIT_CACHE_DIR"
machine
# warm the page cache and cuaudit's own bytecode (not measured)
"${CU[@]}" --version; warm_site
echo "== cold, timeline"
CUAUDIT_SRC=/tmp/site t $PY scripts/timeline.py "$OUT/tl.log" -- env -q --format json -o "$OUT/env-cold.json" --exit-zero
$PY scripts/timeline.py --summary "$OUT/tl.log" > "$OUT/timeline.txt"; head -c 1500 "$OUT/timeline.txt"
echo "== cold, plain"; rm -rf "$CUAUDIT_CACHE_DIR"
t "${CU[@]}" env -q --format json -o "$OUT/env-cold2.json" --exit-zero
echo "== cached"
t "${CU[@]}" env -q --format json -o "$OUT/env-cached.json" --exit-zero
t "${CU[@]}" env -q --format json -o "$OUT/env-cached.json" --exit-zero
drop_snapshot "$CUAUDIT_CACHE_DIR"
t "${CU[@]}" env -q --format json -o "$OUT/env-facts-cached.json" --exit-zero
if [ -n "${CAS:-}" ]; then
  echo "== content-addressed facts only (the rows keyed by stat and the bundles dropped)"
  content_only "$CUAUDIT_CACHE_DIR"
  t "${CU[@]}" env -q --format json -o "$OUT/env-cas.json" --exit-zero
fi
$PY scripts/device/compare_reports.py "$OUT"/env-*.json
