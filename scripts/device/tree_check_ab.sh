#!/usr/bin/env bash
# Cold `cuaudit check` of installed packages' folders read as source trees (CU104 then walks their
# attribute chains, and the standard library's closures with them), BASE against this tree,
# alternating, with the reports compared.  The GPU machine has no wheel files of cupy or torch: their
# installed folders stand in for the wheels' checks.  Set-up from _env.sh; outputs under $OUT.
#   BASE=.base_src PAIRS=3 PKGS="cupy torch" bash scripts/device/tree_check_ab.sh
set -u; OUT=${OUT:-/tmp/tree_ab_out}; BASE=${BASE:-.base_src}
. "$(dirname "$0")/_env.sh"
ready
for pkg in ${PKGS:-cupy torch}; do
  dir=$($PY -c "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('$pkg').origin))") || continue
  echo "== $pkg: $dir ($(find "$dir" -name '*.py' | wc -l) .py files)"
  for i in $(seq "${PAIRS:-3}"); do
    for who in base new; do
      tree=$([ $who = base ] && echo "$BASE" || echo src)
      rm -rf /tmp/c-$who
      t bash -c "$(cu "$tree") check --cache-dir /tmp/c-$who -f json -o $OUT/$pkg-$who.json --exit-zero $dir" >/dev/null
      grep -o '"evidence_facts_extracted": [0-9]*' "$OUT/$pkg-$who.json" | sed "s/^/   $who /"
    done
  done
  $PY scripts/device/compare_reports.py "$OUT/$pkg-base.json" "$OUT/$pkg-new.json" | grep -i identical
  rm -f "$OUT/$pkg-base.json" "$OUT/$pkg-new.json"
done
