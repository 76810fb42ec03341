"""Run on a machine with an NVIDIA GPU: ``--probe`` must take the local GPU as a CU6xx target.

    PYTHONPATH=src python scripts/device/probe_cu6_targets.py

It writes a wheel whose only module carries SASS for sm_50 and no PTX (a
hand-made fat binary: no nvcc needed), audits it with probe=True and
CU6xx selected, and prints what it found.  Expected on an H100 / H200
(compute capability 9.0)::

    nvidia-smi compute_cap: 9.0
    probe: local GPU compute capability (CU6xx targets) | nvidia-smi --query-gpu=compute_cap --format=csv,noheader | exit 0: sm_90
    CU601 error sm_90 demo/_k.so: no device code runs on sm_90: SASS sm_50, PTX none; ...
    CU603 info - demo/_k.so: no portable PTX: ...
    OK

(``sm_XX`` is the GPU's compute capability; on a machine without a GPU the
probe line says ``nvidia-smi not found`` and no CU601 is printed.)
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path


def fat_binary_elf() -> bytes:
    payload = b"\0" * 24
    entry = struct.pack("<HHIQIIHHIIIQQQ", 2, 0x101, 64, len(payload), 0, 0, 8, 1, 50, 0, 0, 0x11, 0, 0) + payload
    fatbin = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(entry)) + entry
    names = b"\0.nv_fatbin\0.shstrtab\0"
    data = bytearray(64) + fatbin
    str_off = len(data)
    data += names + b"\0" * (-(len(data) + len(names)) % 8)
    shoff = len(data)
    data += struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    data += struct.pack("<IIQQQQIIQQ", 1, 1, 2, 0, 64, len(fatbin), 0, 0, 8, 0)
    data += struct.pack("<IIQQQQIIQQ", 12, 3, 0, 0, str_off, len(names), 0, 0, 1, 0)
    ident = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    data[:64] = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 56, 0, 64, 3, 2)
    return bytes(data)


def main() -> int:
    from cuaudit import audit
    from cuaudit.config import Config

    smi = shutil.which("nvidia-smi")
    if smi:
        cap = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True, text=True)
        print("nvidia-smi compute_cap:", cap.stdout.strip().replace("\n", ", "))
    with tempfile.TemporaryDirectory() as d:
        whl = Path(d) / "demo-1.0-py3-none-linux_x86_64.whl"
        with zipfile.ZipFile(whl, "w") as zf:
            zf.writestr("demo/__init__.py", "")
            zf.writestr("demo/_k.so", fat_binary_elf())
            zf.writestr("demo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n")
        report = audit([str(whl)], config=Config(cache=False, probe=True, select=("CU6",), jobs=1))
    for p in report.probes:
        print(f"probe: {p.what} | {p.command} | {p.outcome}")
    for f in report.findings:
        print(f.code, f.severity, f.location.symbol or "-", f"{f.location.member}: {f.message}")
    ok = any(f.code == "CU601" for f in report.findings) or not smi
    print("OK" if ok else "UNEXPECTED: no CU601 although a GPU was found")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
