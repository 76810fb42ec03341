"""CU510 and CU6xx: what device code the binaries carry, against what the package claims and the GPUs asked for.

Facts: :mod:`cuaudit.facts.fatbin` (every SASS/PTX entry of every ELF file)
and :mod:`cuaudit.facts.metadata` (name, version, requirements).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from cuaudit.facts.fatbin import DeviceCode, FatbinEntry
from cuaudit.facts.metadata import DistMetadata
from cuaudit.model import ArtifactKind, Finding, Fix, Location, MemberKind, Severity
from cuaudit.names import canonical_name
from cuaudit.rules import Rule

_LOCAL_CUDA = re.compile(r"\+cu\d+")
_NAME_CUDA = re.compile(r"(^|[-_])(cu\d{2,3}|cuda\d+x?)($|[-_])", re.I)
_EXTENSION = re.compile(r"\.(cpython-[^/]*|abi3|pypy[^/]*)\.so$|\.pyd$")


# -- GPU architectures -----------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Target:
    """A GPU to run on: compute capability ``cc`` (90 for 9.0)."""

    cc: int

    @property
    def name(self) -> str:
        return f"sm_{self.cc}"


def parse_target(text: str) -> Target:
    """``sm_90``, ``compute_90``, ``90``, ``9.0`` -> Target(90).  Raises ValueError."""
    t = text.strip().lower()
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+)\.(\d)", t) or re.fullmatch(r"(?:sm_|compute_)?(\d{2,3})[af]?", t)
    if not m:
        raise ValueError(f"not a GPU architecture: {text!r} (expected e.g. sm_90 or 9.0)")
    if m.lastindex == 2:
        return Target(int(m.group(1)) * 10 + int(m.group(2)))
    return Target(int(m.group(1)))


def runs_on(entry: FatbinEntry, target: Target) -> bool:
    """Whether this SASS runs, or this PTX compiles, on ``target``.

    SASS for sm_XY runs on X.Z for Z >= Y (same major); ``a`` variants only on
    exactly X.Y; ``f`` (family) variants on X.Z for Z >= Y.  PTX for
    compute_XY compiles for any later GPU, except ``a``/``f`` PTX (same rules
    as their SASS).
    """
    cc, sm = target.cc, entry.sm
    if entry.variant == "a":
        return cc == sm
    same_family = cc // 10 == sm // 10 and cc >= sm
    if entry.kind == "sass" or entry.variant == "f":
        return same_family
    if entry.kind == "ptx":
        return cc >= sm
    return False


def gpu_targets(capabilities: list[str]) -> list[Target]:
    """Targets for the compute capabilities ``nvidia-smi`` printed (the ``gpu`` probe's result)."""
    targets = []
    for line in capabilities:
        try:
            targets.append(parse_target(line))
        except ValueError:
            continue
    return sorted(set(targets))


def _targets(ctx) -> list[Target]:
    def compute() -> list[Target]:
        out: list[Target] = []
        for text in ctx.config.target_archs:
            try:
                out.append(parse_target(text))
            except ValueError:
                continue
        capabilities = ctx.probe("gpu")  # None unless --probe
        if capabilities is not None:
            out += gpu_targets(capabilities)
        return sorted(set(out))

    return ctx.memo(("devicecode", "targets"), compute)


def _modules(ctx) -> list[tuple[object, str, DeviceCode]]:
    """(artifact, member, device code) for every ELF that carries SASS or PTX (of the artifacts in focus)."""
    return ctx.memo(
        ("devicecode", "modules"),
        lambda: [(a, m.path, c) for a, m, c in ctx.subjects("fatbin") if isinstance(c, DeviceCode) and c.has_device_code],
    )


def _fmt(entries) -> str:
    ordered = sorted(entries, key=lambda e: (e.sm, e.variant))
    return ", ".join(dict.fromkeys(e.arch for e in ordered)) or "none"


# -- CU510 ---------------------------------------------------------------------------------------


def cuda_claims(ctx, art) -> list[tuple[str, bool]]:
    """Why an artifact says it is a CUDA build: (evidence, strong)."""
    claims: list[tuple[str, bool]] = []
    name, version = art.ref.name, art.ref.version
    meta: DistMetadata | None = None
    for a, m, fact in ctx.facts("metadata", art):
        if isinstance(fact, DistMetadata):
            meta = fact
            name, version = fact.name or name, fact.version or version
            break
    if _LOCAL_CUDA.search(version or ""):
        claims.append((f"its version {version} has a CUDA local tag", True))
    if _NAME_CUDA.search(name or ""):
        claims.append((f"its name {name} names a CUDA version", False))
    if meta is not None:
        from cuaudit.requirement import parse_requirement

        for req in filter(None, map(parse_requirement, meta.requires_dist)):
            if req.optional:
                continue
            if req.name.startswith("nvidia-") and "cu" in req.name:
                claims.append((f"it requires {req.without_marker}", False))
            elif req.name == "torch" and _LOCAL_CUDA.search(req.specifier):
                claims.append((f"it requires the CUDA build {req.without_marker}", True))
    cu = [m.path for m in art.members if m.kind is MemberKind.CUDA and m.path.endswith(".cu")]
    if cu:
        # Weak: JIT compilers ship .cu files as run-time resources (numba-cuda's memsys.cu, seen on
        # the GPU machine); only an sdist's .cu files say that the build should have made kernels.
        claims.append((f"it ships CUDA sources ({cu[0]}{' ...' if len(cu) > 1 else ''})", False))
    # .cu sources in an sdist of the same project audited alongside
    for other in ctx.artifacts:
        if other is art or other.ref.kind is not ArtifactKind.SDIST:
            continue
        if canonical_name(other.ref.name or "") == canonical_name(name or ""):
            src = [m.path for m in other.members if m.kind is MemberKind.CUDA and m.path.endswith(".cu")]
            if src:
                claims.append((f"its sdist {other.ref.path.rsplit('/', 1)[-1]} has CUDA sources ({src[0]})", True))
    return claims


class CudaWheelWithoutDeviceCode(Rule):
    """## What it does
    Finds wheels (and installed distributions) that say they are CUDA builds
    -- a CUDA local version tag (`+cu121`), a requirement on `nvidia-*-cu12`
    libraries or on a CUDA build of PyTorch, a `-cuXX`/`cudaXXx` name, `.cu`
    sources in the wheel or in its sdist audited alongside -- and have
    compiled extension modules, none of which carries device code (no SASS,
    no PTX in any `.nv_fatbin`).

    ## Why is this bad?
    It is the symptom of a build that decided against CUDA on its build
    machine (`torch.cuda.is_available()` on a GPU-less builder: PyTorch AO,
    torch-linear-assignment 0.0.5). The wheel installs everywhere and then
    fails, or silently runs a CPU fallback, on the GPU machines it was made
    for.

    ## Example
    `demo-1.0+cu121-cp311-cp311-linux_x86_64.whl` whose `demo/_backend.so`
    has no `.nv_fatbin` section.

    ## Use instead
    Build with the CUDA toolkit and decide on build capability (CU501), then
    check the result: `cuaudit archs dist/*.whl` lists the architectures
    each module carries.

    The severity is error for a local version tag, a CUDA PyTorch requirement
    or `.cu` sources in the project's sdist; info when only the name, an
    `nvidia-*` requirement or `.cu` files inside the wheel say CUDA
    (host-only CUDA packages such as rmm-cu12 have no kernels, and JIT
    compilers such as numba-cuda ship `.cu` files as run-time resources).

    ## Fix safety
    No automatic fix: the wheel must be rebuilt.
    """

    code = "CU510"
    name = "cuda-wheel-without-device-code"
    summary = "A wheel that declares CUDA carries no device code in any module"
    severity = Severity.ERROR
    needs = ("fatbin", "metadata")

    def check(self, ctx) -> Iterator[Finding]:
        with_code = {id(a) for a, _m, _c in _modules(ctx)}
        for art in ctx.artifacts:
            if art.ref.kind not in (ArtifactKind.WHEEL, ArtifactKind.INSTALLED) or id(art) in with_code or not ctx.in_focus(art):
                continue
            exts = [m.path for m in art.members if m.kind is MemberKind.ELF and _EXTENSION.search(m.path)]
            if not exts:
                continue  # no compiled extension: nothing could hold kernels (pure Python, or JIT at run time)
            claims = cuda_claims(ctx, art)
            if not claims:
                continue
            strong = any(s for _c, s in claims)
            why = "; ".join(c for c, _s in claims)
            yield self.finding(
                Location(art.ref, exts[0] if len(exts) == 1 else None),
                f"declares CUDA ({why}) but none of its {len(exts)} extension module(s) carries device code "
                f"(no SASS, no PTX): it was built without its CUDA kernels",
                fix=Fix(user="Install a build that carries device code (another wheel, or a source build with the "
                        "package's force-CUDA switch such as FORCE_CUDA=1); `cuaudit archs` shows what a wheel carries.",
                        maintainer="Rebuild where the build can compile CUDA, deciding on build capability "
                        "(torch.version.cuda, CUDA_HOME) rather than on the build machine's GPU; then `cuaudit archs` "
                        "on the wheel lists its architectures."),
                evidence={"claims": [c for c, _s in claims], "extension_modules": exts[:20]},
                key="no-device-code",
                # A -cuXX name or an nvidia-* requirement alone also fits host-only CUDA
                # packages (rmm-cu12 24.12 has no kernels by design): info only.
                severity=None if strong else Severity.INFO,
            )


# -- CU6xx -------------------------------------------------------------------------------------


class NoDeviceCodeForTarget(Rule):
    """## What it does
    For each module that carries device code, and each target GPU
    (`--target-arch sm_90,sm_100`, `target-archs` in `[tool.cuaudit]`, or
    with `--probe` the compute capability of this machine's GPUs from
    `nvidia-smi`), reports when neither its SASS nor its PTX can run there.
    SASS for `sm_XY` runs on GPUs `X.Z` with `Z >= Y`; `sm_90a` only on 9.0;
    `sm_100f` on the 10.x family; PTX `compute_XY` is compiled by the driver
    for any later GPU.

    ## Why is this bad?
    Every kernel launch of that module fails on that GPU with
    `no kernel image is available for execution on the device`.

    ## Example
    A module with SASS `sm_70, sm_80` and no PTX, for target `sm_90`.

    ## Use instead
    Build for the target (`-gencode arch=compute_90,code=sm_90`,
    `TORCH_CUDA_ARCH_LIST="9.0"`), or add PTX of the newest architecture
    (`+PTX`, `code=compute_90`).

    ## Fix safety
    No automatic fix: the binary must be rebuilt.
    """

    code = "CU601"
    name = "no-device-code-for-target"
    summary = "A module has neither SASS nor PTX that can run on a target GPU"
    severity = Severity.ERROR
    needs = ("fatbin",)

    def check(self, ctx) -> Iterator[Finding]:
        targets = _targets(ctx)
        if not targets:
            return
        for art, member, code in _modules(ctx):
            runnable = [e for e in code.runnable if e.kind in ("sass", "ptx")]
            for t in targets:
                if any(runs_on(e, t) for e in runnable):
                    continue
                yield self.finding(
                    Location(art.ref, member, symbol=t.name),
                    f"no device code runs on {t.name}: SASS {_fmt(code.sass())}, PTX {_fmt(code.ptx())}; "
                    f"kernels fail with 'no kernel image is available for execution on the device'",
                    fix=f"Rebuild with SASS for {t.name} (-gencode arch=compute_{t.cc},code=sm_{t.cc}) or with PTX of an "
                    f"architecture at or below it (code=compute_XY).",
                    evidence={"target": t.name, "sass": [e.arch for e in code.sass()], "ptx": [e.arch for e in code.ptx()]},
                    key=t.name,
                )


class PtxOnlyForTarget(Rule):
    """## What it does
    For each module with device code and each target GPU, reports when only
    PTX can run there: no SASS fits, so the driver compiles the PTX when the
    module is first used.

    ## Why is this bad?
    The first use pays the JIT compilation (seconds to minutes for large
    libraries; cached per user in `~/.nv/ComputeCache`, which is often
    disabled or too small in containers), and it fails outright when the
    driver is older than the PTX ISA version (`the provided PTX was compiled
    with an unsupported toolchain`).

    ## Example
    A module with SASS `sm_80` and PTX `compute_80`, for target `sm_90`.

    ## Use instead
    Add SASS for the target GPUs you support.

    ## Fix safety
    No automatic fix.
    """

    code = "CU602"
    name = "ptx-only-for-target"
    summary = "Only PTX (JIT-compiled at first use) runs on a target GPU"
    severity = Severity.WARNING
    needs = ("fatbin",)

    def check(self, ctx) -> Iterator[Finding]:
        targets = _targets(ctx)
        if not targets:
            return
        for art, member, code in _modules(ctx):
            for t in targets:
                if any(runs_on(e, t) for e in code.sass()):
                    continue
                ptx = [e for e in code.ptx() if runs_on(e, t)]
                if not ptx:
                    continue  # CU601
                yield self.finding(
                    Location(art.ref, member, symbol=t.name),
                    f"only PTX runs on {t.name} ({_fmt(ptx)}, PTX ISA {ptx[-1].version}): the driver JIT-compiles it at "
                    f"first use; SASS is for {_fmt(code.sass())}",
                    fix=f"Add SASS for {t.name} (-gencode arch=compute_{t.cc},code=sm_{t.cc}).",
                    evidence={"target": t.name, "ptx": [e.arch for e in ptx], "sass": [e.arch for e in code.sass()]},
                    key=t.name,
                )


class NoPtxForNewerGpus(Rule):
    """## What it does
    Reports modules whose device code has no portable PTX (plain
    `compute_XY`, not `a`/`f`): nothing can be compiled for GPUs newer than
    the newest SASS.

    ## Why is this bad?
    The next GPU generation cannot run the module until it is rebuilt:
    binaries with PTX kept working on Hopper and Blackwell on day one,
    binaries without it failed with `no kernel image is available`.

    ## Example
    A module with SASS `sm_80, sm_86, sm_90a` and no PTX.

    ## Use instead
    Embed PTX of the newest architecture (`-gencode arch=compute_90,code=compute_90`,
    `TORCH_CUDA_ARCH_LIST="... 9.0+PTX"`, CMake `90-virtual`).

    ## Fix safety
    No automatic fix.
    """

    code = "CU603"
    name = "no-ptx-for-newer-gpus"
    summary = "No portable PTX: GPUs newer than the newest SASS cannot run the module"
    severity = Severity.INFO
    needs = ("fatbin",)

    def check(self, ctx) -> Iterator[Finding]:
        for art, member, code in _modules(ctx):
            sass = code.sass()
            if not sass or any(e.variant == "" for e in code.ptx()):
                continue
            newest = max(sass, key=lambda e: (e.sm, e.variant))
            yield self.finding(
                Location(art.ref, member),
                f"no portable PTX: GPUs newer than {newest.arch} cannot run it (SASS {_fmt(sass)}"
                f"{', PTX ' + _fmt(code.ptx()) if code.ptx() else ''})",
                fix=f"Also embed PTX of the newest architecture (-gencode arch=compute_{newest.sm},code=compute_{newest.sm}).",
                evidence={"sass": [e.arch for e in sass], "ptx": [e.arch for e in code.ptx()], "newest_sass": newest.arch},
                key="no-ptx",
            )
