"""Source trees: a directory walked without following links out of it."""

from __future__ import annotations

import fnmatch
import os
import stat
from typing import IO, Iterable

from cuaudit.inputs.artifact import Artifact, classify, read_regular, stat_key
from cuaudit.model import ArtifactKind, ArtifactRef, Member

#: Folders that are never part of the source (caches, VCS, virtual environments).
DEFAULT_EXCLUDE = (
    ".git",
    ".hg",
    ".svn",
    "__pycache__",
    ".tox",
    ".nox",
    ".venv",
    "venv",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    "node_modules",
    ".eggs",
    ".direnv",
    ".ipynb_checkpoints",
    "__pypackages__",
)
#: Build outputs, skipped only at the top of the tree (`build/lib.linux-x86_64-cpython-311/`
#: holds copies of the sources); a package's own `build/` subpackage is source.
ROOT_EXCLUDE = ("build", "dist", "_build", "wheelhouse")


class TreeArtifact(Artifact):
    def __init__(self, path: str, *, exclude: Iterable[str] = ()) -> None:
        root = os.path.abspath(path)
        super().__init__(ArtifactRef(ArtifactKind.TREE, root, *_project_name(root)))
        self.exclude = tuple(exclude)

    def _excluded(self, rel: str, name: str) -> bool:
        if name in DEFAULT_EXCLUDE:
            return True
        return any(fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(name, pat) for pat in self.exclude)

    def list_members(self) -> list[Member]:
        root = self.ref.path
        real_root = os.path.realpath(root)
        members: list[Member] = []

        def onerror(exc: OSError) -> None:
            rel = os.path.relpath(exc.filename or root, root)
            self.problem("CU001", f"cannot list {rel}: {exc.strerror or exc}", member=rel)

        for dirpath, dirnames, filenames in os.walk(root, onerror=onerror, followlinks=False):
            rel_dir = os.path.relpath(dirpath, root)
            rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
            dirnames[:] = sorted(d for d in dirnames if not self._excluded(rel_dir + d, d)
                                 and not (rel_dir == "" and d in ROOT_EXCLUDE))
            # A virtual or conda environment inside a tree is not source.
            dirnames[:] = [d for d in dirnames if not os.path.exists(os.path.join(dirpath, d, "pyvenv.cfg"))
                           and not os.path.isdir(os.path.join(dirpath, d, "conda-meta"))]
            for name in sorted(filenames):
                rel = rel_dir + name
                if self._excluded(rel, name):
                    continue
                full = os.path.join(dirpath, name)
                try:
                    st = os.lstat(full)
                except OSError as exc:
                    self.problem("CU001", f"cannot read {rel}: {exc.strerror or exc}", member=rel)
                    continue
                if not os.path.isfile(full) or os.path.islink(full):
                    real = os.path.realpath(full)
                    if os.path.islink(full) and os.path.isfile(real) and real.startswith(real_root + os.sep):
                        continue  # the link's target is listed under its own name
                    self.skip(rel, "not a regular file inside the tree (link or special file)")
                    continue
                if name.endswith((".whl", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")):
                    # `cuaudit check dist/` must not look like an all-clear for the wheels in it
                    self.skip(rel, "an archive inside a source tree is not opened; name it on the command line "
                              f"(cuaudit check {os.path.join(self.ref.path, *rel.split('/'))})")
                members.append(Member(rel, classify(rel), st.st_size, stat_key(st, rel)))
        return members

    def open_member(self, path: str) -> IO[bytes]:
        return open(self.fs_path(path), "rb")

    def fs_path(self, path: str) -> str:
        return os.path.join(self.ref.path, *path.split("/"))


def _project_name(root: str) -> tuple[str, str]:
    """The project's name and version from pyproject.toml, when it states them."""
    from cuaudit.compat import tomllib

    data = read_regular(os.path.join(root, "pyproject.toml"), 4 * 1024**2)  # never a FIFO
    try:
        project = tomllib.loads(data.decode("utf-8")).get("project", {}) if data is not None else {}
    except (ValueError, RecursionError):
        return "", ""  # the pyproject extractor reports what is wrong with it
    if not isinstance(project, dict):
        return "", ""
    name = project.get("name", "")
    version = project.get("version", "")
    return (name if isinstance(name, str) else "", version if isinstance(version, str) else "")


class NamedFiles(Artifact):
    """Some files of a folder, named rather than found by walking it.

    For evidence about files a run already points at (the traced program's
    sources, for their inline suppressions), under the ``ref`` the findings carry.
    """

    def __init__(self, ref: ArtifactRef, paths: Iterable[str]) -> None:
        super().__init__(ref)
        self._paths = sorted(set(paths))

    def list_members(self) -> list[Member]:
        members = []
        for rel in self._paths:
            try:
                st = os.stat(self.fs_path(rel))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                members.append(Member(rel, classify(rel), st.st_size, stat_key(st, rel)))
        return members

    def open_member(self, path: str) -> IO[bytes]:
        return open(self.fs_path(path), "rb")

    def fs_path(self, path: str) -> str:
        if self.ref.kind is ArtifactKind.FILE:
            return self.ref.path
        return os.path.join(self.ref.path, *path.split("/"))
