#!/usr/bin/env bash
# A/B of two cuaudit source trees on the GPU machine's environment: `cuaudit env` cold, alternating,
# then this tree's facts by content alone (the rows by identity, the bundles and the snapshot dropped).
#   BASE=.base_src bash scripts/device/ab_env.sh     (BASE: another checkout's src/, carried; PAIRS=n; SKIP_CAS=1)
set -u
OUT=${OUT:-/tmp/ab_out}; BASE=${BASE:-.base_src}
. "$(dirname "$0")/_env.sh"
install_wheels || exit 1
warm_site
for i in $(seq ${PAIRS:-2}); do for v in "$BASE" src; do
  rm -rf /tmp/c-$i; /usr/bin/time -f "$v cold: %e s wall %U user %S sys %M KB" bash -c "$(cu $v) env -q --exit-zero --cache-dir /tmp/c-$i -f json -o $OUT/$(basename $v)-$i.json"
  echo "  cache: $(du -sh /tmp/c-$i | cut -f1)"
done; done
if [ -z "${SKIP_CAS:-}" ]; then  # SKIP_CAS=1: the cold pairs only
content_only /tmp/c-${PAIRS:-2}
/usr/bin/time -f "by content only: %e s wall %U user %S sys %M KB" bash -c "$(cu src) env -q --exit-zero --cache-dir /tmp/c-${PAIRS:-2} -f json -o $OUT/cas.json"
fi
$PY scripts/device/compare_reports.py "$OUT"/*.json | grep -v '^findings\|^by sev'
