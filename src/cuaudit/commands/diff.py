"""``cuaudit diff OLD NEW``: the Cython C-API change between two releases, triaged, and whom it breaks."""

from __future__ import annotations

import argparse
import os
import sys

from cuaudit.commands._common import add_audit_options, config_from_args, emit, make_progress


def configure_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diff",
        help="compare the Cython C-API and modules of two releases (imports nothing)",
        description="Compare OLD and NEW (each a wheel, a directory, NAME==VERSION, or the name of a "
        "distribution installed in --python's environment): C functions/variables added, removed or "
        "changed in signature, modules removed or moved, extension types resized, public Python modules "
        "removed; triaged harmless (info) / breaking (error). With --consumers, which consumers break.",
    )
    p.add_argument("old", metavar="OLD")
    p.add_argument("new", metavar="NEW")
    p.add_argument("--consumers", nargs="+", default=[], metavar="PATH",
                   help="wheels, directories, NAME==VERSION or installed names whose imports to check "
                        "(files are only read: an executable named python* is a file like any other)")
    p.add_argument("--consumers-python", metavar="PYTHON", action="append", default=[],
                   help="also check every distribution installed in this interpreter's environment "
                        "(the interpreter is run once, to ask for its paths)")
    p.add_argument("--python", metavar="PYTHON", help="interpreter whose environment holds installed names")
    add_audit_options(p)
    p.set_defaults(func=execute)


def resolve_side(spec: str, python: str | None, config) -> list:
    """Artifacts for one side: a path or NAME==VERSION, else an installed distribution's name."""
    from cuaudit.inputs import resolve
    from cuaudit.inputs.index import looks_like_requirement

    # An input is data, never a program: a path is read, whatever its name or
    # mode (a wheel with a shell script in front is still a valid zip).  Only
    # interpreters named by an option that says so (--python,
    # --consumers-python) are ever run.
    if os.path.lexists(spec) or looks_like_requirement(spec):
        return resolve([spec], exclude=config.exclude, cache_dir=config.cache_dir)
    from packaging.utils import canonicalize_name

    from cuaudit.inputs.environment import load_environment
    from cuaudit.inputs.file import MissingArtifact

    env = load_environment(python)
    want = canonicalize_name(spec)
    found = [d for d in env.distributions if canonicalize_name(d.ref.name) == want]
    return found or [MissingArtifact(spec, f"is neither a path, NAME==VERSION, nor installed in {env.info.python}")]


def environment_distributions(python: str) -> list:
    """Every distribution installed in the environment of ``python`` (which the user named to be run)."""
    from cuaudit.inputs.environment import InterpreterError, load_environment
    from cuaudit.inputs.file import MissingArtifact

    try:
        return list(load_environment(python).distributions)
    except InterpreterError as exc:
        return [MissingArtifact(python, str(exc))]


def label_of(artifacts: list, spec: str) -> str:
    for a in artifacts:
        if a.ref.name:
            return f"{a.ref.name} {a.ref.version}".strip()
    return os.path.basename(spec.rstrip("/")) or spec


def execute(args: argparse.Namespace) -> int:
    import time

    from cuaudit import rules as rules_registry
    from cuaudit.analysis.capi_diff import Side, diff_findings
    from cuaudit.analysis.capi_index import CapiIndex
    from cuaudit.engine import Report, audit_stats, finish, gather, suppressions_for

    started = time.perf_counter()
    config = config_from_args(args)
    old = resolve_side(args.old, args.python, config)
    new = resolve_side(args.new, args.python, config)
    consumers = [a for spec in args.consumers for a in resolve_side(spec, args.python, config)]
    for python in args.consumers_python:
        consumers += environment_distributions(python)
    # the compared distribution itself is not its own consumer (an environment lists it too)
    from packaging.utils import canonicalize_name

    compared = {canonicalize_name(a.ref.name) for a in old + new if a.ref.name}
    consumers = [a for a in consumers if not a.ref.name or canonicalize_name(a.ref.name) not in compared]
    # one gather for the three sides: listing, extraction, the fact cache and the CU0xx
    # problems met on the way, exactly as `check` does them
    gathered = gather(old + new + consumers, config=config, extractors=("cython-capi", "metadata"),
                      progress=make_progress(args))
    everything, extraction = gathered.artifacts, gathered.extraction
    position = {id(a): i for i, a in enumerate(everything)}

    def facts_of(art, path):
        return extraction.facts.get((position[id(art)], path, "cython-capi"))

    sides = {}
    for label, arts, spec in (("old", old, args.old), ("new", new, args.new)):
        sides[label] = Side(label_of(arts, spec), arts, CapiIndex.build(arts, facts_of))
    findings = list(gathered.problems)
    findings += diff_findings(sides["old"], sides["new"], consumers, lambda side, art: facts_of, rules_registry.get)
    selected = list(rules_registry.select(config.selected, config.ignored))
    findings, suppressed, baselined = finish(
        findings, config, {c.code for c in selected}, suppressions_for(findings, everything, config)
    )
    extraction.store.close()
    report = Report(
        findings=findings,
        skipped=[s for a in everything for s in a.skipped],
        artifacts=[a.ref for a in everything],
        config=config,
        rules=[c.code for c in selected],
        stats=audit_stats(gathered, started),
        suppressed=suppressed,
        baselined=baselined,
        command="diff",
    )
    return emit(report, args)
