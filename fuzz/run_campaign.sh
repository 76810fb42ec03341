#!/bin/sh
# The fuzzing campaign of docs/security.md: each harness in turn, one core,
# lowest priority, until 1,000,000 executions or SECONDS_EACH seconds.
#   sh fuzz/run_campaign.sh WORKDIR [SECONDS_EACH] [HARNESS...]
set -u
work=${1:?work directory}; each=${2:-900}; shift 2 2>/dev/null || shift $#
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
harnesses=${*:-"text report elf fatbin cython zip tar"}
mkdir -p "$work"
[ -d "$work/seeds" ] || PYTHONPATH="$here/../src" $python "$here/make_seeds.py" "$work/seeds"
for h in $harnesses; do
  mkdir -p "$work/corpus/$h" "$work/crashes/$h"
  CUAUDIT_FUZZ_KEEP_GOING="$work/crashes/$h" PYTHONPATH="$here/../src" nice -n 19 $python "$here/fuzz_$h.py" \
    -runs=1000000 -max_total_time="$each" -rss_limit_mb=1024 -timeout=60 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$work/crashes/$h/" \
    "$work/corpus/$h" "$work/seeds/$h" > "$work/$h.log" 2>&1
  echo "$h exit $?" >> "$work/summary.log"
done
