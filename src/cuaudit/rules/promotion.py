"""CU4xx: NEP 50 scalar promotion (NumPy 2).

NumPy 2 adopted NEP 50: Python scalars are "weak" (they take the dtype of
the array they meet and raise ``OverflowError`` when they do not fit), NumPy
scalars and 0-d arrays are "strong", and nothing promotes by *value* any
more.  The seed incident: CuPy 13.0-13.4.0's ``cupy.fuse`` checked Python
scalar operands with ``numpy.can_cast(scalar, dtype)``, which NumPy 2 rejects,
so ``@cupy.fuse() def f(mu, dt, delta_phi): return 1 + mu * dt * delta_phi``
raised ``TypeError`` (cupy/cupy#8536, fixed in 13.4.1).

CU401-CU405 are static (facts of ``cuaudit.facts.promotion``); their severity
follows the versions in play: an environment given with ``--python`` (its
installed CuPy and NumPy), else the audited project's declared requirements.
CU410-CU413 are emitted by ``cuaudit trace``, which runs the user's own
program and compares each operation's NumPy 2 outcome with cuaudit's model
of legacy value-based promotion.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from cuaudit.model import Applicability, ArtifactKind, Edit, Finding, Fix, Location, Severity
from cuaudit.names import canonical_name
from cuaudit.rules import Rule

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.context import RuleContext
    from cuaudit.facts.promotion import Span
    from cuaudit.inputs import Artifact

#: CuPy releases whose fusion scalar check calls numpy.can_cast on Python scalars.
CUPY_BROKEN = ">=13.0.0,<13.4.1"
_CUPY_BROKEN_RELEASES = ("13.0.0", "13.1.0", "13.2.0", "13.3.0", "13.4.0")
_NUMPY2_RELEASES = ("2.0.0", "2.0.1", "2.0.2", "2.1.0", "2.1.3", "2.2.0", "2.2.6", "2.3.0", "2.3.5", "2.4.0",
                    "2.4.6", "2.99.0")
#: CuPy releases whose cupy.copyto calls numpy.can_cast on a Python scalar source (fixed in 13.3.0).
CUPY_COPYTO_BROKEN = ">=13.0.0,<13.3.0"
_CUPY_COPYTO_BROKEN_RELEASES = ("13.0.0", "13.1.0", "13.2.0")
_CUPY_NAME = re.compile(r"^cupy(-cuda\d+x?|-rocm-[\d-]+|-wheel)?$")


def is_cupy(name: str) -> bool:
    return bool(_CUPY_NAME.match(canonical_name(name)))


@dataclass(frozen=True)
class Verdict:
    """Whether the versions in play admit the breaking combination, and why we think so."""

    state: str  # "admitted" | "excluded" | "unknown"
    evidence: str

    def severity(self, admitted: Severity = Severity.ERROR, unknown: Severity = Severity.WARNING) -> Severity:
        return {"admitted": admitted, "excluded": Severity.INFO}.get(self.state, unknown)


@dataclass(frozen=True)
class Versions:
    """CuPy/NumPy versions for one artifact: installed (exact) or declared (specifiers)."""

    source: str  # "environment" | "declared" | "none"
    cupy: tuple[tuple[str, str], ...] = ()  # (name, version or specifier)
    numpy: tuple[str, ...] = ()
    where: str = ""

    def fuse_verdict(self) -> Verdict:
        return self.cupy_verdict(CUPY_BROKEN, _CUPY_BROKEN_RELEASES, "13.4.1", "CuPy's fusion")

    def copyto_verdict(self) -> Verdict:
        return self.cupy_verdict(CUPY_COPYTO_BROKEN, _CUPY_COPYTO_BROKEN_RELEASES, "13.3.0", "cupy.copyto")

    def cupy_verdict(self, broken_spec: str, broken_releases: tuple[str, ...], fixed_in: str, what: str) -> Verdict:
        """Can a CuPy release in ``broken_spec`` meet NumPy >= 2 with these versions?"""
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion, Version

        broken = SpecifierSet(broken_spec)
        span = f"CuPy {broken_releases[0].rsplit('.', 1)[0]}-{broken_releases[-1]}"
        if self.source == "environment":
            if not self.cupy:
                return Verdict("excluded", f"no CuPy is installed in the environment ({self.where})")
            name, ver = self.cupy[0]
            np_ver = self.numpy[0] if self.numpy else None
            try:
                cupy_bad = Version(ver) in broken
                numpy2 = np_ver is None or Version(np_ver).major >= 2
            except InvalidVersion:
                return Verdict("unknown", f"unparsable installed versions {name} {ver}, numpy {np_ver}")
            installed = f"{name} {ver} and " + (f"numpy {np_ver}" if np_ver else "no NumPy") + " are installed"
            if cupy_bad and numpy2:
                return Verdict("admitted", installed)
            why = f"{what} is fixed in {fixed_in}" if not cupy_bad else "NumPy 1.x still accepts Python scalars in can_cast"
            return Verdict("excluded", f"{installed}; {why}")
        if self.source == "declared" and self.cupy:
            try:
                cupy_specs = [SpecifierSet(s) for _, s in self.cupy]
                numpy_specs = [SpecifierSet(s) for s in self.numpy]
            except InvalidSpecifier as exc:
                return Verdict("unknown", f"unparsable requirement in {self.where}: {exc}")
            cupy_ok = any(all(s.contains(v, prereleases=True) for s in cupy_specs) for v in broken_releases)
            numpy_ok = any(all(s.contains(v, prereleases=True) for s in numpy_specs) for v in _NUMPY2_RELEASES)
            decl = ", ".join(f"{n}{s or ' (any version)'}" for n, s in self.cupy)
            decl += "; " + (", ".join(f"numpy{s}" for s in self.numpy if s) or "numpy unconstrained")
            if cupy_ok and numpy_ok:
                return Verdict("admitted", f"the declared requirements ({decl}, in {self.where}) admit {span} with NumPy >= 2")
            return Verdict("excluded", f"the declared requirements ({decl}, in {self.where}) exclude {span} with NumPy >= 2")
        return Verdict("unknown", "no CuPy version is known (give the environment with --python, or declare cupy in pyproject.toml)")

    def numpy2_verdict(self) -> Verdict:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion, Version

        if self.source == "environment" and self.numpy:
            try:
                major = Version(self.numpy[0]).major
            except InvalidVersion:
                return Verdict("unknown", f"unparsable numpy version {self.numpy[0]}")
            if major >= 2:
                return Verdict("admitted", f"numpy {self.numpy[0]} is installed")
            return Verdict("excluded", f"numpy {self.numpy[0]} is installed (breaks on upgrade to NumPy 2)")
        if self.source == "declared" and self.numpy:
            try:
                specs = [SpecifierSet(s) for s in self.numpy]
            except InvalidSpecifier:
                return Verdict("unknown", f"unparsable numpy requirement in {self.where}")
            text = ", ".join(f"numpy{s}" for s in self.numpy if s) or "numpy"
            if any(all(s.contains(v, prereleases=True) for s in specs) for v in _NUMPY2_RELEASES):
                return Verdict("admitted", f"the declared {text} ({self.where}) admits NumPy 2")
            return Verdict("excluded", f"the declared {text} ({self.where}) excludes NumPy 2")
        return Verdict("unknown", "no NumPy version is known; NumPy 2 is assumed")


def _requirement(text: str) -> tuple[str, str] | None:
    """(name, specifier) of a requirement that is always installed (not only under an extra)."""
    from cuaudit.requirement import parse_requirement

    req = parse_requirement(text)
    return None if req is None or req.optional else (req.name, req.specifier)


def versions_for(ctx: "RuleContext", artifact: "Artifact") -> Versions:
    """The versions that decide severities for findings in ``artifact`` (memoised per audit)."""

    def environment() -> Versions | None:
        installed = [a.ref for a in ctx.artifacts if a.ref.kind is ArtifactKind.INSTALLED]
        if ctx.environment is None and not installed:
            return None
        cupy = tuple((r.name, r.version) for r in installed if is_cupy(r.name))
        numpy = tuple(r.version for r in installed if canonical_name(r.name) == "numpy")
        where = ctx.environment.python if ctx.environment is not None else "installed distributions"
        return Versions("environment", cupy, numpy, where)

    env = ctx.memo(("promotion", "environment"), environment)
    if env is not None:
        return env

    def declared() -> Versions:
        cupy: list[tuple[str, str]] = []
        numpy: list[str] = []
        where: list[str] = []
        for _, member, fact in ctx.facts("promotion_requirements", artifact):
            for text in fact.requirements:
                r = _requirement(text)
                if r:
                    (cupy.append(r) if is_cupy(r[0]) else numpy.append(r[1]) if canonical_name(r[0]) == "numpy" else None)
            if fact.requirements:
                where.append(member.path)
        if artifact.ref.kind in (ArtifactKind.WHEEL, ArtifactKind.SDIST):
            for _, member, meta in ctx.facts("metadata", artifact):
                for text in meta.requires_dist:
                    r = _requirement(text)
                    if r:
                        (cupy.append(r) if is_cupy(r[0]) else numpy.append(r[1]) if canonical_name(r[0]) == "numpy" else None)
                where.append(member.path)
        if is_cupy(artifact.ref.name) and artifact.ref.version:
            # auditing a CuPy release itself: its own version is the CuPy in play
            cupy.insert(0, (artifact.ref.name, f"=={artifact.ref.version}"))
            where.append(f"{artifact.ref.name} {artifact.ref.version} itself")
        if not cupy and not numpy:
            return Versions("none")
        return Versions("declared", tuple(cupy), tuple(numpy), ", ".join(dict.fromkeys(where)))

    return ctx.memo(("promotion", "declared", id(artifact)), declared)


def _location(artifact: "Artifact", member: str, span: "Span", symbol: str | None = None) -> Location:
    return Location(artifact.ref, member, span.line, span.column, span.end_line, span.end_column, symbol=symbol)


def _edit(member: str, span: "Span", content: str) -> Edit:
    return Edit(member, span.line, span.column, span.end_line, span.end_column, content)


class _SourceRule(Rule):
    """Base of the static CU4xx rules (no code: not registered)."""

    needs = ("promotion_source", "promotion_requirements", "metadata")
    # what facts() reads is what ahead() names: the same memo of the family
    ahead_reads = ("promotion_source",)

    @staticmethod
    def _wanted(ctx: "RuleContext") -> list[tuple[Any, Any]]:
        """(artifact, member) whose promotion_source facts the rules read, listed once for the family.

        The tests of an installed distribution never run on import, and NumPy's own tests
        assert exactly these new behaviours (seen: `cuaudit env` flagged numpy/_core/tests):
        their facts are not even extracted."""
        def find() -> list[tuple[Any, Any]]:
            from cuaudit.inputs import is_test_path

            return [(art, m) for art in ctx.artifacts if ctx.in_focus(art) for m in art.members
                    if not (art.ref.kind is ArtifactKind.INSTALLED and is_test_path(m.path))]

        return ctx.memo("promotion.wanted", find)

    def facts(self, ctx: "RuleContext") -> Iterator[tuple[Any, Any, Any]]:
        def read() -> list[tuple[Any, Any, Any]]:
            wanted = self._wanted(ctx)
            ctx.prefetch("promotion_source", [(art, m.path) for art, m in wanted])  # one batch
            return [(art, m, f) for art, m in wanted if (f := ctx.fact("promotion_source", art, m.path)) is not None]

        yield from ctx.memo("promotion.source_facts", read)

    def ahead(self, ctx: "RuleContext") -> None:
        def name() -> bool:
            ctx.prefetch("promotion_source", [(art, m.path) for art, m in self._wanted(ctx)], ahead=True)
            return True

        ctx.memo("promotion.ahead", name)  # once for the family


class FusedPythonScalar(_SourceRule):
    """## What it does
    Finds Python scalars (literals such as `1` or `0.5`, names bound only to
    them, `math.pi`/`numpy.pi`) used as operands inside a `cupy.fuse` kernel:
    in arithmetic, comparisons, in-place operators and CuPy ufunc calls. Any
    import spelling counts (`import cupy as cp; @cp.fuse()`, `from cupy import
    fuse; @fuse`, `k = cupy.fuse(f)`).

    Severity follows the versions in play: **warning** when the environment
    (`--python`) has CuPy 13.0-13.4.0 with NumPy >= 2, or the project's declared
    requirements admit that pair, and when no version is known; **info** when
    they exclude it (CuPy >= 13.4.1, or NumPy < 2).

    ## Why is this bad?
    CuPy 13.0-13.4.0 checks each scalar operand of a fused ufunc with
    `numpy.can_cast(scalar, dtype)`. NumPy 2 (NEP 50) no longer accepts Python
    scalars there, so CuPy's first fusion implementation raises
    `TypeError: can_cast() does not support Python ints, floats, and complex`
    (cupy/cupy#8536, found by cuCIM's test suite; CuPy 13.4.1 fixed the check).

    What happens next was measured on an H100 (CuPy 13.3.0 with NumPy 2.0.2,
    2.2.6 and 2.5.2; `scripts/device/nep50_conditions.py`, docs/promotion.md):
    the TypeError is raised, with the frames of the public traceback, on every
    kernel with a Python literal operand (`2.0 * x` included), and
    `Fusion.__call__` catches it and runs the kernel through CuPy's second
    fusion implementation. The kernel then works, with NumPy 2's result dtype
    when its arguments are arrays or NumPy scalars. The TypeError reached the
    users of cupy/cupy#8536 (CuPy 13.3 builds, NumPy 2.0.1 and later); it was
    not reproduced here, which is why this is a warning and not an error. A
    related silent divergence of the same releases, Python scalars passed as
    kernel arguments, is in `docs/promotion.md`.

    ## Example
    ```python
    import cupy

    @cupy.fuse()
    def f(mu, dt, delta_phi):
        return 1 + mu * dt * delta_phi
    ```

    ## Use instead
    ```python
    @cupy.fuse()
    def f(mu, dt, delta_phi):
        return delta_phi.dtype.type(1) + mu * dt * delta_phi
    ```
    or pass the scalar as an argument of the kernel, or require `cupy>=13.4.1`.

    ## Fix safety
    Unsafe: the cast uses the dtype of one operand of the expression, which
    may differ from the dtype the legacy promotion picked for the whole
    expression.
    """

    code = "CU401"
    references = ("https://github.com/cupy/cupy/issues/8536", "https://numpy.org/neps/nep-0050-scalar-promotion.html")
    name = "fuse-python-scalar"
    summary = "A Python scalar operand in a cupy.fuse kernel (TypeError inside CuPy 13.0-13.4.0 with NumPy 2)"
    severity = Severity.WARNING

    def check(self, ctx: "RuleContext") -> Iterable[Finding]:
        for art, member, facts in self.facts(ctx):
            if not facts.fused:
                continue
            verdict = versions_for(ctx, art).fuse_verdict()
            # a crash was reported, not reproduced (CuPy 13.3.0 recovered through its fallback on an H100)
            sev = verdict.severity(admitted=Severity.WARNING)
            for s in facts.fused:
                edits: tuple[Edit, ...] = ()
                hint = "pass it to the kernel as an argument"
                if s.partner:
                    cast = f"{s.partner}.dtype.type({s.text})"
                    edits = (_edit(member.path, s.span, cast),)
                    hint = f"write `{cast}`, or pass it to the kernel as an argument"
                yield self.finding(
                    _location(art, member.path, s.span, symbol=s.kernel),
                    f"Python scalar `{s.text}` is an operand ({s.operation}) in cupy.fuse kernel `{s.kernel}`: "
                    f"under NumPy 2, CuPy 13.0-13.4.0's fusion raises TypeError (can_cast) on it, then may fall back to "
                    f"its second implementation (CuPy 13.3.0 did on an H100; users of cupy#8536 got the TypeError); "
                    f"{verdict.evidence}",
                    fix=Fix(edits=edits, applicability=Applicability.UNSAFE if edits else Applicability.DISPLAY,
                            user="Install cupy>=13.4.1 (or keep NumPy<2) until the kernel is fixed.",
                            maintainer=f"Cast the scalar to the operand's dtype: {hint}; or require cupy>=13.4.1."),
                    evidence={"scalar": s.text, "value": s.value, "kernel": s.kernel, "kernel_line": s.kernel_line,
                              "operation": s.operation, "versions": verdict.state, "why": verdict.evidence},
                    key=f"{s.kernel}:{s.text}:{s.operation}",
                    severity=sev,
                )


class CanCastPythonScalar(_SourceRule):
    """## What it does
    Finds `numpy.can_cast(x, dtype)` and `cupy.can_cast(x, dtype)` whose first
    argument is a Python scalar (a literal or a name bound only to one).

    ## Why is this bad?
    NumPy 2 raises `TypeError: can_cast() does not support Python ints,
    floats, and complex because the result used to depend on the value`.
    NumPy 1.x answered by value (`np.can_cast(300, np.uint8)` was `False`,
    `np.can_cast(100, np.uint8)` `True`). `cupy.can_cast` forwards to NumPy.
    This is the call that broke `cupy.fuse` in CuPy 13.0-13.4.0.

    ## Example
    ```python
    if np.can_cast(300, np.uint8): ...
    ```

    ## Use instead
    ```python
    info = np.iinfo(np.uint8)
    if info.min <= 300 <= info.max: ...
    ```
    or `np.can_cast(np.min_scalar_type(300), np.uint8)` for the legacy answer.

    ## Fix safety
    No automatic fix: the right replacement depends on what was meant.
    """

    code = "CU402"
    name = "can-cast-python-scalar"
    summary = "numpy.can_cast / cupy.can_cast with a Python scalar (TypeError on NumPy 2)"
    severity = Severity.ERROR

    def check(self, ctx: "RuleContext") -> Iterable[Finding]:
        for art, member, facts in self.facts(ctx):
            if not facts.can_cast:
                continue
            verdict = versions_for(ctx, art).numpy2_verdict()
            for c in facts.can_cast:
                yield self.finding(
                    _location(art, member.path, c.span, symbol=c.function),
                    f"`{c.function}({c.text}, ...)` passes a Python scalar: NumPy 2 raises TypeError "
                    f"(NumPy 1.x answered by value); {verdict.evidence}",
                    fix=f"Compare against `np.iinfo`/`np.finfo` bounds, or use `np.can_cast(np.min_scalar_type({c.text}), ...)` "
                    "for the value-based answer.",
                    evidence={"function": c.function, "argument": c.text, "value": c.value, "versions": verdict.state},
                    key=f"{c.function}:{c.text}",
                    severity=verdict.severity(),
                )


class FusedKernelPythonScalarArgument(_SourceRule):
    """## What it does
    Finds calls of a `cupy.fuse` kernel (a decorated function, or `k =
    cupy.fuse(f)`) that pass a Python scalar as an argument: a literal, a
    name bound only to one, `math.pi`.

    Severity follows the versions in play, as for CU401: **warning** when
    CuPy 13.0-13.4.0 can meet NumPy >= 2, **info** otherwise.

    ## Why is this bad?
    Measured on an H100 with CuPy 13.3.0 and NumPy 2.0.2, 2.2.6 and 2.5.2
    (`scripts/device/nep50_conditions.py`, docs/promotion.md): both of
    CuPy 13.3.0's fusion implementations treat a Python float argument as
    float64 and a Python int as int64, so `k(x_float32, 5.0)` returns
    float64 where NumPy 2 (NEP 50) and CuPy 14 keep float32 (int32 for an
    int32 array and a Python int). Nothing fails: results silently change
    dtype, precision, memory and speed. Other 13.x releases were not
    measured; they share the fusion code.

    ## Example
    ```python
    @cupy.fuse()
    def scale(x, h):
        return 1.0 - (x * x) / (h * h)

    y = scale(x32, 5.0)          # float64 with CuPy 13.3.0
    ```

    ## Use instead
    ```python
    y = scale(x32, numpy.float32(5.0))   # float32 everywhere
    ```
    or require `cupy>=14`.

    ## Fix safety
    No automatic fix: the scalar type to pass is the kernel's intent.
    """

    code = "CU407"
    name = "fuse-python-scalar-argument"
    summary = "A Python scalar passed to a cupy.fuse kernel (float64/int64 result with CuPy 13.3.0, where NumPy 2 keeps the array's dtype)"
    severity = Severity.WARNING

    def check(self, ctx: "RuleContext") -> Iterable[Finding]:
        for art, member, facts in self.facts(ctx):
            if not facts.fused_calls or art.ref.kind is ArtifactKind.INSTALLED:
                continue
            verdict = versions_for(ctx, art).fuse_verdict()
            sev = verdict.severity(admitted=Severity.WARNING, unknown=Severity.INFO)
            for c in facts.fused_calls:
                is_int = c.value.lstrip("-").isdigit()
                wide = "int64" if is_int else "float64"
                widens = "int64, or float64 with float32 arrays" if is_int else "float64"
                yield self.finding(
                    _location(art, member.path, c.span, symbol=c.kernel),
                    f"Python scalar `{c.text}` is passed to cupy.fuse kernel `{c.kernel}` (argument {c.position + 1}): "
                    f"CuPy 13.3.0's fusion types it as {wide}, not as a weak Python scalar (measured on an H100), so "
                    f"results computed with it widen ({widens}) where NumPy 2 and CuPy 14 keep the array's dtype; "
                    f"{verdict.evidence}",
                    fix=Fix(user="Pass a NumPy scalar of the intended dtype, or use cupy>=14.",
                            maintainer=f"Pass `numpy.float32({c.text})` (or the array's dtype) instead of a Python scalar."),
                    evidence={"scalar": c.text, "value": c.value, "kernel": c.kernel, "position": c.position,
                              "versions": verdict.state, "why": verdict.evidence},
                    key=f"{c.kernel}:{c.position}:{c.text}",
                    severity=sev,
                )


class CopytoPythonScalar(_SourceRule):
    """## What it does
    Finds `cupy.copyto(dst, src)` whose `src` is a Python scalar, and
    `cupy.select(condlist, choicelist, default)` whose `default` is a Python
    scalar or omitted (it defaults to the Python int `0`).

    Severity follows the versions in play, as for CU401: **error** where CuPy
    13.0-13.2 can meet NumPy >= 2, **info** where the versions exclude it,
    **warning** when unknown.

    ## Why is this bad?
    CuPy 13.0-13.2's `copyto` checked a Python-scalar source with
    `numpy.can_cast(src, dst.dtype, casting)`, which NumPy 2 rejects:
    `TypeError: can_cast() does not support Python ints, floats, and
    complex`. `cupy.select` fills its result with `copyto(result, default)`,
    so every `cupy.select` call without an array default failed
    (cupy/cupy#8453; scikit-hep/awkward#3243 hit it through `copyto`).
    CuPy 13.3.0 checks the cast with `numpy.copyto` instead.

    ## Example
    ```python
    cupy.copyto(out, 0.5)
    r = cupy.select([x > 0], [x], cupy.nan)
    ```

    ## Use instead
    ```python
    cupy.copyto(out, cupy.asarray(0.5, dtype=out.dtype))
    r = cupy.select([x > 0], [x], cupy.asarray(cupy.nan, dtype=x.dtype))
    ```
    or require `cupy>=13.3.0`.

    ## Fix safety
    No automatic fix: the dtype of the 0-d array to pass depends on the target.
    """

    code = "CU406"
    name = "copyto-python-scalar"
    summary = "cupy.copyto / cupy.select with a Python scalar (TypeError with CuPy 13.0-13.2 and NumPy 2)"
    severity = Severity.ERROR

    def check(self, ctx: "RuleContext") -> Iterable[Finding]:
        for art, member, facts in self.facts(ctx):
            if not getattr(facts, "copyto", ()):
                continue
            verdict = versions_for(ctx, art).copyto_verdict()
            for c in facts.copyto:
                what = "source" if c.function == "cupy.copyto" else "default"
                yield self.finding(
                    _location(art, member.path, c.span, symbol=c.function),
                    f"`{c.function}` gets the Python scalar {what} `{c.text}`: CuPy 13.0-13.2 checks it with "
                    f"numpy.can_cast, a TypeError under NumPy 2; {verdict.evidence}",
                    fix="Pass a 0-d array of the target's dtype (`cupy.asarray(v, dtype=dst.dtype)`), or require "
                    "cupy>=13.3.0.",
                    evidence={"function": c.function, "scalar": c.text, "value": c.value, "versions": verdict.state},
                    key=f"{c.function}:{c.text}",
                    severity=verdict.severity(),
                )


class _ChangedRule(_SourceRule):
    kind: str = ""
    admitted_severity = Severity.WARNING

    def fix_for(self, change: Any, member: str) -> Fix:  # pragma: no cover - overridden
        raise NotImplementedError

    def check(self, ctx: "RuleContext") -> Iterable[Finding]:
        for art, member, facts in self.facts(ctx):
            if art.ref.kind is ArtifactKind.INSTALLED:
                # Installed libraries: only what crashes their users (CU401 fused kernels, CU402
                # can_cast, CU405 copyto).  Their internal dtype choices (NumPy's own code
                # exercises every promotion on purpose) are their maintainers' business.
                continue
            changes = [c for c in facts.changed if c.kind == self.kind]
            if not changes:
                continue
            verdict = versions_for(ctx, art).numpy2_verdict()
            for c in changes:
                yield self.finding(
                    _location(art, member.path, c.span),
                    f"`{c.text}` ({c.operands}): NumPy 1.x gave {c.legacy}, NumPy 2 "
                    f"{'raises' if re.match(r'^[A-Za-z]+Error', c.new) else 'gives'} {c.new}; {verdict.evidence}",
                    fix=self.fix_for(c, member.path),
                    evidence={"operands": c.operands, "legacy": c.legacy, "numpy2": c.new, "operation": c.operation,
                              "versions": verdict.state},
                    key=f"{c.operation}:{c.operands}",
                    severity=verdict.severity(admitted=self.admitted_severity),
                )


class PythonIntOutOfBounds(_ChangedRule):
    """## What it does
    Finds Python integers that do not fit the integer dtype they meet, where
    that dtype is written down locally: arithmetic with an array made with
    `dtype=`/`astype`, in-place operators on it, NumPy integer scalars
    (`np.uint8(300)`), and integer arrays built from literals. Comparisons are
    never reported: NumPy 2 special-cases them and they still work.

    ## Why is this bad?
    Under NEP 50 a Python int takes the array's dtype, and NumPy 2 raises
    `OverflowError: Python integer 300 out of bounds for uint8`. NumPy 1.x
    promoted by value instead: `np.array([100], np.uint8) + 300` was a uint16
    array `[400]`, `a += 300` wrapped silently.

    ## Example
    ```python
    a = np.array([100], dtype=np.uint8)
    b = a + 300
    ```

    ## Use instead
    ```python
    b = a.astype(np.uint16) + 300
    ```

    ## Fix safety
    No automatic fix: the wider dtype to use is a design decision.
    """

    code = "CU403"
    name = "python-int-out-of-bounds"
    summary = "A Python int out of range for a known integer dtype (OverflowError on NumPy 2)"
    severity = Severity.ERROR
    kind = "int-out-of-bounds"
    admitted_severity = Severity.ERROR

    def fix_for(self, change: Any, member: str) -> Fix:
        if change.operation == "conversion":
            return Fix("Use a dtype that holds the value, or wrap explicitly (`np.array(v).astype(dtype)`).")
        return Fix("Widen the array first (`a.astype(np.int64) + v`) or reduce the value to the dtype's range.")


class NumpyScalarUpcast(_ChangedRule):
    """## What it does
    Finds an array of a known dtype combined with a NumPy scalar of a wider
    dtype (`np.float64(3)`, `np.int64(2)`) whose value the array's dtype holds.

    ## Why is this bad?
    NumPy 1.x looked at the scalar's *value* and kept the array's dtype:
    `np.array([1.], np.float32) * np.float64(3)` was float32. Under NEP 50 a
    NumPy scalar is as strong as an array: the result is float64, doubling
    memory and silently changing precision downstream (and on GPUs, often a
    much slower kernel).

    ## Example
    ```python
    x = np.ones(3, dtype=np.float32)
    y = x * np.float64(3)
    ```

    ## Use instead
    ```python
    y = x * 3.0      # a Python scalar is weak: float32
    ```

    ## Fix safety
    Unsafe: replacing the NumPy scalar by a Python scalar restores the NumPy 1.x
    dtype, which changes the NumPy 2 result.
    """

    code = "CU404"
    name = "numpy-scalar-upcast"
    summary = "An array times a wider NumPy scalar: NumPy 2 upcasts where NumPy 1.x kept the array's dtype"
    severity = Severity.WARNING
    kind = "numpy-scalar-upcast"

    def fix_for(self, change: Any, member: str) -> Fix:
        if change.replacement and change.fix_span:
            return Fix(f"Use a Python scalar (`{change.replacement}`), which keeps the array's dtype, or cast the "
                       "scalar to the array's dtype.", (_edit(member, change.fix_span, change.replacement),),
                       Applicability.UNSAFE)
        return Fix("Cast the scalar to the array's dtype (`x.dtype.type(v)`) or use a Python scalar.")


class PythonScalarNarrowed(_ChangedRule):
    """## What it does
    Finds a Python scalar combined with a NumPy scalar of a narrower dtype
    (`np.float32(x) * 3.0`, `np.int8(v) + 1`), and Python floats out of the
    range of a float16/float32 array they meet (`f16_array + 70000.0`).

    ## Why is this bad?
    NumPy 1.x computed these in float64/int64 (all-scalar operations promoted
    by type, array operations by value). Under NEP 50 the Python scalar is weak:
    the result keeps float32/float16/int8, losing precision, wrapping around,
    or overflowing to `inf` with a `RuntimeWarning`.

    ## Example
    ```python
    s = np.float32(0.1) * 3.0          # float64 before, float32 now
    h = np.zeros(3, np.float16) + 70000.0  # float32 before, inf now
    ```

    ## Use instead
    ```python
    s = np.float64(np.float32(0.1)) * 3.0
    h = np.zeros(3, np.float32) + 70000.0
    ```

    ## Fix safety
    No automatic fix: the intended precision is a design decision.
    """

    code = "CU405"
    name = "python-scalar-narrowed"
    summary = "A Python scalar now computed in a narrower NumPy dtype (precision loss, overflow)"
    severity = Severity.WARNING
    kind = "python-scalar-narrowed"

    def fix_for(self, change: Any, member: str) -> Fix:
        return Fix("Convert the NumPy operand to the wider dtype explicitly (`np.float64(s)`, `a.astype(np.float32)`).")


# -- traced (cuaudit trace) --------------------------------------------------------------


class TracedRule(Rule):
    """Base of the CU41x rules: emitted by ``cuaudit trace``, not by ``check`` (no code)."""

    emitted_by_engine = True
    #: the tracer record kinds this rule reports
    kinds: tuple[str, ...] = ()


class TracedDtypeChange(TracedRule):
    """## What it does
    Reported by `cuaudit trace` (and the pytest plugin, which run your own
    program): an operation that really ran with a scalar operand (Python or
    NumPy scalar, 0-d array) whose result dtype under NumPy 2 differs from the
    dtype NumPy 1.x's value-based promotion gave. Each source location is
    reported once, with the number of times it happened.

    ## Why is this bad?
    The program now computes in another precision: `float32_array *
    np.float64(3)` became float64 (more memory, slower GPU kernels),
    `np.int8(1) + 1` became int8 (wraps around at 127).

    ## Example
    ```
    app.py:7:5: CU410 `x * np.float64(3)` (float32 array * np.float64(3.0)): NumPy 1.x gave float32, NumPy 2.4.6 gives float64 (12 times)
    ```

    ## Use instead
    Make the intended dtype explicit: a Python scalar for "the array's dtype",
    or an explicit `astype`/scalar type for a wider one.

    ## Fix safety
    No automatic fix.
    """

    code = "CU410"
    name = "traced-dtype-change"
    summary = "Traced: an operation's result dtype differs between NumPy 1.x and NumPy 2"
    severity = Severity.WARNING
    kinds = ("dtype",)


class TracedNewException(TracedRule):
    """## What it does
    Reported by `cuaudit trace`: an operation that raised under NumPy 2
    (`OverflowError` for an out-of-bounds Python int, `TypeError` from
    `np.can_cast` with a Python scalar) where NumPy 1.x returned a result.

    ## Why is this bad?
    The program crashes, or takes an `except` branch it never took before.

    ## Example
    ```
    app.py:4:9: CU411 `a + 300` (uint8 array + Python int 300): NumPy 1.x gave uint16 result, NumPy 2.4.6 raises OverflowError
    ```

    ## Use instead
    Widen the array (`a.astype(np.uint16) + 300`), or test value ranges with
    `np.iinfo` instead of `np.can_cast(300, ...)`.

    ## Fix safety
    No automatic fix.
    """

    code = "CU411"
    name = "traced-new-exception"
    summary = "Traced: an operation raises under NumPy 2 where NumPy 1.x returned a result"
    severity = Severity.ERROR
    kinds = ("error",)


class TracedNewOverflow(TracedRule):
    """## What it does
    Reported by `cuaudit trace`: an operation whose NumPy 2 result is
    narrower than NumPy 1.x's *and* overflowed (to `inf`, with
    `RuntimeWarning: overflow`) where the legacy dtype held the value.

    ## Why is this bad?
    Values silently become `inf` (`float16_array + 70000.0`).

    ## Example
    ```
    app.py:9:5: CU412 `h + 70000.0` (float16 array + Python float 70000.0): NumPy 1.x gave float32, NumPy 2.4.6 gives float16 and overflows
    ```

    ## Use instead
    Compute in the wider dtype explicitly (`h.astype(np.float32) + 70000.0`).

    ## Fix safety
    No automatic fix.
    """

    code = "CU412"
    name = "traced-new-overflow"
    summary = "Traced: NumPy 2 computes in a narrower dtype and overflows where NumPy 1.x did not"
    severity = Severity.WARNING
    kinds = ("warning",)


class TracedChangedAnswer(TracedRule):
    """## What it does
    Reported by `cuaudit trace`: a promotion query whose answer changed
    (`np.can_cast(np.float64(1.0), np.float32)` was `True` by value, is `False`
    by dtype), and operations that failed under NumPy 1.x and now succeed.

    ## Why is this bad?
    Code that branches on these answers takes another branch under NumPy 2.

    ## Example
    ```
    app.py:3:4: CU413 can_cast(np.float64(1.0), float32): NumPy 1.x gave True, NumPy 2.4.6 gives False
    ```

    ## Use instead
    Ask about dtypes (`np.can_cast(x.dtype, ...)`) or values (`np.iinfo`)
    explicitly.

    ## Fix safety
    No automatic fix.
    """

    code = "CU413"
    name = "traced-changed-answer"
    summary = "Traced: a promotion query (can_cast) answers differently, or an error went away"
    severity = Severity.WARNING
    kinds = ("value", "fixed")
