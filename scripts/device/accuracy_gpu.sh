#!/usr/bin/env bash
# Accuracy of cuaudit's claims against the runtime, on the GPU machine (issue 12).
#
# Usage: bash scripts/device/accuracy_gpu.sh PYTHON
#   PYTHON: the interpreter of the environment to audit (about 200 distributions with a CUDA 13
#   stack, CuPy 14, torch, JAX).  No network is needed: cuaudit runs from this checkout
#   (PYTHONPATH=src) with the interpreter that runs this script (python3, or $CUAUDIT_PYTHON),
#   which needs cuaudit's dependencies; the audited environment is only read, and imported
#   only by the probes (fresh `python -I -S -B`, one process per probe, with a timeout).
#
# It prints a compact summary to paste into benchmarks/RESULTS.md:
#   1. CU201 claims against `LD_BIND_NOW=1 LD_DEBUG=bindings` of a real load of each file
#      (ctypes.CDLL in a fresh process): confirmed = no symbol of the library is bound;
#      CU203 claims against the same real load: confirmed = the load fails naming the library;
#   2. CU101/CU102 against fresh-interpreter probes of every public parent.submodule pair:
#      precision, recall, abstentions, and the mistakes (at most 50 lines in all).
# Full outputs are kept under $OUT (default /tmp/accuracy_gpu_out).
set -u
PY=${1:?usage: accuracy_gpu.sh PYTHON}
OUT=${OUT:-/tmp/accuracy_gpu_out}
mkdir -p "$OUT"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
RUN=${CUAUDIT_PYTHON:-python3}
export PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}"  # keep carried dependencies (/tmp/site) visible
cd "$REPO"
echo "== machine"
nvidia-smi -L 2>/dev/null | head -8 || echo "no nvidia-smi"
"$PY" -c "import sys; print(sys.version.split()[0], sys.prefix)"
echo "distributions: $("$PY" -m pip list 2>/dev/null | tail -n +3 | wc -l)"
git -C "$REPO" log -1 --format='cuaudit %h %cs' 2>/dev/null
echo "== 1. loader claims (CU201 vs LD_DEBUG=bindings, CU203 vs real loads)"
"$RUN" -m cuaudit env --python "$PY" --select CU201,CU203 --no-cache -q --exit-zero --format json -o "$OUT/env.json"
echo "cuaudit env exit $?"
"$RUN" benchmarks/accuracy.py claims --python "$PY" --report "$OUT/env.json" --limit 20 | tee "$OUT/claims.txt"
echo "== 2. submodule traps (CU101/CU102 vs fresh-interpreter probes)"
"$RUN" benchmarks/accuracy.py env --python "$PY" --limit 12 --timeout 180 2>"$OUT/env_probe.err" | tee "$OUT/traps.txt"
echo "== done; full outputs in $OUT"
