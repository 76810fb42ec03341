#!/usr/bin/env bash
# A CPU profile of `cuaudit env` on the GPU machine's environment with its facts cached but no
# snapshot (after any change to one installed file): fills the cache cold, drops the snapshot, then
# profiles one run in process.  Writes $OUT/facts-cached.prof and prints its top functions.
set -u
OUT=${OUT:-/tmp/profile_out}; mkdir -p "$OUT"; PY=${PY:-python3}
[ -n "${SKIP_WHEELS:-}" ] || $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
unset PYTHONPATH PYTHONDONTWRITEBYTECODE
export CUAUDIT_CACHE_DIR=/tmp/cuaudit-profile; rm -rf "$CUAUDIT_CACHE_DIR"
SITE="import sys; sys.path[:0] = ['$PWD/src', '/tmp/site']"
$PY -c "$SITE; sys.argv[0] = 'cuaudit'; from cuaudit.cli import entry; entry()" env -q --exit-zero -o /dev/null
$PY -c "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute(\"DELETE FROM facts WHERE key LIKE 'snapshot:%'\"); db.commit()" "$CUAUDIT_CACHE_DIR/facts.sqlite3"
$PY -c "$SITE
import cProfile, time
from cuaudit.cli import main
p = cProfile.Profile(time.process_time)
t = time.time()
p.runcall(main, ['env', '-q', '--exit-zero', '-o', '/dev/null'])
print(f'profiled run: {time.time() - t:.1f} s')
p.dump_stats('$OUT/facts-cached.prof')
import pstats
s = pstats.Stats(p)
s.sort_stats('cumulative').print_stats(45)
s.sort_stats('tottime').print_stats(30)
" 2>&1 | cut -c1-170
