"""The format check: the framework's own pass that turns unreadable members into CU0xx.

It runs on every member that has a format (Python sources, TOML files, ELF
images: headers that fit the file and the dynamic loader's view, CU005) whenever any CU0xx rule is
selected, whatever other rules are: a file with ``def (:`` is CU006 under
``--select CU0`` as under ``--select CU4,CU0``.  It shares the member's one
parse with the extractors of the same pass (``MemberReader`` keeps it), so it
costs nothing more when they run too.
"""

from __future__ import annotations

from cuaudit.facts import Extractor, MemberReader
from cuaudit.model import InputError, Member, MemberKind

#: which format each kind of member is checked as
PYTHON_KINDS = (MemberKind.PYTHON, MemberKind.STUB, MemberKind.BUILD)


def format_of(member: Member) -> str | None:
    if member.kind in PYTHON_KINDS and member.path.endswith((".py", ".pyi")):
        return "python"
    if member.path.endswith(".toml") and member.path.rsplit("/", 1)[-1] == "pyproject.toml":
        return "toml"
    if member.kind is MemberKind.ELF:
        return "elf"
    return None


class FormatCheck(Extractor):
    name = "format"
    version = 2

    @classmethod
    def reads_whole(cls, member: Member) -> bool:
        return format_of(member) != "elf"  # an ELF image is checked from its prefix

    def applies(self, member: Member) -> bool:
        return format_of(member) is not None

    def extract(self, reader: MemberReader) -> None:
        kind = format_of(reader.member)
        if kind == "elf":
            reader.elf().check()  # raises CU005 (CU006: not ELF at all) for this member
            return None
        parsed = reader.python() if kind == "python" else reader.toml()
        error = parsed.error
        if error is not None:
            # a build script that does not parse (setup.py) stops every build front end: CU007
            code = "CU007" if reader.member.kind is MemberKind.BUILD and error.code == "CU006" else error.code
            detail = {k: v for k, v in (("line", error.line), ("column", error.column)) if v is not None}
            raise InputError(code, error.message, **detail)
        return None
