#!/usr/bin/env bash
# `env --package NAME` on the GPU machine, cold: this tree's focused audit against BASE's (which audits
# the whole environment, then narrows the report), for each named distribution; the findings, inputs
# and skips of the two must be identical.
#   BASE=.base_src PACKAGES="torch jax" bash scripts/device/package_ab.sh
set -u
OUT=${OUT:-/tmp/package_ab_out}; BASE=${BASE:-.base_src}
. "$(dirname "$0")/_env.sh"
ready
for p in ${PACKAGES:-torch cupy-cuda13x jax numba-cuda cuda-bindings}; do
  for v in "$BASE" src; do
    rm -rf /tmp/c-pk
    start=$(date +%s%N)
    if ! bash -c "$(cu "$v") env -q --exit-zero --package $p --cache-dir /tmp/c-pk -f json -o /tmp/pk-$(basename "$v").json" \
        >/dev/null 2>/tmp/pk-err.txt; then
      echo "== $p: $(tail -1 /tmp/pk-err.txt)"; continue 2
    fi
    echo "== $p $(basename "$v") cold: $(( ($(date +%s%N) - start) / 1000000 )) ms"
  done
  $PY - "/tmp/pk-$(basename "$BASE").json" /tmp/pk-src.json <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
same = lambda k: json.dumps(a.get(k), sort_keys=True) == json.dumps(b.get(k), sort_keys=True)
print(f"   findings {len(a['findings'])} / {len(b['findings'])}, {len(b['inputs'])} inputs; identical: findings {same('findings')}, "
      f"inputs {[i['name'] for i in a['inputs']] == [i['name'] for i in b['inputs']]}, skipped {same('skipped')}")
PYEOF
done
