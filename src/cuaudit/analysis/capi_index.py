"""Who provides which module, and what C-API it exports: shared by the CU3xx rules and `cuaudit diff`.

Built from the ``cython-capi`` facts of every artifact in an audit (or of the
two sides of a diff) plus the member lists (a module can exist as a ``.py``,
a package ``__init__``, or an extension module that is not Cython).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from cuaudit.facts.cython import CExport, CImport, CythonModule, TypeImport, module_name_for
from cuaudit.model import ArtifactRef, Location, Member, MemberKind

_DATA = re.compile(r"^[^/]+\.data/(purelib|platlib)/")


def module_of(path: str) -> str | None:
    """The import name a member provides, or None (metadata, data files, scripts)."""
    path = _DATA.sub("", path)
    first = path.split("/", 1)[0]
    if first.endswith((".dist-info", ".egg-info", ".data")) or first in ("tests", "test", "bin"):
        return None
    if path.endswith("/__init__.py"):
        name = path[: -len("/__init__.py")]
    elif path.endswith(".py"):
        name = path[:-3]
    elif path.endswith(".so") or path.endswith(".pyd"):
        name = module_name_for(path).replace(".", "/")
    else:
        return None
    if not all(part.isidentifier() for part in name.split("/")):
        return None
    return name.replace("/", ".")


@dataclass
class Provider:
    """One module as found in one artifact."""

    module: str
    artifact: Any  # cuaudit.inputs.Artifact
    member: str
    #: None: a Python module or a non-Cython extension; or a function giving the facts, called when
    #: they are first asked for (:attr:`facts`: a provider nobody imports from is never read)
    _facts: Any

    @property
    def facts(self) -> CythonModule | None:
        f = self._facts
        if callable(f):
            f = self._facts = f()
        return f

    @property
    def ref(self) -> ArtifactRef:
        return self.artifact.ref

    @property
    def dist(self) -> str:
        ref = self.ref
        if ref.name:
            return f"{ref.name} {ref.version}".strip()
        return ref.path

    def location(self) -> Location:
        return Location(self.ref, self.member)

    @property
    def is_python(self) -> bool:
        return self.member.endswith(".py")


@dataclass
class CapiIndex:
    """Every module of a set of artifacts, and the C-API facts of the Cython ones."""

    modules: dict[str, list[Provider]] = field(default_factory=dict)
    top_levels: dict[str, set[int]] = field(default_factory=dict)  # top-level package -> artifact ids

    @classmethod
    def build(cls, artifacts: Iterable[Any], facts_of) -> "CapiIndex":
        """``facts_of(artifact, member_path)`` returns the member's CythonModule facts or None."""
        index = cls()
        for art in artifacts:
            for m in art.members:
                name = module_of(m.path)
                if not name:
                    continue
                fact = functools.partial(facts_of, art, m.path) if m.kind is MemberKind.ELF else None
                index.modules.setdefault(name, []).append(Provider(name, art, m.path, fact))
                index.top_levels.setdefault(name.split(".")[0], set()).add(id(art))
        # Where one folder holds both mod.py and mod.cpython-*.so, the import system loads the
        # extension (FileFinder tries extension suffixes first): Cython's own compiled compiler
        # ships Scanning.py beside Scanning.so, and only the .so has the __pyx_capi__.
        for name, provs in index.modules.items():
            compiled = {(id(p.artifact), p.member.rsplit("/", 1)[0]) for p in provs if not p.is_python}
            if compiled:
                index.modules[name] = [
                    p for p in provs if not (p.is_python and (id(p.artifact), p.member.rsplit("/", 1)[0]) in compiled)
                ]
        return index

    def providers(self, module: str) -> list[Provider]:
        return self.modules.get(module, [])

    def consumers(self, judged: Callable[[Any], bool] | None = None) -> Iterable[Provider]:
        """The Cython modules that import a C-API (of the artifacts ``judged`` says yes to)."""
        for provs in self.modules.values():
            for p in provs:
                if judged is not None and not judged(p.artifact):
                    continue
                if p.facts is not None and p.facts.is_cython and (p.facts.imports or p.facts.type_imports):
                    yield p

    def exports_of(self, provider: Provider, _seen: frozenset = frozenset()) -> dict[str, CExport] | None:
        """name -> export of a provider; None when it has no ``__pyx_capi__``.

        A module that re-exports another's ``__pyx_capi__`` from Python code gets the
        other's table (when exactly one candidate module with a C-API is found).
        """
        f = provider.facts
        if f is None or not f.is_cython:
            return None
        if f.exports:
            return {e.name: e for e in f.exports}
        if f.reexport_candidates and provider.module not in _seen:
            found = []
            for cand in f.reexport_candidates:
                if cand == provider.module:
                    continue
                for p in self.providers(cand):
                    if p.artifact is provider.artifact or len(self.providers(cand)) == 1:
                        table = self.exports_of(p, _seen | {provider.module})
                        if table:
                            found.append(table)
            if len(found) == 1:
                return found[0]
            if found:
                merged: dict[str, CExport] = {}
                for t in found:
                    merged.update(t)
                return merged
            return {} if f.has_capi else None
        return {} if f.has_capi else None

    def typedef_size(self, module: str, name: str) -> tuple[Provider, int] | None:
        for p in self.providers(module):
            if p.facts:
                for t in p.facts.types:
                    if t.name == f"{module}.{name}" and t.size is not None:
                        return p, t.size
        return None


@dataclass(frozen=True)
class ImportProblem:
    """Why one consumer import fails against one provider."""

    kind: str  # "no-module", "no-capi", "missing", "signature", "type-size"
    consumer: Provider
    module: str
    provider: Provider | None
    imports: tuple[CImport, ...] = ()
    found: tuple[str, ...] = ()  # provider's signatures for "signature"
    type_import: TypeImport | None = None
    actual_size: int | None = None
    origin: str = "static"  # "probe": the consumer's side was read by importing it


def _relocated_variant(module: str, by_module: dict[str, list[CImport]], index: CapiIndex) -> bool:
    """Is this module a build variant shipped under another folder than its import name?

    cuda-core 1.2 ships `cuda/core/cu12/_device.so` beside its CUDA 13 build and loads the
    one matching cuda-bindings under the name `cuda.core._device`; the idle variant cimports
    `cuda.core._stream`, which exists only as `cuda.core.cu12._stream` on disk.  Judged by
    its folder it looks broken (160 false CU301s on the GPU machine); no verdict is given.
    """
    package = module.rsplit(".", 1)[0]
    parts = package.split(".")
    for imported in by_module:
        if index.providers(imported):
            continue
        for k in range(len(parts) - 1, 0, -1):
            base = ".".join(parts[:k])
            if not imported.startswith(base + "."):
                continue
            # the variant's root is the consumer's package or one of its parents below `base`
            for j in range(k + 1, len(parts) + 1):
                if index.providers(".".join(parts[:j]) + imported[len(base):]):
                    return True
    return False


def import_problems(consumer: Provider, index: CapiIndex) -> list[ImportProblem]:
    """Every way ``consumer``'s Cython imports fail against the modules of ``index``."""
    facts = consumer.facts
    out: list[ImportProblem] = []
    if facts is None:
        return out
    by_module: dict[str, list[CImport]] = {}
    for imp in facts.imports:
        by_module.setdefault(imp.module, []).append(imp)
    # Cython >= 3.1 shares its utility code (`__Pyx_*`) through one module of the package
    # (scipy._cyutility), built in the same run as its users: a break there cannot come
    # from another distribution, and the reader does not recover that module's table
    # (false CU301s on scipy 1.17/1.18 and scikit-learn 1.9 with Cython 3.2).  No verdict.
    for module in list(by_module):
        if module.rsplit(".", 1)[-1] == "_cyutility":
            del by_module[module]  # also its memoryview helpers (_allocate_buffer, _err, ...)
            continue
        kept = [i for i in by_module[module] if not i.name.startswith("__Pyx_")]
        if kept:
            by_module[module] = kept
        else:
            del by_module[module]
    if _relocated_variant(facts.module, by_module, index):
        return out
    for module, imps in sorted(by_module.items()):
        if module == facts.module:
            continue
        provs = index.providers(module)
        if not provs:
            # Only when the package is there but the module is not (removed or moved);
            # a provider that is not installed at all is a missing dependency, not ours.
            top = module.split(".")[0]
            if index.top_levels.get(top):
                out.append(ImportProblem("no-module", consumer, module, None, tuple(imps)))
            continue
        for prov in provs:
            table = index.exports_of(prov)
            if prov.facts is not None and prov.facts.unresolved and not table:
                continue  # its C-API was not read (a CU009 says so): no verdict
            if table == {} and prov.facts is not None and prov.facts.has_capi:
                # Cython creates __pyx_capi__ only to put exports in it: an empty table read
                # from a module that has one means the reader missed them (scipy 1.17's
                # cython_blas, Cython 3.2.4): no verdict rather than a false "does not export".
                continue
            if table is None:
                if prov.facts is None and not prov.is_python:
                    continue  # an extension module the static reader could not read
                if prov.artifact is consumer.artifact and prov.facts is not None and prov.facts.is_cython:
                    # Built together from one .pxd, a Cython sibling without __pyx_capi__ means the
                    # reader missed it, not a break (pandas 3.0.6 tslibs.ccalendar, Cython 3.2, seen
                    # on the GPU machine).  Breaks between distributions (the seed) are still judged.
                    continue
                out.append(ImportProblem("no-capi", consumer, module, prov, tuple(imps)))
                continue
            unnamed = set(prov.facts.unnamed_variable_exports) if prov.facts else set()
            missing = tuple(i for i in imps if i.name not in table and not (i.kind == "variable" and i.signature in unnamed))
            if missing and prov.facts is not None and prov.facts.unresolved:
                missing = ()  # the provider's table was read only in part (CU009 says so): no verdict
            if missing:
                out.append(ImportProblem("missing", consumer, module, prov, missing))
            for i in imps:
                e = table.get(i.name)
                if e is not None and e.signature != i.signature:
                    out.append(ImportProblem("signature", consumer, module, prov, (i,), (e.signature,)))
    for t in facts.type_imports:
        if t.module in ("builtins", "__builtin__") or t.size is None:
            continue
        found = index.typedef_size(t.module, t.name)
        if found is None:
            continue
        prov, size = found
        if size == t.size:
            continue
        if size > t.size and t.check_size == "ignore":
            continue
        out.append(ImportProblem("type-size", consumer, t.module, prov, type_import=t, actual_size=size))
    return out
