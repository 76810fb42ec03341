"""Evidence-only inputs: files a rule needs that are not audited.

The standard library of the audited interpreter, this machine's library
folders and ``ld.so.cache``, and ``--with`` wheels or folders are read the way
audited artifacts are (members, extractors, the fact cache) but no finding is
ever reported on them and reports do not list them as audited.

Folder evidence is large (the standard library holds ~2 000 files, ``/usr/lib``
many more) and an audit touches a few hundred of its files at most, so
:class:`OnDemandFolder` is never walked: a member exists once someone asks
for its path (one ``stat``), and the engine extracts its facts on demand.
"""

from __future__ import annotations

import functools
import glob
import os
import posixpath
import stat
import sys
import sysconfig
from typing import IO, Iterable

from cuaudit.inputs.artifact import Artifact, classify, stat_key
from cuaudit.model import ArtifactKind, ArtifactRef, Member


class OnDemandFolder(Artifact):
    """A folder whose members are found by path when asked for, never listed.

    ``members`` holds the members asked for so far.  Paths are POSIX,
    relative to the folder; for :class:`SystemFiles` (the root folder) they
    are absolute paths.
    """

    evidence = True

    def __init__(self, ref: ArtifactRef, root: str) -> None:
        super().__init__(ref)
        self.root = root
        self._found: dict[str, Member | None] = {}

    def list_members(self) -> list[Member]:
        return [m for m in self._found.values() if m is not None]

    @property
    def members(self) -> list[Member]:
        return self.list_members()

    def fs_path(self, path: str) -> str:
        return os.path.join(self.root, *path.strip("/").split("/"))

    def open_member(self, path: str) -> IO[bytes]:
        return open(self.fs_path(path), "rb")

    def member(self, path: str) -> Member | None:
        """The regular file at ``path`` (links followed), or None."""
        if path not in self._found:
            try:
                st = os.stat(self.fs_path(path))
            except (OSError, ValueError):
                st = None
            self._found[path] = (
                Member(path, classify(path), st.st_size, stat_key(st, path)) if st and stat.S_ISREG(st.st_mode) else None
            )
        return self._found[path]

    def is_dir(self, path: str) -> bool:
        return _is_dir(self.fs_path(path))

    def listdir(self, path: str) -> tuple[str, ...]:
        return _listdir(self.fs_path(path))

    def glob(self, pattern: str) -> list[str]:
        """Paths (in this folder's terms) matching a glob relative to the folder, sorted."""
        base = self.root.rstrip("/") or "/"
        hits = sorted(glob.glob(os.path.join(base, pattern.lstrip("/"))))
        if self.root == "/":
            return hits
        return [posixpath.relpath(h, base) for h in hits]


@functools.lru_cache(maxsize=256)
def _listdir(d: str) -> tuple[str, ...]:
    try:
        return tuple(sorted(os.listdir(d)))
    except OSError:
        return ()


@functools.lru_cache(maxsize=4096)
def _is_dir(d: str) -> bool:
    return os.path.isdir(d)


# -- the standard library ---------------------------------------------------------------------


class StdlibFolder(OnDemandFolder):
    """The standard library folder of the audited interpreter (its ``.py`` files are evidence)."""

    machine = True  # keyed by each file's stat and the interpreters: see Extraction.on_demand

    def __init__(self, root: str, version: str = "") -> None:
        super().__init__(ArtifactRef(ArtifactKind.TREE, os.path.abspath(root), "stdlib", version), os.path.abspath(root))


def stdlib_dir(environment=None) -> str | None:
    """The standard library's folder: the environment's (from its sys.path), else this interpreter's."""
    if environment is not None:
        for d in environment.sys_path:
            if os.path.isfile(os.path.join(d, "os.py")) and os.path.isdir(os.path.join(d, "importlib")):
                return d
    d = sysconfig.get_paths().get("stdlib")
    return d if d and os.path.isdir(d) else None


def stdlib_folder(environment=None) -> StdlibFolder | None:
    """The audited interpreter's standard library (``environment``'s, else this interpreter's)."""
    root = stdlib_dir(environment)
    if root is None:
        return None
    version = environment.version if environment is not None else ".".join(map(str, sys.version_info[:3]))
    return StdlibFolder(root, version or "")


# -- this machine's libraries -----------------------------------------------------------------

#: the dynamic loaders, by machine, whose built-in search folders the loader model reads from the
#: file itself (``analysis.libraries.default_dirs``)
LOADERS = ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1", "/lib64/ld64.so.2", "/lib/ld-linux-x86-64.so.2")


class SystemFiles(OnDemandFolder):
    """This machine's files as the dynamic loader sees them: member paths are absolute.

    ``/etc/ld.so.cache``, ``/etc/ld.so.conf`` (and what it includes) and the
    libraries found in the loader's folders, an ``LD_LIBRARY_PATH`` or a
    ``DT_RUNPATH``.
    """

    def __init__(self) -> None:
        super().__init__(ArtifactRef(ArtifactKind.TREE, "/", "system libraries"), "/")

    def fs_path(self, path: str) -> str:
        return path


# -- --with -------------------------------------------------------------------------------------


def with_artifacts(paths: Iterable[str]) -> list[Artifact]:
    """``--with`` wheels and folders, as evidence: their libraries are used, not audited.

    A path that is neither a wheel nor a folder holds no library (``--with``
    is a hint, not an input: nothing is reported about it, but reports say it
    was tried).
    """
    from cuaudit.inputs.wheel import WheelArtifact

    out: list[Artifact] = []
    for p in paths:
        path = os.path.abspath(p)
        art: Artifact = WheelArtifact(path) if path.endswith(".whl") and os.path.isfile(path) else _WithFolder(path)
        art.evidence = True
        out.append(art)
    return out


class _WithFolder(Artifact):
    """A ``--with`` folder: every file with ``.so`` in its name, at any depth (links followed)."""

    evidence = True

    def __init__(self, path: str) -> None:
        super().__init__(ArtifactRef(ArtifactKind.TREE, path))

    def list_members(self) -> list[Member]:
        out: list[Member] = []
        seen: set[str] = set()
        for dirpath, dirs, files in os.walk(self.ref.path):
            dirs.sort()
            for f in sorted(files):
                if ".so" not in f:
                    continue
                full = os.path.join(dirpath, f)
                rel = os.path.relpath(full, self.ref.path).replace(os.sep, "/")
                try:
                    st = os.stat(full)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode) and rel not in seen:
                    seen.add(rel)
                    out.append(Member(rel, classify(rel), st.st_size, stat_key(st, rel)))
        return out

    def fs_path(self, path: str) -> str:
        return os.path.join(self.ref.path, *path.split("/"))

    def open_member(self, path: str) -> IO[bytes]:
        return open(self.fs_path(path), "rb")
