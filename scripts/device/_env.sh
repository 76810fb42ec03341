# Sourced by the device scripts (run from the repository root on the GPU machine): what they share.
#   install_wheels     cuaudit's dependencies, carried as wheels in .whl/, into /tmp/site (SKIP_WHEELS=1: not)
#   cu TREE            the command line (a string, for bash -c) of cuaudit run from the source tree TREE
#   CU                 the same for src/, as an array: "${CU[@]}" env ...
#   t CMD...           run CMD under /usr/bin/time; its wall, CPU and peak memory appended to $OUT/timings.txt
#   machine            what the run was on: GPU, Python, CPUs, date, commit
#   warm_site          the audited site's files read once, so that every run finds them in the page cache
#   ready              a measured session's set-up: install_wheels (the script ends if it fails), machine, warm_site
#   drop_snapshot DIR  the environment snapshots of the cache in DIR dropped (as after any change to one
#                      installed file): the next run reads the facts cached, and runs every rule
#   cold_then_cached DIR FN
#                      FN cold, then FN fc: a run with an empty fact cache in DIR, then one with its facts
#                      cached but the snapshot dropped (FN gets the run's name and the cache folder)
#   content_only DIR   only the facts by content kept (the rows by identity, the bundles and the snapshot
#                      dropped): what a new virtual environment of the same packages finds
# cuaudit runs from the source tree through sys.path, never PYTHONPATH: the audited interpreter (this
# one, by default) then sees its own environment only, not cuaudit's carried dependencies.
PY=${PY:-${PYTHON:-python3}}
OUT=${OUT:-/tmp/device_out}; mkdir -p "$OUT"
# The device sets PYTHONDONTWRITEBYTECODE=1: every run would compile cuaudit's modules from source
# (about 0.1 s of a cached run) where an installed cuaudit has its bytecode.  Users' runs write it.
unset PYTHONPATH PYTHONDONTWRITEBYTECODE

install_wheels() {
  [ -n "${SKIP_WHEELS:-}" ] && return 0
  local out
  out=$($PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1) \
    || { echo "$out"; return 1; }
  echo "$out" | grep -v "^WARNING: Target" || true
}

cu() {
  echo "$PY -c \"import sys; sys.path[:0] = ['$PWD/$1', '/tmp/site']; sys.argv[0] = 'cuaudit'; from cuaudit.cli import entry; entry()\""
}

CU=($PY -c "import sys; sys.path[:0] = ['$PWD/src', '/tmp/site']; sys.argv[0] = 'cuaudit'; from cuaudit.cli import entry; entry()")

t() {
  /usr/bin/time -f "%e s wall, %U s user, %S s sys, %M KB max RSS" -o "$OUT/t.txt" "$@"
  local rc=$?
  echo "${*: -6} -> rc=$rc $(cat "$OUT/t.txt")" | sed "s|$PWD/||g" | cut -c1-300 | tee -a "$OUT/timings.txt"
}

machine() {
  echo "== machine"
  nvidia-smi -L 2>/dev/null
  $PY -c 'import sys; print(sys.version.split()[0])'; nproc; date -u
  git log -1 --format='%h %s' 2>/dev/null | cut -c1-100
}

warm_site() {
  find "$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" -type f -size -64M -print0 | xargs -0 cat > /dev/null 2>&1
}

ready() {
  install_wheels || exit 1
  machine
  warm_site
}

drop_snapshot() {
  $PY -c "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute(\"DELETE FROM facts WHERE key LIKE 'snapshot:%'\"); db.commit()" "$1/facts.sqlite3"
}

content_only() {
  $PY -c "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); print(db.execute(\"DELETE FROM facts WHERE key NOT LIKE '%:sha256:%'\").rowcount, 'rows dropped'); db.commit(); db.execute('VACUUM')" "$1/facts.sqlite3"
}

cold_then_cached() {
  local cache=$1 fn=$2 run
  rm -rf "$cache"
  for run in cold fc; do
    [ $run = fc ] && drop_snapshot "$cache"
    echo "== $run"
    "$fn" $run "$cache"
  done
}
