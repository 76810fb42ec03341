#!/usr/bin/env bash
# Timelines (scripts/timeline.py) of `cuaudit env` on the GPU machine's environment: one cold run, then
# one with the facts cached but no snapshot.  A forked family's child logs into the same file (its
# rules' R lines).  Set-up from _env.sh.  Outputs under $OUT: tl-cold.*, tl-fc.*.
set -u
OUT=${OUT:-/tmp/timelines_out}
. "$(dirname "$0")/_env.sh"
export CUAUDIT_SRC=/tmp/site
ready
timeline() {  # timeline RUN CACHE
  t $PY scripts/timeline.py "$OUT/tl-$1.log" -- env -q --cache-dir "$2" --format json -o "$OUT/env-$1.json" --exit-zero
  $PY scripts/timeline.py --summary "$OUT/tl-$1.log" > "$OUT/tl-$1.txt"
  head -5 "$OUT/tl-$1.txt"; grep -v "^R" "$OUT/tl-$1.txt" | grep "^P\|^END\|walk\|_bundle_up\|flush\|settle"
  awk '$1 == "R" && $3 - $2 > 0.1' "$OUT/tl-$1.txt"
}
cold_then_cached /tmp/c-tl timeline
