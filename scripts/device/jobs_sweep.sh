#!/usr/bin/env bash
# Cold `cuaudit env` of the GPU machine's environment with several worker counts: the wall time and
# the process tree's memory of each (scripts/pss_roles.py: the parent, the pool, a forked family's
# child), and whether the reports are identical.  What the tree's peak costs in time.
#   JOBS="8 12 16" bash scripts/device/jobs_sweep.sh
set -u
OUT=${OUT:-/tmp/jobs_sweep_out}
. "$(dirname "$0")/_env.sh"
ready
for j in ${JOBS:-8 12 16}; do
  rm -rf /tmp/c-jobs
  log="$OUT/jobs-$j.log"
  start=$(date +%s%N)
  $PY scripts/pss_roles.py "$log" -- "${CU[@]}" env -q --exit-zero --jobs "$j" --cache-dir /tmp/c-jobs -f json -o "$OUT/jobs-$j.json"
  echo "== --jobs $j cold: $(( ($(date +%s%N) - start) / 1000000 )) ms"
  $PY scripts/pss_roles.py --summary "$log" 0
done
$PY scripts/device/compare_reports.py "$OUT"/jobs-*.json | grep -v '^findings\|^by sev'
