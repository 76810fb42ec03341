#!/usr/bin/env python3
"""How fast another parser reads Python sources than ``ast.parse``: tree-sitter, the one C parser
with Python bindings on PyPI (a diagnostic for the question "would a native extractor be faster?").

    pip install tree-sitter tree-sitter-python   # in a scratch venv: not cuaudit's dependencies
    python scripts/parser_speed.py SITE_PACKAGES [N]

Parses N (3,000) ``.py`` files picked at random (seed 1) under SITE_PACKAGES with both, garbage
collection off as in cuaudit, and prints the process CPU time and throughput of each.  tree-sitter
builds no Python objects: its time is a floor for an extractor built on it, which would still walk
its tree from Python.  The sixteenth session's run on the accuracy-venv: 3,000 files, 49.9 MB;
``ast.parse`` 4.85 s (10.3 MB/s), tree-sitter 3.58 s (13.9 MB/s).
"""

from __future__ import annotations

import ast
import gc
import os
import random
import sys
import time


def main(site: str, n: int = 3000) -> None:
    files = sorted(os.path.join(root, f) for root, _dirs, names in os.walk(site) for f in names if f.endswith(".py"))
    random.seed(1)
    random.shuffle(files)
    datas = []
    for path in files[:n]:
        with open(path, "rb") as fh:
            datas.append(fh.read())
    total = sum(map(len, datas)) / 1e6
    print(f"{len(datas)} files, {total:.1f} MB")
    gc.disable()
    start = time.process_time()
    for data in datas:
        try:
            ast.parse(data)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
    took = time.process_time() - start
    print(f"ast.parse    {took:.2f} s  {total / took:.1f} MB/s")
    try:
        import tree_sitter
        import tree_sitter_python
    except ImportError:
        print("tree-sitter: not installed (pip install tree-sitter tree-sitter-python)")
        return
    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))
    start = time.process_time()
    for data in datas:
        parser.parse(data)
    took = time.process_time() - start
    print(f"tree-sitter  {took:.2f} s  {total / took:.1f} MB/s")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3000)
