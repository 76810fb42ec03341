#!/usr/bin/env bash
# What the forked family's child does on the GPU machine's environment: scripts/child_reads.py on a cold
# run and on a facts-cached one, then the same two runs sampled by py-spy (--subprocesses: the parent,
# the workers and the child), if a py-spy wheel is in .whl/.  Set-up from _env.sh.  Outputs under $OUT:
# child-{cold,fc}.txt, spy-{cold,fc}.txt (py-spy's raw format: one stack per line, its sample count last).
set -u
OUT=${OUT:-/tmp/child_out}
. "$(dirname "$0")/_env.sh"
install_wheels || exit 1
export CUAUDIT_SRC=/tmp/site
machine
warm_site
rm -rf /tmp/c-ch
for run in cold fc; do
  [ $run = fc ] && drop_snapshot /tmp/c-ch
  echo "== $run"
  t $PY scripts/child_reads.py -- env -q --cache-dir /tmp/c-ch --format json -o "$OUT/env-$run.json" --exit-zero 2> "$OUT/child-$run.txt"
  cut -c1-600 "$OUT/child-$run.txt"
done
SPY=/tmp/site/bin/py-spy
[ -x $SPY ] || exit 0
rm -rf /tmp/c-spy
for run in cold fc; do
  [ $run = fc ] && drop_snapshot /tmp/c-spy
  echo "== py-spy $run"
  t $SPY record --subprocesses -r 100 -f raw -o "$OUT/spy-$run.txt" -- "${CU[@]}" env -q --cache-dir /tmp/c-spy --format json -o "$OUT/spy-env-$run.json" --exit-zero 2>&1 | tail -3
done
