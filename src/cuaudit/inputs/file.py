"""A single file named on the command line (an ELF library, a script)."""

from __future__ import annotations

import os
from typing import IO

from cuaudit.inputs import Artifact, classify, stat_key
from cuaudit.model import ArtifactKind, ArtifactRef, Member


class FileArtifact(Artifact):
    def __init__(self, path: str) -> None:
        super().__init__(ArtifactRef(ArtifactKind.FILE, os.path.abspath(path)))
        self._name = os.path.basename(path)

    def list_members(self) -> list[Member]:
        try:
            st = os.stat(self.ref.path)
        except OSError as exc:
            self.problem("CU001", f"cannot read {self.ref.path}: {exc.strerror or exc}")
            return []
        if not os.access(self.ref.path, os.R_OK):
            self.problem("CU001", f"cannot read {self.ref.path}: permission denied", member=self._name)
            return []
        kind = classify(self._name)
        if kind.value == "other":
            # A file named explicitly: sniff it, so `cuaudit check ./libfoo` works.
            try:
                with open(self.ref.path, "rb") as fh:
                    if fh.read(4) == b"\x7fELF":
                        from cuaudit.model import MemberKind

                        kind = MemberKind.ELF
            except OSError:
                pass
        return [Member(self._name, kind, st.st_size, stat_key(st))]

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
