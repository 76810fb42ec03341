"""CU3xx: Cython C-API breaks between packages.

A module that ``cimport``s functions from another package's Cython module
binds to them at import time through the provider's ``__pyx_capi__`` dict:
by name, checking the signature string; extension types are checked by
struct size.  Nothing at install time checks any of it.  The seed incident:
cuda-python 12.6.1 made ``cuda.ccudart`` a shim without ``__pyx_capi__``, and
every RMM, cuDF and cuGraph built against 12.6.0 failed at ``import`` with
``AttributeError: module 'cuda.ccudart' has no attribute '__pyx_capi__'``.

The facts come from the ``cython-capi`` extractor (static, from the
binaries); the rules pair each consumer's imports with the provider module
found among the audited artifacts (an environment, or several wheels).
"""

from __future__ import annotations

from typing import Iterable

from cuaudit.analysis.capi_index import CapiIndex, ImportProblem, Provider, import_problems
from cuaudit.model import Finding, Fix, Location, Severity
from cuaudit.rules import Rule

NEEDS = ("cython-capi", "metadata")


def _index(ctx) -> CapiIndex:
    def build() -> CapiIndex:
        return CapiIndex.build(ctx.artifacts, lambda art, path: ctx.fact("cython-capi", art, path))

    return ctx.memo(("capi", "index"), build)


def _problems(ctx) -> list[ImportProblem]:
    def compute() -> list[ImportProblem]:
        index = _index(ctx)
        out: list[ImportProblem] = []
        for consumer in index.consumers(ctx.in_focus):
            found = import_problems(consumer, index)
            if ctx.config.probe and (found or consumer.facts.unresolved):
                probed = _probe(ctx, consumer, index)
                if probed is not None:
                    found = probed
            out += found
        _note_absent_providers(ctx, index)
        return out

    return ctx.memo(("capi", "problems"), compute)


def _declared_like(ctx, consumer: Provider, top: str) -> tuple[str, list[str]] | None:
    """The consumer's requirement whose name starts like the provider's package (cuda -> cuda-python)."""
    for texts, reqs in _requires_dist(ctx, consumer.artifact):
        for req in reqs:
            if req.name.startswith(top.lower().replace("_", "-")):
                return req.name, [t for t in texts if t.lower().replace("_", "-").startswith(req.name)]
    return None


def _requires_dist(ctx, art) -> list[tuple[tuple[str, ...], list]]:
    """(Requires-Dist texts, the requirements that parse) of each metadata file of an artifact, in
    member order; read once per artifact (asked for each of its consumers' unresolved imports)."""
    from cuaudit.requirement import parse_requirement

    def read() -> list[tuple[tuple[str, ...], list]]:
        out = []
        for m in art.members:
            if m.path.endswith(".dist-info/METADATA") or m.path == "PKG-INFO":
                texts = tuple(getattr(ctx.fact("metadata", art, m.path), "requires_dist", ()) or ())
                out.append((texts, list(filter(None, map(parse_requirement, texts)))))
        return out

    return ctx.memo(("capi", "requires_dist", id(art)), read)


def _note_absent_providers(ctx, index: CapiIndex) -> None:
    """Say when a consumer's C-API provider is in none of the audited artifacts (`check rmm-cu12==24.12.0`
    alone): nothing was checked against it, which a bare "No findings" would hide."""
    noted: set[tuple[int, str]] = set()
    for consumer in index.consumers(ctx.in_focus):
        if consumer.facts is None:
            continue
        for imp in consumer.facts.imports:
            top = imp.module.split(".")[0]
            key = (id(consumer.artifact), top)
            if key in noted or imp.module == consumer.facts.module or index.providers(imp.module) or index.top_levels.get(top):
                continue
            noted.add(key)
            ref = consumer.artifact.ref
            name = f"{ref.name}=={ref.version}" if ref.name and ref.version else ref.path
            declared = _declared_like(ctx, consumer, top)
            provider = f"{declared[0]}==<version>" if declared else "<provider>==<version>"
            consumer.artifact.skip(
                consumer.member,
                f"C-API provider `{imp.module}` (package `{top}`) is in none of the audited artifacts: CU301-CU303 did "
                f"not check {ref.name or 'this artifact'}'s Cython imports from it; name the provider too, e.g. "
                f"`cuaudit check {name} {provider}`, or audit the environment (`--python`)"
                + (f"; declared: {', '.join(declared[1])}" if declared else ""),
                "CU301",  # the rule that could not judge these imports
            )


def _probe(ctx, consumer: Provider, index: CapiIndex) -> list[ImportProblem] | None:
    """--probe: read the consumer's imports by importing it against stand-ins; None if it could not run."""
    import dataclasses
    import sys

    from cuaudit.facts.cython import CImport, TypeImport

    path = consumer.artifact.fs_path(consumer.member)
    if path is None:
        consumer.artifact.skip(consumer.member, "--probe needs the module on disk (install the wheel, then `cuaudit env --probe`)")
        return None
    python = ctx.environment.python if ctx.environment else sys.executable
    facts = consumer.facts
    guess: dict[str, dict] = {}
    for i in facts.imports:
        guess.setdefault(i.module, {"capi": {}, "types": {}})["capi"][i.name] = (i.signature, i.kind)
    for t in facts.type_imports:
        if t.module not in ("builtins", "__builtin__") and t.size:
            guess.setdefault(t.module, {"capi": {}, "types": {}})["types"][t.name] = t.size
    result = ctx.probe("capi", python=python, module=facts.module, path=path, providers=guess)
    if result is None:
        return None
    if not result.complete:
        return None
    checks = {(t.module, t.name): t.check_size for t in facts.type_imports}
    probed = dataclasses.replace(
        facts,
        imports=tuple(sorted(CImport(m, n, sig, kind) for (m, n), (sig, kind) in result.imports.items())),
        type_imports=tuple(sorted(TypeImport(m, n, size, checks.get((m, n), "")) for (m, n), size in result.type_sizes.items())),
        unresolved=(),
    )
    probed_consumer = dataclasses.replace(consumer, _facts=probed)
    return [dataclasses.replace(p, consumer=consumer, origin="probe") for p in import_problems(probed_consumer, index)]


def _requirement(ctx, consumer: Provider, provider: Provider | None) -> str:
    """The consumer's own declared requirement on the provider's distribution, if any."""
    if provider is None or not provider.ref.name:
        return ""
    return _declared(ctx, consumer.artifact, provider.ref.name)


def _declared(ctx, artifact, name: str) -> str:
    """The specifier of ``artifact``'s unconditional requirement on distribution ``name`` ("" if none)."""
    from packaging.utils import canonicalize_name

    want = canonicalize_name(name)
    for _texts, reqs in _requires_dist(ctx, artifact):
        for req in reqs:
            if req.name == want and not req.marker:
                return req.specifier
    return ""


def _maintainer_text(p: ImportProblem, what: str) -> str:
    """The fix at the source of a C-API break: the provider keeps the old module working, the consumer pins."""
    prov = p.provider.dist if p.provider is not None else "the provider"
    return (f"{prov} keeps {p.module} exporting {what} (re-export it: `__pyx_capi__ = <new module>.__pyx_capi__`, "
            f"as cuda-python 12.6.2 did); {p.consumer.dist} declares the range of {prov} it was built against.")


def _fix_text(ctx, p: ImportProblem, what: str) -> str:
    consumer, prov = p.consumer, p.provider
    cdist = consumer.dist
    parts = []
    spec = _requirement(ctx, consumer, prov)
    if prov is not None and prov.ref.name:
        pname, pver = prov.ref.name, prov.ref.version
        if spec:
            from packaging.specifiers import SpecifierSet

            inside = pver and SpecifierSet(spec).contains(pver, prereleases=True)
            if inside:
                parts.append(
                    f"{cdist} declares `{pname}{spec}`, which admits the installed {pver}: that range is too wide; "
                    f"exclude {pname} {pver} (`{pname}!={pver}`) and install a release of {pname} that still exports {what}"
                )
            else:
                parts.append(
                    f"install {pname} in the range {cdist} declares, `{pname}{spec}` "
                    f"(pip installed {pver} outside it, e.g. with --no-deps or a later upgrade)"
                )
        else:
            parts.append(f"install a release of {pname} that exports {what}, or rebuild {cdist} against {pname} {pver}")
    else:
        parts.append(f"rebuild {cdist} against the installed providers")
    return "; ".join(parts) + "."


def _names(imps) -> str:
    names = [i.name for i in imps]
    text = ", ".join(names[:5])
    return text + (f" and {len(names) - 5} more" if len(names) > 5 else "")


class CapiRule(Rule):
    needs = NEEDS


class MissingCapiImport(CapiRule):
    """## What it does
    Finds a compiled Cython module that `cimport`s C functions or variables
    from another module which, as installed, does not export them: the
    provider module has no `__pyx_capi__` at all (it became a Python shim, or
    a non-Cython extension), no longer exports that name, or no longer exists.

    The imports are read from the consumer's binary (the names passed to
    Cython's `__Pyx_ImportFunction` after `PyImport_ImportModule`), the
    exports from the provider's binary (its `__Pyx_ExportFunction` calls).

    ## Why is this bad?
    Cython binds the imports when the consumer module is imported, so the
    whole package fails at `import`, long after pip reported success.  The
    real case: rmm-cu12 24.12.0 with cuda-python 12.6.1 →
    `AttributeError: module 'cuda.ccudart' has no attribute '__pyx_capi__'`
    from `rmm.pylibrmm.device_buffer`.

    ## Example
    ```
    rmm-cu12 24.12.0 (installed):rmm/pylibrmm/device_buffer.cpython-311-x86_64-linux-gnu.so [cuda.ccudart]:
      CU301 imports cudaMemcpyAsync from cuda.ccudart (cuda-python 12.6.1), which has no __pyx_capi__
    ```

    ## Use instead
    Install a provider release that exports the functions (here cuda-python
    12.6.0, or 12.6.2.post1 which re-exports `__pyx_capi__` from
    `cuda.bindings.cyruntime`), or rebuild the consumer against the installed
    provider.  A provider that moves its C-API should keep the old module
    re-exporting it: `__pyx_capi__ = cyruntime.__pyx_capi__`.

    ## Fix safety
    No automatic fix: choosing a provider version changes the environment.
    """

    code = "CU301"
    name = "missing-capi-import"
    summary = "A Cython module imports a C function the installed provider does not export"
    severity = Severity.ERROR

    def check(self, ctx) -> Iterable[Finding]:
        for p in _problems(ctx):
            if p.kind not in ("no-module", "no-capi", "missing"):
                continue
            c = p.consumer
            names = _names(p.imports)
            first = p.imports[0]
            what = f"{p.module}.{first.name}" if len(p.imports) == 1 else f"the C-API of {p.module}"
            if p.kind == "no-module":
                msg = (
                    f"{c.module} cimports {names} from {p.module}, which no longer exists "
                    f"(its package is installed, the module is not): import fails with ModuleNotFoundError"
                )
                fix = _fix_text(ctx, p, what)
                evidence = {"provider_module": p.module}
            elif p.kind == "no-capi":
                prov = p.provider
                nature = (
                    "a Python module" if prov.is_python
                    else "not a Cython module" if prov.facts is not None and not prov.facts.is_cython
                    else "a module that creates no __pyx_capi__"
                )
                msg = (
                    f"{c.module} cimports {names} from {p.module} ({prov.dist}), which has no __pyx_capi__ "
                    f"({nature}): import fails with AttributeError: module '{p.module}' has no attribute '__pyx_capi__'"
                )
                fix = _fix_text(ctx, p, what)
                evidence = {"provider_module": p.module, "provider": prov.dist, "provider_member": prov.member}
            else:
                prov = p.provider
                msg = (
                    f"{c.module} cimports {names} from {p.module} ({prov.dist}), which does not export "
                    f"{'it' if len(p.imports) == 1 else 'them'}: import fails with "
                    f"ImportError: {p.module} does not export expected C function {first.name}"
                )
                fix = _fix_text(ctx, p, what)
                evidence = {"provider_module": p.module, "provider": prov.dist, "provider_member": prov.member}
            evidence["functions"] = [{"name": i.name, "signature": i.signature, "kind": i.kind} for i in p.imports]
            yield self.finding(
                Location(c.ref, c.member, symbol=p.module), msg, evidence=evidence, key=p.module,
                fix=Fix(user=fix, maintainer=_maintainer_text(p, what)),
                origin=p.origin,
            )


class CapiSignatureMismatch(CapiRule):
    """## What it does
    Finds a Cython C function or variable whose signature string, as the
    consumer was compiled, differs from the one the installed provider
    exports (the capsule name in its `__pyx_capi__`).

    ## Why is this bad?
    Cython compares the strings at import and refuses the module:
    `TypeError: C function cuda.ccudart.cudaGraphAddNode has wrong signature
    (expected ..., got ...)`.  Even a change only in Cython's mangled type
    names (cuda-python 12.6.2.post1 renamed `__pyx_t_4cuda_7ccudart_...` to
    `__pyx_t_4cuda_8bindings_9cyruntime_...` in 23 signatures) breaks it.

    ## Example
    `cuda.bindings.cyruntime.cudaGraphAddNode` changed its parameters between
    cuda-bindings 12.9.4 and 13.0.3; a consumer built against 12.9 fails.

    ## Use instead
    Rebuild the consumer against the installed provider, or install the
    provider release the consumer was built against.

    ## Fix safety
    No automatic fix.
    """

    code = "CU302"
    name = "capi-signature-mismatch"
    summary = "A Cython C function's expected signature differs from the installed provider's"
    severity = Severity.ERROR

    def check(self, ctx) -> Iterable[Finding]:
        for p in _problems(ctx):
            if p.kind != "signature":
                continue
            c, prov, imp = p.consumer, p.provider, p.imports[0]
            msg = (
                f"{c.module} expects {p.module}.{imp.name} as `{imp.signature}`; {prov.dist} exports "
                f"`{p.found[0]}`: import fails with TypeError: C function {p.module}.{imp.name} has wrong signature"
            )
            yield self.finding(
                Location(c.ref, c.member, symbol=f"{p.module}.{imp.name}"),
                msg,
                fix=Fix(user=_fix_text(ctx, p, f"{p.module}.{imp.name} with the signature `{imp.signature}`"),
                        maintainer=_maintainer_text(p, f"{p.module}.{imp.name} with the signature `{imp.signature}`")),
                evidence={"provider_module": p.module, "provider": prov.dist, "function": imp.name,
                          "expected": imp.signature, "found": p.found[0]},
                key=f"{p.module}.{imp.name}",
                origin=p.origin,
            )


class ExtensionTypeSizeChanged(CapiRule):
    """## What it does
    Finds an extension type a Cython module imports (`cdef class` from a
    `.pxd`, or an extern type such as `numpy.ndarray`) whose struct size, as
    the consumer was compiled, differs from the installed type's
    `tp_basicsize` read from the provider's binary.

    ## Why is this bad?
    Cython checks the size at import: smaller than expected is always an
    error (`ValueError: rmm._cuda.stream.Stream size changed, may indicate
    binary incompatibility. Expected 40 from C header, got 32 from
    PyObject`); larger is an error for `check_size='error'` (the default for
    `cdef class`es of Cython packages), a warning for `'warn'`.  Field
    accesses through the old layout would read the wrong memory.

    ## Example
    A consumer compiled against a provider whose `cdef class Stream` had one
    more attribute.

    ## Use instead
    Rebuild the consumer against the installed provider, or install the
    provider release it was built against.

    ## Fix safety
    No automatic fix.
    """

    code = "CU303"
    name = "extension-type-size-changed"
    summary = "An imported extension type's size differs from the installed type"
    severity = Severity.ERROR

    def check(self, ctx) -> Iterable[Finding]:
        for p in _problems(ctx):
            if p.kind != "type-size":
                continue
            c, prov, t = p.consumer, p.provider, p.type_import
            severity = Severity.ERROR
            if p.actual_size > t.size and t.check_size in ("warn", ""):
                severity = Severity.WARNING
            msg = (
                f"{c.module} expects {t.module}.{t.name} of {t.size} bytes; {prov.dist} defines it with "
                f"{p.actual_size} bytes: import {'fails with' if severity is Severity.ERROR else 'warns'} "
                f"'{t.module}.{t.name} size changed, may indicate binary incompatibility'"
            )
            yield self.finding(
                Location(c.ref, c.member, symbol=f"{t.module}.{t.name}"),
                msg,
                fix=Fix(user=_fix_text(ctx, p, f"{t.module}.{t.name} with the layout {c.dist} was built against"),
                        maintainer=_maintainer_text(p, f"{t.module}.{t.name} with the layout {c.dist} was built against")),
                evidence={"provider_module": t.module, "provider": prov.dist, "type": t.name,
                          "expected_size": t.size, "actual_size": p.actual_size, "check_size": t.check_size},
                key=f"{t.module}.{t.name}",
                severity=severity,
                origin=p.origin,
            )


#: sizeof(PyArray_Descr) on 64-bit platforms as Cython records it for `numpy.dtype`, by the
#: headers a module was compiled with: NumPy < 1.20, 1.20-1.26, 2.x (whose public struct is small)
#: numpy.dtype sizes that say which headers a Cython module was built with.  88 bytes is not
#: in it: NumPy < 1.20 headers record it, and so do NumPy 2 builds for the 1.x-compatible API
#: (CuPy 14.2.0's modules record 88 and import under NumPy 2.5.2: 17 false CU317 errors on an
#: H100, 2026-11-23, before 88 was taken out).
NUMPY_DTYPE_SIZE = {96: "1.x (1.20-1.26)", 32: "2.x"}


def _numpy_versions(ctx) -> dict[tuple[int, int], str]:
    """(major, minor) -> "X.Y.Z" for the NumPy distributions among the artifacts."""
    import re

    out: dict[tuple[int, int], str] = {}
    for art in ctx.artifacts:
        nums = re.match(r"(\d+)\.(\d+)", art.ref.version or "")
        if (art.ref.name or "").lower() == "numpy" and nums:
            out.setdefault((int(nums.group(1)), int(nums.group(2))), art.ref.version)
    return out


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _declared_admits(ctx, art, version: str) -> bool:
    """``art`` declares a numpy requirement whose range holds ``version``."""
    from packaging.specifiers import SpecifierSet

    spec = _declared(ctx, art, "numpy") if art.ref.name else ""
    return bool(spec) and SpecifierSet(spec).contains(version, prereleases=True)


def _numpy_fix(ctx, art, running: str, pin: str, build: str) -> str:
    """Install a NumPy in ``pin`` or a build made for the running one, said against the range ``art`` declares."""
    from packaging.specifiers import SpecifierSet

    name = art.ref.name or "this package"
    spec = _declared(ctx, art, "numpy") if art.ref.name else ""
    if spec and not SpecifierSet(spec).contains(running, prereleases=True):
        return (f"install numpy in the range {name} declares, `numpy{spec}` (pip installed numpy {running} outside "
                f"it, e.g. with --no-deps or a later upgrade)")
    text = f"install {build}, or pin `numpy{pin}` for it"
    if spec:
        return f"{text}; {name} declares `numpy{spec}`, which admits numpy {running}: that range is too wide"
    return f"{text}; {name} should declare `numpy{pin}`"


#: NPY_FEATURE_VERSION by the "X.Y" NumPy 2.x headers spell for it (NPY_FEATURE_VERSION_STRING): each
#: is the first NumPy release with that C-API, so a running NumPy provides it iff its X.Y is not older
NUMPY_FEATURE_VERSION = {(1, 7): 0x7, (1, 8): 0x8, (1, 9): 0x9, (1, 10): 0xA, (1, 13): 0xB, (1, 14): 0xC,
                         (1, 16): 0xD, (1, 20): 0xE, (1, 22): 0xF, (1, 23): 0x10, (1, 25): 0x11, (2, 0): 0x12,
                         (2, 1): 0x13, (2, 3): 0x14, (2, 4): 0x15}


def _c_api_version(numpy: tuple[int, int]) -> int | None:
    """The C-API (feature) version a NumPy X.Y runs with, as its error messages print it."""
    known = [v for k, v in NUMPY_FEATURE_VERSION.items() if k <= numpy]
    return known[-1] if known and numpy <= max(NUMPY_FEATURE_VERSION) else None


def _hex(version: int | None) -> str:
    return f"0x{version:x}" if version is not None else "0x..."


class NumpyAbiMismatch(CapiRule):
    """## What it does
    Finds a compiled module whose NumPy C-API the NumPy next to it
    (installed in `env`, or given to `check` as a wheel) does not provide:

    - built with NumPy 1.x headers, running with NumPy 2.x.  Read from the
      C strings of NumPy's `import_array()` compiled into every module that
      uses NumPy's C-API (C, C++, pybind11 with `numpy/arrayobject.h`, f2py,
      Cython): 1.x headers import only `numpy.core._multiarray_umath`, 2.x
      headers `numpy._core._multiarray_umath` first.  For Cython modules also
      from the size recorded for `numpy.dtype`: 96 bytes from NumPy 1.20-1.26
      headers, 32 from 2.x on 64-bit platforms.
    - built with NumPy 2.x headers for a newer C-API than the running NumPy
      has: 2.x headers spell the version they target (`NPY_TARGET_VERSION`;
      by default 1.19's C-API, spelled `1.16`, up to NumPy 2.3's headers,
      1.23 from 2.4's) in `import_array()`'s error message, `(NumPy X.Y)`.
      1.x headers keep their target only in machine code, which is not
      read; a 1.20+ Cython build (96-byte `numpy.dtype`) next to NumPy <
      1.20 is reported.

    Modules built with NumPy 2.x headers for their default target also run
    on NumPy 1.x, so they are not reported.  A module for a newer C-API in a
    package whose other modules run with the NumPy next to it, and whose
    declared numpy range admits that NumPy, is reported as info: such a
    package imports it only under a newer NumPy (h5py 3.16.0's
    `_npystrings`, for NumPy 2's StringDType).  Not read: libraries that
    hold the NumPy import of a package's extension (torch's
    `libtorch_python.so`).

    ## Why is this bad?
    `import_array()` runs when the module is imported and refuses the NumPy
    it finds: NumPy 2 refuses a 1.x build (`A module that was compiled using
    NumPy 1.x cannot be run in NumPy 2.x`, then `ImportError:
    numpy.core.multiarray failed to import`; a Cython module fails earlier,
    at its type import: `ValueError: numpy.dtype size changed, may indicate
    binary incompatibility. Expected 96 from C header, got 88 from
    PyObject`, as every module of h5py 3.10.0 does under NumPy 2.0.2); an
    older NumPy refuses a build for a newer C-API (`RuntimeError: module was compiled against NumPy
    C-API version 0x14 (NumPy 2.3) but the running NumPy has C-API version
    0x12`, then `ImportError: numpy._core.multiarray failed to import`); a
    1.20+ Cython build under NumPy < 1.20 fails with `ValueError:
    numpy.dtype size changed, may indicate binary incompatibility`.  pip
    installs any of these pairs without complaint when the package's
    requirement on numpy does not say the range it was built for.

    ## Example
    ```
    pkg/_ext.cpython-311-x86_64-linux-gnu.so: CU317 compiled with NumPy 1.x headers (its import_array()
    imports numpy.core._multiarray_umath only); numpy 2.0.2 is installed: import fails
    ```

    ## Use instead
    Install a build of the package made for the NumPy you run (built with
    NumPy 2.x headers, for a target not newer than it), or pin numpy to the
    range the build needs (`numpy<2`, `numpy>=2.3`), and declare that range
    in the package's requirements.

    ## Fix safety
    No automatic fix.
    """

    code = "CU317"
    name = "numpy-abi-mismatch"
    summary = "A compiled module needs a NumPy C-API the NumPy next to it does not provide"
    severity = Severity.ERROR
    needs = NEEDS + ("extension_strings",)

    def check(self, ctx) -> Iterable[Finding]:
        versions = _numpy_versions(ctx)
        if len(versions) != 1:
            return  # no NumPy named, or several: which one runs is not known
        (running, version), = versions.items()
        modules: dict[tuple[int, str], list] = {}  # (artifact, member) -> [art, member, dtype size, strings]
        for art, member, facts in ctx.subjects("cython-capi"):
            for t in getattr(facts, "type_imports", ()):
                if (t.module, t.name) == ("numpy", "dtype"):
                    modules.setdefault((id(art), member.path), [art, member, None, None])[2] = t.size
        for art, member, strings in ctx.subjects("extension_strings"):
            if getattr(strings, "numpy_headers", None):
                modules.setdefault((id(art), member.path), [art, member, None, None])[3] = strings
        # modules of a distribution whose import_array() accepts the running NumPy
        runnable: dict[int, int] = {}
        for art, member, size, strings in modules.values():
            target = _version_tuple(strings.numpy_target) if strings is not None and strings.numpy_target else None
            if target is not None and target <= running:
                runnable[id(art)] = runnable.get(id(art), 0) + 1
        for art, member, size, strings in modules.values():
            finding = self._judge(ctx, running, version, art, member, size, strings, runnable.get(id(art), 0))
            if finding is not None:
                yield finding

    def _judge(self, ctx, running, version, art, member, size, strings, runnable: int) -> Finding | None:
        headers = strings.numpy_headers if strings is not None else None
        target = strings.numpy_target if strings is not None else None
        built = "2.x" if headers == "2.x" else NUMPY_DTYPE_SIZE.get(size) or headers  # the size says which 1.x
        said = []  # what the binary says, in the order it was read
        if size is not None and NUMPY_DTYPE_SIZE.get(size):
            said.append(f"it expects numpy.dtype of {size} bytes")
        if headers == "1.x":
            said.append("its import_array() imports numpy.core._multiarray_umath only")
        which = f"numpy {version}"
        evidence = {"numpy": which}
        if size is not None:
            evidence["expected_size"] = size
        if headers:
            evidence["import_array_headers"] = headers
        name = art.ref.name or "this package"
        severity = None
        if built is not None and built != "2.x" and running >= (2, 0):
            # Cython checks the sizes of the types it imports before import_array() runs (h5py 3.10.0
            # under NumPy 2.0.2: every module with a 96-byte numpy.dtype fails this way)
            error = ("`ValueError: numpy.dtype size changed, may indicate binary incompatibility. Expected 96 from "
                     "C header, got 88 from PyObject`" if size == 96 else
                     "`A module that was compiled using NumPy 1.x cannot be run in NumPy 2.x`, then "
                     "`ImportError: numpy.core.multiarray failed to import`")
            fix = _numpy_fix(ctx, art, version, "<2", f"a build of {name} made with NumPy 2.x headers")
            maintainer = f"{name} builds with NumPy 2.x headers (such builds run on NumPy 1.x too), or declares `numpy<2`"
            built_with = built
        elif target and _version_tuple(target) > running:
            want = _version_tuple(target)
            # the ImportError is spelled numpy._core (C header, numpy's .pxd) or numpy.core (Cython's automatic
            # import_array(), which also drops the RuntimeError: h5py 3.16.0's _npystrings under NumPy 1.26.4)
            error = (f"`ImportError: ...multiarray failed to import`, from import_array()'s `RuntimeError: module was "
                     f"compiled against NumPy C-API version {_hex(NUMPY_FEATURE_VERSION.get(want))} (NumPy {target}) "
                     f"but the running NumPy has C-API version {_hex(_c_api_version(running))}`")
            said.append(f"its import_array() targets the C-API of NumPy {target} (NPY_TARGET_VERSION)")
            fix = _numpy_fix(ctx, art, version, f">={target}", f"a build of {name} that targets NumPy {version}")
            maintainer = f"{name} declares `numpy>={target}`, the NPY_TARGET_VERSION it builds with, or targets an older NumPy"
            built_with, evidence["target"] = "2.x", target
            if runnable and _declared_admits(ctx, art, version):
                # h5py 3.16.0: _npystrings targets NumPy 2.0 for StringDType, its 24 other modules 1.20, and
                # it declares numpy>=1.21.2; under NumPy 1.26.4 nothing imports _npystrings (h5py's string
                # I/O works): a package that keeps one module for newer NumPys is not broken by it
                severity = Severity.INFO
                said.append(f"{runnable} other module{'s' if runnable > 1 else ''} of {name} run with numpy {version}, "
                            f"which {name} declares it supports: it likely imports this one only under a newer NumPy")
                fix = f"nothing to do unless your code imports this module itself: it needs numpy>={target}"
                maintainer = f"{name} imports this module only under numpy>={target} (guarded by the NumPy version)"
        elif size == 96 and headers != "2.x" and running < (1, 20):
            error = ("`ValueError: numpy.dtype size changed, may indicate binary incompatibility. "
                     "Expected 96 from C header, got 88 from PyObject`")
            fix = _numpy_fix(ctx, art, version, ">=1.20", f"a build of {name} made with the headers of NumPy {version}")
            maintainer = f"{name} declares `numpy>=1.20`, the oldest NumPy whose headers it builds with"
            built_with = NUMPY_DTYPE_SIZE[96]
        else:
            return None
        evidence["built_with"] = built_with
        where = "installed" if art.ref.kind.value == "installed" else "given"
        symbol = "numpy.dtype" if size in NUMPY_DTYPE_SIZE and headers != "2.x" else "import_array"
        return self.finding(
            Location(art.ref, member.path, symbol=symbol),
            f"{member.path} was compiled with NumPy {built_with} headers ({'; '.join(said)}); "
            f"{which} is {where}: import fails with {error}",
            fix=Fix(user=fix, maintainer=maintainer),
            evidence=evidence,
            key=symbol,
            severity=severity,
        )


# -- `cuaudit diff` findings ------------------------------------------------------------------


class DiffRule(Rule):
    """Base of the findings of `cuaudit diff` (never run by `check` or `env`)."""

    emitted_by_engine = True


class CapiFunctionRemoved(DiffRule):
    """## What it does
    `cuaudit diff OLD NEW`: a C function or variable in a module's
    `__pyx_capi__` in OLD is not exported by that module in NEW.

    ## Why is this bad?
    Every consumer compiled against OLD that cimports it fails at import
    (`ImportError: ... does not export expected C function ...`).  Breaking.

    ## Example
    `cuda.bindings.cyruntime.cudaGraphAddNode_v2` exported by cuda-bindings
    12.9.4, gone in 13.0.3.

    ## Use instead
    Keep exporting the old name (a thin wrapper) for a deprecation period, or
    release the change as a new major version with consumers pinning `<NEXT`.

    ## Fix safety
    No automatic fix.
    """

    code = "CU310"
    name = "capi-function-removed"
    summary = "diff: a C function/variable is no longer exported (breaking)"
    severity = Severity.ERROR


class CapiSignatureChanged(DiffRule):
    """## What it does
    `cuaudit diff OLD NEW`: a C function or variable keeps its name but its
    signature string (the capsule name Cython checks) differs.

    ## Why is this bad?
    Consumers compiled against OLD fail at import with `TypeError: C function
    ... has wrong signature`.  Breaking, even when only Cython's mangled type
    names changed (cuda-python 12.6.2.post1's `__pyx_t_4cuda_7ccudart_...` →
    `__pyx_t_4cuda_8bindings_9cyruntime_...`).

    ## Example
    `cuda.bindings.cyruntime.cudaGraphAddNode`: 12.9.4 → 13.0.3 adds a parameter.

    ## Use instead
    Add the new signature under a new name and keep the old one.

    ## Fix safety
    No automatic fix.
    """

    code = "CU311"
    name = "capi-signature-changed"
    summary = "diff: a C function/variable changes its signature (breaking)"
    severity = Severity.ERROR


class CapiFunctionAdded(DiffRule):
    """## What it does
    `cuaudit diff OLD NEW`: a C function or variable (or a whole module's
    C-API) is new in NEW.

    ## Why is this bad?
    It is not: additions are harmless for existing consumers.  Listed so the
    report is a complete account of the C-API change.

    ## Example
    `cuda.bindings.cyruntime.cudaGraphConditionalHandleCreate_v2` new in 13.0.

    ## Use instead
    Nothing to do.

    ## Fix safety
    Nothing to fix.
    """

    code = "CU312"
    name = "capi-function-added"
    summary = "diff: a C function/variable is added (harmless)"
    severity = Severity.INFO


class CapiModuleRemoved(DiffRule):
    """## What it does
    `cuaudit diff OLD NEW`: a module that had a `__pyx_capi__` in OLD is gone
    in NEW, or is still there without one; says where its functions moved
    when another NEW module exports most of them.

    ## Why is this bad?
    The seed incident: cuda-python 12.6.1 made `cuda.ccudart`, `cuda.ccuda`
    and `cuda.cnvrtc` shims over `cuda.bindings.*` without `__pyx_capi__`;
    RMM, cuDF and cuGraph failed at import with `AttributeError: module
    'cuda.ccudart' has no attribute '__pyx_capi__'`.

    ## Example
    ```
    cuaudit diff cuda-python==12.6.0 cuda-python==12.6.1
    CU313 cuda.ccudart loses its __pyx_capi__ in cuda-python 12.6.1 (298 functions/variables) ...;
          the functions moved to cuda.bindings.cyruntime
    ```

    ## Use instead
    Keep the old module re-exporting the C-API, as 12.6.2.post1 did:
    `from cuda.bindings import cyruntime; __pyx_capi__ = cyruntime.__pyx_capi__`.

    ## Fix safety
    No automatic fix.
    """

    code = "CU313"
    name = "capi-module-removed"
    summary = "diff: a module with a C-API is removed or loses __pyx_capi__ (breaking)"
    severity = Severity.ERROR


class ExtensionTypeResized(DiffRule):
    """## What it does
    `cuaudit diff OLD NEW`: an extension type defined in both releases has a
    different `tp_basicsize`.

    ## Why is this bad?
    Consumers that cimport the type check its size at import: `ValueError:
    ... size changed, may indicate binary incompatibility`.

    ## Example
    A `cdef class Stream` that gains a field between two minor releases.

    ## Use instead
    Change struct layouts only in major releases.

    ## Fix safety
    No automatic fix.
    """

    code = "CU314"
    name = "extension-type-resized"
    summary = "diff: an extension type changes size (breaking for cimporting consumers)"
    severity = Severity.ERROR


class PublicModuleRemoved(DiffRule):
    """## What it does
    `cuaudit diff OLD NEW`: a public Python module (no `_`-prefixed part, not
    a test package) of OLD does not exist in NEW.

    ## Why is this bad?
    `import` of it fails for every Python caller.

    ## Example
    `cuda.tests.test_ccudart` in cuda-python 12.6.0, moved under
    `cuda.bindings.tests` in 12.6.1.

    ## Use instead
    Keep a shim module that imports from the new location, with a
    deprecation warning, for a release or two.

    ## Fix safety
    No automatic fix.
    """

    code = "CU315"
    name = "public-module-removed"
    summary = "diff: a public Python module is removed"
    severity = Severity.WARNING


class ConsumerBroken(DiffRule):
    """## What it does
    `cuaudit diff OLD NEW --consumers PATH...`: a consumer (a wheel or an
    installed distribution) whose Cython imports work against OLD and fail
    against NEW.

    ## Why is this bad?
    Upgrading from OLD to NEW breaks `import` of that consumer.

    ## Example
    `cuaudit diff cuda-python==12.6.0 cuda-python==12.6.1 --consumers rmm_cu12-24.12.0-*.whl`
    → rmm.pylibrmm.device_buffer cimports cudaMemcpyAsync from cuda.ccudart, which has no `__pyx_capi__`.

    ## Use instead
    Pin the consumer's requirement below NEW (`cuda-python<=12.6.0`), or
    rebuild it against NEW.

    ## Fix safety
    No automatic fix.
    """

    code = "CU316"
    name = "consumer-broken"
    summary = "diff: a consumer's Cython imports work with OLD and fail with NEW"
    severity = Severity.ERROR
