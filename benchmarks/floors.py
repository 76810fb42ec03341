"""Physical floors: the least work any tool must do to answer, in plain Python.

Each mode is one single pass over exactly the bytes the analysis cannot avoid,
run as its own process (like every command of the harness), printing a JSON
summary line ``{"bytes": N, "files": M}``:

- ``inflate WHEEL... [--kinds elf,python,metadata] [--member NAME]``: inflate every member of
  those kinds completely with zipfile/zlib.  A deflate stream cannot be
  entered in the middle, and the dynamic string table of a big library sits
  near its end (``libtorch_cuda.so``), so the whole member must be inflated.
- ``sections FILE NAME...``: read the named ELF sections of a file on disk
  (what an mmap-based reader touches: ``.dynsym``/``.dynstr``, ``.nv_fatbin``).
- ``read-tree DIR [--kinds ...]``: read every file of those kinds under DIR
  (an installed environment read cold, without a fact cache).
- ``stat-tree DIR``: stat every file under DIR (what validating a fact cache
  keyed by inode, size and mtime must do at least).

The member kinds follow cuaudit's classification by name (``.so``/``.so.N``
ELF, ``.py`` Python, ``*.dist-info/*`` metadata) without importing cuaudit.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import sys
import zipfile

CHUNK = 1 << 20
_ELF = re.compile(r"\.so(\.\d+)*$")
_META = {"METADATA", "PKG-INFO", "RECORD", "WHEEL", "entry_points.txt", "top_level.txt"}


def kind(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    if _ELF.search(name) or name.endswith(".pyd"):
        return "elf"
    if name.endswith(".py"):
        return "python"
    parent = path.rsplit("/", 2)[-2] if "/" in path else ""
    if name in _META and parent.endswith((".dist-info", ".egg-info")):
        return "metadata"
    return "other"


def inflate(wheels: list[str], kinds: set[str], member: str | None = None) -> dict:
    total = members = 0
    buf = bytearray(CHUNK)
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                if info.is_dir() or (info.filename != member if member else kind(info.filename) not in kinds):
                    continue
                with zf.open(info) as fh:
                    while True:
                        n = fh.readinto(buf)
                        if not n:
                            break
                        total += n
                members += 1
    return {"bytes": total, "files": members}


def sections(path: str, names: set[str]) -> dict:
    """Read the named sections of a 64-bit little-endian ELF file."""
    total = found = 0
    with open(path, "rb") as fh:
        ident = fh.read(64)
        if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
            raise SystemExit(f"{path}: not a 64-bit little-endian ELF file")
        shoff, = struct.unpack_from("<Q", ident, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", ident, 0x3A)
        fh.seek(shoff)
        table = fh.read(shentsize * shnum)
        headers = [struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize) for i in range(shnum)]
        _n, _t, _f, _a, str_off, str_size, *_ = headers[shstrndx]
        fh.seek(str_off)
        strtab = fh.read(str_size)
        for name_off, sh_type, _flags, _addr, off, size, *_ in headers:
            name = strtab[name_off:strtab.index(b"\0", name_off)].decode()
            if name in names and sh_type != 8:  # SHT_NOBITS has no bytes
                fh.seek(off)
                left = size
                while left:
                    data = fh.read(min(CHUNK, left))
                    if not data:
                        break
                    left -= len(data)
                    total += len(data)
                found += 1
    return {"bytes": total, "sections": found}


def read_tree(root: str, kinds: set[str]) -> dict:
    total = files = 0
    buf = bytearray(CHUNK)
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if kind(rel) not in kinds or os.path.islink(full):
                continue
            with open(full, "rb", buffering=0) as fh:
                while True:
                    n = fh.readinto(buf)
                    if not n:
                        break
                    total += n
            files += 1
    return {"bytes": total, "files": files}


def stat_tree(root: str) -> dict:
    files = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            os.stat(os.path.join(dirpath, name))
            files += 1
    return {"bytes": 0, "files": files}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="mode", required=True)
    a = sub.add_parser("inflate")
    a.add_argument("wheels", nargs="+")
    a.add_argument("--kinds", default="elf,python,metadata")
    a.add_argument("--member", help="only this member")
    s = sub.add_parser("sections")
    s.add_argument("file")
    s.add_argument("names", nargs="+")
    r = sub.add_parser("read-tree")
    r.add_argument("root")
    r.add_argument("--kinds", default="elf,python,metadata")
    t = sub.add_parser("stat-tree")
    t.add_argument("root")
    args = p.parse_args(argv)
    if args.mode == "inflate":
        out = inflate(args.wheels, set(args.kinds.split(",")), args.member)
    elif args.mode == "sections":
        out = sections(args.file, set(args.names))
    elif args.mode == "read-tree":
        out = read_tree(args.root, set(args.kinds.split(",")))
    else:
        out = stat_tree(args.root)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
