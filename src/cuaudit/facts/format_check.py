"""The format check: the framework's own pass that turns unreadable members into CU0xx.

It runs on every member that has a format (Python sources, TOML files, ELF
images once ``formats/elf.py`` provides them) whenever any CU0xx rule is
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
    return None


class FormatCheck(Extractor):
    name = "format"
    version = 1

    def applies(self, member: Member) -> bool:
        return format_of(member) is not None

    def extract(self, reader: MemberReader) -> None:
        kind = format_of(reader.member)
        parsed = reader.python() if kind == "python" else reader.toml()
        error = parsed.error
        if error is not None:
            # a build script that does not parse (setup.py) stops every build front end: CU007
            code = "CU007" if reader.member.kind is MemberKind.BUILD and error.code == "CU006" else error.code
            detail = {k: v for k, v in (("line", error.line), ("column", error.column)) if v is not None}
            raise InputError(code, error.message, **detail)
        return None
