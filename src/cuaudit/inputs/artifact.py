"""The artifact model of the inputs: :class:`Artifact` (a set of members that can be
opened), member classification, content keys and the name checks every input kind
shares.  The input kinds (``wheel.py``, ``sdist.py``, ``tree.py`` ...) build on it;
``cuaudit.inputs`` re-exports it and resolves what the user named into artifacts.
"""

from __future__ import annotations

import os
import re
import stat
from typing import IO, Any, Iterable

from cuaudit.inputs.identity import file_identity
from cuaudit.names import is_test_path  # noqa: F401 - re-exported: inputs classify members with it
from cuaudit.model import ArtifactRef, Location, Member, MemberKind, Problem, Severity, Skipped

_BUILD_FILES = {
    "setup.py",
    "setup.cfg",
    "pyproject.toml",
    "CMakeLists.txt",
    "meson.build",
    "meson.options",
    "meson_options.txt",
    "hatch_build.py",
    "build.py",
}
_METADATA_FILES = {"METADATA", "PKG-INFO", "RECORD", "WHEEL", "entry_points.txt", "top_level.txt", "direct_url.json"}
_SO = re.compile(r"\.so(\.\d+)*$")


def classify(path: str) -> MemberKind:
    """Kind of a member, from its name alone (extractors check the content)."""
    name = path.rsplit("/", 1)[-1]
    if name.endswith(".py"):  # most members (no metadata file's name ends so): the checks below, in short
        return MemberKind.BUILD if name in _BUILD_FILES else MemberKind.PYTHON
    parent = path.rsplit("/", 2)[-2] if "/" in path else ""
    if name in _METADATA_FILES and (parent.endswith((".dist-info", ".egg-info")) or name == "PKG-INFO"):
        return MemberKind.METADATA
    if name in _BUILD_FILES or name.endswith(".cmake"):
        return MemberKind.BUILD
    if name.endswith(".py"):
        return MemberKind.PYTHON
    if name.endswith(".pyi"):
        return MemberKind.STUB
    if _SO.search(name) or name.endswith(".pyd"):
        return MemberKind.ELF
    if name.endswith((".pyx", ".pxd", ".pxi")):
        return MemberKind.CYTHON
    if name.endswith((".cu", ".cuh")):
        return MemberKind.CUDA
    return MemberKind.OTHER


def key_text(path: str) -> str:
    """A member path as it goes into a content key: always encodable (the cache is SQLite, text is UTF-8).

    Names are data: a file name that is not UTF-8 arrives with surrogate
    escapes, and stays a member like any other.  The other parts of every key
    (an inode, an offset) already keep two members apart, so the spelling only
    has to be encodable and stable.
    """
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return "bytes:" + path.encode("utf-8", "surrogateescape").hex()


def stat_key(st: os.stat_result, path: str = "") -> str:
    """Content key of a file on disk: :func:`file_identity` of its stat.

    ``path`` (the member's path) keeps hard links of one inode apart, since
    facts may record where a file is.
    """
    return identity_key(file_identity(st), path)


def identity_key(identity: str, path: str = "") -> str:
    """:func:`stat_key` from a :func:`file_identity` already in hand."""
    return f"stat:{identity}:{key_text(path)}"


def open_regular(path: str) -> tuple[int, os.stat_result] | None:
    """A read-only descriptor of the regular file at ``path`` and its ``stat``; None for anything
    else or an error (the caller closes the descriptor).

    Opened without blocking and checked on the open descriptor: a FIFO named
    ``METADATA`` or ``x.pth`` would block a plain ``open`` forever, and a
    device never ends.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
    except OSError:
        st = None
    if st is None or not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return fd, st


def read_regular(path: str, limit: int = 1 << 20) -> bytes | None:
    """Up to ``limit`` bytes of the regular file at ``path``; None for anything else or an error
    (:func:`open_regular`)."""
    opened = open_regular(path)
    if opened is None:
        return None
    fd = opened[0]
    try:
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(limit)
    except OSError:
        return None
    finally:
        os.close(fd)


class Artifact:
    """A set of members and a way to read each one.

    Artifacts cross process boundaries (parallel extraction): subclasses
    keep only picklable state and reopen handles lazily.
    """

    ref: ArtifactRef
    #: evidence-only (the standard library, system libraries, ``--with``): read, never reported on
    evidence: bool = False
    #: the machine's own files (the standard library), not an input: cached even under ``--no-cache``
    machine: bool = False
    #: its listing (members, their keys, problems, skips) follows from the bytes of the one file at
    #: ``ref.path`` (and cuaudit's code and configuration): a snapshot may stand for it by that file's
    #: identity, without listing it (torch 2.8.0's zip directory: 0.18 s of a cached check)
    single_file: bool = False

    def __init__(self, ref: ArtifactRef) -> None:
        self.ref = ref
        self.problems: list[Problem] = []
        self.skipped: list[Skipped] = []
        self._members: list[Member] | None = None

    # -- interface ------------------------------------------------------------
    def list_members(self) -> list[Member]:  # pragma: no cover - abstract
        raise NotImplementedError

    def open_member(self, path: str) -> IO[bytes]:  # pragma: no cover - abstract
        raise NotImplementedError

    def fs_path(self, path: str) -> str | None:
        """The member's file on disk, when it has one (for mmap)."""
        return None

    def listing_key(self, hint: Any = None) -> tuple[str, Any] | None:
        """A text that changes whenever the listing would (members, their keys, problems, skips),
        made more cheaply than listing, and a hint that makes the next one cheaper (given back as
        ``hint`` by the next run, if cuaudit's code is the same); or None: a snapshot is then keyed by
        the listing itself."""
        return None

    # -- shared -----------------------------------------------------------------
    @property
    def members(self) -> list[Member]:
        if self._members is None:
            self._members = self.list_members()
        return self._members

    def member(self, path: str) -> Member | None:
        for m in self.members:
            if m.path == path:
                return m
        return None

    def problem(self, code: str, message: str, member: str | None = None, **evidence: object) -> None:
        self.problems.append(Problem(code, message, Location(self.ref, member), evidence, key=member or ""))

    def skip(self, member: str | None, reason: str, code: str = "") -> None:
        self.skipped.append(Skipped(Location(self.ref, member), reason, code))

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        for key in list(state):
            if key.startswith("_h_"):  # open handles are per process
                state[key] = None
        return state

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.ref.display}>"


def unsafe_member_name(name: str) -> str | None:
    """Why an archive member name must never be used as a path, or None."""
    if not name:
        return "is empty"
    if "\x00" in name:
        return "contains a NUL byte"
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        return "is an absolute path"
    parts = re.split(r"[/\\]", name)
    if ".." in parts:
        return "escapes the archive with '..'"
    return None


def is_symlink_mode(mode: int) -> bool:
    return stat.S_ISLNK(mode)


class MemberSubset(Artifact):
    """A view of an artifact limited to some members (post-hoc reads, evidence of a few files)."""

    def __init__(self, inner: Artifact, paths: set[str]) -> None:
        super().__init__(inner.ref)
        self.inner = inner
        self.paths = paths

    def list_members(self) -> list[Member]:
        return [m for m in self.inner.members if m.path in self.paths]

    def open_member(self, path: str):
        return self.inner.open_member(path)

    def fs_path(self, path: str) -> str | None:
        return self.inner.fs_path(path)
