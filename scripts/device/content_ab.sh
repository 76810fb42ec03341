#!/usr/bin/env bash
# A/B of a new venv's run on the GPU machine (the facts by content alone: the rows by identity, the
# bundles and the snapshot dropped from a cold cache, as a new venv of the same packages misses them),
# BASE against this tree, alternating: its time and how much the cache grows.  Then this tree's cold
# timeline (scripts/timeline.py: the parent's waits and CPU per second).
#   BASE=.base_src bash scripts/device/content_ab.sh     (BASE: another checkout's src/, carried)
set -u
OUT=${OUT:-/tmp/content_ab_out}; BASE=${BASE:-.base_src}
. "$(dirname "$0")/_env.sh"
ready
rm -rf /tmp/c-cold; /usr/bin/time -f "cold (this tree): %e s wall %U user %S sys %M KB" bash -c "$(cu src) env -q --exit-zero --cache-dir /tmp/c-cold -f json -o $OUT/cold.json"
content_only /tmp/c-cold
echo "by-content rows: $(du -sh /tmp/c-cold | cut -f1)"
for i in $(seq ${PAIRS:-2}); do for v in "$BASE" src; do
  rm -rf /tmp/c-x; cp -r /tmp/c-cold /tmp/c-x
  /usr/bin/time -f "$v new venv: %e s wall %U user %S sys %M KB" bash -c "$(cu $v) env -q --exit-zero --cache-dir /tmp/c-x -f json -o $OUT/$(basename $v)-$i.json"
  echo "  cache after: $(du -sh /tmp/c-x | cut -f1)"
  /usr/bin/time -f "  then cached: %e s wall" bash -c "$(cu $v) env -q --exit-zero --cache-dir /tmp/c-x -o /dev/null"
done; done
$PY scripts/device/compare_reports.py "$OUT"/*.json 2>&1 | grep -v '^findings\|^by sev'
echo "== cold timeline, this tree"; rm -rf /tmp/c-tl; export CUAUDIT_SRC=/tmp/site
/usr/bin/time -f "%e s wall %U user %S sys %M KB" $PY scripts/timeline.py $OUT/tl.log -- env -q --cache-dir /tmp/c-tl -f json -o /dev/null --exit-zero
$PY scripts/timeline.py --summary $OUT/tl.log | grep -v "^R\|^P"
