#!/usr/bin/env bash
# Where a cold `cuaudit env` of the GPU machine's environment spends its CPU: the worker/parent
# timeline of a cold run (scripts/timeline.py), each extractor's CPU time in a one-process run
# (scripts/extractor_times.py, --jobs 1), and a profile of the parent's rules with the facts cached
# but no snapshot.  Set-up from _env.sh.  Outputs under $OUT.
set -u
OUT=${OUT:-/tmp/breakdown_out}
. "$(dirname "$0")/_env.sh"
install_wheels || exit 1
export CUAUDIT_SRC=/tmp/site  # the diagnostics put it on sys.path after src/ (not PYTHONPATH)
machine
"${CU[@]}" --version; warm_site
echo "== cold, timeline"; rm -rf /tmp/c-tl
t $PY scripts/timeline.py "$OUT/tl.log" -- env -q --cache-dir /tmp/c-tl --format json -o "$OUT/env-cold.json" --exit-zero
$PY scripts/timeline.py --summary "$OUT/tl.log" > "$OUT/timeline.txt"; head -c 2500 "$OUT/timeline.txt"
echo "== facts cached, profiled"
drop_snapshot /tmp/c-tl
$PY -c "import sys; sys.path[:0] = ['$PWD/src', '/tmp/site']
import cProfile, time, pstats
from cuaudit.cli import main
p = cProfile.Profile(time.thread_time); t = time.time()
p.runcall(main, ['env', '-q', '--exit-zero', '--cache-dir', '/tmp/c-tl', '-o', '/dev/null'])
print(f'profiled run: {time.time() - t:.1f} s'); p.dump_stats('$OUT/facts-cached.prof')
s = pstats.Stats(p); s.sort_stats('cumulative').print_stats(60); s.sort_stats('tottime').print_stats(40)" > "$OUT/facts-cached.txt" 2>&1
grep -E "profiled run|function calls" "$OUT/facts-cached.txt"
echo "== one process, extractor times"; rm -rf /tmp/c-j1
timeout 400 $PY scripts/extractor_times.py -- env -q --jobs 1 --cache-dir /tmp/c-j1 --exit-zero -o /dev/null 2>&1 | tail -25
