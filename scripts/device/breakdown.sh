#!/usr/bin/env bash
# Where a cold `cuaudit env` of the GPU machine's environment spends its CPU: the worker/parent
# timeline of a cold run (scripts/timeline.py), each extractor's CPU time in a one-process run
# (scripts/extractor_times.py, --jobs 1), and a profile of the parent's rules with the facts cached
# but no snapshot.  cuaudit's dependencies travel as wheels in .whl/.  Outputs under $OUT.
set -u
OUT=${OUT:-/tmp/breakdown_out}; mkdir -p "$OUT"; PY=${PYTHON:-python3}
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
unset PYTHONPATH PYTHONDONTWRITEBYTECODE
export CUAUDIT_SRC=/tmp/site
CU=($PY -c "import sys; sys.path[:0] = ['$PWD/src', '/tmp/site']; sys.argv[0] = 'cuaudit'; from cuaudit.cli import entry; entry()")
echo "== machine"; nproc; date -u; git log -1 --format='%h %s' | cut -c1-100
"${CU[@]}" --version; find "$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" -type f -size -64M -print0 | xargs -0 cat > /dev/null 2>&1
echo "== cold, timeline"; rm -rf /tmp/c-tl
/usr/bin/time -f "%e s wall, %U s user, %S s sys, %M KB" $PY scripts/timeline.py "$OUT/tl.log" -- env -q --cache-dir /tmp/c-tl --format json -o "$OUT/env-cold.json" --exit-zero
$PY scripts/timeline.py --summary "$OUT/tl.log" > "$OUT/timeline.txt"; head -c 2500 "$OUT/timeline.txt"
echo "== facts cached, profiled"
$PY -c "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute(\"DELETE FROM facts WHERE key LIKE 'snapshot:%'\"); db.commit()" /tmp/c-tl/facts.sqlite3
$PY -c "import sys; sys.path[:0] = ['$PWD/src', '/tmp/site']
import cProfile, time, pstats
from cuaudit.cli import main
p = cProfile.Profile(time.process_time); t = time.time()
p.runcall(main, ['env', '-q', '--exit-zero', '--cache-dir', '/tmp/c-tl', '-o', '/dev/null'])
print(f'profiled run: {time.time() - t:.1f} s'); p.dump_stats('$OUT/facts-cached.prof')
s = pstats.Stats(p); s.sort_stats('cumulative').print_stats(60); s.sort_stats('tottime').print_stats(40)" > "$OUT/facts-cached.txt" 2>&1
grep -E "profiled run|function calls" "$OUT/facts-cached.txt"
echo "== one process, extractor times"; rm -rf /tmp/c-j1
timeout 400 $PY scripts/extractor_times.py -- env -q --jobs 1 --cache-dir /tmp/c-j1 --exit-zero -o /dev/null 2>&1 | tail -25
