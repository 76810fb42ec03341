"""Cython C-API recovery: cuaudit's reader vs the straightforward objdump-based recovery.

The peer approach: extract every extension module of the wheel, run
``objdump -d`` on it (the whole text), and pair the string operands of the
instructions before each call to ``PyImport_ImportModule`` and to the import
helpers (``objdump -s -j .rodata`` for the strings).  cuaudit decodes only
the windows around those calls, straight from the zip member, with capstone.

Usage: python benchmarks/bench_capi.py [WHEEL]   (default: the corpus's cuda-bindings 13.0.3)
Prints both timings, the ratio, and the counts each found, from one run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path


def default_wheel() -> Path:
    corpus = Path(os.environ.get("CUAUDIT_CORPUS") or Path.home() / ".cache" / "cuaudit" / "corpus")
    found = sorted(corpus.glob("cuda_bindings-13.0.3-*.whl"))
    if not found:
        sys.exit(f"no cuda_bindings-13.0.3 wheel in {corpus}")
    return found[0]


_LEA = re.compile(r"lea\s+(\w+),\[rip\+0x[0-9a-f]+\]\s+# ([0-9a-f]+)")
_CALL = re.compile(r"call\s+([0-9a-f]+) <([^>]*)>")


def objdump_recovery(wheel: Path) -> tuple[float, float, int]:
    """The peer approach; returns (seconds, CPU seconds with children, name/signature pairs found)."""
    if shutil.which("objdump") is None:
        sys.exit("objdump (binutils) is needed for the comparison")
    started = time.perf_counter()
    cpu0 = os.times()
    pairs = 0
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if not info.filename.endswith(".so"):
                continue
            path = Path(tmp) / info.filename.replace("/", "_")
            path.write_bytes(zf.read(info))
            data = path.read_bytes()
            asm = subprocess.run(["objdump", "-d", "-M", "intel", "--no-show-raw-insn", str(path)],
                                 capture_output=True, text=True).stdout
            regs: dict[str, int] = {}

            def cstr(addr: int) -> str | None:
                # .rodata is mapped at its file offset in these modules (p_vaddr == p_offset)
                end = data.find(b"\0", addr, addr + 4096)
                return data[addr:end].decode("utf-8", "replace") if end > 0 else None

            for line in asm.splitlines():
                m = _LEA.search(line)
                if m:
                    regs[m.group(1)] = int(m.group(2), 16)
                    continue
                c = _CALL.search(line)
                if c:
                    # a helper call taking (module, name, ptr, signature) as string operands
                    if "rsi" in regs and "rcx" in regs:
                        name, sig = cstr(regs["rsi"]), cstr(regs["rcx"])
                        if name and sig and name.isidentifier() and "(" in sig:
                            pairs += 1
                    if "rdi" in regs and "rdx" in regs and "rsi" in regs:
                        name, sig = cstr(regs["rdi"]), cstr(regs["rdx"])
                        if name and sig and name.isidentifier() and "(" in sig:
                            pairs += 1
                    regs.clear()
    cpu1 = os.times()
    cpu = (cpu1.user + cpu1.system + cpu1.children_user + cpu1.children_system) - (
        cpu0.user + cpu0.system + cpu0.children_user + cpu0.children_system)
    return time.perf_counter() - started, cpu, pairs


def cuaudit_recovery(wheel: Path) -> tuple[float, float, int, int]:
    """cuaudit's extractor on every .so member; returns (seconds, CPU seconds, exports, imports)."""
    started = time.perf_counter()
    cpu = time.process_time()
    from cuaudit.facts.cython import read_module

    exports = imports = 0
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.filename.endswith(".so"):
                m = read_module(zf.read(info), info.filename)
                exports += len(m.exports)
                imports += len(m.imports)
    return time.perf_counter() - started, time.process_time() - cpu, exports, imports


def main() -> None:
    wheel = Path(sys.argv[1]) if len(sys.argv) > 1 else default_wheel()
    print(f"wheel: {wheel.name} ({wheel.stat().st_size / 1e6:.1f} MB)")
    ours, ours_cpu, exports, imports = cuaudit_recovery(wheel)
    print(f"cuaudit (capstone, call-site windows): {ours:6.2f} s wall, {ours_cpu:6.2f} s CPU  "
          f"{exports} exports, {imports} imports")
    theirs, theirs_cpu, pairs = objdump_recovery(wheel)
    print(f"objdump -d + text parsing:             {theirs:6.2f} s wall, {theirs_cpu:6.2f} s CPU  "
          f"{pairs} name/signature pairs")
    print(f"ratio: cuaudit is {theirs / ours:.1f}x faster (wall), {theirs_cpu / ours_cpu:.1f}x (CPU)")


if __name__ == "__main__":
    main()
