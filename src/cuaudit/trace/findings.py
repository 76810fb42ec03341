"""Turn the tracer's records into findings (CU410-CU413) and a Report.

One finding per source location and rule, with the total count; the
evidence lists every operand combination seen there.  Locations under the
root directory (the working directory) belong to one tree artifact, others
to file artifacts, so every renderer (text, JSON, SARIF, GitHub, HTML) shows
them like any other finding.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from cuaudit import rules as rules_registry
from cuaudit.config import Config
from cuaudit.model import ArtifactKind, ArtifactRef, Finding, Location, Severity

_KIND_TO_CODE = {"dtype": "CU410", "error": "CU411", "warning": "CU412", "value": "CU413", "fixed": "CU413"}


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _message(rec: Mapping[str, Any], numpy: str) -> str:
    head = f"`{rec['source']}` ({rec['operands']})"
    new = str(rec["new"]).splitlines()[0]
    kind = rec["kind"]
    if kind == "error":
        return f"{head}: NumPy 1.x gave {rec['legacy']}, NumPy {numpy} raises {new}"
    if kind == "warning":
        return f"{head}: NumPy 1.x gave {rec['legacy']}, NumPy {numpy} gives {new} and overflows (RuntimeWarning)"
    if kind == "fixed":
        return f"{head}: NumPy 1.x raised {rec['legacy']}, NumPy {numpy} gives {new}"
    return f"{head}: NumPy 1.x gave {rec['legacy']}, NumPy {numpy} gives {new}"


_FIXES = {
    "CU410": "Make the dtype explicit: a Python scalar keeps the array's dtype; `astype`/a scalar type picks a wider one.",
    "CU411": "Widen the operand first (`a.astype(np.int64)`), or check ranges with np.iinfo/np.finfo instead of np.can_cast.",
    "CU412": "Compute in the wider dtype explicitly (`a.astype(np.float32)`).",
    "CU413": "Ask about dtypes or values explicitly (`np.can_cast(x.dtype, ...)`, `np.iinfo`).",
}


def findings_from_trace(data: Mapping[str, Any], root: str) -> tuple[list[Finding], list[ArtifactRef]]:
    numpy = data.get("numpy") or "2"
    root = os.path.abspath(root)
    tree = ArtifactRef(ArtifactKind.TREE, root)
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for rec in data.get("records", []):
        code = _KIND_TO_CODE.get(rec.get("kind", ""))
        if code is None:
            continue
        groups.setdefault((rec["file"], rec["line"], rec["column"], code), []).append(rec)
    findings: list[Finding] = []
    artifacts: dict[ArtifactRef, None] = {}
    for (file, line, column, code), recs in sorted(groups.items()):
        recs.sort(key=lambda r: -int(r["count"]))
        total = sum(int(r["count"]) for r in recs)
        path = os.path.abspath(file)
        if path.startswith(root + os.sep):
            ref, member = tree, os.path.relpath(path, root).replace(os.sep, "/")
        else:
            ref, member = ArtifactRef(ArtifactKind.FILE, path), os.path.basename(path)
        artifacts[ref] = None
        first = recs[0]
        message = _message(first, numpy)
        if len(recs) > 1:
            message += f" (and {len(recs) - 1} other operand combination{'s' if len(recs) > 2 else ''})"
        message += f"; seen {_times(total)}"
        rule = rules_registry.get(code)
        findings.append(rule.finding(
            Location(ref, member, line, column, first.get("end_line"), first.get("end_column")),
            message,
            fix=_FIXES[code],
            evidence={
                "count": total,
                "numpy": numpy,
                "source": first["source"],
                "observed": [
                    {"operands": r["operands"], "legacy": r["legacy"], "numpy2": str(r["new"]).splitlines()[0],
                     "count": int(r["count"])}
                    for r in recs
                ],
            },
            key=f"{first['source']}",
            origin="probe",
        ))
    return findings, list(artifacts)


def build_report(data: Mapping[str, Any], *, root: str, config: Config, probe: Any, seconds: float) -> Any:
    """A :class:`cuaudit.engine.Report` for a traced run (selection, severities, suppressions applied)."""
    from cuaudit.engine import Report, finish, suppressions_for
    from cuaudit.inputs.tree import NamedFiles

    findings, artifacts = findings_from_trace(data, root)
    selected = [cls.code for cls in rules_registry.select(config.selected, config.ignored)]
    # The same finishing step as check/env/diff: selection, per-path ignores,
    # severities, inline suppressions (read as facts of the traced files) and baseline.
    files: dict[ArtifactRef, set[str]] = {}
    for f in findings:
        if f.location.member:
            files.setdefault(f.location.artifact, set()).add(f.location.member)
    sources = [NamedFiles(ref, paths) for ref, paths in files.items()]
    kept, suppressed, baselined = finish(findings, config, set(selected), suppressions_for(findings, sources, config))
    return Report(
        findings=kept,
        skipped=[],
        artifacts=artifacts or [ArtifactRef(ArtifactKind.TREE, os.path.abspath(root))],
        config=config,
        rules=[c for c in selected if c.startswith("CU41")],
        probes=[probe],
        stats={
            "seconds": round(seconds, 3),
            "numpy": data.get("numpy"),
            "cupy": data.get("cupy"),
            "sites_rewritten": data.get("sites_rewritten", 0),
            "checked_operations": data.get("checked_operations", 0),
            "exit": data.get("exit"),
        },
        suppressed=suppressed,
        baselined=baselined,
        command="trace",
    )


__all__ = ["findings_from_trace", "build_report", "Severity"]


def interpreter_and_program(argv: Sequence[str], default_python: str) -> tuple[str, list[str], list[str]]:
    """Split ``python [-flags] script.py ARGS`` / ``python -m mod ARGS`` / ``script.py ARGS``.

    Returns (interpreter, interpreter flags, runner arguments).
    """
    argv = list(argv)
    if not argv:
        raise ValueError("nothing to run: give `-- python script.py ARGS`")
    first = argv[0]
    base = os.path.basename(first)
    if first.endswith(".py") or not (base.startswith("python") or base.startswith("pypy")):
        if first.endswith(".py"):
            return default_python, [], argv
        raise ValueError(f"{first!r} is not a Python interpreter or a .py script")
    flags: list[str] = []
    rest = argv[1:]
    while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c", "-"):
        flag = rest.pop(0)
        flags.append(flag)
        if flag in ("-X", "-W") and rest:
            flags.append(rest.pop(0))
    if not rest:
        raise ValueError("no script or -m module after the interpreter")
    if rest[0] == "-c":
        raise ValueError("`python -c CODE` cannot be traced: put the code in a file")
    if rest[0] == "-m":
        if len(rest) < 2:
            raise ValueError("-m needs a module name")
        return first, flags, ["-m", rest[1], "--", *rest[2:]]
    return first, flags, ["--", *rest]
