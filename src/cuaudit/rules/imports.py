"""CU1xx: submodule attribute traps, in packages and in the code that uses them.

Python binds a submodule as an attribute of its parent package only once
something imports it.  The seed incident: ``from cupy.cuda import nccl``
works while ``import cupy; cupy.cuda.nccl`` raises ``AttributeError: module
'cupy.cuda' has no attribute 'nccl'`` (CuPy >= 9: ``cupy.cuda.__getattr__``
serves ``cublas``, ``cusolver``, ``cusparse``, ``curand`` lazily but not
``nccl``), and users read it as "NCCL is not installed".

Package side (CU101-CU103) looks at what each package's ``__init__`` binds;
code side (CU104-CU105) at attribute chains in user code, resolved against
the wheels and trees of the same run, the installed distributions of the
audited environment, and the standard library (read from its source files).
The static model is in :mod:`cuaudit.analysis.module_tree`; ``--probe`` confirms the
package-side findings in a clean interpreter (:mod:`cuaudit.probe.imports`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterator

from cuaudit.model import Applicability, ArtifactKind, Edit, Finding, Fix, Location, Severity, error_for
from cuaudit.analysis.module_tree import ModuleUniverse, Reach, build_universe, public_submodules
from cuaudit.rules import Rule, get as rule_named

#: [tool.cuaudit.allow] lists this family reads
ALLOW_LISTS = {
    "submodule-traps": "submodules (globs of dotted names) meant to be imported explicitly, never CU102",
}

FACTS = "python_source"


# -- the shared model (one per audit) ----------------------------------------------------------


@dataclass
class _Model:
    universe: ModuleUniverse
    modules: dict[int, dict[str, Any]]  # artifact index -> its modules
    names: dict[int, dict[str, str]]  # artifact index -> member path -> module name

    def release(self) -> None:
        """Called by the rule context once every CU1xx rule has run (``RuleContext.release``)."""
        self.universe.release()


def _model(ctx) -> _Model:
    def build() -> _Model:
        def facts_for(art, member: str, extractor: str):
            return ctx.fact(extractor, art, member)

        def has_fact(art, member: str, extractor: str) -> bool:
            return ctx.has_fact(extractor, art, member)

        uni, per = build_universe(ctx.artifacts, facts_for, ctx.environment, stdlib=next(iter(ctx.evidence("stdlib")), None),
                                  has_fact=has_fact, prefetch=ctx.prefetch, walk=ctx.walk)
        names = {i: {e.member: n for n, e in mods.items() if e.member} for i, mods in per.items()}
        return _Model(uni, per, names)

    return ctx.memo("imports.model", build)


@dataclass(frozen=True)
class _PackageTrap:
    artifact: Any
    parent: str
    sub: str
    reach: Reach
    member: str
    kind: str  # module | package | extension
    probe: Any = None  # ProbeResult when probed


def _package_traps(ctx) -> list[_PackageTrap]:
    """Every public ``parent.sub`` of the audited packages that is a trap (static, then probed)."""

    def compute() -> list[_PackageTrap]:
        m = _model(ctx)
        uni = m.universe
        out: list[_PackageTrap] = []
        pairs: dict[int, list[tuple[str, str]]] = {}
        for i, art in enumerate(ctx.artifacts):
            if art.ref.kind is ArtifactKind.FILE or not ctx.in_focus(art):
                continue
            mods = m.modules.get(i, {})
            for parent, sub in public_submodules(uni, mods):
                pairs.setdefault(i, []).append((parent, sub))
        # what the verdicts read, extracted in batches: the parents' facts and the programs their imports reach
        uni.prefetch_closures(sorted({parent for plist in pairs.values() for parent, _ in plist}), with_facts=True)
        # [tool.cuaudit.allow] submodule-traps = ["numpy.distutils.*"]: submodules meant to be
        # imported explicitly (the maintainer's choice, not an oversight)
        allowed = ctx.config.allowed("submodule-traps")
        if allowed:
            import fnmatch

            pairs = {
                i: [(p, s) for p, s in plist if not any(fnmatch.fnmatchcase(f"{p}.{s}", g) for g in allowed)]
                for i, plist in pairs.items()
            }
        static: dict[tuple[int, str, str], Reach] = {}
        failed: dict[tuple[int, str], str] = {}
        for i, plist in pairs.items():
            for parent, sub in plist:
                if (i, parent) not in failed:
                    try:
                        static[(i, parent, sub)] = uni.reach(parent, sub, uni.closure([parent]))
                        continue
                    except Exception as exc:  # noqa: BLE001 - one package's failure must not hide the others' verdicts
                        failed[(i, parent)] = _why(exc)
                # no verdict of the model: a --probe may still find the trap
                static[(i, parent, sub)] = Reach("unknown", "the static model failed on this package (CU011)")
        for (i, parent), why in sorted(failed.items()):
            out.append(_PackageTrap(ctx.artifacts[i], parent, "", Reach("failed", why), m.modules[i][parent].member, "package"))
        probed: dict[tuple[str, str], Any] = {}
        if ctx.config.probe and pairs:
            probed = _run_probe(ctx, m, pairs)
        for (i, parent, sub), r in sorted(static.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
            art = ctx.artifacts[i]
            p = probed.get((parent, sub))
            if p is not None and p.status == "ok":
                continue  # reality says it works: never report against it
            if not r.is_trap and not (p is not None and p.status == "trap"):
                continue
            if not r.is_trap:
                # found only by the probe: say why the model missed it
                entry = uni.get(parent)
                has_getattr = bool(entry and entry.facts and entry.facts.getattr)
                r = Reach("getattr-trap" if has_getattr else "trap", f"probe only; static model: {r.detail}")
            entry = m.modules[i][f"{parent}.{sub}"]
            out.append(_PackageTrap(art, parent, sub, r, m.modules[i][parent].member, entry.kind, p))
        return out

    return ctx.memo("imports.package_traps", compute)


def _run_probe(ctx, m: _Model, pairs: dict[int, list[tuple[str, str]]]) -> dict[tuple[str, str], Any]:
    """Probe results for the (parent, sub) pairs; each pair is probed once per audit."""
    cache: dict[tuple[str, str], Any] = ctx.memo("imports.probe_results", dict)
    by_parent: dict[str, list[str]] = {}
    for plist in pairs.values():
        for parent, sub in plist:
            if (parent, sub) not in cache:
                by_parent.setdefault(parent, []).append(sub)
    if by_parent:
        # standard-library parents need none of the audited artifacts (no wheel is unpacked)
        stdlib_only = all(m.universe.is_stdlib(parent) for parent in by_parent)
        results = ctx.probe("imports", artifacts=ctx.artifacts, modules_of=m.modules, environment=ctx.environment,
                            pairs=by_parent, stdlib_only=stdlib_only)
        cache.update(results or {})
    return {pair: cache[pair] for plist in pairs.values() for pair in plist if pair in cache}


def _probe_evidence(t: _PackageTrap) -> dict[str, Any]:
    if t.probe is None:
        return {}
    return {"probe": {"status": t.probe.status, "exception": t.probe.exception, "message": t.probe.message}}


def _origin(t) -> str:
    return "probe" if t.probe is not None and t.probe.status == "trap" else "static"


def _probe_suffix(t: _PackageTrap) -> str:
    if t.probe is None:
        return ""
    if t.probe.status == "trap":
        return f" Confirmed by --probe: `{t.probe.exception}: {t.probe.message}`."
    if t.probe.status == "parent-failed":
        return f" (--probe could not import {t.parent}: {t.probe.exception}.)"
    return f" (--probe: {t.probe.text}.)"


# -- package side ------------------------------------------------------------------------------


def _why(exc: Exception) -> str:
    """What went wrong, and where (``KeyError: 'x' (at module_tree.py:912)``)."""
    return error_for(exc)[1].removeprefix("internal error while analysing this file: ")


def _failed(rule: Rule, t: "_PackageTrap | _ChainTrap") -> Finding:
    """CU011 for a package or file whose verdicts failed (a bug of ours): the rest of the family's
    findings stand, where a failure used to take every one of them (``rule_run``'s CU011)."""
    what = f"the submodules of {t.parent}" if isinstance(t, _PackageTrap) else "the attribute chains of this file"
    # one finding for the rules that share the verdicts (the report keeps one of equal findings)
    return rule_named("CU011").finding(
        Location(t.artifact.ref, t.member), f"the submodule-trap rules (CU1xx) failed on {what}: {t.reach.detail}",
        evidence={"rule": rule.code}, key=f"CU1xx:{t.parent or t.member}")


class SubmoduleNotBound(Rule):
    """## What it does
    Finds public submodules of a package that are not attributes of the
    package after `import package`: the package's `__init__` neither imports
    nor binds them, nothing that importing it runs imports them, and it has
    no module `__getattr__`.

    The check is static: it follows the module-level imports of `__init__`
    and of everything they import (so `os.path`, bound by `os` itself, is
    fine), and gives up silently where it cannot see (star imports from
    extension modules, `globals()` updates, modules replacing themselves in
    `sys.modules`).  Private (`_name`) and test (`tests`, `test`) modules and
    namespace packages are left out.  `--probe` confirms each finding with a
    real import in a clean interpreter.

    ## Why is this bad?
    `import pkg; pkg.sub.f()` raises `AttributeError: module 'pkg' has no
    attribute 'sub'` — or works by accident when some other import happened
    to load `pkg.sub` first.  Users read the error as "this feature is not
    installed" (the CuPy NCCL reports), and availability checks written as
    `hasattr(pkg, "sub")` give the wrong answer.

    ## Example
    ```python
    # pkg/__init__.py
    from .core import run
    # pkg/plot.py exists, but:
    import pkg
    pkg.plot.show()   # AttributeError: module 'pkg' has no attribute 'plot'
    ```

    ## Use instead
    Bind it in the package:
    ```python
    # pkg/__init__.py
    from . import plot
    ```
    or, when importing it eagerly is too costly, serve it lazily from a
    module `__getattr__` (PEP 562) or `lazy_loader.attach`.

    Default severity is info: leaving submodules to explicit imports is a
    common design, and a whole environment has thousands.  Maintainers raise
    it for their own package with `[tool.cuaudit] severity = {CU101 = "warning"}`.

    ## Fix safety
    No automatic fix: importing a submodule eagerly can change start-up time
    and the failure mode of `import pkg` (an optional dependency).  Submodules
    meant to be imported explicitly can be listed in `pyproject.toml`:
    `[tool.cuaudit.allow] submodule-traps = ["pkg.cli", "pkg.contrib.*"]`.
    """

    code = "CU101"
    options = ("allow.submodule-traps",)
    references = ("https://docs.python.org/3/reference/import.html#submodules",)
    name = "submodule-not-bound"
    summary = "A public submodule is not an attribute of its package after importing the package"
    # Info by default: most packages leave some submodules to be imported explicitly, and a
    # whole environment holds thousands (4,400 in a 103-distribution one), which would bury
    # CU102, the form that breaks users (cupy.cuda.nccl).  A package's own CI raises it with
    # `severity = {CU101 = "warning"}`.
    severity = Severity.INFO
    needs = (FACTS, "extension_strings", "import_time")

    def check(self, ctx) -> Iterator[Finding]:
        for t in _package_traps(ctx):
            if t.reach.status == "failed":
                yield _failed(self, t)
            if t.reach.status != "trap":
                continue
            what = "subpackage" if t.kind == "package" else "extension module" if t.kind == "extension" else "submodule"
            yield self.finding(
                Location(t.artifact.ref, t.member, symbol=f"{t.parent}.{t.sub}"),
                f"`import {t.parent}; {t.parent}.{t.sub}` raises AttributeError: the {what} {t.parent}.{t.sub} "
                f"exists but {t.reach.detail}.{_probe_suffix(t)}",
                fix=Fix(
                    f"Add `from . import {t.sub}` to {t.member}, or serve `{t.sub}` lazily from a module "
                    f"`__getattr__`; users meanwhile write `import {t.parent}.{t.sub}`."
                ),
                evidence={"parent": t.parent, "submodule": f"{t.parent}.{t.sub}", "why": t.reach.detail, **_probe_evidence(t)},
                key=f"{t.parent}.{t.sub}",
                origin="probe" if t.probe is not None and t.probe.status == "trap" else "static",
            )


class GetattrMissesSubmodule(Rule):
    """## What it does
    Finds packages whose module `__getattr__` (PEP 562) serves some
    submodules lazily but raises `AttributeError` for another importable
    submodule.

    The names a `__getattr__` serves are read from its code: comparisons
    with its argument (`if name == "cublas"`, `name in (...)`, `match`),
    look-ups in module-level tables (`_submodules[name]`, `.get(name)`), a
    generic `importlib.import_module(f".{name}", __name__)`, and
    `lazy_loader.attach(...)` / `attach_stub(...)` with the `.pyi` stub.

    ## Why is this bad?
    This is the CuPy incident: `cupy.cuda.__getattr__` imports `cublas`,
    `cusolver`, `cusparse` and `curand` on first access but not `nccl`, so
    `import cupy; cupy.cuda.nccl` raises
    `AttributeError: module 'cupy.cuda' has no attribute 'nccl'` although
    `cupy/cuda/nccl.py` is right there.  Users concluded NCCL was missing.
    A half-lazy package is worse than a non-lazy one: it teaches users that
    attribute access works.

    ## Example
    ```python
    # cupy/cuda/__init__.py (CuPy 13)
    def __getattr__(key):
        if key == 'cublas':
            from cupy_backends.cuda.libs import cublas
            return cublas
        ...
        raise AttributeError(f"module '{__name__}' has no attribute '{key}'")
    ```

    ## Use instead
    Extend `__getattr__` to every public submodule:
    ```python
        elif key == 'nccl':
            from cupy.cuda import nccl
            return nccl
    ```

    ## Fix safety
    No automatic fix.
    """

    code = "CU102"
    options = ("allow.submodule-traps",)
    references = ("https://docs.python.org/3/reference/import.html#submodules",)
    name = "getattr-misses-submodule"
    summary = "A module `__getattr__` raises AttributeError for an importable submodule"
    severity = Severity.WARNING
    needs = (FACTS, "extension_strings", "import_time")

    def check(self, ctx) -> Iterator[Finding]:
        m = _model(ctx)
        for t in _package_traps(ctx):
            if t.reach.status == "failed":
                yield _failed(self, t)
            if t.reach.status != "getattr-trap":
                continue
            entry = m.universe.get(t.parent)
            g = entry.facts.getattr if entry is not None and entry.facts is not None else None
            handled = sorted(m.universe.lazy_names(t.parent)[0]) if g else []
            served = f" (it serves {', '.join(handled[:8])}{', ...' if len(handled) > 8 else ''})" if handled else ""
            yield self.finding(
                Location(t.artifact.ref, t.member, line=g.line if g else None, symbol=f"{t.parent}.{t.sub}"),
                f"`import {t.parent}; {t.parent}.{t.sub}` raises AttributeError: {t.parent}.__getattr__ does not "
                f"handle {t.sub!r}{served}, although {t.parent}.{t.sub} is an importable "
                f"{'subpackage' if t.kind == 'package' else 'submodule'}.{_probe_suffix(t)}",
                fix=Fix(
                    user=f"Write `import {t.parent}.{t.sub}` before using `{t.parent}.{t.sub}`.",
                    maintainer=f"Handle {t.sub!r} in {t.parent}.__getattr__ ({t.member}:{g.line if g else '?'}), e.g. "
                    f"`if name == {t.sub!r}: from . import {t.sub}; return {t.sub}`, or bind it with "
                    f"`from . import {t.sub}`."
                ),
                evidence={
                    "parent": t.parent, "submodule": f"{t.parent}.{t.sub}", "handled": handled,
                    "why": t.reach.detail, **_probe_evidence(t),
                },
                key=f"{t.parent}.{t.sub}",
                origin="probe" if t.probe is not None and t.probe.status == "trap" else "static",
            )


class LazyTableMismatch(Rule):
    """## What it does
    Compares a package's lazy-loading table with its `.pyi` stub and with
    the files on disk: `lazy_loader.attach(submodules=[...],
    submod_attrs={...})`, `lazy_loader.attach_stub` and its `__init__.pyi`,
    and `__getattr__` tables that import `f".{name}"`.  Reports table entries
    naming a submodule that does not exist, an `attach_stub` package without
    its stub, and submodules the stub declares that the runtime table does
    not serve (and the reverse).

    ## Why is this bad?
    A name in the table without a file raises `ModuleNotFoundError` (or
    `AttributeError`) on first access, far from the cause; a stub that
    disagrees with the runtime makes type checkers and IDEs promise
    attributes that raise, or hide ones that work.

    ## Example
    ```python
    # skimage-style package
    __getattr__, __dir__, __all__ = lazy.attach(__name__, submodules=["filters", "morphology"])
    # but there is no morphology/ folder in the wheel
    ```

    ## Use instead
    Keep one source of truth: generate the table from the stub
    (`lazy_loader.attach_stub(__name__, __file__)`) and ship the `.pyi`;
    remove entries whose modules were removed.

    ## Fix safety
    No automatic fix.
    """

    code = "CU103"
    name = "lazy-table-mismatch"
    summary = "A lazy-loading table, its `.pyi` stub and the files on disk disagree"
    severity = Severity.WARNING
    needs = (FACTS, "extension_strings", "import_time")

    def ahead(self, ctx) -> None:
        self._packages(ctx, ahead=True)

    @staticmethod
    def _packages(ctx, ahead: bool = False) -> None:
        """The facts of every package this rule reads, in one batch (``ahead``: see ``Rule.ahead``)."""
        m = _model(ctx)
        uni = m.universe
        uni.prefetch_facts((e for i, mods in m.modules.items() if ctx.in_focus(ctx.artifacts[i])
                            for n, e in sorted(mods.items()) if e.kind == "package" and uni.entries.get(n) is e),
                           ahead=ahead)

    def check(self, ctx) -> Iterator[Finding]:
        m = _model(ctx)
        uni = m.universe
        self._packages(ctx)
        for i, mods in m.modules.items():
            art = ctx.artifacts[i]
            if not ctx.in_focus(art):
                continue
            for name, entry in sorted(mods.items()):
                if entry.kind != "package" or uni.entries.get(name) is not entry:
                    continue
                f = entry.facts
                if f is None or f.getattr is None:
                    continue
                children = uni.children.get(name, set())
                loc = Location(art.ref, entry.member, line=f.getattr.line, symbol=name)
                lazy = f.lazy
                if lazy is not None and lazy.kind == "attach_stub" and entry.stub is None:
                    yield self.finding(
                        loc, f"{name}: lazy_loader.attach_stub needs {entry.member}i, which is not shipped: "
                        f"`import {name}` fails with ValueError", severity=Severity.ERROR,
                        fix=f"Ship {entry.member}i in the distribution (package data), or list the names with lazy_loader.attach().",
                        key=f"{name}:stub-missing",
                    )
                    continue
                declared: set[str] = set()
                if lazy is not None and lazy.kind == "attach":
                    declared = set(lazy.submodules or ()) | set((lazy.submod_attrs or {}).keys())
                elif lazy is not None and lazy.kind == "attach_stub":
                    stub = entry.stub
                    for imp in stub.imports:
                        if imp.kind == "from" and imp.level == 1 and not imp.module and imp.name:
                            declared.add(imp.name)
                        elif imp.kind == "from" and imp.level == 1 and imp.module:
                            declared.add(imp.module.split(".")[0])
                for sub in sorted(declared - children - f.bound_names()):
                    yield self.finding(
                        Location(art.ref, entry.member, line=f.getattr.line, symbol=f"{name}.{sub}"),
                        f"{name}: the lazy table ({f.getattr.source}) lists {sub!r}, but there is no module "
                        f"{name}.{sub} in this artifact: `{name}.{sub}` raises on first use",
                        severity=Severity.ERROR,
                        fix=f"Remove {sub!r} from the table in {entry.member}, or ship {name}.{sub}.",
                        key=f"{name}.{sub}:missing",
                    )
                if lazy is not None and lazy.kind == "attach" and entry.stub is not None:
                    stub_subs = {imp.name for imp in entry.stub.imports if imp.kind == "from" and imp.level == 1 and not imp.module and imp.name}
                    for sub in sorted(stub_subs - declared - f.bound_names()):
                        yield self.finding(
                            Location(art.ref, entry.stub_member, symbol=f"{name}.{sub}"),
                            f"{name}: the stub {entry.stub_member} declares submodule {sub!r}, but lazy_loader.attach "
                            f"({entry.member}:{lazy.line}) does not serve it: type checkers accept `{name}.{sub}`, which raises",
                            fix=f"Add {sub!r} to submodules= in {entry.member}, or use lazy_loader.attach_stub.",
                            key=f"{name}.{sub}:stub-only",
                        )
                    for sub in sorted((set(lazy.submodules or ()) & children) - stub_subs):
                        yield self.finding(
                            Location(art.ref, entry.stub_member, symbol=f"{name}.{sub}"),
                            f"{name}: lazy_loader.attach serves submodule {sub!r} but the stub {entry.stub_member} "
                            f"does not declare it: type checkers reject `{name}.{sub}`, which works",
                            severity=Severity.INFO,
                            fix=f"Add `from . import {sub}` to {entry.stub_member}.",
                            key=f"{name}.{sub}:table-only",
                        )


# -- code side -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ChainTrap:
    artifact: Any
    member: str
    chain: Any
    parent: str
    sub: str
    module: str  # the deepest module of the chain (what to import)
    reach: Reach
    root_import: Any  # the ImportRecord that binds the chain's root
    probe: Any = None  # ProbeResult of `import parent; parent.sub` with --probe
    at_end_without_newline: bool = False  # the import is on the file's last line, which has no newline


def _chain_traps(ctx) -> list[_ChainTrap]:
    def compute() -> list[_ChainTrap]:
        m = _model(ctx)
        uni = m.universe
        out: list[_ChainTrap] = []
        for i, art in enumerate(ctx.artifacts):
            if art.ref.kind is ArtifactKind.INSTALLED or not ctx.in_focus(art):
                # Installed distributions are what user code is resolved against, not the
                # code under audit: walking every file of an environment cost 10 s of a
                # 16 s cached `cuaudit env` (103 distributions) for two latent findings.
                continue
            names = m.names.get(i, {})
            files = [(member.path, facts) for _, member, facts in ctx.facts(FACTS, art)  # one batch
                     if not member.path.endswith(".pyi") and facts.syntax_error is None and facts.chains]
            # what each import of each file imports (read twice: asked once)
            imports: list[list[list[str]]] = []
            roots: set[str] = set()
            for path, facts in files:
                own = names.get(path)
                importer = own or path.rsplit("/", 1)[-1].removesuffix(".py")
                is_pkg = path.endswith("__init__.py")
                mods = [uni.imported_by(imp, importer, is_pkg) for imp in facts.imports]
                imports.append(mods)
                for found in mods:
                    roots.update(found)
            # the programs the files' imports reach: one walk the workers run ahead of, before the closures read them
            uni.prefetch_closures(sorted(roots))
            bound: list[_Bound | Exception] = []
            for (path, facts), mods in zip(files, imports):
                try:
                    bound.append(_bound(uni, path, names.get(path), facts, mods))
                except Exception as exc:  # noqa: BLE001 - reported below, as a failure of this file
                    bound.append(exc)
            # the standard library's closures, for the files whose chains start there (see _file_traps):
            # extracted by the workers a level at a time, not one module at a time in the parent
            uni.prefetch_stdlib(sorted({m for (_p, facts), b in zip(files, bound) if isinstance(b, _Bound)
                                        and b.walks_stdlib(uni, facts) for m in b.std_roots}))
            verdicts: dict[tuple[str, str, frozenset[str]], Reach] = {}
            for (path, facts), b in zip(files, bound):
                try:
                    if isinstance(b, Exception):
                        raise b
                    out += _file_traps(uni, art, path, names.get(path), facts, b, verdicts)
                except Exception as exc:  # noqa: BLE001 - one file's failure must not hide the others' traps
                    out.append(_ChainTrap(art, path, None, "", "", "", Reach("failed", _why(exc)), None))
        if ctx.config.probe and out:
            # `import parent` alone, in a clean interpreter: does `parent.sub` raise?
            probed = _run_probe(ctx, m, {-1: sorted({(t.parent, t.sub) for t in out if t.reach.status != "failed"})})
            kept = []
            for t in out:
                p = probed.get((t.parent, t.sub)) if t.reach.status != "failed" else None
                if p is not None and p.status == "ok":
                    continue  # reality says the attribute exists
                kept.append(dataclasses.replace(t, probe=p))
            out = kept
        return out

    return ctx.memo("imports.chain_traps", compute)


@dataclass(frozen=True)
class _Bound:
    """What a file's imports bind and import (:func:`_bound`), read by :func:`_file_traps`."""

    #: local name -> (module, the import that binds it); None when bound to different things
    local: dict[str, tuple[str, Any] | None]
    imported: frozenset[str]
    #: the imported modules of the standard library, and the others that exist
    std_roots: tuple[str, ...]
    roots: tuple[str, ...]

    def walks_stdlib(self, uni: ModuleUniverse, facts) -> bool:
        """Whether a chain of the file starts at a standard-library module and goes into one of its
        submodules: only then does :func:`_file_traps` read the closure of ``std_roots``."""
        for ch in facts.chains:
            got = None if ch.shadowed or not ch.attrs else self.local.get(ch.root)
            if got and uni.is_stdlib(got[0]) and uni.exists(f"{got[0]}.{ch.attrs[0]}"):
                return True
        return False


def _bound(uni: ModuleUniverse, path: str, own: str | None, facts, imports: list[list[str]]) -> _Bound:
    """``imports``: what each of ``facts.imports`` imports (``uni.imported_by``)."""
    is_pkg = path.endswith("__init__.py")
    importer = own or path.rsplit("/", 1)[-1].removesuffix(".py")
    # local name -> (module, the import that binds it); None when bound to different things
    local: dict[str, tuple[str, Any] | None] = {}
    imported: set[str] = set()
    for imp, mods in zip(facts.imports, imports):
        imported.update(mods)
        if imp.kind == "from" and imp.name == "*":
            continue
        name = imp.bound_name
        if imp.kind == "import":
            target = (uni.resolve(imp, importer, is_pkg) or "") if imp.asname else imp.module.split(".")[0]
        else:
            base = uni.resolve(imp, importer, is_pkg)
            target = f"{base}.{imp.name}" if base and uni.exists(f"{base}.{imp.name}") else ""
        if not target:
            local[name] = None
            continue
        if name in local:
            prev = local[name]
            if prev is None or prev[0] != target:
                local[name] = None
            elif prev[1].scope != "module" and imp.scope == "module":
                local[name] = (target, imp)  # the fix goes after the module-level import
        else:
            local[name] = (target, imp)
    # pip's pkg_resources: `__import__('pip._vendor.packaging.version')` after `from pip._vendor import packaging`
    imported |= uni.dynamic_targets(facts, importer, is_pkg)
    for b in facts.bindings:
        if b.kind not in ("import", "from") and b.name in local:
            local[b.name] = None  # rebound to something else at module level
    if own:
        imported.add(own.split(".")[0])  # this module runs inside its own package
    # The standard library never imports third-party modules: its (large) import graph is
    # only followed when a chain starts at a standard-library module.
    std_roots: list[str] = []
    roots: list[str] = []
    for mod in imported:
        if uni.is_stdlib(mod):
            std_roots.append(mod)
        elif uni.exists(mod):
            roots.append(mod)
    return _Bound(local, frozenset(imported), tuple(std_roots), tuple(roots))


def _file_traps(uni: ModuleUniverse, art, path: str, own: str | None, facts, bound: _Bound,
                verdicts: dict[tuple[str, str, frozenset[str]], Reach]) -> list[_ChainTrap]:
    """``bound``: what the file's imports bind (:func:`_bound`); ``verdicts``: the reach of
    ``parent.sub`` after a closure, shared by the files whose imports have that closure."""
    local, imported, std_roots = bound.local, bound.imported, bound.std_roots
    # most files' imports lie inside one closure (`import torch`'s): that set itself, shared
    third_party = uni.closure_of_each(bound.roots)
    if not imported <= third_party:
        third_party = third_party | imported
    closures: dict[bool, frozenset[str]] = {False: third_party}

    def closure_for(module: str) -> frozenset[str]:
        std = uni.is_stdlib(module)
        if std not in closures:
            closures[std] = third_party | uni.closure_of_each(std_roots)
        return closures[std]
    out: list[_ChainTrap] = []
    own_top = own.split(".")[0] if own else None
    for ch in facts.chains:
        if ch.shadowed:
            continue
        bound = local.get(ch.root)
        if not bound:
            continue
        cur, imp = bound
        if own_top and cur.split(".")[0] == own_top and ch.scope != "module":
            # A package reaching its own modules from inside a function runs after the
            # package has loaded much more (torch._inductor does it to break import cycles):
            # only module-level accesses are certain to run with nothing else imported.
            continue
        if not uni.exists(cur):
            continue
        for depth, attr in enumerate(ch.attrs):
            cand = f"{cur}.{attr}"
            if not uni.exists(cand):
                break  # an ordinary attribute, not a submodule
            # a third-party parent's verdict needs the closure of third-party imports, which most
            # files share (the same set, see closure_of_each): asked once per closure
            key = None if uni.is_stdlib(cur) else (cur, attr, third_party)
            r = verdicts.get(key) if key is not None else None
            if r is None:
                r = uni.reach(cur, attr, lambda c=cur: closure_for(c))
                if key is not None:
                    verdicts[key] = r
            if r.works:
                if r.status == "bound" and r.target != cand:
                    # bound to something else: the chain goes on from that object.  When the
                    # package re-binds the name after importing the submodule (sympy's
                    # `from .series import series`), a submodule reached through it is a trap.
                    nxt = ch.attrs[depth + 1] if depth + 1 < len(ch.attrs) else None
                    shadow = uni.shadowed(cand) if nxt and uni.exists(f"{cand}.{nxt}") else None
                    if shadow is not None and shadow.is_trap:
                        out.append(_ChainTrap(art, path, ch, cand, nxt, f"{cand}.{nxt}", shadow, imp))
                    break
                cur = cand
                continue
            if r.is_trap:
                deepest = cand
                for more in ch.attrs[depth + 1 :]:
                    if uni.exists(f"{deepest}.{more}"):
                        deepest = f"{deepest}.{more}"
                    else:
                        break
                last = imp is not None and imp.end_line >= facts.line_count and not facts.ends_with_newline
                out.append(_ChainTrap(art, path, ch, cur, attr, deepest, r, imp, at_end_without_newline=last))
            break
    return out


class SubmoduleAttributeAccess(Rule):
    """## What it does
    Finds code that reaches a submodule through attributes (`a.b.c`) when
    only `a` is imported and nothing imports `a.b`: neither `a`'s `__init__`
    (nor what it imports), nor an import in the same file, nor its
    `__getattr__`.  The modules are resolved against the wheels and trees
    audited in the same run, the installed distributions of the audited
    environment, and the standard library (read from its source files,
    never imported).

    ## Why is this bad?
    It raises `AttributeError: module 'a' has no attribute 'b'`, or works by
    accident because something else imported `a.b` earlier — until that
    import moves.  `import concurrent; concurrent.futures.ThreadPoolExecutor()`
    fails in a fresh interpreter; `import cupy; cupy.cuda.nccl.NcclCommunicator`
    fails although NCCL is installed.

    ## Example
    ```python
    import cupy
    comm = cupy.cuda.nccl.NcclCommunicator(n, uid, rank)
    ```

    ## Use instead
    ```python
    import cupy
    import cupy.cuda.nccl
    comm = cupy.cuda.nccl.NcclCommunicator(n, uid, rank)
    ```

    ## Fix safety
    Safe: `cuaudit check --fix` adds `import a.b` right after the statement
    that imports `a` (same block, same indentation).  The import is one the
    attribute access needed anyway; the only change is that a genuinely
    missing module is reported as `ImportError` where the `import a` is,
    instead of `AttributeError` later.  The fix is marked unsafe when `a` is
    imported under another name (the added import binds `a`).
    """

    code = "CU104"
    name = "submodule-attribute-access"
    summary = "Code reaches a submodule through attributes without importing it"
    severity = Severity.WARNING
    needs = (FACTS, "extension_strings", "import_time")

    def check(self, ctx) -> Iterator[Finding]:
        for t in _chain_traps(ctx):
            if t.reach.status == "failed":
                yield _failed(self, t)
                continue
            ch = t.chain
            if ch.guard:
                continue  # an availability check: CU105
            dotted = ".".join((ch.root,) + ch.attrs)
            if t.reach.shadow:
                # importing the submodule does not help: the walk goes through the re-bound object
                yield self.finding(
                    Location(t.artifact.ref, t.member, ch.line, ch.column, ch.end_line, ch.end_column, symbol=t.module),
                    f"`{dotted}` walks through `{t.parent}`, which is not the module: {t.reach.detail}; this raises "
                    f"AttributeError (the object has no attribute '{t.sub}') even after `import {t.module}`",
                    fix=Fix(f"Bind the submodule directly: `from {t.parent} import {t.sub}` (or `import {t.module} as {t.sub}`)"),
                    evidence={"module": t.module, "parent": t.parent, "submodule": f"{t.parent}.{t.sub}", "why": t.reach.detail},
                    key=f"{t.module}",
                    origin=_origin(t),
                )
                continue
            edits, applicability = _import_edit(t)
            yield self.finding(
                Location(t.artifact.ref, t.member, ch.line, ch.column, ch.end_line, ch.end_column, symbol=t.module),
                f"`{dotted}` reaches submodule {t.parent}.{t.sub} through attributes, but nothing imports it: "
                f"{t.reach.detail}, so this raises `AttributeError: module '{t.parent}' has no attribute '{t.sub}'`"
                f"{_probe_suffix(t)}",
                fix=Fix(edits=edits, applicability=applicability,
                        user=f"Add `import {t.module}`" + (f" after line {t.root_import.end_line}" if t.root_import else ""),
                        maintainer=f"{t.parent} can bind {t.sub} (`from . import {t.sub}` or a module __getattr__) "
                        "so that attribute access works"),
                evidence={"module": t.module, "parent": t.parent, "submodule": f"{t.parent}.{t.sub}", "why": t.reach.detail, **_probe_evidence(t)},
                key=f"{t.module}",
                origin=_origin(t),
            )


def _import_edit(t: _ChainTrap) -> tuple[tuple[Edit, ...], Applicability]:
    imp = t.root_import
    if imp is None or not imp.starts_line:
        return (), Applicability.DISPLAY
    if t.chain.scope == "module" and t.chain.line <= imp.end_line:
        return (), Applicability.DISPLAY  # `import a; a.b.c` on one line: the import must go before it
    applicability = Applicability.SAFE
    if imp.kind == "from" or imp.asname:
        applicability = Applicability.UNSAFE  # `import a.b` binds the name `a` here
    text = f"{imp.indent}import {t.module}\n"
    if t.at_end_without_newline:
        text = f"\n{imp.indent}import {t.module}"  # appended after the last line
    # insert at the start of the line after the import statement
    edit = Edit(t.member, imp.end_line + 1, 1, imp.end_line + 1, 1, text)
    return (edit,), applicability


class AttributeErrorAvailabilityCheck(Rule):
    """## What it does
    Finds availability checks that probe a submodule through attribute
    access and treat `AttributeError` as "not available": a `try` block
    catching `AttributeError` around `a.b`,
    `hasattr(a, "b")`, or `getattr(a, "b", None)`, where `a.b` is a
    submodule that `import a` does not import.

    ## Why is this bad?
    The check answers "not available" even when the feature is installed:
    the attribute is missing only because nobody imported the submodule.
    The seed incident: `try: cupy.cuda.nccl except AttributeError:
    nccl_available = False` reported NCCL as missing on machines that had it.

    ## Example
    ```python
    import cupy
    try:
        cupy.cuda.nccl
        HAVE_NCCL = True
    except AttributeError:
        HAVE_NCCL = False
    ```

    ## Use instead
    ```python
    try:
        from cupy.cuda import nccl
        HAVE_NCCL = nccl.available
    except ImportError:
        HAVE_NCCL = False
    ```
    or, without importing it, `importlib.util.find_spec("cupy.cuda.nccl") is not None`.

    ## Fix safety
    No automatic fix: the right replacement depends on what "available"
    means for the feature (importable, or its library loadable).
    """

    code = "CU105"
    name = "attribute-error-availability-check"
    summary = "An availability check catches AttributeError from an unimported submodule"
    severity = Severity.WARNING
    needs = (FACTS, "extension_strings", "import_time")

    def check(self, ctx) -> Iterator[Finding]:
        seen: set[tuple] = set()
        for t in _chain_traps(ctx):
            if t.reach.status == "failed":
                yield _failed(self, t)
                continue
            ch = t.chain
            if not ch.guard:
                continue
            key = (t.artifact.ref, t.member, ch.guard_line, t.module)
            if key in seen:
                continue
            seen.add(key)
            dotted = ".".join((ch.root,) + ch.attrs)
            how = {
                "except": f"the try at line {ch.guard_line} catches AttributeError around `{dotted}`",
                "hasattr": f"`hasattr(..., {ch.attrs[-1]!r})` at line {ch.guard_line}",
                "getattr-default": f"`getattr(..., {ch.attrs[-1]!r}, default)` at line {ch.guard_line}",
            }[ch.guard]
            yield self.finding(
                Location(t.artifact.ref, t.member, ch.guard_line or ch.line, ch.column if ch.guard != "except" else None, symbol=t.module),
                f"wrong availability check: {how}, but {t.parent}.{t.sub} is a submodule that `import {t.parent}` "
                f"does not import ({t.reach.detail}): the check says 'missing' even when {t.module} is installed",
                fix=Fix(
                    user=f"Import it and catch ImportError: `try: import {t.module} except ImportError: ...`, "
                    f"or test `importlib.util.find_spec({t.module!r}) is not None`.",
                    maintainer=f"{t.parent} can bind {t.sub} (`from . import {t.sub}` or a module __getattr__) "
                    "so that such checks work",
                ),
                evidence={"module": t.module, "guard": ch.guard, "access_line": ch.line, "why": t.reach.detail, **_probe_evidence(t)},
                key=f"{t.module}:{ch.guard_line}",
                origin=_origin(t),
            )
