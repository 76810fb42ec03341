"""``cuaudit env``: audit every distribution installed in an environment."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from cuaudit.commands._common import add_audit_options, config_from_args, emit, make_progress

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.finish import Report


def configure_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "env",
        help="audit every distribution installed in an environment (imports nothing)",
        description="Audit the installed distributions of the current interpreter, or of --python. "
        "Packages are read from disk, never imported (unless --probe).",
    )
    p.add_argument("--python", metavar="PYTHON",
                   help="interpreter of the environment, or its folder (default: this one); never imports its packages")
    p.add_argument("--package", action="append", metavar="NAME", default=[],
                   help="report only this distribution's findings, and those of its dependencies at or above "
                   "--fail-on (repeatable); the other distributions are still read where these need them "
                   "(what they import and link against), so cross-package checks hold, but their own "
                   "findings are not computed")
    add_audit_options(p)
    p.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from cuaudit.engine import audit

    config = config_from_args(args)
    if args.package:
        import dataclasses

        from packaging.utils import canonicalize_name

        # the rules compute the findings of these (and of what they require) only: the report keeps no other
        config = dataclasses.replace(config, focus=tuple(sorted({canonicalize_name(n) for n in args.package})))
    report = audit([], env=args.python or True, config=config, progress=make_progress(args), command="env")
    if args.package:
        report = only_packages(report, args.package)
    return emit(report, args)


def only_packages(report: "Report", names: list[str]) -> "Report":
    """The report narrowed to the named distributions and what they depend on.

    Every finding of a named distribution is kept; of its dependencies (their
    ``Requires-Dist``, transitively, extras left out), the findings that fail
    the audit: those explain why the named one breaks (a library it needs that
    a dependency lacks), the rest is another package's noise.
    """
    import dataclasses

    from packaging.utils import canonicalize_name

    from cuaudit.model import ArtifactKind, ConfigError

    installed = {canonicalize_name(a.name): a for a in report.artifacts if a.kind is ArtifactKind.INSTALLED and a.name}
    wanted = {canonicalize_name(n) for n in names}
    unknown = sorted(wanted - installed.keys())
    if unknown:
        raise ConfigError(f"--package: not installed in this environment: {', '.join(unknown)}")
    deps = _dependencies(report, wanted, set(installed)) - wanted
    keep = {installed[n] for n in wanted | deps}
    findings = [
        f for f in report.findings
        if f.location.artifact in keep
        and (canonicalize_name(f.location.artifact.name) in wanted or f.severity >= report.config.fail_on)
    ]
    return dataclasses.replace(
        report,
        findings=findings,
        skipped=[s for s in report.skipped if s.location.artifact in keep],
        artifacts=[a for a in report.artifacts if a in keep],
    )


def _dependencies(report: "Report", roots: set[str], installed: set[str]) -> set[str]:
    """The installed distributions that ``roots`` require, transitively (read from their METADATA)."""
    from cuaudit.requirement import required_closure

    if report.environment is None:
        return set()
    return required_closure(report.environment.site_dirs, roots, installed)
