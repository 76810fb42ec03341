"""Where each ``DT_NEEDED`` library resolves, as the dynamic loader would, and why.

The steps follow ld.so(8), in its order, for a library needed by a file:

1. ``DT_RPATH`` of the file (only when it has no ``DT_RUNPATH``);
2. ``LD_LIBRARY_PATH`` (only for ``env``: the environment's variable);
3. ``DT_RUNPATH`` of the file;
4. ``/etc/ld.so.cache`` (parsed, ``ldconfig`` is never run);
5. the loader's built-in folders, read from the loader (``/lib/x86_64-linux-gnu``,
   ``/usr/lib/x86_64-linux-gnu``, ``/lib``, ``/usr/lib`` on Debian; ``/lib64`` first elsewhere).

A library that sits in an ``ld.so.conf`` folder but is missing from the
cache is reported as found off the loader's path ("run ldconfig").

``$ORIGIN`` is the folder of the file inside its artifact: wheel members, and
the distributions installed in one site directory, share one namespace, so
``$ORIGIN/../../nvidia/cublas/lib`` in ``torch/lib/libtorch_cuda.so`` reaches
the ``nvidia-cublas-cu12`` wheel given beside it.  A wheel checked together
with an environment (``check --python``) is placed in the environment's
first site directory, as if installed there.

When these fail, the places where the library *exists* but the loader would
not look are tried too, and reported as such (``on_loader_path=False``):
the same distribution (including ``*.libs/`` folders grafted by auditwheel),
other wheels or installed distributions (the ``nvidia/<component>/lib`` and
``nvidia/cu13/lib`` layouts), the conda prefix, and ``--with`` extras.  Such a
library loads only once something else loaded it first (CuPy and PyTorch
preload theirs with ``ctypes``).  Driver libraries (``libcuda.so.1``...)
resolve only from the system: a copy elsewhere is a bug (CU204).

Not modelled: the RPATH of the loading executable and of the parents in the
load chain, ``LD_PRELOAD``, hardware-capability subfolders, ``DT_FLAGS_1``'s
``NODEFLIB``.  Every result carries ``tried``: each place, in order.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from cuaudit.analysis.libraries import CudaCatalog, default_dirs, ld_so_cache, ld_so_conf_dirs
from cuaudit.facts.elf import ElfFacts
from cuaudit.facts.evidence import Evidence
from cuaudit.model import ArtifactKind, Member, MemberKind

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.inputs import Artifact


@dataclass(frozen=True)
class Resolution:
    """Where one needed library resolves (or every place it was looked for)."""

    needed: str
    found_via: str | None  # DT_RPATH, LD_LIBRARY_PATH, DT_RUNPATH, ld.so.cache, system directory, same distribution ...
    where: str = ""  # the path found (member path in its artifact, or a file of this machine)
    on_loader_path: bool = False
    tried: tuple[str, ...] = ()
    provider: str = ""  # the distribution / wheel that holds it, when not the system
    fs_path: str | None = None
    key: Any = field(default=None, compare=False, hash=False)  # (artifact index, member) when an artifact member

    @property
    def found(self) -> bool:
        return self.found_via is not None

    def describe(self) -> str:
        if not self.found:
            return f"{self.needed}: not found (tried: {'; '.join(self.tried)})"
        extra = "" if self.on_loader_path else " — not on the loader's search path: it loads only if something loaded it before"
        prov = f" ({self.provider})" if self.provider else ""
        return f"{self.needed} => {self.where}{prov} via {self.found_via}{extra}"


def _namespace(art: "Artifact", shared_wheels: bool = True, site_root: str | None = None) -> tuple[str, str | None]:
    """(namespace key, filesystem root) of an artifact's member paths."""
    kind = art.ref.kind
    if kind is ArtifactKind.WHEEL:
        if site_root and shared_wheels:
            return site_root, site_root  # checked against an environment: as if installed there
        # Wheels install into one site directory together; two versions of one project cannot.
        return ("<wheels>" if shared_wheels else f"<wheel:{art.ref.path}>"), None
    if kind is ArtifactKind.FILE:
        root = os.path.dirname(art.ref.path)
        return root, root
    return art.ref.path, art.ref.path


class Resolver:
    """Resolves needed libraries over the audited artifacts, extras and this machine."""

    def __init__(
        self,
        artifacts: list["Artifact"],
        fact: Any,
        *,
        environ: dict[str, str] | None = None,
        extras: Iterable["Evidence | str"] = (),
        use_system: bool = True,
        site_root: str | None = None,
        system: Evidence | None = None,
    ) -> None:
        """``system``: this machine's files as evidence (``ctx.evidence("system")``) and
        ``extras`` the ``--with`` evidence (``ctx.evidence("with")``); given as
        paths, or left out, they are read here, uncached (library callers, tests).
        """
        self.artifacts = artifacts
        self._fact = fact  # (artifact, member path) -> ElfFacts | None
        self.environ = dict(environ) if environ is not None else None
        self.catalog = CudaCatalog.load()
        self.use_system = use_system
        self.ns_members: dict[str, dict[str, tuple[int, Member]]] = {}
        self.ns_roots: dict[str, str | None] = {}
        self.by_name: dict[str, list[tuple[int, str]]] = {}
        self.art_ns: list[str] = []
        from collections import Counter

        names = Counter(a.ref.name for a in artifacts if a.ref.kind is ArtifactKind.WHEEL)
        for i, art in enumerate(artifacts):
            ns, root = _namespace(art, names[art.ref.name] < 2, site_root)
            self.art_ns.append(ns)
            self.ns_roots.setdefault(ns, root)
            table = self.ns_members.setdefault(ns, {})
            for m in art.members:
                if m.kind is MemberKind.ELF:
                    table.setdefault(m.path, (i, m))
                    self.by_name.setdefault(m.path.rsplit("/", 1)[-1], []).append((i, m.path))
        if system is None:
            from cuaudit.inputs.evidence import SystemFiles

            system = Evidence(SystemFiles())
        self.system = system
        self.extras = [_Extra(e) for e in _extra_evidence(extras)]
        self._ld_so_cache: Any = None
        self._cache: dict[Any, Resolution] = {}

    # -- facts of what was found ------------------------------------------------------------
    def facts_of(self, res: Resolution) -> ElfFacts | None:
        if not res.found:
            return None
        if res.key is not None:
            kind, a, b = res.key
            if kind == "artifact":
                return self._fact(self.artifacts[a], b)
            if kind == "extra":
                return self.extras[a].facts(b)
        if res.fs_path:
            return self.system.fact("elf", res.fs_path)
        return None

    def system_sonames(self) -> Any:
        """soname -> paths of ``/etc/ld.so.cache`` (from the system evidence's facts)."""
        if self._ld_so_cache is None:
            self._ld_so_cache = ld_so_cache(self.system)
        return self._ld_so_cache

    # -- resolution ----------------------------------------------------------------------------
    def resolve(self, art_index: int, member: str, facts: ElfFacts, needed: str) -> Resolution:
        ns = self.art_ns[art_index]
        origin = posixpath.dirname(member)
        key = (ns, origin, facts.rpath if not facts.runpath else (), facts.runpath, needed)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._resolve(art_index, ns, origin, facts, needed)
            self._cache[key] = hit
        return hit

    def _resolve(self, art_index: int, ns: str, origin: str, facts: ElfFacts, needed: str) -> Resolution:
        tried: list[str] = []
        driver = self.catalog.is_driver(needed)
        if "/" in needed:
            path = needed if os.path.isabs(needed) else None
            if path and self.system.exists(path):
                return Resolution(needed, "path in DT_NEEDED", path, True, (path,), fs_path=path)
            return Resolution(needed, None, tried=(f"{needed} (a path)",))
        steps: list[tuple[str, list[str]]] = []
        if not driver:
            if not facts.runpath and facts.rpath:
                steps.append(("DT_RPATH", list(facts.rpath)))
        if self.environ is not None and self.environ.get("LD_LIBRARY_PATH"):
            steps.append(("LD_LIBRARY_PATH", [d for d in self.environ["LD_LIBRARY_PATH"].split(":") if d]))
        if not driver and facts.runpath:
            steps.append(("DT_RUNPATH", list(facts.runpath)))
        for via, dirs in steps:
            for d in dirs:
                res = self._in_dir(ns, origin, d, needed, via, tried)
                if res is not None:
                    return res
        if self.use_system:
            cached = self.system_sonames().get(needed)
            if cached:
                return Resolution(needed, "ld.so.cache", cached[0], True, tuple(tried + ["/etc/ld.so.cache"]), fs_path=cached[0])
            tried.append("/etc/ld.so.cache")
            for d in default_dirs():
                p = os.path.join(d, needed)
                if self.system.exists(p):
                    return Resolution(needed, "system directory", p, True, tuple(tried + [d]), fs_path=p)
                tried.append(d)
            # The loader reads the cache, not ld.so.conf: a library in a configured folder that
            # the cache lacks (ldconfig not run since it was installed) is not found.
            for d in ld_so_conf_dirs(self.system):
                p = os.path.join(d, needed)
                if self.system.exists(p):
                    return Resolution(needed, "ld.so.conf directory missing from ld.so.cache (run ldconfig)", p, False,
                                      tuple(tried + [f"{d} (ld.so.conf)"]), fs_path=p)
        if driver:
            return Resolution(needed, None, tried=tuple(tried) + ("(a driver library comes only from the system)",))
        # Places the loader does not search: found only when something loaded the library first.
        own = self.artifacts[art_index]
        candidates = self.by_name.get(needed, [])
        for i, path in candidates:
            if i == art_index:
                return Resolution(needed, "same distribution", path, False, tuple(tried + [f"{own.ref.display} (anywhere)"]),
                                  provider=own.ref.name or os.path.basename(own.ref.path), key=("artifact", i, path))
        tried.append(f"{own.ref.display} (anywhere)")
        for i, path in candidates:
            art = self.artifacts[i]
            if self.art_ns[i] == ns:
                label = "installed distribution" if art.ref.kind is ArtifactKind.INSTALLED else "wheel beside it"
                return Resolution(needed, label, path, False, tuple(tried + ["other distributions"]),
                                  provider=f"{art.ref.name} {art.ref.version}".strip(), key=("artifact", i, path))
        tried.append("other distributions" if len(self.ns_members) else "")
        if self.environ is not None and self.environ.get("CONDA_PREFIX"):
            d = os.path.join(self.environ["CONDA_PREFIX"], "lib")
            p = os.path.join(d, needed)
            if self.system.exists(p):
                return Resolution(needed, "conda prefix", p, False, tuple(tried + [d]), fs_path=p)
            tried.append(d)
        for j, extra in enumerate(self.extras):
            found = extra.find(needed)
            if found:
                return Resolution(needed, "--with", found, False, tuple(tried + [extra.path]),
                                  provider=os.path.basename(extra.path), key=("extra", j, found),
                                  fs_path=found if extra.is_dir else None)
            tried.append(f"--with {extra.path}")
        return Resolution(needed, None, tried=tuple(t for t in tried if t))

    def _in_dir(self, ns: str, origin: str, d: str, needed: str, via: str, tried: list[str]) -> Resolution | None:
        rel = None
        for token in ("$ORIGIN", "${ORIGIN}"):
            if d.startswith(token):
                rel = posixpath.normpath(posixpath.join(origin, "." + d[len(token):]))
                break
        d = d.replace("$LIB", "lib64").replace("${LIB}", "lib64").replace("$PLATFORM", "x86_64")
        root = self.ns_roots.get(ns)
        if rel is not None:
            rel = "" if rel == "." else rel
            if not rel.startswith(".."):
                path = f"{rel}/{needed}" if rel else needed
                hit = self.ns_members.get(ns, {}).get(path)
                label = f"{via} {d} -> {rel or '.'}/"
                tried.append(label)
                if hit is not None:
                    i, m = hit
                    art = self.artifacts[i]
                    return Resolution(needed, via, path, True, tuple(tried), provider=f"{art.ref.name} {art.ref.version}".strip(),
                                      key=("artifact", i, path))
                if root is None:
                    return None
                full = os.path.join(root, *path.split("/"))
            elif root is not None:
                full = os.path.normpath(os.path.join(root, *rel.split("/"), needed))
                tried.append(f"{via} {d} -> {os.path.dirname(full)}")
            else:
                tried.append(f"{via} {d} (outside the wheel)")
                return None
        elif os.path.isabs(d):
            full = os.path.join(d, needed)
            tried.append(f"{via} {d}")
        else:
            tried.append(f"{via} {d} (relative to the working directory: ignored)")
            return None
        if self.use_system or rel is not None:
            if self.system.exists(full):
                return Resolution(needed, via, full, True, tuple(tried), fs_path=full)
        return None


def _extra_evidence(extras: Iterable["Evidence | str"]) -> list[Evidence]:
    from cuaudit.inputs.evidence import with_artifacts

    out: list[Evidence] = []
    for e in extras:
        out += [e] if isinstance(e, Evidence) else [Evidence(a) for a in with_artifacts([e])]
    return out


class _Extra:
    """A ``--with`` wheel or folder (evidence): libraries that are not audited, only used."""

    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence
        self.path = evidence.ref.path
        self.is_dir = evidence.ref.kind is ArtifactKind.TREE
        self._index: dict[str, str] | None = None

    def names(self) -> dict[str, str]:
        """file name -> where (the file in the folder, or the member of the wheel) of every library it holds."""
        if self._index is None:
            index: dict[str, str] = {}
            for m in self.evidence.members:
                if self.is_dir or m.kind is MemberKind.ELF:
                    index.setdefault(m.path.rsplit("/", 1)[-1], self._where(m.path))
            self._index = index
        return self._index

    def find(self, name: str) -> str | None:
        return self.names().get(name)

    def _where(self, member: str) -> str:
        return (self.evidence.fs_path(member) or member) if self.is_dir else member

    def facts(self, where: str) -> ElfFacts | None:
        member = os.path.relpath(where, self.path).replace(os.sep, "/") if self.is_dir else where
        return self.evidence.fact("elf", member)
