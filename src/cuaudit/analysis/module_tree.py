"""The package model: which modules exist, what ``import X`` imports, what binds what.

Built from the member lists of the audited artifacts (wheels, trees,
installed distributions) plus their ``python_source`` facts, and, on
demand, from the standard library's own source files (read, never
imported).  Everything is static: ``import parent`` is modelled as running
the module-level imports of ``parent`` and of everything they import, and a
submodule ``parent.sub`` is an attribute of ``parent`` afterwards only if one
of those imports imported it, or ``parent/__init__`` binds ``sub``, or its
``__getattr__`` serves ``sub``.

Where the model cannot know (an extension module's own imports, a
``globals()`` update, a star import from a compiled module, a module that
replaces itself in ``sys.modules``) the answer is ``unknown`` and the rules
stay silent: a missed trap is better than a false alarm (pyflakes' promise).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from cuaudit.analysis.import_time import ImportTimeModel, ModuleRun, absolute_module
from cuaudit.facts.evidence import Evidence
from cuaudit.facts.import_time import ImportTimeFacts
from cuaudit.facts.python_source import ImportRecord, PythonSourceFacts, platform_allows
from cuaudit.inputs.evidence import StdlibFolder, stdlib_dir, stdlib_folder  # noqa: F401 - stdlib_dir re-exported
from cuaudit.model import ArtifactKind
from cuaudit.names import dotted_prefixes

_EXT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(\.[A-Za-z0-9_-]+)*\.(so|pyd)$")
_DATA_DIR = re.compile(r"^[^/]+\.data/(purelib|platlib)/")
_SKIP_DIR = re.compile(r"(^|/)[^/]+\.(dist-info|egg-info|data)(/|$)")
#: the files module_name_of may name a module
_MODULE_SUFFIXES = (".py", ".pyi", ".so", ".pyd")

#: submodule names that are never public API (test suites, entry points, build scripts)
PRIVATE_NAMES = frozenset({"tests", "test", "conftest", "__main__", "setup", "__pycache__"})


@dataclass
class ModuleEntry:
    """One importable module of the model."""

    name: str
    kind: str  # package | module | extension | namespace
    artifact: object | None = None  # the Artifact it comes from (None: standard library)
    member: str | None = None  # its file inside the artifact (None for namespace packages)
    stub_member: str | None = None  # the .pyi beside it
    origin: str = ""  # "artifact" | "stdlib"
    #: an extension's same-named ``.py`` beside it, which the extension shadows: its source
    #: (Cython's pure-Python mode, mypyc; fontTools' ``cu2qu.py`` beside ``cu2qu.*.so``)
    source_member: str | None = None
    _facts: PythonSourceFacts | None = None
    _stub: PythonSourceFacts | None = None
    _load: Callable[[], tuple[PythonSourceFacts | None, PythonSourceFacts | None]] | None = None

    def _ensure(self) -> None:
        if self._load is not None:
            self._facts, self._stub = self._load()
            self._load = None

    @property
    def facts(self) -> PythonSourceFacts | None:
        self._ensure()
        return self._facts

    @property
    def stub(self) -> PythonSourceFacts | None:
        self._ensure()
        return self._stub

    @property
    def is_package(self) -> bool:
        return self.kind in ("package", "namespace")

    @property
    def display(self) -> str:
        """How messages name the module's file."""
        if self.origin == "stdlib":
            return f"{stdlib_member(self)} (standard library)"
        return self.member or self.name


def module_name_of(path: str) -> tuple[str, str] | None:
    """(dotted name, kind) for a member path relative to an import root, or None.

    kind: package (``__init__.py``), module, extension, stub (``.pyi``), stub-package.
    """
    parts = path.split("/")
    fname = parts[-1]
    dirs = parts[:-1]
    if not all(d.isidentifier() for d in dirs):
        return None
    if fname in ("__init__.py",):
        return (".".join(dirs), "package") if dirs else None
    if fname == "__init__.pyi":
        return (".".join(dirs), "stub-package") if dirs else None
    if fname.endswith(".py") and fname[:-3].isidentifier():
        return ".".join(dirs + [fname[:-3]]), "module"
    if fname.endswith(".pyi") and fname[:-4].isidentifier():
        return ".".join(dirs + [fname[:-4]]), "stub"
    m = _EXT.match(fname)
    if m and "/" + fname not in ("/__init__.so",):
        name = m.group("name")
        if name == "__init__":
            return (".".join(dirs), "package") if dirs else None
        return ".".join(dirs + [name]), "extension"
    return None


def artifact_modules(artifact, members: Iterable) -> dict[str, ModuleEntry]:
    """The modules an artifact provides: name -> entry (facts loaded lazily by the caller)."""
    kind = artifact.ref.kind
    paths: dict[str, str] = {}  # relative-to-import-root path -> member path
    member_paths = [m.path for m in members]
    if kind in (ArtifactKind.TREE, ArtifactKind.SDIST):
        present = set(member_paths)
        for p in member_paths:
            if not p.endswith(_MODULE_SUFFIXES) or _SKIP_DIR.search(p):
                continue
            parts = p.split("/")
            # climb while the folder is a regular package
            i = len(parts) - 1
            while i > 0 and "/".join(parts[:i]) + "/__init__.py" in present:
                i -= 1
            rel = "/".join(parts[i:])
            paths.setdefault(rel, p)
    elif kind is ArtifactKind.FILE:
        for p in member_paths:
            paths.setdefault(p.rsplit("/", 1)[-1], p)
    else:
        # module_name_of names no other file: the rest of an installed distribution (its
        # __pycache__, data, metadata) is left before the patterns run
        for p in member_paths:
            if not p.endswith(_MODULE_SUFFIXES):
                continue
            rel = _DATA_DIR.sub("", p, count=1)
            if _SKIP_DIR.search(rel):
                continue
            paths.setdefault(rel, p)
    out: dict[str, ModuleEntry] = {}
    stubs: dict[str, str] = {}
    for rel, member in paths.items():
        got = module_name_of(rel)
        if got is None:
            continue
        name, mkind = got
        if mkind in ("stub", "stub-package"):
            stubs[name] = member
            continue
        prev = out.get(name)
        # CPython's path finder: a package folder first, then extension suffixes before
        # `.py` (`x.py` beside `x.cpython-*.so`: the extension is what runs)
        if prev is not None and (prev.kind == "package" or (prev.kind == "extension" and mkind == "module")):
            if prev.kind == "extension":
                prev.source_member = member
            continue
        out[name] = ModuleEntry(name, mkind, artifact, member, origin="artifact",
                                source_member=prev.member if prev is not None and prev.kind == "module" and mkind == "extension" else None)
    # namespace packages: folders holding modules without an __init__
    if kind is not ArtifactKind.FILE:
        for name in list(out):
            parts = name.split(".")
            for i in range(1, len(parts)):
                parent = ".".join(parts[:i])
                if parent not in out:
                    out[parent] = ModuleEntry(parent, "namespace", artifact, None, origin="artifact")
    for name, member in stubs.items():
        if name in out:
            out[name].stub_member = member
    return out


# -- the standard library ----------------------------------------------------------------


def stdlib_entry(stdlib: Evidence, name: str) -> ModuleEntry | None:
    """A standard-library module, found by its source file in the stdlib evidence (never imported)."""
    if name in sys.builtin_module_names:
        return ModuleEntry(name, "extension", None, None, origin="stdlib")
    rel = name.replace(".", "/")
    for path, kind in ((f"{rel}/__init__.py", "package"), (f"{rel}.py", "module")):
        if stdlib.exists(path):
            def load(path: str = path) -> tuple[PythonSourceFacts | None, None]:
                return stdlib.fact("python_source", path), None

            entry = ModuleEntry(name, kind, None, stdlib.fs_path(path), origin="stdlib")
            entry._load = load
            return entry
    if "." not in name and any(f.split(".")[0] == name for f in stdlib.listdir("lib-dynload")):
        return ModuleEntry(name, "extension", None, None, origin="stdlib")
    return None


def stdlib_member(entry: ModuleEntry) -> str:
    """The path of a standard-library module's source in its folder (see :func:`stdlib_entry`)."""
    rel = entry.name.replace(".", "/")
    return f"{rel}/__init__.py" if entry.kind == "package" else f"{rel}.py"


def _stdlib_evidence(stdlib: "Evidence | str | None") -> Evidence | None:
    """Evidence for a standard-library folder given by path (library callers and tests: read uncached)."""
    if stdlib is None or isinstance(stdlib, Evidence):
        return stdlib
    return Evidence(StdlibFolder(stdlib))


# -- verdicts -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reach:
    """Whether ``parent.sub`` works as an attribute after some imports.

    status: ``imported`` (something imported the submodule), ``bound``
    (the parent binds the name), ``getattr`` (its ``__getattr__`` serves it),
    ``trap`` (AttributeError; no ``__getattr__``), ``getattr-trap`` (its
    ``__getattr__`` raises AttributeError for it), ``unknown``; ``failed``: the
    model raised while judging it (the import rules report CU011 there).
    """

    status: str
    detail: str = ""
    target: str | None = None  # the module the attribute is, when known
    #: an ancestor name is re-bound to an object: the chain reaches that object, not the module
    shadow: bool = False

    @property
    def works(self) -> bool:
        return self.status in ("imported", "bound", "getattr")

    @property
    def is_trap(self) -> bool:
        return self.status in ("trap", "getattr-trap")


_UNREAD = object()


class ModuleUniverse:
    """Every module the audit can see, and the static import semantics over them."""

    def __init__(self, stdlib: "Evidence | str | None" = None) -> None:
        """``stdlib``: the standard library as evidence (or its folder), None to model none."""
        self.entries: dict[str, ModuleEntry] = {}
        self.children: dict[str, set[str]] = {}
        self.stdlib = _stdlib_evidence(stdlib)
        self.stdlib_root = self.stdlib.fs_path("") if self.stdlib is not None else None
        self._stdlib_top = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
        self._not_stdlib: set[str] = set()
        #: names exists() found no module for: asked again, they are still none (a module added
        #: later is in ``entries``, which exists() reads first)
        self._absent: set[str] = set()
        self._closure: dict[tuple[str, bool], frozenset[str]] = {}
        self._graphs: dict[bool, _Components] = {}
        self._direct: dict[str, tuple[frozenset[str], bool]] = {}
        self._strings: dict[str, tuple] = {}
        self._sources: dict[str, tuple] = {}  # extension module -> how to get its source's python_source facts
        self._targets: dict[tuple[str, str], str | None] = {}  # (parent, sub) -> binding_target
        self._named: dict[str, dict[str, str]] = {}  # module -> bare names its calls pass -> where
        self._named_by_parent: dict[tuple[str, frozenset[str]], dict[str, str]] = {}  # the same over a parent's folder
        self._maybe: dict[frozenset[str], tuple[dict[str, str], tuple[str, ...]]] = {}  # closure -> maybe_imported
        self._telling: dict[frozenset[str], tuple[ModuleRun, ...]] = {}  # closure -> _telling_runs
        self._tells: set[str] = set()  # modules whose runs _telling_runs keeps
        self._names_modules: set[str] = set()  # modules whose calls name modules (see _naming)
        self._names_none: set[str] = set()  # modules asked whose calls name none
        self._silent: set[str] = set()  # modules asked whose runs it does not (or without a program)
        # ("failed", closure) -> module -> why its import fails;
        # ("computed", closure) -> package -> a computed import into it
        self._run_reasons: dict[tuple[str, frozenset[str]], dict[str, str]] = {}
        #: the platform imports are evaluated for (the audited environment's, else this one's)
        self.sys_platform = sys.platform
        self.os_name = os.name  # extension module -> how to get its dotted strings
        self.python_version: tuple[int, ...] = tuple(sys.version_info[:3])
        self._programs: dict[str, tuple] = {}  # module -> how to get its import_time facts
        self._decoded: dict[str, ImportTimeFacts | None] = {}  # module -> its import_time facts, once read
        #: (id(artifact), member) -> the module whose program it holds (what a walk of the facts follows)
        self._program_at: dict[tuple[int, str], str] = {}
        #: ``has_fact(artifact, member, extractor)``: whether ``facts_for`` may give a fact,
        #: extracting and decoding nothing (None: not known)
        self.has_fact: Callable[[object, str, str], bool] | None = None
        #: ``prefetch(extractor, [(artifact, member)], ahead=False)``: extract these facts at once,
        #: before they are read one by one (None: each is read when needed)
        self.prefetch: Callable[..., None] | None = None
        #: ``walk([(artifact, member, extractor)], follow)``: extract those facts and the ones
        #: ``follow(artifact, member, extractor)`` names once each is in (``RuleContext.walk``)
        self.walk: Callable[[list[tuple[object, str, str]], Callable], None] | None = None
        #: every installed distribution is in the universe (an environment): a module nobody
        #: provides fails to import, and the model may say so
        self.complete = False
        self.model = ImportTimeModel(self, self.program)

    # -- building ------------------------------------------------------------------------
    def release(self) -> None:
        """Let go of everything, for good: the universe and its import-time model refer to each other
        (with the entries' loaders and the programs read), and what an audit holds is frozen out of
        the cyclic collector (heap.py), so nothing of it was freed before the process ended."""
        vars(self.model).clear()
        vars(self).clear()

    def add_artifact(self, artifact, facts_for: Callable[[object, str, str], object | None]) -> dict[str, ModuleEntry]:
        """Add an artifact's modules; ``facts_for(artifact, member, extractor)`` gives their facts."""
        mods = artifact_modules(artifact, artifact.members)
        for name, entry in mods.items():
            if entry.member or entry.stub_member:
                def load(a=artifact, e=entry) -> tuple:
                    f = facts_for(a, e.member, "python_source") if e.member and e.member.endswith(".py") else None
                    s = facts_for(a, e.stub_member, "python_source") if e.stub_member else None
                    return f, s

                entry._load = load
            if entry.kind == "extension" and entry.member:
                self._strings[name] = (artifact, entry.member, facts_for)
                if entry.source_member:
                    self._sources[name] = (artifact, entry.source_member, facts_for)
            if entry.kind in ("package", "module") and entry.member and entry.member.endswith(".py"):
                self._programs[name] = (artifact, entry.member, facts_for, entry)
                self._program_at[(id(artifact), entry.member)] = name
            if name.split(".")[0] in self._stdlib_top and self.stdlib_root:
                continue  # the standard library wins for its own names
            if name not in self.entries or (self.entries[name].kind == "namespace" and entry.kind != "namespace"):
                self.entries[name] = entry
            if "." in name:
                parent, _, child = name.rpartition(".")
                self.children.setdefault(parent, set()).add(child)
        return mods

    def program(self, name: str) -> ImportTimeFacts | None:
        """The import-time program of the module the universe resolves ``name`` to."""
        got = self._programs.get(name)
        if got is None or self.entries.get(name) is not got[3]:
            return None
        prog = self._decoded.get(name, _UNREAD)
        if prog is _UNREAD:
            prog = self._decoded[name] = got[2](got[0], got[1], "import_time")
        return prog

    def get(self, name: str) -> ModuleEntry | None:
        entry = self.entries.get(name)
        if entry is None and self.stdlib_root and name not in self._not_stdlib and name.split(".")[0] in self._stdlib_top:
            entry = stdlib_entry(self.stdlib, name)
            if entry is not None:
                self.entries[name] = entry
            else:
                self._not_stdlib.add(name)  # asked again for every import that names it (`os.foo`)
        return entry

    def is_stdlib(self, name: str) -> bool:
        entry = self.get(name)
        return entry is not None and entry.origin == "stdlib"

    def exists(self, name: str) -> bool:
        if name in self.entries:
            return True
        if name in self._absent:
            return False  # most names `from pkg import name` asks about are functions and classes
        if self.get(name) is not None:
            return True
        self._absent.add(name)
        return False

    # -- imports ----------------------------------------------------------------------------
    def resolve(self, imp: ImportRecord, importer: str, importer_is_package: bool) -> str | None:
        """The absolute module an import names (its ``from`` part), or None."""
        if imp.level == 0:
            return imp.module
        return absolute_module(imp.module, imp.level, importer, importer_is_package)

    def imported_by(self, imp: ImportRecord, importer: str, importer_is_package: bool) -> list[str]:
        """Modules an import statement imports (with their parents), as far as the model knows."""
        base = self.resolve(imp, importer, importer_is_package)
        if not base:
            return []
        out = list(dotted_prefixes(base))
        if imp.kind == "from" and imp.name and imp.name != "*":
            cand = f"{base}.{imp.name}"
            if self.exists(cand):
                out.append(cand)
        return out

    def dynamic_targets(self, facts: PythonSourceFacts, importer: str, is_package: bool) -> set[str]:
        """Modules named by literal ``importlib.import_module``/``__import__`` calls (with parents)."""
        out: set[str] = set()
        for dyn in facts.dynamic_imports:
            if dyn.startswith("."):
                pkg = importer if is_package else importer.rpartition(".")[0]
                level = len(dyn) - len(dyn.lstrip("."))
                base = pkg.split(".")[: len(pkg.split(".")) - (level - 1)]
                target = ".".join(base + [dyn.lstrip(".")]) if dyn.lstrip(".") else ".".join(base)
            else:
                target = dyn
            out.update(dotted_prefixes(".".join(p for p in target.split(".") if p)))
        return out

    def direct_imports(self, name: str) -> tuple[frozenset[str], bool]:
        """(modules imported by running ``name``'s module-level code, whether that is fully known)."""
        if name in self._direct:
            return self._direct[name]
        entry = self.get(name)
        out: set[str] = set()
        known = True
        if entry is None or entry.kind == "extension":
            known = entry is not None and entry.origin == "stdlib"  # C modules of the stdlib import nothing of ours
            if name in self._strings:
                # a compiled module imports by name: every dotted string naming a known module counts
                art, member, facts_for = self._strings[name]
                found = facts_for(art, member, "extension_strings")
                idents = set(getattr(found, "identifiers", ()))
                packages = {name.rpartition(".")[0]} if "." in name else set()
                evidence = getattr(found, "imports", None)
                for dotted in evidence if evidence is not None else getattr(found, "dotted", ()):
                    if dotted in self.entries and dotted != name:
                        out.update(dotted_prefixes(dotted))
                        packages.add(dotted)
                # `from pkg import sub` in Cython: "pkg" and "sub" are separate strings; in other
                # extension modules a bare identifier is an attribute or keyword name (matplotlib's
                # pybind11 ft2font holds "style", numba's C _dispatcher "cuda": neither imports them)
                cython = "cython_runtime" in idents or any(d.startswith("_cython_") for d in getattr(found, "dotted", ()))
                for pkg in packages if cython else ():
                    for child in self.children.get(pkg, ()):
                        if child in idents and f"{pkg}.{child}" != name:
                            out.add(f"{pkg}.{child}")
            source = self.source_facts(name)
            if source is not None:
                # compiled from the source beside it (fontTools' cu2qu): it runs that source's
                # imports, whose names a compressed Cython string table hides from the strings
                for imp in source.module_level_imports():
                    if not (imp.platform and not platform_allows(imp.platform, self.sys_platform, self.os_name)):
                        out.update(self.imported_by(imp, name, False))
                out.update(self.dynamic_targets(source, name, False))
        elif entry.kind == "namespace":
            pass
        elif self._has_source(entry) and (run := self.model.run(name)) is not None:
            # a program exists only for source that parsed: the python_source facts of the
            # thousands of modules a closure walks (27 MB on the accuracy-venv) stay undecoded
            out.update(run.sure)
        else:
            facts = entry.facts
            run = self.model.run(name) if facts is not None and facts.syntax_error is None else None
            if facts is None or facts.syntax_error is not None:
                known = False
            elif run is not None:
                out.update(run.sure)
            else:
                for imp in facts.module_level_imports():
                    # urllib3: `if sys.platform == "emscripten": from .contrib.emscripten import ...`
                    if imp.platform and not platform_allows(imp.platform, self.sys_platform, self.os_name):
                        continue
                    out.update(self.imported_by(imp, name, entry.is_package))
                out.update(self.dynamic_targets(facts, name, entry.is_package))
        result = (frozenset(out), known)
        self._direct[name] = result
        return result

    def source_facts(self, name: str) -> PythonSourceFacts | None:
        """The python_source facts of the ``.py`` beside an extension module that it was compiled
        from: its strings name that file (Cython keeps ``Lib/fontTools/cu2qu/cu2qu.py`` for
        tracebacks); an extension that does not may be something else, whose imports are unknown."""
        got = self._sources.get(name)
        strings = self._strings.get(name)
        if got is None or strings is None:
            return None
        found = strings[2](strings[0], strings[1], "extension_strings")
        if f"{name.rpartition('.')[2]}.py" not in getattr(found, "dotted", ()):
            return None
        source = got[2](got[0], got[1], "python_source")
        return source if source is not None and source.syntax_error is None else None

    def _has_source(self, entry: ModuleEntry) -> bool:
        """Whether an artifact module may have python_source facts, asked without extracting or
        decoding them (its program exists only where they do: a source that parsed)."""
        member = entry.member
        return (self.has_fact is not None and entry.artifact is not None and member is not None
                and member.endswith(".py") and self.has_fact(entry.artifact, member, "python_source"))

    def prefetch_facts(self, entries: Iterable[ModuleEntry], extractors: tuple[str, ...] = ("python_source",), *,
                       ahead: bool = False) -> None:
        """Have the facts of these artifact modules (``entry.facts``, ``entry.stub``) extracted in one
        batch, before they are read one module at a time; ``extractors`` for their ``.py`` files
        (``ahead``: when the workers are idle, see ``RuleContext.prefetch``)."""
        if self.prefetch is None:
            return
        entries = [e for e in entries if e.artifact is not None and e._load is not None]
        members = [(e.artifact, e.member) for e in entries if (e.member or "").endswith(".py")]
        stubs = [(e.artifact, e.stub_member) for e in entries if e.stub_member]
        self.prefetch(extractors, members, ahead=ahead)
        self.prefetch("python_source", stubs, ahead=ahead)

    def prefetch_closures(self, roots: Iterable[str], *, with_facts: bool = False) -> None:
        """Have the import-time programs of the modules importing ``roots`` reaches extracted ahead
        of the closures, which read them one module at a time (one by one, serially): a walk over
        their module-level imports that the workers run ahead of (each module's imports are sent
        to them as soon as its program is in, not one batch per level).

        A prediction only: the imports of every program met count, conditional or not, and
        what the closures read beyond (a function a module calls) is still read when needed.
        The python_source facts of the modules a star import names come along (the verdicts
        read what ``from m import *`` binds).  ``with_facts``: the roots' python_source facts
        (and their stubs') too (the verdicts about their submodules read them): the parse of
        a root serves its program and its facts alike.
        """
        if self.walk is None:
            return
        programs, entries = self._programs, self.entries
        seen: set[str] = set()  # modules whose programs the walk asked for
        starred: set[str] = set()  # modules whose python_source facts it asked for

        def sources(names: Iterable[str]) -> list[tuple[object, str, str]]:
            out = []
            for n in sorted(set(names) - starred):
                starred.add(n)
                e = entries.get(n)
                if e is not None and e.artifact is not None and e._load is not None:
                    if (e.member or "").endswith(".py"):
                        out.append((e.artifact, e.member, "python_source"))
                    if e.stub_member and with_facts:
                        out.append((e.artifact, e.stub_member, "python_source"))
            return out

        def named(names: Iterable[str]) -> list[tuple[object, str, str]]:
            out = []
            for n in sorted(set(names) - seen):
                got = programs.get(n)
                if got is not None:
                    seen.add(n)
                    out.append((got[0], got[1], "import_time"))
            return out

        #: (id(artifact), source member) -> the extension module compiled from it
        compiled = {(id(got[0]), got[1]): ext for ext, got in self._sources.items()}
        compiled_seen: set[str] = set()  # extension modules whose sources the walk asked for

        def compiled_sources(names: Iterable[str]) -> list[tuple[object, str, str]]:
            # an extension module imported: the source beside it, if it has one, names what it imports
            out = []
            for n in sorted((set(names) & self._sources.keys()) - compiled_seen):
                compiled_seen.add(n)
                art, member, _facts_for = self._sources[n]
                out.append((art, member, "python_source"))
            return out

        def follow(artifact: object, member: str, extractor: str) -> list[tuple[object, str, str]]:
            if extractor == "python_source" and (id(artifact), member) in compiled:
                # the source an extension module was compiled from: what it imports (direct_imports)
                try:
                    return named(self.direct_imports(compiled[(id(artifact), member)])[0])
                except Exception:  # noqa: BLE001 - a prediction only: the verdicts meet (and report) it
                    return []
            name = self._program_at.get((id(artifact), member)) if extractor == "import_time" else None
            if name is None or entries.get(name) is None:
                return []
            imported, stars = self._imports_named(name)
            return named(imported | self._read_beyond(name)) + sources(stars) + compiled_sources(imported)

        roots = sorted(set(roots))
        first = sources(roots) if with_facts else []
        self.walk(first + named(p for root in roots for p in dotted_prefixes(root)), follow)

    def _read_beyond(self, name: str) -> set[str]:
        """Modules whose programs CU101's verdicts may read beyond the closures, as ``name``'s own
        program tells: a prediction for the walk (:meth:`prefetch_closures`), where the GPU machine's
        forked child read 132 modules one by one (0.5-0.9 s of its 3.7-6 s).  The submodules a
        ``__getattr__`` imports by name, turning an ImportError into AttributeError
        (``_getattr_import_fails``), and the siblings a call names by a keyword string
        (``_named_in_a_call``): whether importing each fails is asked of its program."""
        prog = self.program(name)
        out: set[str] = set()
        if prog is None:
            return out
        g = prog.getattr
        if g is not None and g.import_error_raises and g.imports_prefix in (".", f"{name}."):
            out.update(f"{name}.{c}" for c in self.children.get(name, ()))
        calls = prog.keyword_calls()
        if calls:
            parents = {name, name.rpartition(".")[0]} - {""}
            for e in calls:
                for _, a in e.kwargs:
                    if a.isidentifier():
                        out.update(f"{p}.{a}" for p in parents if self.exists(f"{p}.{a}"))
        return out

    def prefetch_stdlib(self, roots: Iterable[str]) -> None:
        """Have the python_source facts of the standard-library modules that the closures of the
        standard-library ``roots`` read (``_closure_of(root, True)``) extracted a level at a time,
        each level at once in the engine's workers, instead of one by one in the parent as the
        closures meet them (``Evidence.prefetch``).  A prediction: only standard-library modules
        are followed, and each level's imports are read as the closures read them
        (``direct_imports``), so the closures then find the facts and answer as before."""
        stdlib = self.stdlib
        if stdlib is None or not stdlib.prefetches:
            return
        level = {p for r in roots if self.is_stdlib(r) for p in dotted_prefixes(r)}
        seen: set[str] = set()
        while level:
            seen |= level
            entries = [e for n in sorted(level) if (e := self.get(n)) is not None
                       and e.origin == "stdlib" and e._load is not None]
            stdlib.prefetch("python_source", [stdlib_member(e) for e in entries])
            level = {m for e in entries for m in self.direct_imports(e.name)[0]} - seen

    def _imports_named(self, name: str) -> tuple[set[str], set[str]]:
        """(the modules ``name``'s program imports, with their parents, conditional or not; the
        modules it star-imports): what a walk of the import closure follows from it."""
        found: set[str] = set()
        stars: set[str] = set()
        entry = self.entries.get(name)
        prog = self.program(name) if entry is not None else None
        if prog is None:
            return found, stars
        is_pkg = entry.kind == "package"  # type: ignore[union-attr]
        bases: dict[tuple[str, int], str | None] = {}  # most of a module's imports share a few `from` parts
        for effect in prog.effects:
            kind = effect.kind
            if kind == "import":
                key = (effect.module, effect.level)
                if key in bases:
                    base = bases[key]
                else:
                    base = bases[key] = absolute_module(effect.module, effect.level, name, is_pkg)
                    if base:
                        found.update(dotted_prefixes(base))
                if not base:
                    continue
                if effect.name == "*":
                    stars.add(base)
                elif effect.name:
                    found.add(f"{base}.{effect.name}")
            elif kind == "dynamic-import" and effect.module and not effect.module.startswith("."):
                found.update(dotted_prefixes(effect.module))
        return found, stars

    def closure(self, roots: Iterable[str]) -> frozenset[str]:
        """Every module imported, as far as the model knows, by importing ``roots``.

        Reachability from several roots is the union of each root's: each root's set is
        memoised (per the stdlib flag of the request), so the thousands of files of an
        environment share them instead of walking the graph once per file.
        """
        roots = tuple(sorted(set(roots)))
        stdlib_request = all(r.split(".")[0] in self._stdlib_top for r in roots)
        if len(roots) == 1:
            return self._closure_of(roots[0], stdlib_request)  # the memoised set itself: its hash is kept
        return union_of_closed([(dotted_prefixes(r), self._closure_of(r, stdlib_request)) for r in roots])

    def closure_of_each(self, roots: Iterable[str]) -> frozenset[str]:
        """The union of ``closure([root])`` for each root (each by its own stdlib flag, as a file's
        imports are followed one by one); the memoised closure itself where one holds the others
        (a torch file's imports mostly lie inside ``import torch``'s)."""
        by_flag: dict[bool, list[str]] = {}
        for r in set(roots):
            by_flag.setdefault(r.split(".")[0] in self._stdlib_top, []).append(r)
        parts = [union_of_closed([(dotted_prefixes(r), self._closure_of(r, flag)) for r in rs]) for flag, rs in by_flag.items()]
        if len(parts) == 1:
            return parts[0]
        return frozenset().union(*parts)

    def _closure_of(self, root: str, stdlib_request: bool) -> frozenset[str]:
        key = (root, stdlib_request)
        cached = self._closure.get(key)
        if cached is not None:
            return cached
        graph = self._graphs.get(stdlib_request)
        if graph is None:
            graph = self._graphs[stdlib_request] = _Components(lambda m: self._imports_followed(m, stdlib_request))
        result = graph.reach(list(dotted_prefixes(root)))
        self._closure[key] = result
        return result

    def _imports_followed(self, m: str, stdlib_request: bool) -> frozenset[str]:
        entry = self.entries.get(m)
        if entry is None and not stdlib_request:
            return frozenset()  # the stdlib never imports third-party submodules: do not read it for them
        if entry is not None and entry.origin == "stdlib" and not stdlib_request:
            return frozenset()
        return self.direct_imports(m)[0]

    def maybe_imported(self, imported: frozenset[str]) -> tuple[dict[str, str], tuple[str, ...]]:
        """Modules that importing ``imported`` (a closure) may import "either way", and why;
        and the computed imports that run meanwhile (``module:line ...``), sorted."""
        got = self._maybe.get(imported)
        if got is None:
            # every submodule of a parent asks about the same closure
            got = self._maybe[imported] = self._find_maybe_imported(imported)
        return got

    def _telling_runs(self, imported: frozenset[str]) -> tuple[ModuleRun, ...]:
        """The runs of a closure's modules, in name order, that import anything only maybe, fail an
        import, compute a module name or import a name the model cannot compute: what the closure's
        verdicts read (most runs do none of it), gathered once per closure."""
        got = self._telling.get(imported)
        if got is None:
            # each module is asked once (the closures of an environment share most of their
            # modules): the rest of a closure is sorted out by set operations
            runs, programs, tells, silent = self.model.run, self._programs, self._tells, self._silent
            for m in imported - tells - silent:
                run = runs(m) if m in programs else None
                if run is not None and (run.maybe or run.failed or run.computed or run.opaque):
                    tells.add(m)
                else:
                    silent.add(m)
            got = self._telling[imported] = tuple(runs(m) for m in sorted(imported & tells))
        return got

    def _naming(self, imported: frozenset[str]) -> set[str]:
        """The modules of a closure whose top level names modules of its package in calls
        (``ImportTimeModel.named_modules``), each module asked once."""
        naming, quiet, programs = self._names_modules, self._names_none, self._programs
        for m in imported - naming - quiet:
            (naming if m in programs and self.model.named_modules(m) else quiet).add(m)
        return imported & naming

    def _find_maybe_imported(self, imported: frozenset[str]) -> tuple[dict[str, str], tuple[str, ...]]:
        maybe: dict[str, str] = {}
        opaques: set[str] = set()
        for run in self._telling_runs(imported):
            if run.opaque:
                opaques.add(run.opaque)
            for mod, why in run.maybe.items():
                if mod not in imported:
                    maybe.setdefault(mod, why)
        opaque = min(opaques) if opaques else ""
        if opaques:
            # a registry filled with literal module names (sqlalchemy's
            # `@preload_module("sqlalchemy.orm.strategies")`): those may be imported
            # only registrations made by modules that run (sqlalchemy.orm's own are not, when
            # `import sqlalchemy` imports no sqlalchemy.orm module)
            # (in name order: the first module naming one is the one the reason gives)
            for m in sorted(self._naming(imported)):
                for mod in self.model.named_modules(m):
                    if mod not in imported:
                        maybe.setdefault(mod, f"{opaque}, and {m} names {mod} in a call at import time")
        added: dict[int, frozenset[str]] = {}  # the closures added so far, by identity
        for mod, why in list(maybe.items()):
            closure = self._closure_of(mod, False)
            if id(closure) in added:
                # the memoised closure of a component many modules share (torch's): each of its
                # modules is in already, with the reason of the first module that reached it
                # (the GPU machine's child spent a tenth of its time on these differences again)
                continue
            added[id(closure)] = closure
            # (what is not in yet, as a set difference: most of that closure is)
            for more in closure - imported:
                maybe.setdefault(more, why)
        return maybe, tuple(sorted(opaques))

    def shadowed(self, parent: str, sub: str | None = None, depth: int = 0) -> Reach | None:
        """``a.b`` re-bound by ``a`` to an object after ``a`` imported ``a.b`` (sympy's ``series``):
        user code that walks ``a.b`` gets the object, not the module.  Re-bound to another module
        (nltk's ``from nltk.translate import *`` binds ``metrics`` to ``nltk.translate.metrics``),
        ``a.b.<sub>`` is looked up in that module (only with ``sub``, for the last name of ``parent``)."""
        parts = parent.split(".")
        for i in range(1, len(parts)):
            owner, name = ".".join(parts[:i]), parts[i]
            if self.program(owner) is None:
                continue
            what, effect, truth = self.model.final_binding(owner, name)
            other = what[len("module:"):] if what.startswith("module:") else ""
            if effect is None or not (what == "object" or (other and other != f"{owner}.{name}" and not other.startswith(f"{owner}.{name}."))):
                continue
            if other and (sub is None or i != len(parts) - 1 or depth > 3 or not self.exists(other)):
                continue
            child = f"{owner}.{name}"
            entry = self.get(owner)
            is_pkg = bool(entry and entry.is_package)
            def names_child(e) -> bool:
                base = absolute_module(e.module, e.level, owner, is_pkg) or ""
                return base == child or base.startswith(child + ".") or (bool(e.name) and f"{base}.{e.name}" == child)

            if other:
                # the first load of a submodule sets its parent's attribute: the re-binding sticks
                # only when `child` was loaded before it (nltk.metrics, yes; networkx's
                # algorithms.connectivity, first loaded after the star import, no)
                before = [m for e in self.program(owner).effects if e.kind == "import" and e.line < effect.line
                          for m in self.model._import_targets(e, owner, is_pkg)]
                if child not in self.closure(before):
                    continue
            else:
                from_child = effect.kind == "import" and names_child(effect)
                earlier = any(e.kind == "import" and e.line < effect.line and names_child(e) for e in self.program(owner).effects)
                if not (from_child or earlier):
                    continue
            where = f"{entry.display}:{effect.line}" if entry else owner
            if truth.value is None:
                return Reach("unknown", f"{where} may re-bind {name} to {other or 'an object'} (either way: {truth.reason})")
            if other:
                inner = self.reach(other, sub, lambda: self.closure([parts[0], other]), depth + 1)
                if inner.is_trap:
                    return Reach("trap", f"{where} re-binds {name} to the module {other} after importing {child}: "
                                 f"`{child}` is {other}, which has no {sub!r} ({inner.detail})", shadow=True)
                return inner if inner.status == "unknown" else Reach(inner.status, inner.detail, inner.target)
            return Reach("trap", f"{where} re-binds {name} to an object after importing {child}: `{child}` is that object, not the module", shadow=True)
        return None

    def getattr_verdict(self, parent: str, sub: str, model) -> Reach | None:
        """A ``__getattr__`` whose tables and fallback are all known: serves ``sub`` or raises."""
        if model is None:
            return None
        names = set(model.literals)
        for t in model.tables:
            keys = self._table(parent, t)
            if keys is None:
                return None
            names |= set(keys)
        entry = self.get(parent)
        where = f"{entry.display}:{model.line}" if entry else parent
        if sub in names:
            return Reach("getattr", f"{where} __getattr__ serves {sub!r} from its table", f"{parent}.{sub}")
        if model.fallback == "raise":
            return Reach("getattr-trap", f"{where} __getattr__ raises AttributeError for {sub!r} (not in {', '.join(model.tables) or 'its names'})")
        if model.fallback == "call":
            target = self._factory_raises(parent, model.fallback_callee, sub)
            if target:
                return Reach("getattr-trap", f"{where} __getattr__ falls back to {model.fallback_callee}(), which raises AttributeError for {sub!r} ({target})")
        return None

    def _getattr_import_fails(self, parent: str, sub: str, prog: ImportTimeFacts | None) -> str:
        """Why the import a ``__getattr__`` makes for ``sub`` fails, when it turns that ImportError
        into AttributeError (imageio's plugins whose libraries are not installed); else ""."""
        model = prog.getattr if prog is not None else None
        if model is None or not model.import_error_raises or not model.imports_prefix:
            return ""
        prefix = model.imports_prefix
        target = f"{parent}.{sub}" if prefix == "." else f"{prefix}{sub}"
        return self.model.failure(target) if target == f"{parent}.{sub}" else ""

    def _table(self, module: str, name: str) -> tuple[str, ...] | None:
        prog = self.program(module)
        if prog is None or "." in name:
            return None
        keys = prog.table(name)
        if keys is not None:
            return keys
        imported = self.model._imported_object(module, name)
        if imported and imported[1]:
            other = self.program(imported[0])
            return other.table(imported[1]) if other is not None else None
        return None

    def _factory_raises(self, module: str, callee: str, sub: str) -> str:
        """Where ``callee`` (or the function a factory returned into it) ends in raise AttributeError."""
        prog = self.program(module)
        if prog is None or "." in callee:
            return ""
        body = prog.function(callee)
        where = module
        if body is None:
            factory = self.model._bound_value(module, callee)
            if not factory or "." in factory:
                return ""
            imported = self.model._imported_object(module, factory)
            if prog.function(factory) is not None:
                where, fname = module, factory
            elif imported and imported[1]:
                where, fname = imported
            else:
                return ""
            other = self.program(where)
            body = other.function(fname) if other is not None else None
            if body is None or not body.returns_function:
                return ""
            # a table of the factory's module naming `parent:sub` would be served (pydantic's MOVED_IN_V2)
            if any(f"{module}:{sub}" in keys or f"{module}.{sub}" in keys for _, keys in other.tables):
                return ""
        return f"{where}.{body.name}" if body.raises_attribute_error else ""

    # -- names ---------------------------------------------------------------------------------
    def exported(self, name: str, depth: int = 0) -> frozenset[str] | None:
        """Names ``from name import *`` binds, or None when unknown."""
        entry = self.get(name)
        source = self.source_facts(name) if entry is not None and entry.kind == "extension" else None
        if source is not None:
            # compiled from the source beside it: a literal __all__ there is what the star takes
            return frozenset(source.all_names) if source.all_names is not None else None
        if entry is None or entry.kind in ("extension", "namespace") or depth > 8:
            return None
        f = entry.facts
        if f is None or f.syntax_error is not None:
            return None
        if f.all_names is not None:
            return frozenset(f.all_names)
        names = {n for n in f.bound_names() if not n.startswith("_")}
        for imp in f.star_imports:
            src = self.resolve(imp, name, entry.is_package)
            sub = self.exported(src, depth + 1) if src else None
            if sub is None:
                return None
            names |= sub
        return frozenset(names)

    def binding_target(self, parent: str, sub: str) -> str | None:
        """The module ``parent.sub`` is when ``parent`` binds ``sub`` by an import, else None."""
        key = (parent, sub)
        got = self._targets.get(key, _UNREAD)
        if got is _UNREAD:
            # asked for every chain through a bound name (3.7 k scans of a module's imports for torch)
            got = self._targets[key] = self._binding_target(parent, sub)
        return got  # type: ignore[return-value]

    def _binding_target(self, parent: str, sub: str) -> str | None:
        entry = self.get(parent)
        f = entry.facts if entry else None
        if f is None:
            return None
        for imp in f.module_level_imports():
            if imp.bound_name != sub:
                continue
            base = self.resolve(imp, parent, entry.is_package)
            if not base:
                continue
            if imp.kind == "import":
                return base if imp.asname else base.split(".")[0]
            cand = f"{base}.{imp.name}"
            if self.exists(cand):
                return cand
        return None

    def _delegate_module(self, parent: str, delegate: str) -> str | None:
        """The module a ``__getattr__`` forwards to: a local name bound by an import, then submodules."""
        head, *rest = delegate.split(".")
        target = self.binding_target(parent, head)
        for part in rest:
            if target is None or not self.exists(f"{target}.{part}"):
                return None
            target = f"{target}.{part}"
        return target

    def lazy_names(self, parent: str) -> tuple[set[str], GetattrSummary | None]:
        """Names a package's ``__getattr__`` serves, resolving ``attach_stub`` through its ``.pyi``."""
        entry = self.get(parent)
        f = entry.facts if entry else None
        if f is None or f.getattr is None:
            return set(), None
        g = f.getattr
        handled = set(g.handled)
        stub_subs: set[str] = set()
        stub_attrs: set[str] = set()
        if f.lazy is not None and f.lazy.kind == "attach_stub":
            stub = entry.stub
            if stub is not None:
                for imp in stub.imports:
                    if imp.kind == "from" and imp.level == 1 and not imp.module and imp.name:
                        stub_subs.add(imp.name)
                    elif imp.kind == "from" and imp.level == 1 and imp.name:
                        stub_attrs.add(imp.asname or imp.name)
            handled |= stub_subs | stub_attrs
        return handled, GetattrSummary(g.line, g.generic, g.fallback, tuple(g.raising), g.source, tuple(sorted(stub_subs)))

    def reach(self, parent: str, sub: str, imported: frozenset[str] | Callable[[], frozenset[str]], depth: int = 0) -> Reach:
        """Is ``parent.sub`` an attribute once the modules in ``imported`` (a closure) are imported?

        ``imported`` may be a function computing the closure: it is only called when the
        parent does not bind the name itself (``os.path`` needs no closure).
        """
        failed = self.model.failure(parent)
        if failed:
            # `import parent` itself raises ImportError here (urllib3.contrib.emscripten needs `js`)
            return Reach("unknown", f"unknown: importing {parent} fails ({failed})")
        renamed = self.renamed(parent)
        if renamed:
            return Reach("unknown", f"unknown: {renamed}")
        r = self.shadowed(parent, sub, depth) or self._reach(parent, sub, imported, depth)
        if r.is_trap and not r.shadow:
            named = self._named_in_a_call(parent, sub, imported() if callable(imported) else imported)
            if named and not self.model.failure(f"{parent}.{sub}"):
                return Reach("unknown", f"unknown: {named}, which may import {parent}.{sub} by that name")
        return r

    def renamed(self, module: str) -> str:
        """Why ``module`` or a package above it is not what its name says: its top level updates its
        globals from another module's ``__dict__``, taking that module's ``__name__``, ``__path__``
        and names (cuda.core's ``globals().update(cu13.__dict__)``, after which its own
        ``from cuda.core import utils`` imports ``cuda.core.cu13.utils``); "" when none does."""
        parts = module.split(".")
        for i in range(1, len(parts) + 1):
            owner = ".".join(parts[:i])
            run = self.model.run(owner) if owner in self._programs else None
            if run is not None and owner in run.renamed:
                return (f"{run.renamed[owner]}, which replaces its __name__, __path__ and names with another "
                        f"module's: what importing {module} binds is not modelled")
        return ""

    def _reach(self, parent: str, sub: str, imported: frozenset[str] | Callable[[], frozenset[str]], depth: int = 0) -> Reach:
        full = f"{parent}.{sub}"
        entry = self.get(parent)
        facts = entry.facts if entry is not None and entry.kind in ("package", "module") else None
        deleted = [line for name, line in (facts.deleted if facts else ()) if name == sub]
        prog = self.program(parent) if facts is not None and facts.syntax_error is None else None
        either = ""
        if prog is not None:
            # the import-time model: the last binding that runs wins; one that may not run is "either way"
            what, effect, truth = self.model.final_binding(parent, sub)
            if what != "none" and truth.value is True:
                assumed = f" (assuming {truth.assumed})" if truth.assumed else ""
                return Reach("bound", f"{entry.display}:{effect.line} binds {sub}{assumed}", self.binding_target(parent, sub))
            if what != "none":
                either = f"{entry.display}:{effect.line} binds {sub} only in one case (either way: {truth.reason})"
        elif facts is not None and facts.syntax_error is None and not deleted and sub in facts.bound_names():
            b = next(b for b in facts.bindings if b.name == sub)
            return Reach("bound", f"{entry.display}:{b.line} binds {sub}", self.binding_target(parent, sub))
        if callable(imported):
            imported = imported()
        if full in imported and not deleted:
            return Reach("imported", f"{full} is imported when {parent} is", full)
        if prog is not None:
            maybe, opaque = self.maybe_imported(imported)
            run = self.model.run(parent)
            if run is not None and run.swapped:
                return Reach("unknown", f"unknown: {run.swapped} while {parent} is imported")
            if either:
                return Reach("unknown", either)
            if full in maybe:
                return Reach("unknown", f"{full} is imported only in one case (either way: {maybe[full]})")
            # a computed import in a module of this very package may import any of its modules
            for why in opaque:
                if why.split(":")[0].rpartition(".")[0] == parent:
                    return Reach("unknown", f"unknown: {why} while {parent} is imported")
        if entry is None:
            return Reach("unknown", f"{parent} is not known")
        where = entry.display
        if entry.kind == "extension":
            return Reach("unknown", f"{parent} is an extension module")
        if entry.kind == "namespace":
            return Reach("trap", f"{parent} is a namespace package: it binds none of its submodules")
        f = entry.facts
        if f is None or f.syntax_error is not None:
            return Reach("unknown", f"{where} could not be read")
        if deleted:
            handled, g = self.lazy_names(parent)
            if g is not None and sub in handled:
                return Reach("getattr", f"{where}:{g.line} __getattr__ serves {sub!r}", full)
            return Reach("trap", f"{where}:{deleted[-1]} deletes {sub} (`del {sub}`) after importing it")
        if prog is None and sub in f.bound_names():
            b = next(b for b in f.bindings if b.name == sub)
            return Reach("bound", f"{where}:{b.line} binds {sub}", self.binding_target(parent, sub))
        swap = prog.swap if prog is not None else None
        if swap is not None and swap.copies_dict and swap.cls and prog.function(f"{swap.cls}.__init__") is None:
            # Pygments' lexers: the replacement is an instance of the module's own class holding a
            # copy of the module's names; what it lacks, its class's __getattr__ answers
            if prog.swap_getattr is None:
                return Reach("trap", f"{where}:{swap.line} replaces the module with a {swap.cls} copying its names; {sub} is not one of them")
            got = self.getattr_verdict(parent, sub, prog.swap_getattr)
            return got or Reach("unknown", f"{where}:{prog.swap_getattr.line} {swap.cls}.__getattr__ may serve {sub!r}")
        dynamic = f.dynamic
        run = self.model.run(parent) if prog is not None else None
        if run is not None and not run.opaque:
            # the import-time model computed the names of these imports (else `opaque` says so)
            dynamic = tuple(d for d in dynamic if not d[1].endswith("of a computed name"))
        if dynamic:
            line, what = dynamic[0]
            return Reach("unknown", f"{where}:{line} binds names dynamically ({what})")
        for imp in f.star_imports:
            src = self.resolve(imp, parent, entry.is_package)
            names = self.exported(src) if src else None
            if names is None:
                return Reach("unknown", f"{where}:{imp.line} star-imports from {src or '?'}, whose names are not known")
            if sub in names:
                return Reach("bound", f"{where}:{imp.line} star-imports {sub} from {src}")
        handled, g = self.lazy_names(parent)
        if g is not None and prog is not None and f.lazy is None and sub not in handled and not (prog.getattr and prog.getattr.delegates):
            got = self.getattr_verdict(parent, sub, prog.getattr)
            if got is not None:
                return got
        if g is not None:
            if f.getattr is not None and f.getattr.delegate and sub not in handled and sub not in g.raising:
                target = self._delegate_module(parent, f.getattr.delegate)
                if target and target != parent and depth < 4:
                    inner = self.reach(target, sub, lambda: imported | self.closure([target]), depth + 1)
                    if inner.works:
                        return Reach("getattr", f"{where}:{g.line} __getattr__ forwards to {target}, which has {sub!r}", full)
                    if inner.is_trap:
                        return Reach("getattr-trap", f"{where}:{g.line} __getattr__ forwards to {target}, which has no {sub!r} ({inner.detail})")
                return Reach("unknown", f"{where}:{g.line} __getattr__ forwards to {f.getattr.delegate}")
            failed = self._getattr_import_fails(parent, sub, prog)
            if failed:
                return Reach("getattr-trap", f"{where}:{g.line} __getattr__ imports {full}, whose import fails ({failed}), "
                             "and turns the ImportError into AttributeError")
            if sub in handled or g.generic:
                return Reach("getattr", f"{where}:{g.line} __getattr__ serves {sub!r}", full)
            if g.fallback == "AttributeError" or sub in g.raising:
                return Reach("getattr-trap", f"{where}:{g.line} __getattr__ raises AttributeError for {sub!r}")
            return Reach("unknown", f"{where}:{g.line} __getattr__ may serve {sub!r}")
        return Reach("trap", f"{where} neither binds nor imports {sub}{self._failed_import(full, imported)}"
                     f"{self._computed_sibling(parent, imported)}")

    def _named_in_a_call(self, parent: str, sub: str, imported: frozenset[str]) -> str:
        """Where a module of ``parent``'s own folder that ``import parent`` loads passes ``sub``, the
        bare module name, as a keyword argument of a call (astropy's ``parsing.lex(lextab="generic_lextab")``, which ply
        imports by a name it builds): the model cannot see whether that import runs."""
        key = (parent, imported)
        found = self._named_by_parent.get(key)
        if found is None:
            found = self._named_by_parent[key] = self._names_passed(parent, imported)
        return found.get(sub, "")

    def _names_passed(self, parent: str, imported: frozenset[str]) -> dict[str, str]:
        """Bare names -> the first call passing each, over ``parent`` and its children that run."""
        found: dict[str, str] = {}
        for m in [parent] + [f"{parent}.{c}" for c in sorted(self.children.get(parent, ()))]:
            if m not in imported:
                continue
            names = self._named.get(m)
            if names is None:
                names = self._named[m] = {}
                prog = self.program(m)
                for e in prog.keyword_calls() if prog is not None else ():
                    # keyword arguments only: a positional name is more often a library's
                    # (cupy's `_preload_library('cutensor')`) than a module's
                    for _, a in e.kwargs:
                        if a.isidentifier():
                            names.setdefault(a, f"{self.get(m).display}:{e.line} passes {a!r} to {e.callee}()")
            for a, where in names.items():
                found.setdefault(a, where)
        return found

    def _computed_sibling(self, parent: str, imported: frozenset[str]) -> str:
        """``; <module:line> imports <parent.other> (<how the name was computed>)``: the claim rests on
        a computed module name evaluated at its defaults (astropy's constants version)."""
        computed = self._from_runs("computed", imported, lambda target: target.rpartition(".")[0])
        return f"; {computed[parent]}" if parent in computed else ""

    def _failed_import(self, full: str, imported: frozenset[str]) -> str:
        """``; <module:line> tries to import it, which fails: <why>`` when a module that runs does."""
        failed = self._from_runs("failed", imported, lambda mod: mod)
        return f"; {failed[full]}" if full in failed else ""

    def _from_runs(self, what: str, imported: frozenset[str], key: Callable[[str], str]) -> dict[str, str]:
        """The first reason per ``key(name)`` in ``run.<what>`` (name -> why) of the closure's modules
        that run, in name order; once per (what, closure)."""
        found = self._run_reasons.get((what, imported))
        if found is None:
            found = self._run_reasons[(what, imported)] = {}
            for run in self._telling_runs(imported):
                for name, why in getattr(run, what).items():
                    found.setdefault(key(name), why)
        return found


@dataclass(frozen=True)
class GetattrSummary:
    line: int
    generic: bool
    fallback: str
    raising: tuple[str, ...]
    source: str
    stub_submodules: tuple[str, ...] = ()


def is_public_path(name: str) -> bool:
    """No private component (leading underscore) and no test-suite folder anywhere in the name."""
    return all(p and not p.startswith("_") and p not in PRIVATE_NAMES for p in name.split("."))


def public_submodules(universe: ModuleUniverse, modules: dict[str, ModuleEntry]) -> Iterator[tuple[str, str]]:
    """(parent, sub) pairs of an artifact: regular packages and their public child modules.

    Namespace packages are left out as parents (they cannot bind their
    portions), and so are namespace folders inside regular packages (data
    folders that happen to hold ``.py`` files, more often than API).
    """
    for parent in sorted(modules):
        entry = modules[parent]
        if entry.kind != "package" or not is_public_path(parent):
            continue
        if universe.entries.get(parent) is not entry:
            continue  # shadowed by another artifact or the standard library
        for child in sorted(universe.children.get(parent, ())):
            full = f"{parent}.{child}"
            ce = modules.get(full)
            if ce is None or ce.kind == "namespace" or not is_public_path(full):
                continue
            yield parent, child


def build_universe(artifacts: list, facts_for: Callable[[object, str, str], object | None], environment=None, *, stdlib: "Evidence | bool | None" = True,
                   has_fact: Callable[[object, str, str], bool] | None = None,
                   prefetch: Callable[..., None] | None = None,
                   walk: Callable[[list[tuple[object, str, str]], Callable], None] | None = None,
                   ) -> tuple[ModuleUniverse, dict[int, dict[str, ModuleEntry]]]:
    """The universe of a set of artifacts: given ones first, installed ones next, then the stdlib.

    ``stdlib``: the standard library evidence (``ctx.evidence("stdlib")``); True
    reads the environment's (else this interpreter's) uncached, False or None none.
    ``has_fact``: whether ``facts_for`` may have a fact, extracting and decoding nothing
    (``RuleContext.has_fact``); ``prefetch``: extract facts in a batch (``RuleContext.prefetch``);
    ``walk``: extract facts and the ones they lead to (``RuleContext.walk``).
    """
    if stdlib is True:
        folder = stdlib_folder(environment)
        stdlib = Evidence(folder) if folder is not None else None
    uni = ModuleUniverse(stdlib or None)
    uni.has_fact = has_fact
    uni.prefetch = prefetch
    uni.walk = walk
    if environment is not None and environment.platform:
        # sysconfig platform -> sys.platform, for `if sys.platform == ...` around imports
        plat = environment.platform
        uni.sys_platform = "win32" if plat.startswith("win") else "darwin" if plat.startswith("macosx") else "linux" if plat.startswith("linux") else uni.sys_platform
        uni.os_name = "nt" if uni.sys_platform == "win32" else "posix"
    uni.complete = environment is not None and environment.complete
    if environment is not None and environment.version:
        uni.python_version = tuple(int(p) for p in re.findall(r"\d+", environment.version)[:3])
    per: dict[int, dict[str, ModuleEntry]] = {}
    ordered = sorted(range(len(artifacts)), key=lambda i: artifacts[i].ref.kind is ArtifactKind.INSTALLED)
    for i in ordered:
        per[i] = uni.add_artifact(artifacts[i], facts_for)
    return uni, per


def union_of_closed(parts: list[tuple[Iterable[str], frozenset[str]]]) -> frozenset[str]:
    """The union of closures of one import graph, each given with the roots it reaches from.

    A closure is closed under the graph's edges, so one whose roots all lie in another set
    of the union adds nothing to it; when a single closure holds the others it is returned
    itself, not copied (its hash is kept, and memos keyed by closures match it at once).
    """
    if not parts:
        return frozenset()
    ordered = sorted(parts, key=lambda p: -len(p[1]))
    first = ordered[0][1]
    out: set[str] | None = None
    for roots, found in ordered[1:]:
        have = first if out is None else out
        if all(r in have for r in roots):
            continue
        if out is None:
            out = set(first)
        out |= found
    return first if out is None else frozenset(out)


class _Components:
    """The import graph's strongly connected components, found as far as closures ask (Tarjan).

    An environment's closures walked the same cycles again for each of thousands of roots
    (14,283 closures, 6.3 M steps on the GPU machine's environment); a closure is now a walk
    over components, each a cycle of modules that import one another, added at once, and what
    a component reaches is kept: a later walk that meets it adds that set whole (a torch
    check's 1,595 roots walked torch's components again each).
    """

    def __init__(self, successors: Callable[[str], frozenset[str]]) -> None:
        self.successors = successors
        self.component: dict[str, int] = {}
        self.members: list[list[str]] = []
        self.edges: list[set[int]] = []
        self._reached: dict[int, frozenset[str]] = {}  # component -> every module it reaches

    def reach(self, roots: list[str]) -> frozenset[str]:
        for r in roots:
            if r not in self.component:
                self._explore(r)
        return union_of_closed([((self.members[c][0],), self._reach_of(c)) for c in {self.component[r] for r in roots}])

    def _reach_of(self, comp: int) -> frozenset[str]:
        """Every module reachable from a component, memoised per component: the closures of an
        audit's roots mostly run into the same few large cycles (torch's), which are then added
        whole instead of walked again one component at a time."""
        got = self._reached.get(comp)
        if got is not None:
            return got
        members, edges, reached = self.members, self.edges, self._reached
        out: set[str] = set(members[comp])
        stack = list(edges[comp])
        while stack:
            c = stack.pop()
            # a component already in holds all it reaches, or has it on the stack
            if members[c][0] in out:
                continue
            done = reached.get(c)
            if done is not None:
                out |= done
                continue
            out.update(members[c])
            stack.extend(edges[c])
        got = reached[comp] = frozenset(out)
        return got

    def _explore(self, start: str) -> None:
        index: dict[str, int] = {start: 0}
        low: dict[str, int] = {start: 0}
        succs: dict[str, frozenset[str]] = {start: self.successors(start)}
        stack, on_stack = [start], {start}
        work = [(start, iter(succs[start]))]
        while work:
            node, it = work[-1]
            for nxt in it:
                if nxt in self.component:
                    continue  # finished earlier: its component is complete
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    succs[nxt] = self.successors(nxt)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(succs[nxt])))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    comp = len(self.members)
                    group: list[str] = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        self.component[w] = comp
                        group.append(w)
                        if w == node:
                            break
                    self.members.append(group)
                    self.edges.append({self.component[d] for w in group for d in succs[w]} - {comp})
