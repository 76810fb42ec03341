"""Run a Python program with the promotion hooks: ``python -m cuaudit.trace.runner``.

``cuaudit trace -- python script.py ARGS`` starts this in the interpreter the
user named, as ``python -m cuaudit.trace.runner --out FILE [--include DIR] -- script.py ARGS``
(or ``-m module``).  The script and every module imported from the include
directories (default: the script's directory and the working directory; never
the standard library or site-packages) are compiled from a rewritten AST
(:mod:`cuaudit.trace.rewrite`).  When the program ends, however it ends, the
records are written to FILE as JSON.  The program's exit status is kept.
"""

from __future__ import annotations

import argparse
import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import sysconfig
import traceback
from typing import Any, Sequence

from cuaudit.trace import runtime
from cuaudit.trace.rewrite import compile_traced


def _excluded_roots() -> list[str]:
    roots = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            roots.add(os.path.realpath(p))
    for p in sys.path:
        if p.rstrip("/").endswith(("site-packages", "dist-packages")):
            roots.add(os.path.realpath(p))
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    roots.add(here)  # cuaudit itself
    return sorted(roots)


class TracedLoader(importlib.machinery.SourceFileLoader):
    """A source loader that compiles through the rewriter and never writes .pyc files."""

    def source_to_code(self, data: bytes, path: str, *, _optimize: int = -1) -> Any:  # type: ignore[override]
        source = importlib.util.decode_source(data)
        return compile_traced(source, path, runtime.SITES)

    def exec_module(self, module: Any) -> None:
        module.__dict__.update(runtime.hooks())
        super().exec_module(module)

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        with open(path, "rb") as fh:
            data = fh.read()
        return self.source_to_code(data, path)


class TracedFinder(importlib.abc.MetaPathFinder):
    """Claims ``.py`` modules under the include directories (and outside excluded ones)."""

    def __init__(self, include: Sequence[str]) -> None:
        self.include = [os.path.realpath(p) for p in include]
        self.exclude = _excluded_roots()

    def wanted(self, path: str) -> bool:
        real = os.path.realpath(path)
        if not real.endswith(".py"):
            return False
        if any(real.startswith(x + os.sep) for x in self.exclude) and not any(
            real.startswith(i + os.sep) and len(i) > max((len(x) for x in self.exclude if real.startswith(x + os.sep)), default=0)
            for i in self.include
        ):
            return False
        return any(real.startswith(i + os.sep) for i in self.include)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.origin or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None
        if not self.wanted(spec.origin):
            return None
        spec.loader = TracedLoader(fullname, spec.origin)
        return spec


def install(include: Sequence[str]) -> TracedFinder:
    finder = TracedFinder(include)
    sys.meta_path.insert(0, finder)
    return finder


def run_path(script: str, argv: Sequence[str]) -> None:
    """Run ``script`` as ``__main__`` (what ``python script.py`` does), rewritten."""
    import types

    path = os.path.abspath(script)
    with open(path, "rb") as fh:
        source = importlib.util.decode_source(fh.read())
    code = compile_traced(source, path, runtime.SITES)
    main = types.ModuleType("__main__")
    main.__dict__.update({"__file__": path, "__builtins__": __builtins__, "__cached__": None, "__spec__": None})
    main.__dict__.update(runtime.hooks())
    sys.modules["__main__"] = main
    sys.argv = [script, *argv]
    sys.path[0] = os.path.dirname(path)
    exec(code, main.__dict__)


def run_module(name: str, argv: Sequence[str]) -> None:
    import runpy

    sys.argv = [name, *argv]
    sys.path[0] = os.getcwd()
    runpy.run_module(name, run_name="__main__", alter_sys=True)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cuaudit.trace.runner")
    ap.add_argument("--out", required=True)
    ap.add_argument("--include", action="append", default=[])
    ap.add_argument("-m", dest="module")
    ap.add_argument("program", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    program = [a for a in args.program]
    if program and program[0] == "--":
        program = program[1:]
    if not args.module and not program:
        ap.error("no program to run")
    if args.module:
        target_dir = os.getcwd()
    else:
        target_dir = os.path.dirname(os.path.abspath(program[0]))
    include = args.include or [target_dir, os.getcwd()]
    # The directory cuaudit was made importable from must not stay on the user's path.
    private = os.environ.pop("CUAUDIT_TRACE_PATH", None)
    if private and private in sys.path:
        sys.path.remove(private)
    if private:
        pp = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != private]
        if pp:
            os.environ["PYTHONPATH"] = os.pathsep.join(pp)
        else:
            os.environ.pop("PYTHONPATH", None)
    runtime.install_builtins()
    install(include)
    status = {"exit": 0, "exception": None}
    written = {"done": False}

    def flush() -> None:
        if not written["done"]:
            written["done"] = True
            runtime.write(args.out, {"exit": status["exit"], "exception": status["exception"]})

    atexit.register(flush)
    try:
        if args.module:
            run_module(args.module, program)
        else:
            run_path(program[0], program[1:])
    except SystemExit as exc:
        code = exc.code
        status["exit"] = code if isinstance(code, int) else (0 if code is None else 1)
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
    except BaseException as exc:  # noqa: BLE001 - report like the interpreter, then record
        traceback.print_exc()
        status["exit"] = 1
        status["exception"] = f"{type(exc).__name__}: {exc}"[:500]
    flush()
    return int(status["exit"])


if __name__ == "__main__":
    sys.exit(main())
