#!/usr/bin/env bash
# A CPU profile of `cuaudit env` on the GPU machine's environment with its facts cached but no
# snapshot (after any change to one installed file): fills the cache cold, drops the snapshot, then
# profiles one run in process.  Set-up from _env.sh.  Writes $OUT/facts-cached.prof and prints its
# top functions.
set -u
OUT=${OUT:-/tmp/profile_out}
. "$(dirname "$0")/_env.sh"
install_wheels || exit 1
export CUAUDIT_CACHE_DIR=/tmp/cuaudit-profile; rm -rf "$CUAUDIT_CACHE_DIR"
"${CU[@]}" env -q --exit-zero -o /dev/null
drop_snapshot "$CUAUDIT_CACHE_DIR"
$PY -c "import sys; sys.path[:0] = ['$PWD/src', '/tmp/site']
import cProfile, time, pstats
from cuaudit.cli import main
p = cProfile.Profile(time.thread_time)
t = time.time()
p.runcall(main, ['env', '-q', '--exit-zero', '-o', '/dev/null'])
print(f'profiled run: {time.time() - t:.1f} s')
p.dump_stats('$OUT/facts-cached.prof')
s = pstats.Stats(p)
s.sort_stats('cumulative').print_stats(45)
s.sort_stats('tottime').print_stats(30)
" 2>&1 | cut -c1-170
