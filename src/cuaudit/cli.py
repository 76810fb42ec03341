"""The ``cuaudit`` command.  Each subcommand is a module of ``cuaudit.commands``
with ``configure_parser(subparsers)`` and ``execute(args) -> int``; heavy
imports happen inside ``execute``.

Exit codes: 0 nothing at or above the fail threshold, 1 findings, 2 usage or
internal error.
"""

from __future__ import annotations

import os
import sys


def _forget_working_directory() -> None:
    """Drop the working directory from ``sys.path`` (``python -m cuaudit``
    puts it first): auditing a tree from inside it must never import the
    tree's ``json.py`` or ``argparse.py`` in place of the standard library."""
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = ""
    while sys.path and sys.path[0] in ("", ".", cwd):
        del sys.path[0]


if __name__ == "__main__":  # python -m cuaudit.cli: before any other import
    _forget_working_directory()

from typing import TYPE_CHECKING  # noqa: E402

from cuaudit import __version__  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover
    import argparse


def build_parser(command: str | None = None) -> "argparse.ArgumentParser":
    """The whole command line, or with ``command`` only that subcommand's part (what
    parsing its arguments needs: importing and configuring every command costs start-up)."""
    import argparse

    import cuaudit.commands as commands

    parser = argparse.ArgumentParser(
        prog="cuaudit",
        description="Find, explain and repair compatibility failures of GPU (CUDA) Python packages.",
    )
    parser.add_argument("--version", action="version", version=f"cuaudit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if command is not None:
        import importlib

        importlib.import_module(f"{commands.__name__}.{command}").configure_parser(sub)
        return parser
    from cuaudit.discovery import import_submodules

    for module in import_submodules(commands.__name__, commands.__path__):
        module.configure_parser(sub)
    return parser


def _command_named(argv: list[str]) -> str | None:
    """The subcommand that the first word of ``argv`` names, when it names one (None: help,
    ``--version``, a mistyped command: those need every command's parser)."""
    if not argv or argv[0].startswith("_") or not argv[0].isidentifier():
        return None
    import cuaudit.commands as commands

    try:  # exactly that file name (a case-insensitive check of the folder would accept CHECK)
        names = os.listdir(os.path.dirname(commands.__file__ or ""))
    except OSError:
        return None
    return argv[0] if argv[0] + ".py" in names else None


def main(argv: list[str] | None = None) -> int:
    from cuaudit.heap import end_startup, pause_for_startup

    pause_for_startup()
    try:
        return _run(argv)
    finally:
        end_startup()


def _run(argv: list[str] | None) -> int:
    if argv is None:  # a real command line, not the library or the tests calling main()
        _forget_working_directory()

    import warnings

    # ast.parse of audited sources reports *their* invalid escapes (a SyntaxWarning from
    # Python 3.12, a DeprecationWarning before) on stderr, seen on the GPU machine; they
    # are not cuaudit's to print.
    warnings.filterwarnings("ignore", category=SyntaxWarning)
    warnings.filterwarnings("ignore", message="invalid escape sequence")
    words = sys.argv[1:] if argv is None else argv
    if words[:1] == ["--version"]:  # the version alone: no command need be imported
        print(f"cuaudit {__version__}")
        return 0
    from cuaudit import codecache

    codecache.install()  # before any dataclass of cuaudit's is defined
    from cuaudit.config import ConfigError

    parser = build_parser(_command_named(words))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: 0 for --help/--version, 2 for usage errors
        return int(exc.code or 0)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"cuaudit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cuaudit: interrupted", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - an internal error is exit 2 with a message, never exit 1
        import traceback

        if os.environ.get("CUAUDIT_DEBUG"):
            traceback.print_exc()
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" (at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno})" if tb else ""
        print(f"cuaudit: internal error: {type(exc).__name__}: {exc}{where}", file=sys.stderr)
        return 2


def entry() -> None:  # console script
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    entry()
