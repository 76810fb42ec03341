"""``cuaudit check PATH...``: audit wheels, sdists, source trees, ELF files or NAME==VERSION."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from cuaudit.commands._common import add_audit_options, config_from_args, emit, make_progress


def configure_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="audit wheels, sdists, source trees, ELF files or NAME==VERSION (never runs them)",
        description="Audit what you are about to ship. Each PATH is a wheel, an sdist (.tar.gz/.zip), "
        "a source tree, a single file, or NAME==VERSION fetched from the configured index. "
        "Nothing is imported, built or run.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="what to audit (default: the current directory)")
    p.add_argument("--fix", action="store_true", help="apply safe automatic fixes to source files")
    p.add_argument("--unsafe-fixes", action="store_true", help="with --fix/--diff, also apply unsafe fixes")
    p.add_argument("--diff", action="store_true", help="print the automatic fixes as a diff, change nothing")
    p.add_argument("--with", dest="with_", action="append", default=[], metavar="PATH",
                   help="extra wheels or library folders that supply needed libraries: used as evidence "
                   "(linkage rules), not audited; also [tool.cuaudit.linkage] with = [...]")
    p.add_argument("--python", metavar="PYTHON",
                   help="also audit the installed distributions of this interpreter's environment; their versions "
                   "decide version-dependent severities (e.g. CU401: CuPy and NumPy versions). Nothing is imported")
    p.add_argument("-r", "--requirement", dest="requirements", action="append", default=[], metavar="FILE",
                   help="audit the exact pins of a requirements file or a pylock.toml together, before installing: "
                   "each NAME==VERSION is fetched from the index (wheels, never built); unpinned lines are skipped")
    add_audit_options(p)
    p.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from cuaudit.engine import audit

    config = config_from_args(args)
    if getattr(args, "with_", None):
        import dataclasses

        options = dict(config.options)
        linkage = dict(options.get("linkage", {}))
        linkage["with"] = list(linkage.get("with", ())) + list(args.with_)
        options["linkage"] = linkage
        config = dataclasses.replace(config, options=options)
    paths = list(args.paths or ([] if args.requirements else ["."]))
    if args.requirements:
        from cuaudit.inputs.requirements import read_pinned
    pinned = [read_pinned(r) for r in args.requirements]
    paths += [spec for ps in pinned for _line, spec in ps.pins]
    scripts = [p for p in paths if p.endswith(".py") and os.path.isfile(p)]
    resolved = resolve_script_imports(scripts) if scripts and not args.python else None
    report = audit(paths + (resolved.evidence if resolved else []), env=args.python or None, config=config,
                   progress=make_progress(args), command="check")
    if resolved is not None:
        resolved.finish(report)
    for ps in pinned:
        report.skipped += ps.skipped
    if args.fix or args.diff:
        from cuaudit.repair.source import apply_fixes

        result = apply_fixes(report, unsafe=args.unsafe_fixes, write=args.fix and not args.diff)
        for error in result.errors:
            print(f"cuaudit: not fixed: {error}", file=__import__("sys").stderr)
        if args.diff:
            sys.stdout.write(result.diff)
            return 0 if args.exit_zero or not result.diff else 1
        report = result.remaining(report)
    return emit(report, args)


@dataclass
class ScriptImports:
    """The distributions a user's scripts import, read as evidence (never reported on), and what was not found."""

    python: str
    evidence: list[Any] = field(default_factory=list)
    skipped: list[Any] = field(default_factory=list)

    def finish(self, report: Any) -> None:
        refs = {a.ref for a in self.evidence}
        report.findings = [f for f in report.findings if f.location.artifact not in refs]
        report.artifacts = [r for r in report.artifacts if r not in refs]
        report.skipped = [s for s in report.skipped if s.location.artifact not in refs] + self.skipped
        report.stats["imports_resolved_against"] = self.python
        report.stats["import_evidence"] = sorted(f"{r.name} {r.version}" for r in refs)


def resolve_script_imports(scripts: list[str]) -> ScriptImports:
    """Resolve the imports of ``scripts`` against this interpreter's environment, as a type checker does.

    The distributions that provide them are added to the audit as evidence (their Python
    sources only: the code-side CU1xx rules need their module tree), so that
    `import cupy; cupy.cuda.nccl` in train.py is judged without `--python`; an import that
    resolves nowhere is listed as skipped, with the reason.
    """
    from cuaudit.inputs.artifact import MemberSubset
    from cuaudit.explain.scope import Installed
    from cuaudit.facts import MemberReader
    from cuaudit.facts import get as extractor
    from cuaudit.inputs.file import FileArtifact
    from cuaudit.model import Location, MemberKind, Skipped

    installed = Installed.load(None)
    out = ScriptImports(installed.python)
    stdlib = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
    wanted: dict[str, Any] = {}
    for script in scripts:
        art = FileArtifact(script)
        if not art.members:
            continue
        try:
            facts = extractor("python_source")().extract(MemberReader(art, art.members[0], None))
        except Exception:  # noqa: BLE001 - the audit itself reports the file's problem (CU0xx)
            continue
        here = os.path.dirname(os.path.abspath(script))
        seen: set[str] = set()
        for imp in getattr(facts, "imports", ()):
            root = (imp.module or "").split(".")[0]
            if imp.level or not root or root in stdlib or root in seen or imp.type_checking:
                continue
            seen.add(root)
            if os.path.exists(os.path.join(here, root + ".py")) or os.path.isdir(os.path.join(here, root)):
                continue  # the script's own sibling module
            owners = installed.owners(root)
            if not owners:
                out.skipped.append(Skipped(
                    Location(art.ref, art.members[0].path, line=imp.line),
                    f"import {root}: not installed in {installed.python}; code using it was not checked against it "
                    "(imports are resolved against this interpreter's environment: give --python for another)",
                    "",
                ))
            for dist in owners:
                wanted.setdefault(dist.ref.name, dist)
    for dist in wanted.values():
        sources = {m.path for m in dist.members if m.kind in (MemberKind.PYTHON, MemberKind.STUB)}
        out.evidence.append(MemberSubset(dist, sources))
    return out
