#!/usr/bin/env bash
# One batch for a speed change on the GPU machine: ab_env.sh against BASE (cold, alternating, and
# the facts by content alone), the Cython facts with and without the PyInit_ early exit, this
# tree's timeline with memory samples, two cached runs and one with the facts cached but no snapshot.
#   BASE=.base_src2 bash scripts/device/speed_ab.sh
set -u; OUT=${OUT:-/tmp/speed_ab_out}; mkdir -p "$OUT"; BASE=${BASE:-.base_src}
BASE=$BASE OUT=$OUT bash scripts/device/ab_env.sh 2>&1 | grep -v "^WARNING: Target" | tail -n $((12 * ${PAIRS:-2} + 12))
echo "== cython facts with and without the early exit"
PYTHONPATH=/tmp/site python3 scripts/device/same_cython_facts.py "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" 2>&1 | tail -4
echo "== timeline, new code"; export CUAUDIT_SRC=/tmp/site; rm -rf /tmp/c-tl
/usr/bin/time -f "%e s wall %U user %S sys %M KB" python3 scripts/timeline.py $OUT/tl.log -- env -q --cache-dir /tmp/c-tl -f json -o /dev/null --exit-zero
python3 scripts/timeline.py --summary $OUT/tl.log | grep -v "^R\|^P"
CU="python3 -c \"import sys; sys.path[:0] = ['$PWD/src', '/tmp/site']; sys.argv[0] = 'cuaudit'; from cuaudit.cli import entry; entry()\""
for i in 1 2; do /usr/bin/time -f "cached: %e s wall %M KB" bash -c "$CU env -q --cache-dir /tmp/c-tl -o /dev/null --exit-zero"; done
python3 -c "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute(\"DELETE FROM facts WHERE key LIKE 'snapshot:%'\"); db.commit()" /tmp/c-tl/facts.sqlite3
/usr/bin/time -f "facts cached: %e s wall %M KB" bash -c "$CU env -q --cache-dir /tmp/c-tl -o /dev/null --exit-zero"
