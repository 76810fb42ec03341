"""A single file named on the command line (an ELF library, a script)."""

from __future__ import annotations

import os
import stat
from typing import IO

from cuaudit.inputs.artifact import Artifact, classify, stat_key
from cuaudit.model import ArtifactKind, ArtifactRef, Member, MemberKind


class FileArtifact(Artifact):
    single_file = True

    def __init__(self, path: str) -> None:
        super().__init__(ArtifactRef(ArtifactKind.FILE, os.path.abspath(path)))
        self._name = os.path.basename(path)

    def list_members(self) -> list[Member]:
        try:
            st = os.stat(self.ref.path)
        except OSError as exc:
            self.problem("CU001", f"cannot read {self.ref.path}: {exc.strerror or exc}")
            return []
        if not stat.S_ISREG(st.st_mode):
            self.problem("CU001", f"{self.ref.path} is not a regular file (FIFO, socket or device); not read")
            return []
        # Open it and read its head now: permission (as root, os.access says yes to
        # everything) and I/O errors are found here, once, for any rule family.
        try:
            with open(self.ref.path, "rb") as fh:
                magic = fh.read(4)
        except OSError as exc:
            self.problem("CU001", f"cannot read {self.ref.path}: {exc.strerror or exc}", member=self._name)
            return []
        kind = classify(self._name)
        if kind is MemberKind.OTHER and magic == b"\x7fELF":
            # A file named explicitly: sniff it, so `cuaudit check ./libfoo` works.
            kind = MemberKind.ELF
        return [Member(self._name, kind, st.st_size, stat_key(st, self._name))]

    def open_member(self, path: str) -> IO[bytes]:
        return open(self.ref.path, "rb")

    def fs_path(self, path: str) -> str | None:
        return self.ref.path


class MissingArtifact(Artifact):
    """An input that does not exist or could not be obtained: one CU0xx finding."""

    def __init__(self, spec: str, why: str, code: str = "CU001") -> None:
        super().__init__(ArtifactRef(ArtifactKind.FILE, spec))
        self.problem(code, f"{spec}: {why}")

    def list_members(self) -> list[Member]:
        return []
