"""CU2xx: linking and loading.

Failure class 2 of the mission: extension modules that list CUDA libraries
they never use (``DT_NEEDED``), so ``import pkg`` fails wherever those
libraries or the driver are missing.  The seed incident: CuPy wheels
(cupy-cuda11x 12.3.0) whose ``cupy/_core/flags`` module needed
``libcublas.so.11`` and ``libcuda.so.1`` without using them, fixed by linking
with ``-Wl,--as-needed`` (cupy-cuda11x 13.0.0).

Every rule reads the ``elf`` facts (:mod:`cuaudit.facts.elf`) and one shared
analysis (:class:`Linkage`, built once per audit through ``ctx.memo``) that
resolves each needed library (:mod:`cuaudit.analysis.loader`) and decides
from evidence whether it is used.
"""

from __future__ import annotations

import fnmatch
import re
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from cuaudit.facts.elf import ElfFacts
from cuaudit.analysis.libraries import CudaCatalog, split_soname
from cuaudit.analysis.loader import Resolution, Resolver
from cuaudit.model import ArtifactKind, Finding, Fix, Location, Severity
from cuaudit.names import absolute_module, dotted_prefixes
from cuaudit.rules import Rule
from cuaudit.config import Option

#: [tool.cuaudit.linkage] options (validated; documented in docs/configuration.md)
OPTIONS = {
    "with": Option(list, "wheels or library folders that supply needed libraries: evidence, not audited"),
}
#: [tool.cuaudit.allow] lists this family reads
ALLOW_LISTS = {
    "preload-libraries": "libraries whose DT_NEEDED entries are their purpose (preload shims), never CU201",
}

#: Known preload shims: libraries whose job is to be loaded, not to supply symbols.
#: Not special-cased: users list theirs in [tool.cuaudit.allow] preload-libraries.
ALLOW_PRELOAD = "preload-libraries"


@dataclass(frozen=True)
class Usage:
    """Whether a file uses one of its needed libraries, and the evidence that decided."""

    library: str
    used: bool | None  # None: no evidence either way
    evidence: str  # symbol-versions | library | catalog | accounting | none
    detail: str
    symbols: tuple[str, ...] = ()  # a few symbols it supplies (when used)


_EXT_SUFFIX = re.compile(r"(\.cpython-[^.]+|\.abi3|\.cp\d+-[^.]+|\.pypy[^.]*)?\.(so|pyd)$")


def module_name(path: str) -> tuple[str, bool] | None:
    """(dotted module name, is_extension) of a member path, or None."""
    if path.endswith("/__init__.py"):
        return path[: -len("/__init__.py")].replace("/", "."), False
    if path.endswith(".py"):
        return path[:-3].replace("/", "."), False
    m = _EXT_SUFFIX.search(path)
    if m and path.endswith(".so") and not re.search(r"\.so\.\d", path):
        base = path[: m.start()]
        name = base.rsplit("/", 1)[-1]
        if name.startswith("lib") and not m.group(1):
            return None  # a plain shared library, not a module
        return base.replace("/", "."), True
    return None


def _is_python_api(name: str) -> bool:
    return name.startswith(("Py", "_Py"))


class Linkage:
    """The shared analysis of one audit: resolutions and usage of every needed library."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.catalog = CudaCatalog.load()
        env = ctx.environment
        with_ = ctx.evidence("with")
        self.resolver = Resolver(
            ctx.artifacts,
            lambda art, member: ctx.fact("elf", art, member),
            environ=dict(env.environ) if env is not None else None,
            extras=with_,
            site_root=env.site_dirs[0] if env is not None and env.site_dirs else None,
            system=next(iter(ctx.evidence("system")), None),
        )
        self.with_ = tuple(with_)
        self.index = {id(a): i for i, a in enumerate(ctx.artifacts)}
        self.allowed = ctx.config.allowed(ALLOW_PRELOAD)
        self._usage: dict[tuple[int, str], dict[str, Usage]] = {}
        #: a resolved library (its Resolution's key and path) -> its exports as a set, built once
        #: (torch's files need libtorch_cpu's 10^5 exports again and again)
        self._export_sets: dict[tuple[Any, str | None], frozenset[str]] = {}

    def files(self) -> Iterator[tuple[int, Any, Any, ElfFacts]]:
        """The ELF files the rules judge (those of the artifacts in focus); what they are judged
        against (the libraries they resolve to) is read through :meth:`resolve` as needed."""
        for art, member, facts in self.ctx.subjects("elf"):
            yield self.index[id(art)], art, member, facts

    def resolve(self, i: int, member: str, facts: ElfFacts, needed: str) -> Resolution:
        return self.resolver.resolve(i, member, facts, needed)

    def is_allowed(self, library: str) -> bool:
        return any(fnmatch.fnmatch(library, pat) for pat in self.allowed)

    def kind(self, library: str) -> str:
        lib = self.catalog.library(library)
        if lib is None:
            return "system" if library in self.catalog.system_libraries else "other"
        return "driver" if lib.is_driver else "cuda"

    # -- usage ----------------------------------------------------------------------------------
    def usage(self, i: int, member: str, facts: ElfFacts) -> dict[str, Usage]:
        key = (i, member)
        if key not in self._usage:
            self._usage[key] = self._compute_usage(i, member, facts)
        return self._usage[key]

    def _exports_of(self, i: int, member: str, facts: ElfFacts, needed: str) -> tuple[frozenset[str], str, str] | None:
        res = self.resolve(i, member, facts, needed)
        pf = self.resolver.facts_of(res)
        if pf is not None and pf.symbol_count:
            key = (res.key, res.fs_path)
            exports = self._export_sets.get(key)
            if exports is None:
                exports = self._export_sets[key] = frozenset(pf.exports)
            return exports, "library", f"the library itself ({res.where}{', ' + res.provider if res.provider else ''})"
        cat = self.catalog.exports(needed)
        if cat is not None:
            return cat.exports, "catalog", f"cuaudit's CUDA catalog ({needed} from {cat.source})"
        return None

    def _compute_usage(self, i: int, member: str, facts: ElfFacts) -> dict[str, Usage]:
        out: dict[str, Usage] = {}
        versioned: dict[str, list[str]] = {}
        for name, f in zip(facts.imports, facts.import_files):
            if f:
                versioned.setdefault(f, []).append(name)
        unbound = [n for n, f in zip(facts.imports, facts.import_files) if not f]
        known: dict[str, tuple[frozenset[str], str, str]] = {}
        for lib in facts.needed:
            if lib in versioned:
                syms = versioned[lib]
                out[lib] = Usage(lib, True, "symbol-versions",
                                 f"{len(syms)} undefined symbols are versioned for {lib} (.gnu.version_r)", tuple(syms[:5]))
                continue
            exp = self._exports_of(i, member, facts, lib)
            if exp is None:
                continue
            known[lib] = exp
            hits = [n for n in unbound if n in exp[0]]
            if hits:
                out[lib] = Usage(lib, True, exp[1], f"{len(hits)} undefined symbols are exported by {exp[2]}", tuple(hits[:5]))
            else:
                out[lib] = Usage(lib, False, exp[1],
                                 f"none of the file's {len(facts.imports)} undefined symbols is exported by {exp[2]}")
        unknown = [lib for lib in facts.needed if lib not in out]
        if unknown:
            # Accounting: if every symbol the file needs is supplied by something else (a
            # versioned reference, the Python interpreter, a library whose exports are known),
            # the libraries we know nothing about supply nothing.
            supplied = set().union(*(k[0] for lib, k in known.items())) if known else set()
            ext = facts.is_python_extension
            missing = [
                n for j, (n, f) in enumerate(zip(facts.imports, facts.import_files))
                if not f and j not in facts.weak_imports and n not in supplied and not (ext and _is_python_api(n))
            ]
            for lib in unknown:
                if missing:
                    out[lib] = Usage(lib, None, "none", f"{len(missing)} undefined symbols have no known provider "
                                     f"(e.g. {', '.join(missing[:3])}) and {lib}'s exports are unknown")
                else:
                    parts = [f"{sum(1 for f in facts.import_files if f)} by symbol versions"]
                    if ext:
                        parts.append(f"{sum(1 for n in facts.imports if _is_python_api(n))} by the Python interpreter")
                    if known:
                        parts.append("the rest by " + ", ".join(sorted(known)))
                    out[lib] = Usage(lib, False, "accounting",
                                     f"every one of the file's {len(facts.imports)} undefined symbols is supplied "
                                     f"elsewhere ({'; '.join(parts)})")
        return out


def linkage(ctx: Any) -> Linkage:
    return ctx.memo("linkage", lambda: Linkage(ctx))


class LinkageRule(Rule):
    """Base of the CU2xx rules (defines no code: not registered)."""

    needs = ("elf",)
    options = ("linkage.with",)


def _short(items: list[str], n: int = 5) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


class UnusedNeededLibrary(LinkageRule):
    """## What it does
    Reports a `DT_NEEDED` entry of an ELF file (extension module or shared
    library) that supplies none of the file's undefined dynamic symbols and
    has no symbol-versioned reference from it: what `ldd -u` reports, found
    without loading anything.  The evidence that decided is named in the
    message: symbol versions (`.gnu.version_r`), the library itself (in the
    wheel, the environment, a `--with` extra, or this machine), cuaudit's
    catalog of the exports of the CUDA libraries (generated from the
    `nvidia-*` wheels), or accounting (every undefined symbol is supplied by
    something else: a versioned reference, the Python interpreter, another
    library whose exports are known).

    ## Why is this bad?
    The loader loads every `DT_NEEDED` library whether or not it is used, and
    the import fails when one is missing.  cupy-cuda11x 12.3.0's
    `cupy/_core/flags` module needed `libcublas.so.11`, `libcufft.so.10`,
    `libcuda.so.1`... without using any of them, so `import cupy` failed on
    machines without cuBLAS or without a driver.  Error for CUDA libraries and
    the driver; warning for other libraries (they break the same way when
    absent); info for the libraries every manylinux system provides
    (auditwheel's policy: `libm.so.6`, `libpthread.so.0`, `libstdc++.so.6`...).

    ## Example
    ```
    cc -shared -o flags.so flags.o -lcublas -lcudart -lcuda   # no -Wl,--as-needed
    ```

    ## Use instead
    ```
    cc -shared -o flags.so flags.o -Wl,--as-needed -lcublas -lcudart -lcuda
    ```
    (CuPy's fix), or `cuaudit repair WHEEL -o DIR`.  Libraries that exist to
    be preloaded (a shim that pulls others in, such as PyTorch's
    `libtorch_global_deps.so`, which needs `libcudart.so.12` & co. and uses
    none of them) go in
    `[tool.cuaudit.allow] preload-libraries = ["libtorch_global_deps.so"]`:
    a name there (a glob) silences both the shim's own entries and entries
    that name it.

    ## Fix safety
    `cuaudit repair` removes the entries from the dynamic section (what
    `--as-needed` would have produced).  Safe when the evidence is the
    library itself, symbol versions or the catalog; a library loaded only
    for its constructors (a preload shim) loses that effect: allow-list it.
    """

    code = "CU201"
    options = ("linkage.with", "allow.preload-libraries")
    references = ("https://sourceware.org/binutils/docs/ld/Options.html",)
    name = "unused-needed-library"
    summary = "A DT_NEEDED library supplies none of the file's symbols (over-linking)"
    severity = Severity.ERROR

    def check(self, ctx: Any) -> Iterable[Finding]:
        lk = linkage(ctx)
        for i, art, member, facts in lk.files():
            # an allow-listed preload shim (libtorch_global_deps.so) needs libraries without using them
            shim = lk.is_allowed(member.path.rsplit("/", 1)[-1]) or bool(facts.soname and lk.is_allowed(facts.soname))
            usage = lk.usage(i, member.path, facts)
            for lib in facts.needed:
                u = usage.get(lib)
                if u is None or u.used is not False or lk.is_allowed(lib) or shim:
                    continue
                kind = lk.kind(lib)
                sev = {"cuda": Severity.ERROR, "driver": Severity.ERROR, "system": Severity.INFO}.get(kind, Severity.WARNING)
                what = {"driver": "the NVIDIA driver library ", "cuda": "CUDA library "}.get(kind, "")
                consequence = {
                    "driver": "importing it fails on any machine without an NVIDIA driver",
                    "cuda": "importing it fails wherever that library is missing",
                    "system": "harmless (every manylinux system has it), but it costs load time",
                }.get(kind, "the loader still loads it, and fails where it is missing")
                hint = ""
                if not facts.imports:
                    hint = ("; it imports no symbol at all: if it exists to preload its libraries, list it in "
                            "[tool.cuaudit.allow] preload-libraries")
                ctors = _constructors(lk, i, member.path, facts, usage, lib)
                if ctors:
                    # an umbrella (torch's libtorch.so needs libtorch_cuda.so so that its kernels
                    # register): the entry is the point, never a safe removal
                    yield self.finding(
                        Location(art.ref, member.path, symbol=lib),
                        f"{member.path} uses no symbol of {what}{lib}, but it uses none of any of its libraries: it "
                        f"exists to load them, and {lib} runs {ctors} constructors at load (.init_array) that "
                        f"register what it provides; removing the entry would drop that, so it is not over-linking",
                        severity=Severity.INFO,
                        key=lib,
                        evidence={"library": lib, "kind": kind, "evidence": u.evidence, "detail": u.detail,
                                  "needed": list(facts.needed), "verdict": "constructors", "init_array_entries": ctors},
                        fix=Fix("keep the entry (do not link this file with --as-needed, and do not `cuaudit repair` it); "
                                "list the file in [tool.cuaudit.allow] preload-libraries to silence this"),
                    )
                    continue
                yield self.finding(
                    Location(art.ref, member.path, symbol=lib),
                    f"{member.path} needs {what}{lib} but uses none of its symbols ({u.detail}); {consequence}{hint}",
                    severity=sev,
                    key=lib,
                    evidence={"library": lib, "kind": kind, "evidence": u.evidence, "detail": u.detail,
                              "needed": list(facts.needed)},
                    fix=Fix(user=_unused_user_fix(lk, lib, kind),
                            maintainer=f"link with -Wl,--as-needed (or drop -l{split_soname(lib)[0][3:]}): "
                            f"each module then records only the libraries it uses"),
                )


def _constructors(lk: Linkage, i: int, member: str, facts: ElfFacts, usage: dict, lib: str) -> int:
    """Entries of ``lib``'s ``.init_array`` when ``member`` is an umbrella: it uses no symbol of any
    library it needs (its DT_NEEDED entries are its purpose) and ``lib`` has constructors; else 0."""
    if facts.is_python_extension:
        return 0  # an extension module is no umbrella (cupy's _core/flags needing libcublas is the seed)
    others = [facts_lib for facts_lib in facts.needed if lk.kind(facts_lib) != "system"]
    if not others or any(usage.get(n) is None or usage[n].used is not False for n in others):
        return 0
    provider = lk.resolver.facts_of(lk.resolve(i, member, facts, lib))
    for sec in (provider.sections or ()) if provider is not None else ():
        # gcc gives every library one entry (frame_dummy): registration means more than that
        if sec.name == ".init_array" and sec.size // 8 >= 2:
            return sec.size // 8
    return 0


class _Imports:
    """The modules of its own table each module's unguarded imports import (with their parents),
    in order, once per module: every package's walk of :meth:`ImportLoadsGpuLibraries._analyse`
    crosses the modules of the packages it imports again."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self._of: dict[tuple[int, str], list[str]] = {}

    def of(self, table: dict, mod: str) -> list[str]:
        key = (id(table), mod)
        got = self._of.get(key)
        if got is None:
            i, path, is_ext = table[mod]
            facts = None if is_ext else self.ctx.fact("module_imports", self.ctx.artifacts[i], path)
            got = self._of[key] = [t for t in _imported(facts, mod, path) if t in table] if facts is not None else []
        return got


def _imported(facts: Any, mod: str, path: str) -> list[str]:
    """The modules (with their parents) that the unguarded imports of ``mod``'s module_imports import."""
    package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
    targets: list[str] = []
    for stmt in facts.imports:
        if stmt.guarded:
            continue  # a failure there is caught: the import of the package still works
        base = absolute_module(stmt.module, stmt.level, package) or ""
        targets += dotted_prefixes(base)
        targets += [f"{base}.{n}" for n in stmt.names if n != "*"]
    return targets


class ImportLoadsGpuLibraries(LinkageRule):
    """## What it does
    For every importable top-level package (and the extension modules its
    import reaches), follows the module-level imports of its Python files and
    the `DT_NEEDED` entries of its extension modules and of the libraries they
    resolve to, and lists the native libraries that `import X` loads eagerly.
    It reports the package when CUDA libraries or the NVIDIA driver are among
    them, with the chain that pulls each one in: the answer to "will
    `import X` work on a CPU-only machine?".

    ## Why is this bad?
    A package whose import needs `libcuda.so.1` cannot be imported on a
    CPU-only machine (CI runners, login nodes, laptops), even to print its
    version or to use its CPU fallbacks: `import cupy` in cupy-cuda11x 12.3.0
    failed with `libcuda.so.1: cannot open shared object file`.  Warning when
    the driver is needed; info when only CUDA libraries are (they may come
    from wheels).

    ## Example
    `cupy/__init__.py` → `from cupy import _core` → `cupy/_core/__init__.py`
    → `cupy/_core/core.cpython-311-x86_64-linux-gnu.so` → `libcuda.so.1`.

    ## Use instead
    Load GPU libraries lazily (`dlopen` / `ctypes.CDLL` at first use, as CUDA
    Python's `cuda.bindings` does with `libcuda`), link with
    `-Wl,--as-needed`, and import GPU-only submodules inside functions.

    ## Fix safety
    No automatic fix.  Modules imported from compiled (Cython) code are not
    seen statically; `--probe` confirms by importing it in a child interpreter.
    """

    code = "CU202"
    name = "import-loads-gpu-libraries"
    summary = "`import X` loads CUDA libraries or the NVIDIA driver eagerly"
    severity = Severity.WARNING
    needs = ("elf", "module_imports")

    def check(self, ctx: Any) -> Iterable[Finding]:
        lk = linkage(ctx)
        # modules per namespace: dotted name -> (artifact index, member path, is_extension)
        modules: dict[str, dict[str, tuple[int, str, bool]]] = {}
        tops_of: dict[int, set[str]] = {}  # artifact index -> top-level names it provides
        for i, art in enumerate(ctx.artifacts):
            ns = lk.resolver.art_ns[i]
            table = modules.setdefault(ns, {})
            for m in art.members:
                mn = module_name(m.path)
                if mn is None or ".dist-info" in m.path or ".data/" in m.path:
                    continue
                if table.setdefault(mn[0], (i, m.path, mn[1]))[0] == i:
                    tops_of.setdefault(i, set()).add(mn[0].split(".")[0])
        judged = [i for i, art in enumerate(ctx.artifacts)
                  if art.ref.kind in (ArtifactKind.WHEEL, ArtifactKind.INSTALLED, ArtifactKind.TREE) and ctx.in_focus(art)]
        walked = [(modules[lk.resolver.art_ns[i]], sorted(tops_of.get(i, ()))) for i in judged]
        imports = _Imports(ctx)
        self._prefetch(ctx, walked, imports)
        for i in judged:
            ns = lk.resolver.art_ns[i]
            table = modules[ns]
            tops = sorted(tops_of.get(i, ()))
            for top in tops:
                if top not in table:
                    continue
                f = self._analyse(ctx, lk, table, top, imports)
                if f is not None:
                    yield f

    @staticmethod
    def _prefetch(ctx: Any, walked: list[tuple[dict, list[str]]], imports: "_Imports") -> None:
        """Extract the imports every walk of :meth:`_analyse` reads, for all the walks at once: a
        walk of the facts the workers run ahead of (each walk alone would read them one module
        at a time)."""
        at: dict[tuple[int, str], tuple[dict, str]] = {}  # (id(artifact), member) -> (its table, module)
        seen: set[tuple[int, str]] = set()

        def named(table: dict, mods: Iterable[str]) -> list[tuple[Any, str, str]]:
            out = []
            for mod in mods:
                if (id(table), mod) in seen:
                    continue
                seen.add((id(table), mod))
                i, path, is_ext = table[mod]
                if not is_ext:
                    at[(id(ctx.artifacts[i]), path)] = (table, mod)
                    out.append((ctx.artifacts[i], path, "module_imports"))
            return out

        def follow(artifact: Any, path: str, _extractor: str) -> list[tuple[Any, str, str]]:
            table, mod = at[(id(artifact), path)]
            return named(table, imports.of(table, mod))

        ctx.walk([fact for table, tops in walked for fact in named(table, [t for t in tops if t in table])], follow)

    def _analyse(self, ctx: Any, lk: Linkage, table: dict, top: str, imports: "_Imports") -> Finding | None:
        i0, path0, _ = table[top]
        art0 = ctx.artifacts[i0]
        parent: dict[str, str | None] = {top: None}
        queue = deque([top])
        extensions: list[str] = []
        while queue:
            mod = queue.popleft()
            if table[mod][2]:
                extensions.append(mod)
                continue
            for t in imports.of(table, mod):
                if t not in parent:
                    parent[t] = mod
                    queue.append(t)
        # native closure of each extension module
        lib_chain: dict[str, list[str]] = {}
        for ext in extensions:
            i, path, _ = table[ext]
            facts = ctx.fact("elf", ctx.artifacts[i], path)
            if facts is None:
                continue
            mod_chain = []
            m: str | None = ext
            while m is not None:
                mod_chain.append(m)
                m = parent.get(m)
            chain_head = [table[x][1] for x in reversed(mod_chain)]
            seen = {(i, path)}
            stack = [(i, path, facts, chain_head)]
            while stack:
                ci, cpath, cfacts, chain = stack.pop()
                for lib in cfacts.needed:
                    if lib in lib_chain:
                        continue
                    lib_chain[lib] = chain + [lib]
                    res = lk.resolve(ci, cpath, cfacts, lib)
                    if res.key is not None and res.key[0] == "artifact":
                        _k, ni, npath = res.key
                        if (ni, npath) in seen:
                            continue
                        seen.add((ni, npath))
                        nf = ctx.fact("elf", ctx.artifacts[ni], npath)
                        if nf is not None:
                            stack.append((ni, npath, nf, chain + [npath]))
        gpu = {lib: ch for lib, ch in lib_chain.items() if lk.kind(lib) in ("cuda", "driver")}
        if not gpu:
            return None
        drivers = sorted(lib for lib in gpu if lk.kind(lib) == "driver")
        cuda = sorted(lib for lib in gpu if lk.kind(lib) == "cuda")
        first = drivers[0] if drivers else cuda[0]
        chain_text = " → ".join(gpu[first])
        if drivers:
            msg = (f"`import {top}` loads the NVIDIA driver library {', '.join(drivers)}"
                   + (f" and {len(cuda)} CUDA libraries ({_short(cuda, 4)})" if cuda else "")
                   + f" eagerly ({chain_text}); it fails on a machine without an NVIDIA driver")
            sev = Severity.WARNING
        else:
            msg = (f"`import {top}` loads {len(cuda)} CUDA libraries eagerly ({_short(cuda, 4)}; {chain_text}); "
                   "it fails where they are missing")
            sev = Severity.INFO
        return self.finding(
            Location(art0.ref, path0, symbol=first),
            msg,
            severity=sev,
            key=top,
            evidence={"package": top, "gpu_libraries": {k: v for k, v in sorted(gpu.items())},
                      "native_libraries": sorted(lib_chain), "extension_modules": sorted(table[e][1] for e in extensions)},
            fix=Fix(user=(f"on machines without an NVIDIA driver, import {top} only inside the code that needs the GPU "
                          f"(`try: import {top}` / `except ImportError`)" if drivers else
                          f"install the wheels of its CUDA libraries ({_short([_wheel_of(lk, c) for c in cuda], 4)})"),
                    maintainer="load GPU libraries lazily (dlopen/ctypes at first use), link extension modules with "
                    "-Wl,--as-needed, and import GPU-only submodules inside the functions that need them"),
        )


class NeededLibraryNotFound(LinkageRule):
    """## What it does
    In an installed environment (`cuaudit env`), reports a `DT_NEEDED`
    library that the dynamic loader would not find: in none of the places it
    searches (`DT_RPATH`, `LD_LIBRARY_PATH`, `DT_RUNPATH`, `ld.so.cache`, the
    system directories).  The message lists every place searched, and says
    where the library exists when it exists somewhere the loader does not
    look (another distribution's folder, the conda prefix).

    ## Why is this bad?
    Importing the module fails with `cannot open shared object file`, unless
    the package preloads the library itself first.  A missing driver library
    (`libcuda.so.1`) means the machine has no NVIDIA driver: the import
    fails there (warning); any other missing library is an error.

    ## Example
    `cupy/_core/core.cpython-311-x86_64-linux-gnu.so` needs `libcublas.so.11`;
    `nvidia-cublas-cu11` is installed, but its `nvidia/cublas/lib` is on no
    search path of the module.

    ## Use instead
    Install the library (the `nvidia-*` wheel, the toolkit), give the module
    a `$ORIGIN`-relative `RUNPATH` to the folder that holds it, or preload it.

    ## Fix safety
    No automatic fix.
    """

    code = "CU203"
    name = "needed-library-not-found"
    summary = "A needed library is found nowhere the dynamic loader searches (import fails)"
    severity = Severity.ERROR

    def check(self, ctx: Any) -> Iterable[Finding]:
        lk = linkage(ctx)
        groups: dict[tuple[int, str], list[tuple[str, Resolution]]] = {}
        for i, art, member, facts in lk.files():
            if art.ref.kind is not ArtifactKind.INSTALLED:
                continue
            for lib in facts.needed:
                res = lk.resolve(i, member.path, facts, lib)
                if res.found and res.on_loader_path:
                    continue
                groups.setdefault((i, lib), []).append((member.path, res))
        for (i, lib), items in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            art = ctx.artifacts[i]
            members = sorted(p for p, _ in items)
            res = items[0][1]
            kind = lk.kind(lib)
            if res.found:
                msg = (f"{lib}, needed by {_short(members, 3)}, is not on the loader's search path: it exists at "
                       f"{res.where} ({res.found_via}{', ' + res.provider if res.provider else ''}), so the import works "
                       f"only if something loads it first (searched: {'; '.join(res.tried)})")
                sev = Severity.WARNING
            elif kind == "driver":
                msg = (f"{lib} (NVIDIA driver), needed by {_short(members, 3)}, is not installed on this machine: "
                       f"importing these modules fails here (searched: {'; '.join(res.tried)})")
                sev = Severity.WARNING
            else:
                msg = (f"{lib}, needed by {_short(members, 3)}, is not found: importing these modules fails "
                       f"(searched: {'; '.join(res.tried)})")
                sev = Severity.ERROR
            yield self.finding(
                Location(art.ref, members[0], symbol=lib),
                msg,
                severity=sev,
                key=lib,
                evidence={"library": lib, "members": members, "tried": list(res.tried), "found_via": res.found_via,
                          "where": res.where},
                fix=Fix(user=(f"it is at {res.where}: import the package that loads it first, or add its folder to "
                              "LD_LIBRARY_PATH" if res.found else
                              f"install the NVIDIA driver (no wheel ships {lib}); without a GPU, do not import these "
                              "modules" if kind == "driver" else f"`pip install {_wheel_of(lk, lib)}` (it ships {lib})"),
                        maintainer=f"declare Requires-Dist: {_wheel_of(lk, lib)} and give the module a $ORIGIN-relative "
                        f"RUNPATH to the folder that holds {lib} (or preload it)"),
            )


class BundledDriverLibrary(LinkageRule):
    """## What it does
    Reports a wheel or installed distribution that ships a library of the
    NVIDIA driver (`libcuda.so.1`, `libnvidia-ml.so.1`, ... as listed by
    cuda-pathfinder), by file name or SONAME.  Linker stubs in a `stubs/`
    folder are not reported.

    ## Why is this bad?
    The driver's user-space libraries must match the kernel module of the
    machine exactly.  A copy in a wheel shadows the real one (through
    `RPATH`/`RUNPATH`) and fails with `CUDA driver version is insufficient`
    or worse, on every machine whose driver differs from the build host's.
    auditwheel's policy excludes them for this reason.

    ## Example
    A wheel repaired by a misconfigured `auditwheel repair` that grafted
    `libcuda-a1b2c3d4.so.1` into `mypkg.libs/`.

    ## Use instead
    Never ship driver libraries: link against the toolkit's stub
    (`lib64/stubs/libcuda.so`) and let the system's driver satisfy the need
    at run time (`auditwheel repair --exclude libcuda.so.1`).

    ## Fix safety
    No automatic fix.
    """

    code = "CU204"
    name = "bundled-driver-library"
    summary = "A wheel ships an NVIDIA driver library"
    severity = Severity.ERROR

    def check(self, ctx: Any) -> Iterable[Finding]:
        lk = linkage(ctx)
        for _i, art, member, facts in lk.files():
            if art.ref.kind not in (ArtifactKind.WHEEL, ArtifactKind.INSTALLED):
                continue
            if "/stubs/" in f"/{member.path}":
                continue
            base = member.path.rsplit("/", 1)[-1]
            # auditwheel renames grafted copies: libcuda-1a2b3c4d.so.1
            unhashed = re.sub(r"-[0-9a-f]{8}(?=\.so)", "", base)
            for name in (facts.soname, unhashed):
                if name and lk.kind(name) == "driver":
                    yield self.finding(
                        Location(art.ref, member.path, symbol=name),
                        f"{member.path} is the NVIDIA driver library {name}: it must come from the machine's driver, "
                        "never from a wheel (it shadows the real one and breaks on other driver versions)",
                        key=name,
                        evidence={"soname": facts.soname, "file": base},
                        fix=Fix(f"remove {member.path}; link against the CUDA stub and exclude {name} when repairing "
                                "(auditwheel repair --exclude)"),
                    )
                    break


def _requirements(ctx: Any, art: Any) -> tuple[tuple[str, frozenset[str], bool], ...]:
    """(canonical name, extras, only under an extra) for each Requires-Dist of a wheel."""
    from cuaudit.requirement import parse_requirement

    def compute() -> tuple[tuple[str, frozenset[str], bool], ...]:
        out = []
        for _a, m, meta in ctx.facts("metadata", art):
            if not m.path.endswith(".dist-info/METADATA"):
                continue
            for req in filter(None, map(parse_requirement, meta.requires_dist)):
                out.append((req.name, req.extras, req.optional))
        return tuple(out)

    # asked for every CUDA library a wheel's files need (24 times for torch, each a walk of its 14 k members)
    return ctx.memo(("linkage.requirements", id(art)), compute)


class UndeclaredCudaLibrary(LinkageRule):
    """## What it does
    Reports a CUDA library that a wheel's ELF files need but that neither
    ships inside the wheel nor comes from a declared dependency: an
    `nvidia-<component>-cuXX` wheel (or the CUDA 13 `nvidia-<component>`
    layout), or `cuda-toolkit[<component>]`, in `Requires-Dist`.  A
    dependency declared only under an extra is reported as info.

    ## Why is this bad?
    `pip install` of the wheel then gives an environment whose import fails
    with `libcublas.so.11: cannot open shared object file` unless the user
    happens to have a matching CUDA toolkit on the loader's path.  PyTorch
    declares `nvidia-cublas-cu12` & co. for this; CuPy 14 offers them as the
    `ctk` extra.

    ## Example
    cupy-cuda11x 12.3.0 needs `libcublas.so.11` and declares only `numpy`
    and `fastrlock`.

    ## Use instead
    `Requires-Dist: nvidia-cublas-cu11` (or an extra such as
    `cuda-toolkit[cublas]==12.*`), or document the system toolkit requirement
    and load the library lazily.

    ## Fix safety
    No automatic fix.
    """

    code = "CU205"
    name = "undeclared-cuda-library"
    summary = "A needed CUDA library is neither shipped nor provided by a declared dependency"
    severity = Severity.WARNING
    needs = ("elf", "metadata")

    def check(self, ctx: Any) -> Iterable[Finding]:
        lk = linkage(ctx)
        needs: dict[int, dict[str, list[str]]] = {}
        for i, art, member, facts in lk.files():
            if art.ref.kind is not ArtifactKind.WHEEL:
                continue
            for lib in facts.needed:
                if lk.kind(lib) == "cuda":
                    needs.setdefault(i, {}).setdefault(lib, []).append(member.path)
        for i, libs in sorted(needs.items()):
            art = ctx.artifacts[i]
            shipped = {m.path.rsplit("/", 1)[-1] for m in art.members}
            reqs = _requirements(ctx, art)
            for lib, members in sorted(libs.items()):
                if lib in shipped:
                    continue
                cuda = lk.catalog.library(lib)
                provided = [r for r in reqs if _provides(r, cuda)]
                mismatched = [r for r in provided if _major_mismatch(lk, lib, r[0])]
                if mismatched:
                    continue  # CU206 reports it
                if any(not r[2] for r in provided):
                    continue
                members = sorted(members)
                comp = (cuda.components[0] if cuda and cuda.components else split_soname(lib)[0][3:])
                suggestion = lk.catalog.exports(lib).dist if lk.catalog.exports(lib) else f"nvidia-{comp}-cuXX"
                if provided:
                    msg = (f"{lib} (needed by {_short(members, 3)}) comes only from an optional extra "
                           f"({', '.join(r[0] for r in provided)}); a plain install lacks it")
                    sev = Severity.INFO
                else:
                    msg = (f"{lib} (needed by {_short(members, 3)}) is neither in the wheel nor provided by a declared "
                           f"dependency; the import fails unless a matching CUDA toolkit is on the loader's path")
                    sev = Severity.WARNING
                yield self.finding(
                    Location(art.ref, members[0], symbol=lib),
                    msg,
                    severity=sev,
                    key=lib,
                    evidence={"library": lib, "members": members, "requires_dist": [r[0] for r in reqs]},
                    fix=Fix(user=f"`pip install {suggestion}` (it ships {lib})",
                            maintainer=f"declare Requires-Dist: {suggestion} (or ship {lib}), or load it lazily"),
                )


def _provides(req: tuple[str, frozenset[str], bool], cuda: Any) -> bool:
    if cuda is None:
        return False
    name, extras, _opt = req
    comps = set(cuda.components)
    m = re.match(r"^nvidia-(?P<comp>.+?)(-cu(?P<major>\d+))?$", name)
    if m and m.group("comp") in comps:
        return True
    if name == "cuda-toolkit":
        wanted = {cuda.name.lower()} | {c.replace("cuda-", "") for c in comps}
        return bool(wanted & {e.lower() for e in extras})
    return False


def _major_mismatch(lk: Linkage, lib: str, dist: str) -> str | None:
    """The CUDA major of ``dist`` when it is known to ship another soname of ``lib``'s library.

    Library majors are not CUDA majors (``libcurand.so.10`` is in CUDA 11 and 12), so this
    only answers from the catalog: ``lib`` comes from a ``-cuX`` wheel, and the declared
    ``-cuY`` wheel's catalog entry for the same library has another soname.
    """
    have = re.search(r"-cu(\d+)$", dist)
    if not have:
        return None
    stem, _ = split_soname(lib)
    for soname, dist_of in lk.catalog.sonames_of(stem):
        if soname != lib and dist_of.endswith(f"-cu{have.group(1)}"):
            cat = lk.catalog.exports(lib)
            if cat is None or not cat.dist.endswith(f"-cu{have.group(1)}"):
                return have.group(1)
    return None


class CudaMajorMismatch(LinkageRule):
    """## What it does
    Reports a needed CUDA library whose major version differs from what is
    available: `libcublas.so.12` needed while the environment (or a `--with`
    extra, or this machine) has only `libcublas.so.13`, or a wheel that
    needs a CUDA 11 library but declares the CUDA 12 `nvidia-*` wheel for it.

    ## Why is this bad?
    Sonames carry the ABI major: the loader never substitutes `.so.13` for
    `.so.12`, so the import fails with `cannot open shared object file`
    although "cuBLAS is installed".  It happens when `nvidia-*-cu12` wheels
    are replaced by CUDA 13's `nvidia/cu13/lib` layout, or when a package
    built for CUDA 11 is installed next to CUDA 12 wheels.

    ## Example
    `cupy-cuda11x` in an environment with `nvidia-cublas-cu12`: needs
    `libcublas.so.11`, finds only `nvidia/cublas/lib/libcublas.so.12`.

    ## Use instead
    Install the package build for the CUDA major you have (`cupy-cuda12x`),
    or the libraries of the major it was built for.

    ## Fix safety
    No automatic fix.
    """

    code = "CU206"
    name = "cuda-major-mismatch"
    summary = "A needed CUDA library is available only with another major version"
    severity = Severity.ERROR
    needs = ("elf", "metadata")

    def check(self, ctx: Any) -> Iterable[Finding]:
        lk = linkage(ctx)
        have: dict[str, set[str]] = {}
        for name in lk.resolver.by_name:
            stem, ver = split_soname(name)
            if ver:
                have.setdefault(stem, set()).add(name)
        for extra in lk.resolver.extras:
            for name in extra.names():
                stem, ver = split_soname(name)
                if ver:
                    have.setdefault(stem, set()).add(name)
        system: dict[str, set[str]] = {}
        for name in lk.resolver.system_sonames():
            stem, ver = split_soname(name)
            if ver:
                system.setdefault(stem, set()).add(name)
        reported: set[tuple[int, str]] = set()
        for i, art, member, facts in lk.files():
            for lib in facts.needed:
                if lk.kind(lib) != "cuda" or (i, lib) in reported:
                    continue
                stem, ver = split_soname(lib)
                if art.ref.kind is ArtifactKind.WHEEL:
                    for name, _extras, _opt in _requirements(ctx, art):
                        cuda = lk.catalog.library(lib)
                        other = _major_mismatch(lk, lib, name) if _provides((name, _extras, _opt), cuda) else None
                        if other:
                            reported.add((i, lib))
                            yield self.finding(
                                Location(art.ref, member.path, symbol=lib),
                                f"{member.path} needs {lib} but the wheel declares {name} (CUDA {other}), which ships "
                                f"another major of that library",
                                key=lib, evidence={"library": lib, "declared": name},
                                fix=Fix(f"declare the wheel of the CUDA major {lib} belongs to"
                                        + (f" ({lk.catalog.exports(lib).dist})" if lk.catalog.exports(lib) else "")
                                        + f" instead of {name}"),
                            )
                            break
                    if not lk.with_ or (i, lib) in reported:
                        continue
                elif art.ref.kind is not ArtifactKind.INSTALLED:
                    continue
                res = lk.resolve(i, member.path, facts, lib)
                if res.found:
                    continue
                others = sorted(have.get(stem, set()) - {lib})
                where = "installed distributions" if art.ref.kind is ArtifactKind.INSTALLED else "--with"
                if not others:
                    others = sorted(system.get(stem, set()) - {lib})
                    where = "this machine's ld.so.cache"
                if not others:
                    continue
                reported.add((i, lib))
                yield self.finding(
                    Location(art.ref, member.path, symbol=lib),
                    f"{member.path} needs {lib} but only {', '.join(others)} is available ({where}): "
                    "the loader never substitutes another major version",
                    key=lib,
                    evidence={"library": lib, "available": others, "tried": list(res.tried)},
                    fix=Fix(f"install the libraries of the CUDA major {lib} belongs to, or the build of this package "
                            f"for the CUDA you have"),
                )


def _wheel_of(lk: Any, lib: str) -> str:
    """The wheel that ships ``lib`` (nvidia-cublas-cu11 for libcublas.so.11), for fix texts."""
    exports = lk.catalog.exports(lib)
    if exports is not None:
        return exports.dist
    cuda = lk.catalog.library(lib)
    if cuda is not None and cuda.components:
        return f"the nvidia-{cuda.components[0]}-cu* wheel of your CUDA major"
    return f"the package that ships {lib}"


def _unused_user_fix(lk: Any, lib: str, kind: str) -> str:
    """CU201's workaround, with the whole truth about `cuaudit repair`.

    Issue 15: after a repair that a user read as "removes this entry", `import
    cupy` failed on the next library: repair removes every unused entry of
    every module at once, and the libraries that modules really use stay.
    """
    repair = ("`cuaudit repair` the wheel: it removes every unused entry of every module at once; "
              "what remains are the libraries the modules really use")
    if kind == "system":
        return "nothing is needed: every manylinux system has it"
    if kind == "driver":
        return f"no wheel ships the NVIDIA driver: on machines without one, {repair}, and those still need a GPU"
    return f"`pip install {_wheel_of(lk, lib)}` (it ships {lib}); or {repair}, which must still be installed"
