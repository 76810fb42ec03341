#!/usr/bin/env bash
# The forked family's child, BASE against this tree: cold `cuaudit env` runs of the GPU machine's
# environment under scripts/child_reads.py (the child's seconds since the fork, what it extracted
# itself), alternating, with the reports compared.  Set-up from _env.sh; outputs under $OUT.
#   BASE=.base_src PAIRS=2 bash scripts/device/child_ab.sh
set -u; OUT=${OUT:-/tmp/child_ab_out}; BASE=${BASE:-.base_src}
. "$(dirname "$0")/_env.sh"
ready
for i in $(seq "${PAIRS:-2}"); do
  for who in base new; do
    src=$([ $who = base ] && echo "$PWD/$BASE:/tmp/site" || echo /tmp/site)
    rm -rf /tmp/c-$who
    CUAUDIT_SRC=$src t $PY scripts/child_reads.py -- env -q --cache-dir /tmp/c-$who --format json \
      -o "$OUT/$who-$i.json" --exit-zero 2> "$OUT/child-$who.txt" >/dev/null
    grep "^child:" "$OUT/child-$who.txt" | cut -c1-120 | sed "s/^/   $who /"
  done
done
for i in $(seq "${PAIRS:-2}"); do
  $PY scripts/device/compare_reports.py "$OUT/base-$i.json" "$OUT/new-$i.json" | grep -i identical
done
