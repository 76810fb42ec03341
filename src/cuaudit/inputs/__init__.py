"""Inputs: turn what the user names into artifacts (sets of members).

One module per input kind: ``wheel.py``, ``sdist.py``, ``tree.py``,
``file.py``, ``environment.py`` (installed distributions) and ``index.py``
(``NAME==VERSION`` fetched from the configured index).  Every artifact
implements the small :class:`Artifact` interface; problems found while
listing (a corrupt zip, a member named ``../../etc/passwd``) are CU0xx
findings in ``artifact.problems``, never exceptions, and never abort the scan.

Nothing here imports or runs the code being audited.
"""

from __future__ import annotations

import os
import re
import stat
from typing import IO, Any, Iterable

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


def is_test_path(path: str) -> bool:
    """A test module or a file of a test folder (``tests/``, ``testing/``, ``test_*.py``, ``conftest.py``)."""
    parts = path.split("/")
    name = parts[-1]
    return (
        any(p in ("tests", "test", "testing") for p in parts[:-1])
        or name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
    )


def stat_key(st: os.stat_result, path: str = "") -> str:
    """Content key of a file on disk without reading it: same inode, size and mtime.

    ``path`` (the member's path) keeps hard links of one inode apart, since
    facts may record where a file is.
    """
    return f"stat:{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{path}"


class Artifact:
    """A set of members and a way to read each one.

    Artifacts cross process boundaries (parallel extraction): subclasses
    keep only picklable state and reopen handles lazily.
    """

    ref: ArtifactRef

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


def resolve(specs: Iterable[str], *, exclude: Iterable[str] = (), cache_dir: str | None = None,
            progress: Any = None) -> list[Artifact]:
    """Artifacts for command-line inputs: paths, or ``NAME==VERSION`` requirements."""
    from cuaudit.inputs.file import FileArtifact, MissingArtifact
    from cuaudit.inputs.index import fetch_requirement, looks_like_requirement
    from cuaudit.inputs.sdist import SdistArtifact, is_sdist_name
    from cuaudit.inputs.tree import TreeArtifact
    from cuaudit.inputs.wheel import WheelArtifact

    exclude = tuple(exclude)
    out: list[Artifact] = []
    for spec in specs:
        try:
            if not os.path.lexists(spec) and looks_like_requirement(spec):
                out.append(fetch_requirement(spec, cache_dir=cache_dir, progress=progress))
                continue
            if not os.path.lexists(spec):
                hint = ""
                if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?([<>=!~]=?.*)?", spec) and "/" not in spec:
                    hint = " (to audit a release from the package index, give NAME==VERSION with an exact version)"
                out.append(MissingArtifact(spec, "does not exist" + hint))
            elif os.path.isdir(spec):
                out.append(TreeArtifact(spec, exclude=exclude))
            elif not os.path.isfile(spec):
                # A FIFO, socket or device: opening it may block forever or never end.
                out.append(MissingArtifact(spec, "is not a regular file (FIFO, socket or device); not read"))
            elif spec.endswith(".whl"):
                out.append(WheelArtifact(spec))
            elif is_sdist_name(spec):
                out.append(SdistArtifact(spec))
            else:
                out.append(FileArtifact(spec))
        except Exception as exc:  # noqa: BLE001 - one bad input never stops the scan
            out.append(MissingArtifact(spec, f"internal error while opening it: {type(exc).__name__}: {exc}", code="CU011"))
    return out

