#!/usr/bin/env python3
"""What parsing Python sources costs at least: ``ast.parse`` against CPython's parser alone, and
against tree-sitter (a diagnostic for "would another parser, or a native extractor, be faster?").

    python scripts/parser_speed.py SITE_PACKAGES [N]            # N (3,000) .py files at random (seed 1)
    python scripts/parser_speed.py --files LIST SITE_PACKAGES   # the files LIST names (relative to SITE_PACKAGES)
    pip install tree-sitter tree-sitter-python                  # optional, in a scratch venv

``LIST`` is what a run parsed: ``CUAUDIT_PARSED=LIST python scripts/extractor_times.py -- env
--jobs 1 ...`` writes it.  Each file is decoded first, by cuaudit's own ``formats.python.decode_python``
(from ``src``, as the other diagnostics run it), then timed (process CPU, the garbage collector at
cuaudit's thresholds, ``heap.fewer_full_collections``):

- ``ast.parse``: the tree built and dropped, as an extraction does (each tree is freed before the
  next file is parsed: its deallocation is part of the cost);
- ``symtable``: CPython's own tokenizer and parser, then the compiler's symbol table, without a
  single Python object per node (``_symtable.symtable``): the floor of any extractor built on
  ``ast``, since it must run that parser and then build its tree;
- ``tree-sitter``: another C parser that builds no Python objects (when installed): its time is
  a floor for an extractor built on it, which would still walk its tree from Python.

The sixteenth session's run on the accuracy-venv, 3,000 files at random, 49.9 MB: ``ast.parse``
4.85 s (10.3 MB/s), tree-sitter 3.58 s (13.9 MB/s).  The twenty-first session's, on the 7,150
files (135.4 MB) a cold ``env`` of the same venv parses: ``ast.parse`` 18.0-18.3 s, ``symtable``
14.3 s (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import ast
import gc
import os
import random
import sys
import time

from _in_process import use_source_tree


def _files(site: str, listed: str | None, n: int) -> list[str]:
    if listed is not None:
        with open(listed, encoding="utf-8", errors="surrogateescape") as fh:
            return [os.path.join(site, line.rstrip("\n")) for line in fh if line.strip()]
    files = sorted(os.path.join(root, f) for root, _dirs, names in os.walk(site) for f in names if f.endswith(".py"))
    random.seed(1)
    random.shuffle(files)
    return files[:n]


def _timed(label: str, total_mb: float, fn) -> None:  # type: ignore[no-untyped-def]
    start = time.process_time()
    fn()
    took = time.process_time() - start
    print(f"{label:12s} {took:7.2f} s  {total_mb / took:6.1f} MB/s")


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", help="the folder the files are under (a site-packages)")
    ap.add_argument("n", nargs="?", type=int, default=3000, help="files picked at random (without --files)")
    ap.add_argument("--files", help="a list of files to parse, one path relative to SITE per line")
    args = ap.parse_args(argv)
    use_source_tree()
    from cuaudit.formats.python import decode_python
    from cuaudit.heap import fewer_full_collections
    from cuaudit.model import InputError

    texts: list[tuple[str, str]] = []
    size = 0
    for path in _files(args.site, args.files, args.n):
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            texts.append((path, decode_python(data, path)))  # BOM and PEP 263 declarations honoured
            size += len(data)
        except (OSError, InputError):
            continue  # unreadable, too large or not text: cuaudit reports it (CU004, CU006) unparsed too
    total = size / 1e6
    print(f"{len(texts)} files, {total:.1f} MB")
    gc.freeze()
    with fewer_full_collections():  # the collector as cuaudit runs it while it extracts
        _run(texts, total)


def _parse_each(texts: list[tuple[str, str]]) -> None:
    for path, text in texts:
        try:
            ast.parse(text, path)  # the tree is freed here, before the next file
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass


def _symtable_each(texts: list[tuple[str, str]]) -> None:
    import _symtable

    for path, text in texts:
        try:
            _symtable.symtable(text, path, "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass


def _run(texts: list[tuple[str, str]], total: float) -> None:
    _timed("ast.parse", total, lambda: _parse_each(texts))
    _timed("symtable", total, lambda: _symtable_each(texts))
    try:
        import tree_sitter
        import tree_sitter_python
    except ImportError:
        print("tree-sitter: not installed (pip install tree-sitter tree-sitter-python)")
        return
    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))
    datas = [text.encode("utf-8", "surrogatepass") for _p, text in texts]
    _timed("tree-sitter", total, lambda: [parser.parse(d) for d in datas])


if __name__ == "__main__":
    main(sys.argv[1:])
