#!/usr/bin/env bash
# Linking & loading on a machine WITH an NVIDIA GPU and driver (issue 3's last acceptance point).
#
# Usage: bash scripts/device/linkage_env.sh WHEELDIR
#   WHEELDIR: wheels to install offline (pip --no-index --find-links), e.g. torch-2.8.0 and its
#   nvidia-*-cu12 dependencies, cupy-cuda12x 14.2.0 (+ numpy, cuda-pathfinder) and, for the
#   over-linking contrast, cupy-cuda11x 12.3.0 with nvidia-*-cu11.  Everything missing is skipped.
#
# It prints (and writes under $OUT when set):
#   1. `nvidia-smi -L` and where the driver's libcuda.so.1 is (ld.so.cache);
#   2. `cuaudit libs --env --gpu-only`: every CUDA/driver library needed by an installed ELF file,
#      where it resolves and through which step.  Expected: libcuda.so.1 => /usr/lib/.../libcuda.so.1
#      via ld.so.cache; torch/lib/libtorch_cuda.so's libcublas.so.12 => nvidia/cublas/lib/libcublas.so.12
#      [nvidia-cublas-cu12 ...] via DT_RPATH ($ORIGIN/../../nvidia/cublas/lib);
#   3. `cuaudit env --select CU2`: expected no CU203 for libcuda.so.1 (the driver is there), CU202
#      info "`import torch` loads 11 CUDA libraries eagerly (...)", CU202 warning for cupy-cuda11x 12.3.0
#      (driver), none for cupy-cuda12x 14.2.0 (it loads CUDA lazily);
#   4. a summary line per found_via (counts), and the exit status of each step.
set -u
WHEELDIR=${1:?usage: linkage_env.sh WHEELDIR}
OUT=${OUT:-/tmp/linkage_env_out}
mkdir -p "$OUT"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
VENV=/tmp/cuaudit-linkage-env
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --no-index --find-links "$WHEELDIR" -e "$REPO" 2>&1 | tail -3
for pkg in torch cupy-cuda12x cupy-cuda11x; do
  "$VENV/bin/pip" install -q --no-index --find-links "$WHEELDIR" "$pkg" 2>&1 | tail -1 || echo "skip $pkg"
done
echo "== 1. GPU and driver"
nvidia-smi -L || echo "no nvidia-smi"
ldconfig -p | grep -E "libcuda\.so\.1|libnvidia-ml\.so\.1" || echo "driver libraries not in ld.so.cache"
echo "== 2. cuaudit libs --env --gpu-only"
"$VENV/bin/cuaudit" libs --env --gpu-only --no-cache | tee "$OUT/libs.txt" | head -80
"$VENV/bin/cuaudit" libs --env --gpu-only --no-cache --format json > "$OUT/libs.json"; echo "exit $?"
echo "== 3. cuaudit env --select CU2"
"$VENV/bin/cuaudit" env --select CU2 --no-cache -q --format json -o "$OUT/env.json"; echo "exit $?"
"$VENV/bin/cuaudit" env --select CU202,CU203,CU206 --no-cache -q | tail -40
echo "== 4. summary"
"$VENV/bin/python" - "$OUT/libs.json" <<'PY'
import collections, json, sys
rows = json.load(open(sys.argv[1]))["files"]
via = collections.Counter()
for r in rows:
    for x in r["needed"]:
        via[(x["kind"], x["found_via"] or "NOT FOUND", x["on_loader_path"])] += 1
for (kind, how, on), n in sorted(via.items()):
    print(f"{n:6d}  {kind:7s} {how:20s} {'on loader path' if on else 'off loader path'}")
cuda = [x for r in rows for x in r["needed"] if x["needed"] == "libcuda.so.1"]
print("libcuda.so.1 resolutions:", sorted({(x["found_via"], x["where"]) for x in cuda}))
PY
