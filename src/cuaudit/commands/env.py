"""``cuaudit env``: audit every distribution installed in an environment."""

from __future__ import annotations

import argparse

from cuaudit.commands._common import add_audit_options, config_from_args, emit, make_progress


def configure_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "env",
        help="audit every distribution installed in an environment (imports nothing)",
        description="Audit the installed distributions of the current interpreter, or of --python. "
        "Packages are read from disk, never imported (unless --probe).",
    )
    p.add_argument("--python", metavar="PYTHON",
                   help="interpreter of the environment, or its folder (default: this one); never imports its packages")
    add_audit_options(p)
    p.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from cuaudit.engine import audit

    config = config_from_args(args)
    report = audit([], env=args.python or True, config=config, progress=make_progress(args), command="env")
    return emit(report, args)
