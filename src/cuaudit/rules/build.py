"""CU5xx (build scripts): decisions about building CUDA code taken from the build machine's GPU.

The facts come from :mod:`cuaudit.facts.build` (static; nothing is run).
"""

from __future__ import annotations

import posixpath
from typing import Iterable, Iterator

from cuaudit.facts.build import BuildScript, Decision, ExternalDecision, FunctionSummary, HostArch, Probe
from cuaudit.model import Applicability, Edit, Finding, Fix, Location, Severity
from cuaudit.names import absolute_module
from cuaudit.rules import Rule


def _location(art, member: str, span) -> Location:
    return Location(art.ref, member, span.line, span.column, span.end_line, span.end_column)


def _fix(member: str, probes: Iterable[Probe], overrides: tuple[str, ...]) -> Fix:
    probes = list(probes)
    keep = f" (the {', '.join(overrides)} override is kept)" if overrides else ""
    text = (
        "Decide on build capability, not on the build machine's hardware: a CUDA build of PyTorch "
        "(`torch.version.cuda is not None`) or a CUDA toolkit (`torch.utils.cpp_extension.CUDA_HOME is not None`), "
        f"with an environment override such as FORCE_CUDA=1{keep}."
    )
    edits = tuple(
        Edit(member, e.span.line, e.span.column, e.span.end_line, e.span.end_column, e.content) for p in probes for e in p.fix
    )
    if edits and all(p.fix for p in probes):
        applicability = Applicability.UNSAFE if any(p.fix_unsafe for p in probes) else Applicability.SAFE
        return Fix(edits=edits, applicability=applicability, user=_build_user_fix(overrides),
                   maintainer=f"Replace {', '.join(p.text for p in probes)} by `{probes[0].fix_text}`{keep}.")
    return Fix(user=_build_user_fix(overrides), maintainer=text)


def _build_user_fix(overrides: tuple[str, ...]) -> str:
    if overrides:
        return f"Build with {overrides[0]}=1 where no GPU is visible, or install a wheel that carries the CUDA kernels."
    return "Build on a machine where the GPU is visible, or install a wheel that carries the CUDA kernels (`cuaudit archs` lists them)."


def _resolve(ctx, art, member: str, module: str, name: str) -> FunctionSummary | None:
    """The summary of ``module.name`` when ``module`` is a file of the same artifact."""
    folder = posixpath.dirname(member)
    if module.startswith("."):
        level = len(module) - len(module.lstrip("."))
        absolute = absolute_module(module.lstrip("."), level, folder.replace("/", "."))
        if absolute is None:
            return None
        stem = absolute.replace(".", "/")
    else:
        stem = posixpath.join(folder, module.replace(".", "/"))
    for candidate in (f"{stem}.py", f"{stem}/__init__.py", f"{stem}/{name}.py"):
        candidate = posixpath.normpath(candidate)
        fact = ctx.fact("build", art, candidate)
        if isinstance(fact, BuildScript):
            for s in fact.functions + fact.variables:
                if s.name == name:
                    return FunctionSummary(f"{candidate}:{s.name}", s.probes, s.overrides)
    return None


def _decisions(ctx) -> list[tuple[object, str, Decision, str | None]]:
    """(artifact, member, decision, helper member) for every GPU-dependent CUDA build decision."""

    def compute():
        out = []
        for art, member, fact in ctx.facts("build"):
            if not isinstance(fact, BuildScript):
                continue
            for d in fact.decisions:
                out.append((art, member.path, d, None))
            for x in fact.external:
                summary = _resolve(ctx, art, member.path, x.module, x.name)
                if summary is None:
                    continue
                helper = summary.name.split(":", 1)[0]
                d = Decision(
                    x.span, x.condition, summary.probes, x.controls, via=(f"{x.module}.{x.name}()",),
                    overrides=tuple(dict.fromkeys(x.overrides + summary.overrides)), disablers=x.disablers,
                )
                out.append((art, member.path, d, helper))
        return out

    return ctx.memo(("build", "decisions"), compute)


class _GpuProbeRule(Rule):
    needs = ("build",)
    overridable = False

    def check(self, ctx) -> Iterator[Finding]:
        for art, member, d, helper in _decisions(ctx):
            if bool(d.overrides) != self.overridable:
                continue
            probes = ", ".join(dict.fromkeys(p.text for p in d.probes))
            via = f" through {' -> '.join(d.via)}" if d.via else ""
            where = f" (in {helper})" if helper else ""
            if self.overridable:
                tail = (f"; {', '.join(d.overrides)} can force it, but by default a GPU-less build machine "
                        "still builds without it")
            else:
                off = f" ({', '.join(d.disablers)} can only turn it off)" if d.disablers else ""
                tail = f"; nothing can override it{off}: on a GPU-less build machine the wheel silently has no CUDA kernels"
            raising = list(dict.fromkeys(p.label for p in d.probes if p.raises))
            crash = [p.label for p in d.probes if p.raises and not p.guard]
            if crash:
                # the query itself raises on a GPU-less builder, before anything can override it
                tail = f"; on a build machine without a GPU, {', '.join(dict.fromkeys(crash))} raises and the build fails"
            elif raising and d.overrides:
                tail = (f"; on a build machine without a GPU, {', '.join(raising)} raises unless "
                        f"{', '.join(d.overrides)} is set")
            msg = f"{d.controls} is built only if {probes}{where}{via} finds a GPU on the build machine{tail}"
            # The location is the probe itself when it is in this file (what --fix rewrites).
            span = d.probes[0].span if d.probes and not helper and len(d.probes) == 1 else d.span
            yield self.finding(
                _location(art, member, span), msg,
                fix=_fix(helper or member, d.probes, d.overrides),
                evidence={
                    "probes": [p.label for p in d.probes],
                    "condition": d.condition,
                    "condition_line": d.span.line,
                    "controls": d.controls,
                    "via": list(d.via),
                    "overrides": list(d.overrides),
                    "disablers": list(d.disablers),
                    "helper": helper,
                    "raises_without_gpu": raising,
                },
                key=f"{d.probes[0].label if d.probes else ''}:{d.controls}",
                severity=Severity.ERROR if crash else None,
            )


class GpuProbeDecidesCudaBuild(_GpuProbeRule):
    """## What it does
    Finds build scripts (`setup.py` and the tree modules it imports, hatch
    hooks, CMake) that build their CUDA code only when the *build machine*
    has a GPU: `torch.cuda.is_available()`, `torch.cuda.device_count()`,
    `nvidia-smi` calls, `cupy`/`numba`/`jax`/`pynvml` device queries,
    followed through variables and helper functions to the `CUDAExtension`
    (or `.cu` sources, `nvcc` step) they switch on, where nothing can force
    the CUDA path.

    ## Why is this bad?
    Wheels are built on CI machines and in containers without GPUs, even
    when they have the CUDA toolkit and a CUDA build of PyTorch. There the
    probe is false and the build quietly produces a CPU-only wheel, which
    installs fine and fails (or falls back to slow code) only on the user's
    GPU machine. PyTorch AO shipped wheels without their kernels this way;
    torch-linear-assignment 0.0.5 has the same check (`setup.py` line 9).

    ## Example
    ```python
    if torch.backends.cuda.is_built() and torch.cuda.is_available():
        ext_modules = [CUDAExtension("pkg._backend", ["src/kernel.cu"])]
    ```

    ## Use instead
    ```python
    if torch.version.cuda is not None or os.environ.get("FORCE_CUDA") == "1":
        ext_modules = [CUDAExtension("pkg._backend", ["src/kernel.cu"])]
    ```
    Test what the build *can* do (a CUDA build of PyTorch, `CUDA_HOME`), not
    what the build machine has, and give packagers an override.

    ## Fix safety
    `torch.cuda.is_available()` and `torch.cuda.device_count() > 0` on the
    `torch` module are replaced by `torch.version.cuda is not None`; any
    override in the condition is kept. The fix is safe: on a machine with a
    GPU and a CUDA PyTorch both tests agree, and without one the build now
    does what it was meant to. It is marked unsafe when the script also
    mentions ROCm/HIP (`torch.version.cuda` is None on ROCm builds; add
    `or torch.version.hip is not None` there). Other probes (`nvidia-smi`,
    CuPy, Numba, JAX) have no automatic fix.
    """

    code = "CU501"
    name = "gpu-probe-decides-cuda-build"
    summary = "CUDA code is built only if the build machine has a GPU, and nothing can override it"
    severity = Severity.ERROR
    overridable = False


class OverridableGpuProbeDecidesCudaBuild(_GpuProbeRule):
    """## What it does
    Like CU501, where an override exists: the condition also accepts an
    environment variable such as `FORCE_CUDA=1` (or a command-line flag), so
    a packager who knows can force the CUDA build.

    ## Why is this bad?
    The default is still wrong: whoever builds without knowing the variable
    (a plain `pip install` from the sdist, a distribution's build farm) gets
    a wheel without CUDA kernels on a GPU-less machine.
    torch-linear-assignment 0.0.6 added `FORCE_CUDA` to 0.0.5's check.

    ## Example
    ```python
    if os.environ.get("FORCE_CUDA") == "1" or torch.cuda.is_available():
        ...
    ```

    ## Use instead
    ```python
    if os.environ.get("FORCE_CUDA") == "1" or torch.version.cuda is not None:
        ...
    ```

    ## Fix safety
    As CU501: the probe is replaced by `torch.version.cuda is not None` and
    the override is kept. The finding is an error, not a warning, when the
    probe is a device query that raises without a GPU
    (`get_device_properties()`, `nvidia-smi` run by `check_output`) and runs
    before any override or GPU check is tested: the build fails there
    whatever the packager sets.
    """

    code = "CU502"
    name = "overridable-gpu-probe-decides-cuda-build"
    summary = "CUDA code is built by default only if the build machine has a GPU (an override exists)"
    severity = Severity.WARNING
    overridable = True


class BuildHostGpuArchitecture(Rule):
    """## What it does
    Finds GPU architecture lists taken from the build machine:
    `torch.cuda.get_device_capability()`, `nvidia-smi --query-gpu=compute_cap`,
    `-arch=native`, `CMAKE_CUDA_ARCHITECTURES native` (in `CMakeLists.txt` or
    scikit-build-core's `cmake.define`), `cuda_select_nvcc_arch_flags(... Auto)`,
    meson's `nvcc_arch_flags('Auto')`.

    ## Why is this bad?
    The wheel then carries SASS for the builder's GPU only (and no GPU at
    all on a GPU-less builder): users with another GPU get `no kernel image
    is available for execution on the device`.

    ## Example
    ```cmake
    set(CMAKE_CUDA_ARCHITECTURES native)
    ```

    ## Use instead
    ```cmake
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 75 80 86 89 90 100 120)
    endif()
    ```
    An explicit list (plus PTX for the newest, `90-virtual`), overridable by
    the packager (`TORCH_CUDA_ARCH_LIST`, `-DCMAKE_CUDA_ARCHITECTURES=`).

    ## Fix safety
    No automatic fix: which GPUs to support is the project's choice. The
    severity follows the consequence on a GPU-less builder: error when a
    device query that raises there (`get_device_capability()`,
    `nvidia-smi` run by `check_output`) runs with nothing guarding it, so the
    build itself fails; warning when it runs behind `is_available()` or a
    `try`; info when an override read first decides (an environment variable
    such as `TORCH_CUDA_ARCH_LIST`/`CUDAARCHS` tested in the enclosing `if`,
    directly or through a variable assigned from it; a guarded CMake `set`).
    """

    code = "CU503"
    name = "build-host-gpu-architecture"
    summary = "GPU architectures are taken from the build machine's GPU"
    severity = Severity.WARNING
    needs = ("build",)

    def check(self, ctx) -> Iterator[Finding]:
        for art, member, fact in ctx.facts("build"):
            if not isinstance(fact, BuildScript):
                continue
            for h in fact.host_archs:
                if h.overrides:
                    tail, severity = f"; {', '.join(h.overrides)} can override it", Severity.INFO
                elif h.guard in ("gpu-check", "try"):
                    how = "a GPU check" if h.guard == "gpu-check" else "a try/except"
                    tail, severity = f"; it runs behind {how}, so a GPU-less builder takes the script's fallback", None
                elif h.raises:
                    tail, severity = (f"; nothing guards it: on a build machine without a GPU {h.label} raises and the "
                                      "build fails"), Severity.ERROR
                else:
                    tail, severity = "", None
                yield self.finding(
                    _location(art, member.path, h.span),
                    f"GPU architectures come from the build machine ({h.label}): the wheel will only run on GPUs like "
                    f"the builder's, and a GPU-less builder has none{tail}",
                    fix="List the architectures to support explicitly (e.g. TORCH_CUDA_ARCH_LIST=\"7.5 8.0 8.6 9.0+PTX\", "
                    "CMAKE_CUDA_ARCHITECTURES=\"75;80;86;90\"), overridable by the packager; query the device only "
                    "behind that override and `torch.cuda.is_available()`.",
                    evidence={"source": h.label, "text": h.text, "overrides": list(h.overrides), "guard": h.guard,
                              "raises_without_gpu": h.raises},
                    key=h.label,
                    severity=severity,
                )
