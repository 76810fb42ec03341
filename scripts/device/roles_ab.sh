#!/usr/bin/env bash
# A/B of two cuaudit source trees on the GPU machine's environment, cold, with the memory of each run
# by process group (scripts/pss_roles.py: the parent, the worker pool, a forked family's child).
#   BASE=.base_src PAIRS=2 bash scripts/device/roles_ab.sh
set -u
OUT=${OUT:-/tmp/roles_ab_out}; BASE=${BASE:-.base_src}
. "$(dirname "$0")/_env.sh"
ready
for i in $(seq ${PAIRS:-2}); do for v in "$BASE" src; do
  rm -rf /tmp/c-roles
  log="$OUT/roles-$(basename $v)-$i.log"
  start=$(date +%s%N)
  $PY scripts/pss_roles.py "$log" -- $PY -c "import sys; sys.path[:0] = ['$PWD/$v', '/tmp/site']; sys.argv[0] = 'cuaudit'; from cuaudit.cli import entry; entry()" \
    env -q --exit-zero --cache-dir /tmp/c-roles -f json -o "$OUT/cold-$(basename $v)-$i.json"
  echo "== $v cold $i: $(( ($(date +%s%N) - start) / 1000000 )) ms"
  $PY scripts/pss_roles.py --summary "$log" 0
done; done
$PY scripts/device/compare_reports.py "$OUT"/*.json | grep -v '^findings\|^by sev' | grep -v "^cold-"
