"""Device-code listing: cuaudit's fat-binary reader vs ``cuobjdump --list-elf --list-ptx``.

Usage::

    python benchmarks/bench_fatbin.py [FILE ...] [--cuobjdump PATH] [--repeat N]

Without FILE it uses ``libcublasLt.so.12`` from the corpus wheel
nvidia-cublas-cu12 12.9.1.4 (extracted once into a temporary directory).
Each tool runs as its own process; wall time and peak RSS (``wait4``) are
measured for both, best of ``--repeat`` runs, and the listings are compared
line for line.  Prints one line per file and the ratios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

CORPUS = Path(os.environ.get("CUAUDIT_CORPUS") or Path.home() / ".cache" / "cuaudit" / "corpus")
OURS = (
    "import sys; from cuaudit.facts.fatbin import read_path, cuobjdump_listing; "
    "p = sys.argv[1]; print('\\n'.join(cuobjdump_listing(read_path(p), p)))"
)


def run(cmd: list[str]) -> tuple[float, int, str]:
    """(seconds, peak RSS in bytes, stdout) of one process."""
    out = tempfile.TemporaryFile()
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    text = out.read().decode(errors="replace").replace("cubincuobjdump", "cubin\ncuobjdump")
    return seconds, usage.ru_maxrss * 1024, text


def lines(text: str) -> list[str]:
    return [x for x in text.splitlines() if x.startswith(("ELF file", "PTX file"))]


def find_cuobjdump(tmp: Path) -> str:
    found = shutil.which("cuobjdump")
    if found:
        return found
    wheels = sorted(CORPUS.glob("nvidia_cuda_cuobjdump-*.whl"))
    if not wheels:
        sys.exit("cuobjdump not found: install nvidia-cuda-cuobjdump or pass --cuobjdump")
    with zipfile.ZipFile(wheels[0]) as zf:
        name = next(n for n in zf.namelist() if n.endswith("bin/cuobjdump"))
        path = Path(zf.extract(name, tmp))
    path.chmod(0o755)
    return str(path)


def default_files(tmp: Path) -> list[str]:
    wheels = sorted(CORPUS.glob("nvidia_cublas_cu12-12.9.1.4-*.whl"))
    if not wheels:
        sys.exit(f"no FILE given and nvidia-cublas-cu12 12.9.1.4 is not in {CORPUS} (fetch.sh with WITH_LARGE=1)")
    with zipfile.ZipFile(wheels[0]) as zf:
        return [zf.extract("nvidia/cublas/lib/libcublasLt.so.12", tmp)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*")
    ap.add_argument("--cuobjdump")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        cuobjdump = args.cuobjdump or find_cuobjdump(tmp)
        files = args.files or default_files(tmp)
        print(f"{'file':<28} {'entries':>12} {'cuobjdump':>18} {'cuaudit':>18} {'speed-up':>9} {'memory':>8}  same")
        for path in files:
            theirs = min((run([cuobjdump, "--list-elf", "--list-ptx", path]) for _ in range(args.repeat)), key=lambda r: r[0])
            ours = min((run([sys.executable, "-c", OURS, path]) for _ in range(args.repeat)), key=lambda r: r[0])
            same = lines(theirs[2]) == lines(ours[2])
            n_elf = sum(1 for x in lines(ours[2]) if x.startswith("ELF"))
            n_ptx = sum(1 for x in lines(ours[2]) if x.startswith("PTX"))
            print(
                f"{os.path.basename(path):<28} {f'{n_elf}+{n_ptx}':>12} "
                f"{theirs[0]:7.3f} s {theirs[1] / 2**20:6.0f} MB {ours[0]:7.3f} s {ours[1] / 2**20:6.0f} MB "
                f"{theirs[0] / ours[0]:8.1f}x {theirs[1] / ours[1]:7.1f}x  {'yes' if same else 'NO'}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
