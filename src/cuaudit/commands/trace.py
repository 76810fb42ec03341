"""``cuaudit trace -- python script.py ARGS``: run YOUR program and record NEP 50 changes.

This is the one command that runs code on purpose: the program you name, in
the interpreter you name, in a subprocess (with ``--timeout``).  The
program's modules (those under its directory and the working directory,
never the standard library or site-packages) are compiled with hooks on
arithmetic and NumPy calls; every operation with a scalar operand whose NumPy
2 outcome differs from NumPy 1.x's value-based promotion is recorded
(CU410-CU413) and reported once per source location, with counts.
"""

from __future__ import annotations

import argparse
import os
import sys

from cuaudit.commands._common import add_audit_options, config_from_args, emit


def configure_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trace",
        help="run your program and report NumPy operations whose result changed under NEP 50 (NumPy 2)",
        description="Run a Python program (yours: this executes it) with promotion hooks and report every "
        "operation whose NumPy 2 result differs from NumPy 1.x value-based promotion: dtype changes, new "
        "OverflowError/TypeError, new overflows. Usage: cuaudit trace [options] -- python script.py ARGS",
    )
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PYTHON SCRIPT [ARGS]",
                   help="the command to run: `python script.py ARGS`, `python -m module ARGS`, or `script.py ARGS`")
    p.add_argument("--include", action="append", default=[], metavar="DIR",
                   help="trace modules under DIR (default: the script's directory and the working directory)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds before the program is stopped (default: config probe-timeout x 60, i.e. 1 hour)")
    p.add_argument("--keep-records", metavar="FILE", help="also keep the raw tracer records (JSON) in FILE")
    add_audit_options(p)
    p.set_defaults(func=execute)


def _private_path(tmp: str) -> str:
    """A directory holding only the cuaudit package, to put on the child's path."""
    import cuaudit

    pkg = os.path.dirname(os.path.abspath(cuaudit.__file__))
    d = os.path.join(tmp, "path")
    os.makedirs(d, exist_ok=True)
    os.symlink(pkg, os.path.join(d, "cuaudit"))
    return d


def execute(args: argparse.Namespace) -> int:
    import json
    import shlex
    import shutil
    import tempfile
    import time

    from cuaudit.inputs.process import BoundExceeded, run_bounded
    from cuaudit.model import ProbeRecord
    from cuaudit.trace.findings import build_report, interpreter_and_program

    program = list(args.program)
    if program and program[0] == "--":
        program = program[1:]
    try:
        python, flags, runner_args = interpreter_and_program(program, sys.executable)
    except ValueError as exc:
        print(f"cuaudit trace: error: {exc}", file=sys.stderr)
        return 2
    if shutil.which(python) is None and not os.path.exists(python):
        print(f"cuaudit trace: error: interpreter {python!r} not found", file=sys.stderr)
        return 2
    config = config_from_args(args)
    timeout = args.timeout if args.timeout is not None else config.probe_timeout * 60
    tmp = tempfile.mkdtemp(prefix="cuaudit-trace-")
    try:
        out = os.path.join(tmp, "records.json")
        private = _private_path(tmp)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([private] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env["CUAUDIT_TRACE_PATH"] = private
        cmd = [python, *flags, "-m", "cuaudit.trace.runner", "--out", out]
        for d in args.include:
            cmd += ["--include", os.path.abspath(d)]
        cmd += runner_args
        shown = shlex.join(program)
        print(f"cuaudit trace: running {shown}", file=sys.stderr)
        started = time.perf_counter()
        try:
            # the program's own output goes to stderr when the report goes to stdout
            relay: tuple[int, int] | None = (1, 2)
            if not args.output:
                try:
                    relay = (sys.stderr.fileno(), sys.stderr.fileno())
                except (OSError, ValueError, AttributeError):
                    relay = None  # stderr is not a file (captured): read the output, then relay it
            proc = run_bounded(cmd, env=env, timeout=timeout, relay=relay)
            if relay is None:
                sys.stderr.write(proc.out + proc.err)
            outcome = f"exit status {proc.returncode}"
        except BoundExceeded as exc:
            outcome = f"stopped after {timeout:.0f}s (timeout)" if exc.timed_out else f"stopped: {exc}"
        except OSError as exc:
            print(f"cuaudit trace: error: cannot run {python}: {exc}", file=sys.stderr)
            return 2
        seconds = time.perf_counter() - started
        try:
            with open(out, encoding="utf-8") as fh:
                data = json.load(fh)
            if not isinstance(data, dict):
                raise ValueError("not the runner's records")
        except (OSError, ValueError):
            print(f"cuaudit trace: error: the program left no trace records ({outcome}); "
                  "is NumPy importable by that interpreter?", file=sys.stderr)
            return 2
        if args.keep_records:
            shutil.copyfile(out, args.keep_records)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if data.get("numpy") and data["numpy"].split(".")[0] in ("0", "1"):
        print(f"cuaudit trace: note: the program ran with NumPy {data['numpy']}; the tracer compares against "
              "NumPy 2 behaviour, run it under NumPy >= 2", file=sys.stderr)
    probe = ProbeRecord(what=f"traced {shown}", command=shown, seconds=round(seconds, 3), outcome=outcome)
    report = build_report(data, root=os.getcwd(), config=config, probe=probe, seconds=seconds)
    return emit(report, args)
