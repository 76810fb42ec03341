"""``cuaudit rules`` and ``cuaudit rule CODE``: the documentation of every rule."""

from __future__ import annotations

import argparse
import json
import sys


def configure_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rules", help="list every rule", description="List every rule with its code, name and severity.")
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    p.add_argument("--select", help="only rules matching these codes or prefixes")
    p.set_defaults(func=list_rules)
    q = sub.add_parser("rule", help="explain one rule", description="Explain a rule: what it finds, why, example, fix.")
    q.add_argument("code", help="rule code (CU201) or name (unused-needed-library)")
    q.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    q.set_defaults(func=show_rule)


def _doc_json(doc) -> dict:
    return {
        "code": doc.code,
        "name": doc.name,
        "summary": doc.summary,
        "severity": str(doc.severity),
        "family": doc.family,
        "sections": dict(doc.sections),
    }


def list_rules(args: argparse.Namespace) -> int:
    from cuaudit.rules import FAMILIES, all_rules, matches

    rules = all_rules()
    if args.select:
        prefixes = [p.strip().upper() for p in args.select.split(",") if p.strip()]
        rules = [r for r in rules if matches(r.code, prefixes)]
    docs = [r.doc() for r in rules]
    if args.format == "json":
        json.dump([_doc_json(d) for d in docs], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    family = None
    for d in docs:
        if d.code[:3] != family:
            family = d.code[:3]
            title = f"{family}xx  {FAMILIES.get(family, '')}"
            print(f"\n## {title}\n" if args.format == "markdown" else f"\n{title}")
        if args.format == "markdown":
            print(f"- [{d.code}](rules/{d.code}.md) `{d.name}` ({d.severity}): {d.summary}")
        else:
            print(f"  {d.code}  {d.name:<36} {str(d.severity):<8} {d.summary}")
    return 0


def show_rule(args: argparse.Namespace) -> int:
    from cuaudit.rules import by_name_or_code

    try:
        doc = by_name_or_code(args.code).doc()
    except KeyError:
        print(f"cuaudit: error: unknown rule {args.code!r} (see `cuaudit rules`)", file=sys.stderr)
        return 2
    if args.format == "json":
        json.dump(_doc_json(doc), sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.format == "markdown":
        sys.stdout.write(doc.markdown())
    else:
        from rich.console import Console
        from rich.markdown import Markdown

        Console(highlight=False).print(Markdown(doc.markdown()))
    return 0
