#!/usr/bin/env bash
# What the forked family's child does on the GPU machine's environment: scripts/child_reads.py on a cold
# run and on a facts-cached one, then the same two runs sampled by py-spy (--subprocesses: the parent,
# the workers and the child), if a py-spy wheel is in .whl/.  Set-up from _env.sh.  Outputs under $OUT:
# child-{cold,fc}.txt, spy-{cold,fc}.txt (py-spy's raw format: one stack per line, its sample count last).
set -u
OUT=${OUT:-/tmp/child_out}
. "$(dirname "$0")/_env.sh"
export CUAUDIT_SRC=/tmp/site
ready
child_reads() {  # child_reads RUN CACHE
  t $PY scripts/child_reads.py -- env -q --cache-dir "$2" --format json -o "$OUT/env-$1.json" --exit-zero 2> "$OUT/child-$1.txt"
  cut -c1-600 "$OUT/child-$1.txt"
}
cold_then_cached /tmp/c-ch child_reads
SPY=/tmp/site/bin/py-spy
[ -x $SPY ] || exit 0
sampled() {  # sampled RUN CACHE
  t $SPY record --subprocesses -r 100 -f raw -o "$OUT/spy-$1.txt" -- "${CU[@]}" env -q --cache-dir "$2" --format json -o "$OUT/spy-env-$1.json" --exit-zero 2>&1 | tail -3
}
cold_then_cached /tmp/c-spy sampled
