#!/usr/bin/env bash
# A/B of two cuaudit source trees on the GPU machine's environment, wall time and peak memory as the
# benchmarks take them (scripts/peak.py: the process tree's summed PSS): facts cached (snapshot dropped
# before each run) in PAIRS alternating pairs, then COLD pairs of cold runs.
#   BASE=.base_src PAIRS=3 COLD=2 bash scripts/device/fork_ab.sh
set -u
OUT=${OUT:-/tmp/fork_ab_out}; BASE=${BASE:-.base_src}
. "$(dirname "$0")/_env.sh"
ready
run() {  # run LABEL TREE CACHE OUTPUT
  $PY scripts/peak.py "$1" -- $PY -c "import sys; sys.path[:0] = ['$PWD/$2', '/tmp/site']; sys.argv[0] = 'cuaudit'; from cuaudit.cli import entry; entry()" \
    env -q --exit-zero --cache-dir "$3" -f json -o "$4"
}
rm -rf /tmp/c-fc; run "fill (src)" src /tmp/c-fc /dev/null
for i in $(seq ${PAIRS:-3}); do for v in "$BASE" src; do
  drop_snapshot /tmp/c-fc; run "$v facts cached" "$v" /tmp/c-fc "$OUT/fc-$(basename $v)-$i.json"
done; done
for i in $(seq ${COLD:-0}); do for v in "$BASE" src; do
  rm -rf /tmp/c-$i; run "$v cold" "$v" /tmp/c-$i "$OUT/cold-$(basename $v)-$i.json"
done; done
$PY scripts/device/compare_reports.py "$OUT"/*.json | grep -v '^findings\|^by sev' | grep -v "^fc-\|^cold-"
