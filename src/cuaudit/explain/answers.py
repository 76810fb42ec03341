"""One answer per failure kind: the audit's findings (code, evidence, location) turned into a few lines.

Each function takes the :class:`Case` (what was recognised, what was
audited) and returns an :class:`~cuaudit.explain.model.Explanation`.  The
facts come from the findings of the audit; the message alone is the
fallback, and then the answer says which command tells more.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from cuaudit.explain.model import Explanation
from cuaudit.explain.patterns import MIN_DRIVER, PROMOTION_SITES, SYMBOL_ORIGINS
from cuaudit.explain.traceback import ErrorText
from cuaudit.model import Finding

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.explain.scope import Installed
    from cuaudit.finish import Report


@dataclass
class Case:
    """Everything an answer may use."""

    kind: str
    groups: dict[str, str]
    error: ErrorText
    installed: "Installed | None"
    report: "Report | None"
    #: the --python the user gave (repeated in the commands we suggest)
    python_arg: str | None = None
    target_archs: tuple[str, ...] = ()
    audited: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)

    def findings(self, *codes: str, where: Callable[[Finding], bool] = lambda f: True) -> list[Finding]:
        if self.report is None:
            return []
        return [f for f in self.report.findings if f.code.startswith(codes) and where(f)]

    @property
    def py_flag(self) -> str:
        return f" --python {self.python_arg}" if self.python_arg else ""

    def explanation(self, summary: str, *, why=(), user=(), maintainer=(), codes=(), next=(), findings=()) -> Explanation:
        codes = tuple(dict.fromkeys(list(codes) + [f.code for f in findings]))
        return Explanation(
            kind=self.kind, summary=summary, why=tuple(w for w in why if w), user=tuple(u for u in user if u),
            maintainer=tuple(m for m in maintainer if m), codes=codes, next=tuple(next), findings=tuple(findings),
            audited=self.audited, evidence={k: v for k, v in self.groups.items() if v},
        )


def _dist(f: Finding) -> str:
    ref = f.location.artifact
    return f"{ref.name} {ref.version}".strip() if ref.name else ref.path


def _fix(f: Finding) -> str:
    return f.fix.description if f.fix is not None else ""


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# -- CU1xx ----------------------------------------------------------------------------------------------


def submodule_attribute(case: Case) -> Explanation:
    parent, attr = case.groups["parent"], case.groups["attr"]
    full = f"{parent}.{attr}"
    inst = case.installed
    if inst is None or not inst.owners(parent):
        return case.explanation(
            f"`{parent}` has no attribute `{attr}`; `{parent}` is not installed in the audited environment, so "
            "cuaudit cannot tell whether it is a submodule.",
            next=(f"cuaudit explain --python PATH/TO/python \"{case.error.exception}\"  (the interpreter that failed)",),
        )
    files = inst.module_files(full)
    code_side = case.findings("CU104", "CU105", where=lambda f: f.evidence.get("submodule") == full)
    if not files:
        owner = inst.owners(parent)[0]
        return case.explanation(
            f"`{parent}` has no attribute `{attr}`, and {owner.ref.name} {owner.ref.version} has no submodule "
            f"`{full}` either: the name does not exist in this version (renamed, removed, or never there).",
            why=(f"no file implements `{full}` in {owner.ref.name} {owner.ref.version} "
                 f"(looked for {full.replace('.', '/')}.py, /__init__.py and extension modules)",),
            user=(f"check the release notes of {owner.ref.name} for `{attr}`, or install the version that has it",),
        )
    dist, member = files[0]
    traps = case.findings("CU101", "CU102", "CU103", where=lambda f: f.evidence.get("submodule") == full)
    why = [f"`{full}` is a submodule ({member} in {dist.ref.name} {dist.ref.version}); Python binds a submodule as an "
           f"attribute of `{parent}` only once something imports it"]
    maintainer = []
    if traps:
        why.append(traps[0].message)
        maintainer.append(_fix(traps[0]))
    else:
        why.append(f"the static model finds `{full}` bound after `import {parent}`: something in your program may "
                   "delete it, or another version is imported")
    user = [f"import it before use: `import {full}` (or `from {parent} import {attr}`)",
            "in an availability check, catch ImportError (the submodule cannot load), not AttributeError"]
    # the submodule itself may then fail to load: a library it needs is missing (cupy.cuda.nccl -> libnccl.so.2)
    missing = case.findings("CU203", where=lambda f: member in f.evidence.get("members", ()) or f.location.member == member)
    for f in missing:
        lib = f.evidence.get("library", f.location.symbol or "")
        wheel = wheel_for(lib, dist.ref.name)
        why.append(f"`import {full}` will then need {lib}, which is not installed"
                   + (f" (it ships in {wheel})" if wheel else ""))
        if wheel:
            user.append(f"`{full}` needs {lib}: `pip install {wheel}`")
    for f in code_side:
        why.append(f"your code: {f.location.member or f.location.artifact.path}:{f.location.line}: {f.message}")
    return case.explanation(
        f"`{full}` is a submodule that `import {parent}` does not import: the AttributeError means \"not imported "
        f"yet\", not \"not installed\".",
        why=why, user=user, maintainer=maintainer, findings=traps + code_side + missing,
        codes=() if traps else ("CU101",),
    )


# -- CU2xx ----------------------------------------------------------------------------------------------


_CUDA_MAJOR = re.compile(r"(?:-cu|-cuda|\+cu)(\d{2})(?:x|\b|\d)")


def cuda_major_of(name: str) -> str | None:
    """The CUDA major a distribution name or version encodes: cupy-cuda11x, rmm-cu12, torch 2.5+cu121."""
    m = _CUDA_MAJOR.search(name.lower())
    return m.group(1)[:2] if m else None


def wheel_for(soname: str, consumer: str = "") -> str | None:
    """The pip distribution that ships a library: the CUDA catalog, else nvidia-<component>-cuXX."""
    from cuaudit.analysis.libraries import CudaCatalog

    cat = CudaCatalog.load()
    exp = cat.exports(soname)
    if exp is not None:
        return exp.dist
    lib = cat.library(soname)
    if lib is None or lib.is_driver or not lib.components:
        return None
    major = cuda_major_of(consumer)
    return f"nvidia-{lib.components[0]}-cu{major}" if major else f"nvidia-{lib.components[0]}-cuXX"


def missing_library(case: Case) -> Explanation:
    from cuaudit.analysis.libraries import CudaCatalog

    lib = os.path.basename(case.groups["library"])
    cat = CudaCatalog.load()
    importing = [m for m in case.error.modules if case.installed and case.installed.owners(m)]
    where = f" while importing `{importing[-1]}`" if importing else ""
    if cat.is_driver(lib):
        gpu = case.findings("CU202", where=lambda f: lib in str(f.evidence.get("gpu_libraries", "")))
        return case.explanation(
            f"{lib} is the NVIDIA driver's library, and the loader did not find it{where}: this machine has no NVIDIA "
            "driver (a CPU-only node or a container started without the GPU).",
            why=[f"{lib} comes with the driver, never from pip"] + [f.message for f in gpu[:1]],
            user=("run on a machine with an NVIDIA GPU and its driver (in Docker: `--gpus all`), or avoid importing the "
                  "GPU part of the package",),
            maintainer=[_fix(f) for f in gpu[:1]] or ("load the driver lazily (dlopen on first GPU use) so that "
                                                      "`import` works on CPU-only machines",),
            findings=gpu[:1], codes=("CU202",),
        )
    not_found = case.findings("CU203", where=lambda f: f.evidence.get("library") == lib or f.location.symbol == lib)
    unused = case.findings("CU201", where=lambda f: f.location.symbol == lib)
    undeclared = case.findings("CU205", where=lambda f: f.evidence.get("library") == lib)
    mismatch = case.findings("CU206", where=lambda f: f.evidence.get("library") == lib)
    consumer = (not_found or unused or [None])[0]
    consumer_dist = consumer.location.artifact.name if consumer is not None else ""
    wheel = wheel_for(lib, consumer_dist or " ".join(importing))
    why: list[str] = []
    user: list[str] = []
    maintainer: list[str] = []
    if not_found:
        f = not_found[0]
        members = f.evidence.get("members") or [f.location.member]
        why.append(f"{_plural(len(members), 'module')} of {_dist(f)} list {lib} as needed (DT_NEEDED), e.g. "
                   f"{members[0]}; it is in no folder the dynamic loader searches")
    elif case.report is not None:
        why.append(f"the audited distributions find {lib} where the loader looks: it may be missing only from "
                   f"LD_LIBRARY_PATH of the failing process, or the failing module is not among them")
    if unused:
        needers = set((not_found[0].evidence.get("members") or ()) if not_found else ())
        n_unused = len({f.location.member for f in unused})
        all_unused = bool(needers) and needers <= {f.location.member for f in unused}
        why.append(f"{_plural(n_unused, 'module')} of {_dist(unused[0])} need {lib} but use none of its symbols "
                   f"(CU201){': every one of them' if all_unused else ''}: the need is over-linking"
                   + (", not a use" if all_unused else ""))
        maintainer.append(f"link with -Wl,--as-needed: {_plural(n_unused, 'module')} list {lib} and never call it")
    elif not_found:
        why.append(f"the modules use symbols of {lib}: the library is really needed")
    if mismatch:
        why.append(mismatch[0].message)
    if wheel:
        user.append(f"`pip install {wheel}`  (ships {lib})")
    else:
        user.append(f"install the package or toolkit that provides {lib}, or add its folder to LD_LIBRARY_PATH")
    # the next library that would fail: name every missing one at once
    others = []
    if case.report is not None and not_found:
        dist_ref = not_found[0].location.artifact
        for f in case.findings("CU203", where=lambda f: f.location.artifact == dist_ref and f.evidence.get("library") != lib):
            other = f.evidence.get("library", "")
            if other and not cat.is_driver(other):
                others.append((other, wheel_for(other, consumer_dist)))
    # only what the failing import loads eagerly (CU202's chain), not every optional library of the package
    top = importing[0].split(".")[0] if importing else ""
    eager = case.findings("CU202", where=lambda f: f.evidence.get("package") == top)
    if eager:
        loads = set(eager[0].evidence.get("gpu_libraries") or ())
        others = [(o, w) for o, w in others if o in loads]
    if others:
        wheels = sorted({w for _l, w in others if w})
        user.append(f"{'`import ' + top + '`' if eager else _dist(not_found[0])} also needs "
                    f"{', '.join(lib_ for lib_, _w in others)}, missing too"
                    + (f": `pip install {' '.join([wheel] + wheels if wheel else wheels)}` installs them together"
                       if wheels else ""))
    if undeclared:
        maintainer.append(_fix(undeclared[0]) or f"declare {wheel} in Requires-Dist")
    elif wheel and not_found:
        maintainer.append(f"declare `{wheel}` as a dependency (or an extra) so pip installs it")
    findings = not_found[:1] + unused[:1] + undeclared[:1] + mismatch[:1]
    next_cmds = () if case.report is not None and (not_found or unused) else (
        f"cuaudit env{case.py_flag} --select CU2  (which modules need {lib}, and whether they use it)",)
    return case.explanation(
        f"The dynamic loader did not find {lib}{where}.", why=why, user=user, maintainer=maintainer,
        findings=findings, codes=("CU203",), next=next_cmds,
    )


def undefined_symbol(case: Case) -> Explanation:
    path, symbol = case.groups.get("path", ""), case.groups.get("symbol") or case.groups.get("version", "")
    owner = case.installed.owner_of_file(path) if case.installed is not None and path else None
    name = f"{owner.ref.name} {owner.ref.version}" if owner else os.path.basename(path)
    origin = next(((key, label) for rx, key, label in SYMBOL_ORIGINS if rx.search(symbol)), None)
    why, user, maintainer = [], [], []
    if case.kind == "symbol-version":
        why.append(f"{os.path.basename(path)} was built against a newer {symbol.split('_')[0]} than the one the loader "
                   "found (the system's libstdc++/glibc is older than the build machine's)")
        user.append("load a newer libstdc++ (conda: `conda install -c conda-forge libstdcxx-ng`), or install a build "
                    "made for your system (an older manylinux tag)")
        maintainer.append("build on the oldest supported system (the manylinux image) so required symbol versions stay old")
    elif origin is not None:
        key, label = origin
        why.append(f"`{symbol}` belongs to {label}: {name} was compiled against another version of it than the one "
                   "loaded now")
        if key == "torch":
            tv = case.installed.version_of("torch") if case.installed else None
            user.append(f"install the build of {owner.ref.name if owner else 'the package'} made for the installed torch"
                        + (f" {tv}" if tv else "") + ", or pin torch to the version it was built with")
            maintainer.append("publish builds per torch version and pin `torch==X.Y.*` in their requirements")
        elif key == "python":
            user.append("install the wheel built for this Python version (check the cpXY tag of the installed wheel)")
            maintainer.append("tag wheels with the Python ABI they were built for (cpXY, or abi3 with the limited API)")
        elif key == "driver":
            user.append("update the NVIDIA driver: the module calls a driver API function the installed driver lacks")
        else:
            user.append(f"install a newer {key}-cuXX wheel (or toolkit) than the one loaded: the module was built "
                        f"against a release of {label} that defines `{symbol}`")
            maintainer.append(f"declare the minimum version of {label} the build needs")
    else:
        why.append(f"{os.path.basename(path)} imports `{symbol}`, and none of the libraries loaded before it defines it")
    needs = case.findings("CU203", "CU206", where=lambda f: owner is not None and f.location.artifact == owner.ref
                          and (f.location.member and path.endswith(f.location.member)
                               or any(path.endswith(m) for m in f.evidence.get("members", ()))))
    for f in needs[:2]:
        why.append(f.message)
    return case.explanation(
        f"{os.path.basename(path) or 'A module'} ({name}) needs the symbol `{symbol}`, which the libraries "
        "loaded with it do not define.",
        why=why, user=user, maintainer=maintainer, findings=needs[:2], codes=("CU203",),
        next=(f"cuaudit libs {path}  (where each needed library resolves, and which one is picked)",) if path else (),
    )


# -- CU3xx ----------------------------------------------------------------------------------------------


def _consumer_hint(case: Case) -> str:
    mods = [m for m in case.error.modules if m != case.groups.get("module")]
    return mods[-1] if mods else ""


def capi(case: Case) -> Explanation:
    module = case.groups.get("module", "")
    function = case.groups.get("function", "")
    if case.kind == "capi-signature":
        found = case.findings("CU302", where=lambda f: f.evidence.get("provider_module") == module
                              and (not function or f.evidence.get("function") == function))
    else:
        found = case.findings("CU301", where=lambda f: f.evidence.get("provider_module") == module)
    consumer = _consumer_hint(case)
    provider = case.installed.owners(module)[0] if case.installed and case.installed.owners(module) else None
    pdesc = f"{provider.ref.name} {provider.ref.version}" if provider else module.split(".")[0]
    what = {
        "capi-module": f"`{module}` ({pdesc}) has no `__pyx_capi__`: it no longer exports the C functions that "
                       "compiled Cython consumers bind to at import",
        "capi-function": f"`{module}` ({pdesc}) no longer exports the C function `{function}`",
        "capi-signature": f"`{module}.{function}` ({pdesc}) has another C signature than the one its consumer was "
                          "compiled against",
    }[case.kind]
    if found:
        f = found[0]
        consumers = sorted({x.location.artifact.name for x in found})
        why = [f"{', '.join(consumers)} {'was' if len(consumers) == 1 else 'were'} compiled against another {pdesc.split()[0]}: "
               f"{_plural(len(found), 'module')} {'fails' if len(found) == 1 else 'fail'} at import, e.g. {f.message}"]
        user = [_fix(f)]
        maintainer = [f"{pdesc.split()[0]}: keep the old module re-exporting the C-API "
                      f"(`__pyx_capi__ = <new module>.__pyx_capi__`) for a deprecation period",
                      f"{', '.join(consumers)}: pin the provider to the range you built against (an upper bound)"]
        return case.explanation(what + ".", why=why, user=user, maintainer=maintainer, findings=found[:3])
    return case.explanation(
        what + (f" ({consumer} was compiled against an older layout)." if consumer else "."),
        why=("Cython modules that `cimport` from another package bind its C functions by name and signature when they "
             "are imported; nothing checks that at install time",),
        user=(f"install the release of {pdesc.split()[0]} your failing package was built against (see its "
              "Requires-Dist), or a newer build of the failing package",),
        codes=("CU301",) if case.kind != "capi-signature" else ("CU302",),
        next=(f"cuaudit env{case.py_flag} --select CU3  (every consumer checked against the installed providers)",),
    )


def type_size(case: Case) -> Explanation:
    tname = case.groups.get("type", "")
    expected, got = case.groups.get("expected"), case.groups.get("found")
    top = tname.split(".")[0]
    installed_version = case.installed.version_of(top) if case.installed else None
    pkg = f"{top} {installed_version}" if installed_version else top
    found = case.findings("CU303", where=lambda f: tname in (f.location.symbol or "") or tname in f.message)
    consumer = _consumer_hint(case) or "a compiled module"
    why = [f"Cython checks the size of each imported extension type at import: {consumer} was compiled with "
           f"`{tname}` of {expected or '?'} bytes, the installed {pkg} has {got or '?'}"]
    user, maintainer = [], []
    if expected and got and int(expected) > int(got):
        why.append(f"the module was built against a newer {top} than the installed one")
        user.append(f"upgrade {top} (`pip install -U {top}`), or install a build of the failing package made for {pkg}")
        if top == "numpy" and installed_version and installed_version.split(".")[0] < "2":
            user[-1] = ("the module was built against NumPy 2 and runs on NumPy 1.x: `pip install \"numpy>=2\"`, or pin "
                        "the package to a release built for NumPy 1.x")
    else:
        why.append(f"the module was built against an older {top} than the installed one")
        user.append(f"upgrade the failing package to a build made for {pkg}, or pin {top} to the version it was built with")
    maintainer.append(f"build against the oldest {top} you support and declare the range in Requires-Dist"
                      if top != "numpy" else "build against NumPy >= 2.0 (its wheels run on NumPy 1.x too) and "
                      "declare `numpy>=1.x,<3`")
    for f in found[:1]:
        why.append(f.message)
    return case.explanation(
        f"`{tname}` changed size between the {top} a module was compiled against and the installed {pkg}.",
        why=why, user=user, maintainer=maintainer, findings=found[:1], codes=("CU303",),
        next=() if found else (f"cuaudit env{case.py_flag} --select CU303",),
    )


def numpy_1x_module(case: Case) -> Explanation:
    numpy = case.installed.version_of("numpy") if case.installed else None
    consumer = _consumer_hint(case)
    owner = case.installed.owners(consumer)[0] if case.installed and consumer and case.installed.owners(consumer) else None
    pkg = f"{owner.ref.name} {owner.ref.version}" if owner else (consumer or "a compiled package")
    return case.explanation(
        f"{pkg} was compiled against NumPy 1.x and cannot run with NumPy {numpy or case.groups.get('numpy') or '2'}.",
        why=("NumPy 2 changed its C ABI: extension modules built against NumPy 1.x headers do not load under 2.x, while "
             "modules built against 2.x load under both",),
        user=(f"`pip install \"numpy<2\"`, or upgrade {owner.ref.name if owner else 'the package'} to a release built for NumPy 2",),
        maintainer=("build the wheels against NumPy >= 2.0 (they still run on 1.x) and declare `numpy>=1.23,<3`",),
    )


# -- CU4xx ----------------------------------------------------------------------------------------------


def promotion(case: Case) -> Explanation:
    inst = case.installed
    numpy = inst.version_of("numpy") if inst else None
    cupy_dists = inst.matching(r"^cupy(-cuda\d+x|-rocm.*)?$") if inst else []
    cupy = cupy_dists[0] if cupy_dists else None
    frames = "\n".join(f"{f.file} {f.function} {f.source}" for f in case.error.frames) + case.error.text
    site = next((code for rx, code in PROMOTION_SITES if rx.search(frames)), None)
    code_findings = case.findings("CU4")
    why, user, maintainer = [], [], []
    npdesc = f"NumPy {numpy}" if numpy else "NumPy 2"
    if case.kind == "int-out-of-bounds":
        value, dtype = case.groups.get("value", ""), case.groups.get("dtype", "")
        summary = (f"{npdesc} keeps the array's dtype {dtype} for the Python integer {value} (NEP 50), and {value} does "
                   f"not fit in {dtype}.")
        why.append("NumPy 1.x looked at the value and promoted to a wider type; NumPy 2 treats Python scalars as "
                   "\"weak\": they take the array's dtype")
        user.append(f"make the widening explicit: `arr.astype(numpy.int64) + {value}` (or the dtype you need), or "
                    f"`numpy.{dtype}({value})` only if wraparound is what you meant")
        codes = ("CU403",)
    elif site == "CU401":
        cv = cupy.ref.version if cupy else None
        summary = (f"CuPy {cv or '13.x'} checks the Python scalars of a `cupy.fuse` kernel with `numpy.can_cast`, "
                   f"which {npdesc} refuses for Python scalars (NEP 50).")
        why.append("CuPy 13.0-13.4.0 raise this TypeError in fused kernels that mix a Python literal with arrays under "
                   "NumPy 2 (cupy/cupy#8536, fixed in CuPy 13.4.1)")
        if cupy:
            user.append(f"`pip install \"{cupy.ref.name}>=13.4.1\"`, or `pip install \"numpy<2\"`")
        else:
            user.append("upgrade CuPy to 13.4.1 or later, or `pip install \"numpy<2\"`")
        user.append("or in the kernel: give the literal the array's type (`x.dtype.type(1)`) or pass it as an argument")
        maintainer.append("CuPy fixed it in 13.4.1; libraries on CuPy 13.0-13.4.0 should require cupy>=13.4.1 with numpy>=2")
        codes = ("CU401",)
    elif site == "CU406":
        summary = f"CuPy's copyto/select checks a Python scalar with `numpy.can_cast`, which {npdesc} refuses (NEP 50)."
        user.append("upgrade CuPy (13.3 or later), or pass the scalar as a typed value (`dst.dtype.type(v)`)")
        codes = ("CU406",)
    else:
        summary = (f"`can_cast` was given a Python int/float/complex: {npdesc} no longer answers by value (NEP 50) and "
                   "raises instead.")
        why.append("NumPy 1.x answered `can_cast(300, uint8)` by looking at the value; NumPy 2 refuses Python scalars")
        user.append("ask about the type: `numpy.can_cast(numpy.min_scalar_type(v), dtype)`, or test the range with "
                    "`numpy.iinfo(dtype)`")
        codes = ("CU402",)
    for f in code_findings[:3]:
        why.append(f"your code: {f.location.member or f.location.artifact.path}:{f.location.line}: {f.message}")
        if _fix(f):
            user.append(f"{f.location.member or os.path.basename(f.location.artifact.path)}:{f.location.line}: {_fix(f)}")
    files = case.error.user_files
    next_cmds = []
    if not code_findings:
        target = " ".join(files) if files else "YOUR_SCRIPT.py"
        next_cmds.append(f"cuaudit check {target}{case.py_flag} --select CU4  (every such operation in your code)")
        next_cmds.append(f"cuaudit trace -- python {files[0] if files else 'YOUR_SCRIPT.py'}  (compare NumPy 1.x and 2 "
                         "promotion while it runs)")
    return case.explanation(summary, why=why, user=user, maintainer=maintainer, findings=code_findings[:3],
                            codes=codes, next=next_cmds)


# -- CU6xx ----------------------------------------------------------------------------------------------


def gpu_arch(text: str) -> str | None:
    """The GPU's architecture from the error text (PyTorch prints it), else from nvidia-smi when present."""
    m = re.search(r"CUDA capability (sm_\d+)|\bcompute capability (\d+)\.(\d+)", text)
    if m:
        return m.group(1) or f"sm_{m.group(2)}{m.group(3)}"
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    out = _smi_query(smi, "compute_cap")
    if out and re.fullmatch(r"\d+\.\d+", out[0]):
        major, minor = out[0].split(".")
        return f"sm_{major}{minor}"
    return None


def no_kernel_image(case: Case) -> Explanation:
    arch = case.target_archs[0] if case.target_archs else case.extra.get("arch")
    if not arch:
        return case.explanation(
            "The GPU's architecture is not among those a module was compiled for (no SASS for it, and no PTX the "
            "driver could compile).",
            why=("cuaudit needs the GPU's architecture to say which module lacks it",),
            next=("nvidia-smi --query-gpu=compute_cap --format=csv  (e.g. 8.9 -> sm_89)",
                  f"cuaudit explain --target-arch sm_XX{case.py_flag} \"{case.error.exception}\""),
            codes=("CU601",),
        )
    missing = case.findings("CU601")
    ptx_only = case.findings("CU602")
    dists = sorted({_dist(f) for f in missing})
    why, user, maintainer = [], [], []
    if missing:
        f = missing[0]
        why.append(f"{_plural(len(missing), 'module')} of {', '.join(dists)} carry no device code for {arch}: e.g. "
                   f"{f.location.member} has SASS for {', '.join(f.evidence.get('sass', ())) or 'nothing'}"
                   f" and PTX for {', '.join(f.evidence.get('ptx', ())) or 'nothing'}")
        user.append(f"install a build of {', '.join(d.split()[0] for d in dists)} that includes {arch} (a newer release, "
                    "or the wheel for a newer CUDA, e.g. PyTorch's cu128 wheels for sm_120)")
        maintainer.append(_fix(f) or f"add `-gencode arch=compute_{arch[3:]},code=sm_{arch[3:]}`, and PTX for the newest "
                          "architecture (`code=compute_XX`) so newer GPUs can JIT it")
    elif ptx_only:
        why.append(f"only PTX covers {arch}: the driver must JIT-compile it, which fails when the driver is older than "
                   "the PTX's CUDA version")
        user.append("update the NVIDIA driver, or install a build with SASS for your GPU")
    elif case.report is not None:
        why.append(f"every audited module has device code for {arch}: the failing kernel comes from elsewhere "
                   "(JIT-compiled code, another package, or a library loaded from the system)")
    summary = (f"A kernel has no code for this GPU ({arch}): neither SASS for {arch} nor PTX to compile."
               if missing or not ptx_only else
               f"Only PTX covers this GPU ({arch}), and the driver could not compile it.")
    return case.explanation(
        summary,
        why=why, user=user, maintainer=maintainer, findings=(missing or ptx_only)[:2], codes=("CU601",),
        next=() if missing or ptx_only else (f"cuaudit archs{case.py_flag} --env  (the architectures each module covers)",),
    )


def driver_version() -> str | None:
    """The loaded NVIDIA kernel module's version (/proc), else nvidia-smi's, else None."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
            m = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", fh.read())
            if m:
                return m.group(1)
    except OSError:
        pass
    smi = shutil.which("nvidia-smi")
    if smi:
        out = _smi_query(smi, "driver_version")
        return out[0] if out else None
    return None


def _smi_query(smi: str, field: str) -> list[str]:
    """The words ``nvidia-smi`` prints for one ``--query-gpu`` field (none when it fails, hangs or floods)."""
    from cuaudit.inputs.process import BoundExceeded, run_bounded

    try:
        return run_bounded([smi, f"--query-gpu={field}", "--format=csv,noheader"], timeout=10, max_output=1 << 16).out.split()
    except (OSError, BoundExceeded):
        return []


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def insufficient_driver(case: Case) -> Explanation:
    m = re.search(r"Driver Version:\s*(\d+\.\d+(?:\.\d+)?)", case.error.text)
    driver = m.group(1) if m else case.extra.get("driver") or driver_version()
    inst = case.installed
    majors: dict[str, str] = {}
    if inst is not None:
        for dist in inst.environment.distributions:
            major = cuda_major_of(f"{dist.ref.name}-{dist.ref.version}".replace("+", "-+"))
            if major and (dist.ref.name.lower().startswith(("nvidia-cuda-runtime", "cupy", "torch", "rmm", "cudf", "jax"))
                          or "cuda" in dist.ref.name.lower()):
                majors.setdefault(major, f"{dist.ref.name} {dist.ref.version}")
            if dist.ref.name.lower() in ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu11", "nvidia-cuda-runtime-cu12"):
                majors.setdefault(dist.ref.version.split(".")[0], f"{dist.ref.name} {dist.ref.version}")
    need = max(majors, default=None, key=int)
    why, user = [], []
    if need:
        why.append(f"the installed packages use CUDA {need} ({majors[need]}), which needs an NVIDIA driver >= "
                   f"{MIN_DRIVER.get(int(need), '?')} on Linux")
    if driver:
        why.append(f"the loaded driver is {driver}")
        fits = [mj for mj, v in MIN_DRIVER.items() if _version_tuple(driver) >= _version_tuple(v)]
        if fits:
            best = max(fits)
            user.append(f"update the NVIDIA driver to {MIN_DRIVER.get(int(need), 'a newer release') if need else 'a newer release'} "
                        f"or later, or install the builds for CUDA {best} (e.g. `cupy-cuda{best}x`, `*-cu{best}` wheels), "
                        f"which this driver runs")
    if not user:
        user.append("update the NVIDIA driver, or install the package builds for the CUDA version your driver supports "
                    "(`nvidia-smi` prints it as \"CUDA Version\")")
    findings = case.findings("CU206")
    return case.explanation(
        "The NVIDIA driver is older than the CUDA runtime the packages were built with.",
        why=why, user=user, findings=findings[:1],
        maintainer=("state the minimum driver in the install docs; ship builds for each supported CUDA major",),
        next=() if driver else ("nvidia-smi  (the driver version and the highest CUDA version it supports)",),
    )


# -- CU5xx ----------------------------------------------------------------------------------------------


def build_without_gpu(case: Case) -> Explanation:
    m = re.search(r"Building wheel for (?P<name>[\w.-]+) \(", case.error.text)
    name = m.group("name") if m else ""
    v = re.search(rf"(?:Collecting|Downloading|Processing) .*?{re.escape(name)}[-=]+(?P<v>\d[\w.]*?)(?:\.tar\.gz|\.zip|\s|$)",
                  case.error.text, re.IGNORECASE) if name else None
    spec = f"{name}=={v.group('v')}" if v else ""
    found = case.findings("CU50")
    why, user, maintainer = [], [], []
    if found:
        f = found[0]
        why.append(f"{f.location.member}:{f.location.line}: {f.message}")
        maintainer.append(_fix(f))
        overrides = f.evidence.get("overrides") or ()
        if overrides:
            user.append(f"force the CUDA build: set {' or '.join(overrides)} (e.g. `{overrides[0]}=1 pip install ...`)")
    why.append("the build asked whether *this* machine has a GPU (torch.cuda.is_available(), nvidia-smi, a device "
               "count); build machines usually have none, although the CUDA toolkit is there")
    user.append("install a prebuilt wheel, or build on a machine with a GPU; if the project has an override such as "
                "FORCE_CUDA=1 or TORCH_CUDA_ARCH_LIST, set it")
    if not maintainer:
        maintainer.append("decide from the toolkit (torch.version.cuda, CUDA_HOME/nvcc), not from the build machine's "
                          "GPU, and offer an environment override")
    nxt = []
    if not found:
        target = spec or "THE_SDIST_OR_SOURCE_TREE"
        nxt.append(f"cuaudit check {target} --select CU5  (finds the GPU probe in the build scripts; nothing is built)")
    return case.explanation(
        f"The build{f' of {name}' if name else ''} stopped (or dropped its CUDA extension) because the build machine "
        "has no GPU.",
        why=why, user=user, maintainer=maintainer, findings=found[:2], codes=("CU501",), next=nxt,
    )


def no_gpu(case: Case) -> Explanation:
    return case.explanation(
        "The program found no usable NVIDIA GPU at run time.",
        why=("no driver is loaded, no device is visible to this process (CUDA_VISIBLE_DEVICES, a container started "
             "without `--gpus`), or the GPU is in use by a MIG/compute mode that hides it",),
        user=("check `nvidia-smi` on this machine/container; in Docker pass `--gpus all`; unset an empty "
              "CUDA_VISIBLE_DEVICES",),
        next=("nvidia-smi",),
    )


def unrecognised(error: ErrorText, python_arg: str | None) -> Explanation:
    flag = f" --python {python_arg}" if python_arg else ""
    files = error.user_files
    nxt = [f"cuaudit env{flag}  (every installed distribution; errors first)"]
    if files:
        nxt.append(f"cuaudit check {' '.join(files)}{flag}  (your code, with its imports resolved)")
    return Explanation(
        kind="unrecognised",
        summary=f"cuaudit does not recognise this error: {error.exception[:200]}",
        why=("explain knows import failures (missing libraries, undefined symbols, submodule AttributeErrors, Cython "
             "C-API and NumPy ABI breaks), NumPy 2 promotion errors, GPU architecture and driver errors, and CUDA "
             "builds on machines without a GPU",),
        next=tuple(nxt),
    )


#: failure kind -> its answer
ANSWERS: dict[str, Callable[[Case], Explanation]] = {
    "submodule-attribute": submodule_attribute,
    "missing-library": missing_library,
    "undefined-symbol": undefined_symbol,
    "symbol-version": undefined_symbol,
    "capi-module": capi,
    "capi-function": capi,
    "capi-signature": capi,
    "type-size": type_size,
    "numpy-1x-module": numpy_1x_module,
    "can-cast-scalar": promotion,
    "int-out-of-bounds": promotion,
    "no-kernel-image": no_kernel_image,
    "insufficient-driver": insufficient_driver,
    "build-without-gpu": build_without_gpu,
    "no-gpu": no_gpu,
}

