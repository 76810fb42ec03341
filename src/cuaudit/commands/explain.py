"""``cuaudit explain [ERROR | -]``: from an error message or a traceback to the cause and the fix."""

from __future__ import annotations

import argparse
import sys


def configure_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explain",
        help="explain an error message or a traceback: what happened, why, what to do now (imports nothing)",
        description="Recognise the failure in an error message or a whole traceback (an argument, --file, or "
        "standard input), audit only what it needs in the environment (this interpreter's, or --python's) and "
        "answer in a few lines: what happened, why, what to do now, what the maintainer should fix, and the rule "
        "that holds the details. Nothing is imported or run.",
    )
    p.add_argument("error", nargs="*", metavar="ERROR",
                   help="the error text (quote it), or '-' for standard input (the default when it is not a terminal)")
    p.add_argument("--file", "-F", metavar="FILE", help="read the traceback from FILE")
    p.add_argument("--python", metavar="PYTHON", help="interpreter of the environment that failed (default: this one)")
    p.add_argument("--artifact", "-a", dest="artifacts", action="append", default=[], metavar="PATH",
                   help="also audit this wheel, sdist, source tree or NAME==VERSION (what was being built or installed)")
    p.add_argument("--target-arch", dest="target_archs", metavar="ARCH",
                   help="the GPU's architecture (sm_89), for device-code errors; default: from the text or nvidia-smi")
    p.add_argument("--format", "-f", choices=("text", "json"), default="text")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when the audit confirmed a cause")
    p.add_argument("--config", metavar="PYPROJECT", help="read [tool.cuaudit] from this file")
    p.add_argument("--isolated", action="store_true", help="ignore configuration files")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the fact cache")
    p.add_argument("--cache-dir", help="fact cache directory (env CUAUDIT_CACHE_DIR)")
    p.set_defaults(func=execute)


def read_error(args: argparse.Namespace) -> str | None:
    if args.file:
        from cuaudit.config import ConfigError

        try:
            with open(args.file, encoding="utf-8", errors="replace") as fh:
                return fh.read(16 * 1024**2)
        except OSError as exc:
            raise ConfigError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    if args.error and args.error != ["-"]:
        return " ".join(args.error) if len(args.error) > 1 else args.error[0]
    if args.error == ["-"] or not sys.stdin.isatty():
        return sys.stdin.read(16 * 1024**2)
    return None


def execute(args: argparse.Namespace) -> int:
    from cuaudit import config as config_mod
    from cuaudit.config import ConfigError
    from cuaudit.explain import explain
    from cuaudit.inputs.environment import InterpreterError

    text = read_error(args)
    if not text or not text.strip():
        print("cuaudit explain: give the error text as an argument, with --file, or on standard input", file=sys.stderr)
        return 2
    overrides: dict = {"cache-dir": args.cache_dir}
    if args.no_cache:
        overrides["cache"] = False
    config = config_mod.load(config_file=args.config, isolated=args.isolated, overrides=overrides)
    archs = tuple(a.strip() for a in (args.target_archs or "").split(",") if a.strip())
    if archs:
        archs = config_mod.apply(config, {"target-archs": list(archs)}, "--target-arch").target_archs  # validated
    try:
        answer = explain(text, python=args.python, paths=args.artifacts, config=config, target_archs=archs)
    except InterpreterError as exc:
        raise ConfigError(str(exc)) from None
    from cuaudit.commands.cache import enforce_cap

    enforce_cap(config)
    if args.format == "json":
        import json

        print(json.dumps(to_json(answer), indent=2))
    else:
        sys.stdout.write(render_text(answer, width=_width()))
    if args.exit_zero:
        return 0
    return 1 if answer.confirmed else 0


def _width() -> int:
    import shutil

    return max(60, min(shutil.get_terminal_size((100, 24)).columns, 120))


def to_json(answer) -> dict:
    from cuaudit.report.json_report import finding_dict

    return {
        "kind": answer.kind,
        "summary": answer.summary,
        "why": list(answer.why),
        "user": list(answer.user),
        "maintainer": list(answer.maintainer),
        "codes": list(answer.codes),
        "details": [f"cuaudit rule {c}" for c in answer.codes],
        "next": list(answer.next),
        "audited": list(answer.audited),
        "evidence": dict(answer.evidence),
        "confirmed": answer.confirmed,
        "findings": [finding_dict(f) for f in answer.findings],
    }


def render_text(answer, *, width: int = 100) -> str:
    """A few labelled lines, wrapped with a hanging indent."""
    import textwrap

    label_w = 12
    out = [textwrap.fill(answer.summary, width=width)]
    out.append("")

    def block(label: str, items) -> None:
        for n, item in enumerate(items):
            head = (label if n == 0 else "").ljust(label_w)
            out.append(textwrap.fill(item, width=width, initial_indent=head, subsequent_indent=" " * (label_w + 2),
                                     break_long_words=False, break_on_hyphens=False))

    block("Why", answer.why)
    block("Do now", answer.user)
    block("Maintainer", answer.maintainer)
    if answer.codes:
        block("Details", [", ".join(f"cuaudit rule {c}" for c in answer.codes)])
    block("Next", answer.next)
    if answer.audited:
        block("Audited", [", ".join(answer.audited)])
    elif answer.kind != "unrecognised":
        block("Audited", ["nothing: the answer comes from the message alone"])
    return "\n".join(out) + "\n"

