#!/usr/bin/env bash
# A/B of two cuaudit source trees on the GPU machine's environment with its facts cached but no
# snapshot (what any change to one installed file leaves): one cold run fills the cache, then the
# trees' facts-cached runs alternate, the snapshot dropped before each; then COLD pairs of cold runs.
#   BASE=.base_src PAIRS=3 COLD=1 bash scripts/device/fc_ab.sh
set -u
OUT=${OUT:-/tmp/fc_ab_out}; BASE=${BASE:-.base_src}
. "$(dirname "$0")/_env.sh"
install_wheels || exit 1
machine
warm_site
rm -rf /tmp/c-fc; bash -c "$(cu src) env -q --exit-zero --cache-dir /tmp/c-fc -o /dev/null"
for i in $(seq ${PAIRS:-3}); do for v in "$BASE" src; do
  drop_snapshot /tmp/c-fc
  /usr/bin/time -f "$v facts cached: %e s wall %U user %S sys %M KB" bash -c "$(cu $v) env -q --exit-zero --cache-dir /tmp/c-fc -f json -o $OUT/fc-$(basename $v)-$i.json"
done; done
for i in $(seq ${COLD:-0}); do for v in "$BASE" src; do
  rm -rf /tmp/c-$i; /usr/bin/time -f "$v cold: %e s wall %U user %S sys %M KB" bash -c "$(cu $v) env -q --exit-zero --cache-dir /tmp/c-$i -f json -o $OUT/cold-$(basename $v)-$i.json"
done; done
$PY scripts/device/compare_reports.py "$OUT"/*.json | grep -v '^findings\|^by sev'
