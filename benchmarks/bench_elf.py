#!/usr/bin/env python3
"""Linking & loading speed, side by side with the tools users run today (one run, ratios printed).

1. Dynamic symbols read per second on ``libtorch_cpu.so`` (torch 2.8.0 wheel):
   cuaudit's ELF reader (mapped file; and streamed from the wheel) vs pyelftools
   (iterating ``.dynsym`` with names) vs ``readelf --dyn-syms -W``.
2. A full ``cuaudit check`` of the cupy-cuda12x 14.2.0 wheel vs ``auditwheel show``.
3. ``ldd -u -r`` over the wheel's extracted ELF files vs ``cuaudit check`` of that folder
   (ldd runs the dynamic loader; it only runs where the files' dependencies resolve).
4. The torch 2.8.0 wheel: ``cuaudit check`` vs a plain single pass inflating every member,
   vs ``auditwheel show``; peak memory (max RSS of the child processes).

Every tool runs as a subprocess with a cold fact cache (``--no-cache``).  Wall time and
CPU time (user+sys of the child) are both printed: on a shared machine the CPU time is
the steadier figure.  Run from the repository root:
``python benchmarks/bench_elf.py [--skip-torch-auditwheel]`` (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import glob
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

CORPUS = os.environ.get("CUAUDIT_CORPUS") or os.path.expanduser("~/.cache/cuaudit/corpus")
WORK = os.path.expanduser("~/.cache/cuaudit/bench")
PY = sys.executable
BIN = os.path.dirname(PY)


def corpus(pattern: str) -> str | None:
    found = sorted(glob.glob(os.path.join(CORPUS, pattern)))
    return found[0] if found else None


def run(cmd: list[str], **kw) -> tuple[float, float, int, int]:
    """(wall s, cpu s, exit status, peak RSS in MB) of one child (wait4: its own rusage, workers included)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode, usage.ru_maxrss // 1024


def py_time(code: str) -> tuple[float, float, str]:
    """Run a Python snippet in a fresh interpreter; it prints 'wall cpu extra'."""
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1]), " ".join(out[2:])


def row(label: str, wall: float, cpu: float, extra: str = "") -> None:
    print(f"  {label:<44} wall {wall:8.3f} s   cpu {cpu:8.3f} s   {extra}")


def libtorch_cpu() -> str | None:
    target = os.path.join(WORK, "torch-2.8.0", "torch", "lib", "libtorch_cpu.so")
    if os.path.exists(target):
        return target
    whl = corpus("torch-2.8.0-*.whl")
    if not whl:
        return None
    with zipfile.ZipFile(whl) as zf:
        zf.extract("torch/lib/libtorch_cpu.so", os.path.join(WORK, "torch-2.8.0"))
    return target


def bench_symbols() -> None:
    lib = libtorch_cpu()
    print("\n1. dynamic symbols per second, libtorch_cpu.so (torch 2.8.0)")
    if lib is None:
        print("  skipped: torch-2.8.0 wheel not in the corpus")
        return
    ours = py_time(
        "import time; from cuaudit.facts.elf import read_elf_file\n"
        f"read_elf_file({lib!r})\n"
        "bw = bc = 9e9\n"
        "for _ in range(15):\n"
        "    w, c = time.perf_counter(), time.process_time()\n"
        f"    e = read_elf_file({lib!r})\n"
        "    bw, bc = min(bw, time.perf_counter() - w), min(bc, time.process_time() - c)\n"
        "print(bw, bc, e.symbol_count)"
    )
    n = int(ours[2])
    row("cuaudit (mmap, best of 15)", ours[0], ours[1], f"{n / ours[0] / 1e6:.2f} M symbols/s (wall), {n / ours[1] / 1e6:.2f} M/s (cpu)")
    whl = corpus("torch-2.8.0-*.whl")
    stream = py_time(
        "import time, zipfile; from cuaudit.facts.elf import read_elf_stream\n"
        f"zf = zipfile.ZipFile({whl!r}); i = zf.getinfo('torch/lib/libtorch_cpu.so')\n"
        "w, c = time.perf_counter(), time.process_time()\n"
        "e = read_elf_stream(lambda: zf.open(i), i.file_size)\n"
        "w1, c1 = time.perf_counter() - w, time.process_time() - c\n"
        "w, c = time.perf_counter(), time.process_time()\n"
        "f = zf.open(i)\n"
        "while f.read(1 << 20): pass\n"
        "print(w1, c1, e.passes, time.perf_counter() - w, time.process_time() - c)"
    )
    extra = stream[2].split()
    row("cuaudit (streamed from the wheel)", stream[0], stream[1],
        f"{extra[0]} pass; inflating the whole member alone: wall {float(extra[1]):.2f} s, cpu {float(extra[2]):.2f} s")
    pyelf = py_time(
        "import time; from elftools.elf.elffile import ELFFile\n"
        "w, c = time.perf_counter(), time.process_time()\n"
        f"fh = open({lib!r}, 'rb'); s = ELFFile(fh).get_section_by_name('.dynsym')\n"
        "n = sum(1 for sym in s.iter_symbols() if sym.name is not None)\n"
        "print(time.perf_counter() - w, time.process_time() - c, n)"
    )
    row("pyelftools (.dynsym with names)", pyelf[0], pyelf[1], f"{int(pyelf[2]) / pyelf[0] / 1e3:.0f} k symbols/s")
    if shutil.which("readelf"):
        w, c, rc, _ = run(["readelf", "--dyn-syms", "-W", lib])
        row("readelf --dyn-syms -W", w, c, f"{n / w / 1e3:.0f} k symbols/s")
        print(f"  ratio: cuaudit is {pyelf[0] / ours[0]:.0f}x faster than pyelftools, {w / ours[0]:.1f}x than readelf (wall)")
    else:
        print(f"  ratio: cuaudit is {pyelf[0] / ours[0]:.0f}x faster than pyelftools (wall)")


def cuaudit_check(paths: list[str], *extra: str) -> tuple[float, float, int, int]:
    return run([os.path.join(BIN, "cuaudit"), "check", "--no-cache", "--isolated", "-q", "--exit-zero", *extra, *paths])


def bench_cupy() -> None:
    whl = corpus("cupy_cuda12x-14.2.0-*.whl")
    print("\n2. full check of cupy-cuda12x 14.2.0 vs auditwheel show")
    if whl is None:
        print("  skipped: not in the corpus")
        return
    ours = cuaudit_check([whl])
    row("cuaudit check --no-cache (all families)", ours[0], ours[1], f"peak {ours[3]} MB")
    cu2 = cuaudit_check([whl], "--select", "CU0,CU2")
    row("cuaudit check --select CU0,CU2 (linkage)", cu2[0], cu2[1], f"peak {cu2[3]} MB")
    aw = os.path.join(BIN, "auditwheel")
    if os.path.exists(aw):
        theirs = run([aw, "show", whl])
        row("auditwheel show", theirs[0], theirs[1], f"peak {theirs[3]} MB (exit {theirs[2]})")
        print(f"  ratio: cuaudit {theirs[0] / ours[0]:.1f}x faster (wall), {theirs[1] / ours[1]:.1f}x (cpu); "
              f"linkage alone {theirs[0] / cu2[0]:.1f}x (wall), {theirs[1] / cu2[1]:.1f}x (cpu)")
    else:
        print("  auditwheel not installed (pip install -e '.[bench]')")

    print("\n3. ldd -u -r over the extracted ELF files of cupy-cuda12x 14.2.0 vs cuaudit check of the folder")
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(whl) as zf:
            names = [n for n in zf.namelist() if n.endswith(".so") or ".so." in n]
            for n in names:
                zf.extract(n, tmp)
        files = [os.path.join(tmp, n) for n in names]
        if shutil.which("ldd"):
            wall = cpu = 0.0
            ran = 0
            for f in files:
                w, c, rc, _ = run(["ldd", "-u", "-r", f])
                wall += w
                cpu += c
                ran += rc in (0, 1)
            row(f"ldd -u -r ({len(files)} files, {ran} ran)", wall, cpu)
        ours = cuaudit_check([tmp])
        row("cuaudit check (same folder)", ours[0], ours[1])
        if shutil.which("ldd"):
            print(f"  ratio: cuaudit {wall / ours[0]:.1f}x faster than ldd -u -r (wall)")


def bench_torch(skip_auditwheel: bool) -> None:
    whl = corpus("torch-2.8.0-*.whl")
    print("\n4. torch 2.8.0 wheel (888 MB): check vs one plain inflating pass vs auditwheel show")
    if whl is None:
        print("  skipped: not in the corpus")
        return
    plain = py_time(
        "import time, zipfile\n"
        "w, c = time.perf_counter(), time.process_time()\n"
        f"zf = zipfile.ZipFile({whl!r})\n"
        "for i in zf.infolist():\n"
        "    with zf.open(i) as f:\n"
        "        while f.read(1 << 20): pass\n"
        "print(time.perf_counter() - w, time.process_time() - c, 0)"
    )
    row("plain single pass inflating every member", plain[0], plain[1])
    ours = cuaudit_check([whl])
    row("cuaudit check --no-cache", ours[0], ours[1], f"peak {ours[3]} MB (largest process)")
    ours1 = cuaudit_check([whl], "-j1")
    row("cuaudit check --no-cache -j1", ours1[0], ours1[1], f"peak {ours1[3]} MB")
    cu2 = cuaudit_check([whl], "--select", "CU0,CU2")
    row("cuaudit check --select CU0,CU2 (linkage)", cu2[0], cu2[1], f"peak {cu2[3]} MB")
    print(f"  ratio to the plain pass: all families {ours[0] / plain[0]:.2f} (wall), {ours[1] / plain[1]:.2f} (cpu); "
          f"-j1 {ours1[1] / plain[1]:.2f} (cpu); linkage alone {cu2[0] / plain[0]:.2f} (wall), {cu2[1] / plain[1]:.2f} (cpu)")
    aw = os.path.join(BIN, "auditwheel")
    if os.path.exists(aw) and not skip_auditwheel:
        theirs = run([aw, "show", whl])
        row("auditwheel show", theirs[0], theirs[1], f"peak {theirs[3]} MB (exit {theirs[2]})")
        print(f"  ratio: cuaudit {theirs[0] / ours[0]:.1f}x faster than auditwheel show (wall); "
              f"linkage alone {theirs[0] / cu2[0]:.1f}x (wall), {theirs[1] / cu2[1]:.1f}x (cpu)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--skip-torch-auditwheel", action="store_true", help="auditwheel show on torch takes minutes")
    ap.add_argument("--only", choices=("symbols", "cupy", "torch"))
    args = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; "
          f"Python {platform.python_version()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    if args.only in (None, "symbols"):
        bench_symbols()
    if args.only in (None, "cupy"):
        bench_cupy()
    if args.only in (None, "torch"):
        bench_torch(args.skip_torch_auditwheel)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
