#!/usr/bin/env bash
# One batch for a speed change on the GPU machine: ab_env.sh against BASE (cold, alternating, and
# the facts by content alone), the Cython facts with and without the PyInit_ early exit, this
# tree's timeline with memory samples, two cached runs and one with the facts cached but no snapshot.
#   BASE=.base_src2 bash scripts/device/speed_ab.sh
set -u; OUT=${OUT:-/tmp/speed_ab_out}; BASE=${BASE:-.base_src}
BASE=$BASE OUT=$OUT bash "$(dirname "$0")/ab_env.sh" 2>&1 | tail -n $((12 * ${PAIRS:-2} + 12))
. "$(dirname "$0")/_env.sh"  # after ab_env.sh, which installed the wheels
echo "== cython facts with and without the early exit"
PYTHONPATH=/tmp/site $PY scripts/device/same_cython_facts.py "$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" 2>&1 | tail -4
echo "== timeline, new code"; export CUAUDIT_SRC=/tmp/site; rm -rf /tmp/c-tl
t $PY scripts/timeline.py $OUT/tl.log -- env -q --cache-dir /tmp/c-tl -f json -o /dev/null --exit-zero
$PY scripts/timeline.py --summary $OUT/tl.log | grep -v "^R\|^P"
for i in 1 2; do t "${CU[@]}" env -q --cache-dir /tmp/c-tl -o /dev/null --exit-zero; done
drop_snapshot /tmp/c-tl
t "${CU[@]}" env -q --cache-dir /tmp/c-tl -o /dev/null --exit-zero
