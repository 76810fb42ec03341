"""``cuaudit explain``: from an error message or a traceback to the cause and the fix.

1. :mod:`~cuaudit.explain.traceback` reads the pasted text (frames, modules, the exception line);
2. :mod:`~cuaudit.explain.patterns` recognises the failure kind (a table, first match wins);
3. :mod:`~cuaudit.explain.scope` audits only what the kind needs: the distributions the
   traceback names, with the rule families of that kind, through the engine;
4. :mod:`~cuaudit.explain.answers` turns the findings into a few lines: what happened, why,
   what to do now, what the maintainer should fix, and the rule code for details.

Like every audit, nothing of the environment is imported or run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from cuaudit.explain.model import Explanation

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.config import Config

__all__ = ["Explanation", "explain"]


def explain(
    text: str,
    *,
    python: str | None = None,
    paths: Iterable[str] = (),
    config: "Config | None" = None,
    target_archs: Iterable[str] = (),
) -> Explanation:
    """Explain one pasted error against an environment (this interpreter's, or ``python``'s).

    ``paths``: artifacts to audit as well (a wheel, an sdist, a source tree: what was being
    built or installed).  Raises :class:`~cuaudit.inputs.environment.InterpreterError` when
    ``python`` does not run.
    """
    from cuaudit.config import Config
    from cuaudit.explain.answers import ANSWERS, Case, gpu_arch, unrecognised
    from cuaudit.explain.patterns import recognise
    from cuaudit.explain.scope import Installed, audit_scope
    from cuaudit.explain.traceback import parse

    config = config or Config()
    error = parse(text)
    hit = recognise(text)
    if hit is None:
        return unrecognised(error, python)
    pattern, match = hit
    groups = {k: v for k, v in match.groupdict().items() if v}
    installed = Installed.load(python)
    paths = list(paths)
    dists = []
    for g in pattern.module_groups:
        if groups.get(g):
            dists += installed.owners(groups[g])
    if groups.get("path"):
        owner = installed.owner_of_file(groups["path"])
        if owner is not None:
            dists.append(owner)
    for module in error.modules:
        dists += installed.owners(module)
    named = list(dict.fromkeys(dists))
    if pattern.families and not named and not paths and pattern.kind.startswith(("missing-library", "capi", "type-size")):
        # nothing in the text names a distribution: the environment, read with this kind's rules only
        named = list(installed.environment.distributions)
    if named and pattern.with_libraries:
        dists = named + installed.library_providers()
    else:
        dists = named
    files = list(error.user_files) if pattern.user_code else []
    archs = tuple(target_archs)
    extra: dict[str, str] = {}
    if pattern.kind == "no-kernel-image" and not archs:
        arch = gpu_arch(text)
        if arch:
            archs = (arch,)
    report = None
    if pattern.families and (dists or files or paths) and (pattern.kind != "no-kernel-image" or archs):
        report = audit_scope(installed, dists, families=pattern.families, config=config, paths=files + paths,
                             target_archs=archs)
    audited = tuple([f"{d.ref.name} {d.ref.version}" for d in named] + files + paths)
    case = Case(pattern.kind, groups, error, installed, report, python_arg=python, target_archs=archs,
                audited=audited + ((f"in {installed.python}",) if named else ()), paths=tuple(paths), extra=extra)
    return ANSWERS[pattern.kind](case)
