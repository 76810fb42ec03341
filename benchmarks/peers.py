"""Peer tools that are recipes rather than programs: what a user scripts today
for the same answer, run as its own process like every command of the harness.
Each mode prints a JSON summary line (``{"items": N}``).

- ``capi-objdump WHEEL``: Cython C-API imports recovered the straightforward
  way: extract every extension module, ``objdump -d`` its whole text, and pair
  the string operands loaded before each call (function name and signature),
  reading the strings from the file (``.rodata`` is mapped at its file offset
  in these modules).  Counts the name/signature pairs found.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

_LEA = re.compile(r"lea\s+(\w+),\[rip\+0x[0-9a-f]+\]\s+# ([0-9a-f]+)")
_CALL = re.compile(r"call\s+([0-9a-f]+) <([^>]*)>")


def capi_objdump(wheel: str) -> dict:
    pairs = 0
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if not info.filename.endswith(".so"):
                continue
            path = Path(tmp) / info.filename.replace("/", "_")
            path.write_bytes(zf.read(info))
            data = path.read_bytes()
            asm = subprocess.run(["objdump", "-d", "-M", "intel", "--no-show-raw-insn", str(path)],
                                 capture_output=True, text=True, check=True).stdout
            regs: dict[str, int] = {}

            def cstr(addr: int) -> str | None:
                end = data.find(b"\0", addr, addr + 4096)
                return data[addr:end].decode("utf-8", "replace") if end > 0 else None

            for line in asm.splitlines():
                m = _LEA.search(line)
                if m:
                    regs[m.group(1)] = int(m.group(2), 16)
                    continue
                if _CALL.search(line):
                    # a helper taking (module, name, pointer, signature) as string operands
                    for name_reg, sig_reg in (("rsi", "rcx"), ("rdi", "rdx")):
                        if name_reg in regs and sig_reg in regs:
                            name, sig = cstr(regs[name_reg]), cstr(regs[sig_reg])
                            if name and sig and name.isidentifier() and "(" in sig:
                                pairs += 1
                    regs.clear()
    return {"items": pairs}


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("capi-objdump",):
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(capi_objdump(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
