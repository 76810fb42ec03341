"""The format check: the framework's own pass that turns unreadable members into CU0xx.

It runs on every member that has a format (Python sources, TOML files, ELF
images: headers that fit the file and the dynamic loader's view, CU005) whenever any CU0xx rule is
selected, whatever other rules are: a file with ``def (:`` is CU006 under
``--select CU0`` as under ``--select CU4,CU0``.  It shares the member's one
parse with the extractors of the same pass (``MemberReader`` keeps it, and the
check comes after them), so it costs nothing more when they run too.  A source
no pass parses (an environment's tests, the modules no import reaches) is
checked without building its tree where that is exact (``MemberReader.python_error``,
``formats.python.compiles``: Python 3.10 and 3.11): in an environment installed
without bytecode files (uv's default) those are half of its sources.

An installed source whose ``__pycache__`` holds a valid bytecode file of the
interpreter cuaudit parses with is known to compile, hence to parse: it is not
parsed again for this check (see :func:`compiles_by_its_bytecode`).
"""

from __future__ import annotations

import os
import sys

from cuaudit.facts import Extractor, MemberReader
from cuaudit.model import ArtifactKind, InputError, Member, MemberKind

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
    #: an installed source's check waits for the passes read on demand and shares their parse
    #: (``deferred``, ``comes_along``); the engine checks what no pass parsed once the rules have
    #: run.  Without ``__pycache__`` files (an environment installed by uv) every source was
    #: parsed twice: up front here, then again by the passes.
    extracted_along = True
    #: it may answer from the ``__pycache__`` file beside the source: nothing comes along with it
    parses = False

    @classmethod
    def deferred(cls, member: Member) -> bool:
        return format_of(member) == "python"

    @classmethod
    def comes_along(cls, member: Member) -> bool:
        return format_of(member) == "python"

    @classmethod
    def last(cls, member: Member) -> bool:
        # a source's check shares the parse of the passes before it, and where none parsed,
        # it is checked without building a tree (MemberReader.python_error)
        return format_of(member) == "python"

    @classmethod
    def reads_whole(cls, member: Member) -> bool:
        return format_of(member) != "elf"  # an ELF image is checked from its prefix

    def applies(self, member: Member) -> bool:
        return format_of(member) is not None

    @classmethod
    def answers_beside(cls, reader: MemberReader) -> bool:
        if format_of(reader.member) == "python" and compiles_by_its_bytecode(reader):
            reader.read_beside(cls.name)  # known by the __pycache__ file beside it, not by its bytes
            return True
        return False

    def extract(self, reader: MemberReader) -> None:
        kind = format_of(reader.member)
        if kind == "elf":
            reader.elf().check()  # raises CU005 (CU006: not ELF at all) for this member
            return None
        if kind == "python" and (self.name in reader.beside or self.answers_beside(reader)):
            return None
        error = reader.python_error() if kind == "python" else reader.toml().error
        if error is not None:
            # a build script that does not parse (setup.py) stops every build front end: CU007
            code = "CU007" if reader.member.kind is MemberKind.BUILD and error.code == "CU006" else error.code
            detail = {k: v for k, v in (("line", error.line), ("column", error.column)) if v is not None}
            raise InputError(code, error.message, **detail)
        return None


#: the flags word of a bytecode file's header (PEP 552): 0 is checked by the source's mtime and
#: size; a hash-based file whose hash the import system checks has both bits set
_TIMESTAMP_PYC, _CHECKED_HASH_PYC = 0, 0b11


def compiles_by_its_bytecode(reader: MemberReader) -> bool:
    """Whether an installed ``.py`` has a ``__pycache__/<name>.<cache tag>.pyc`` of this very
    interpreter that was compiled from its present bytes: it then compiles, so ``ast`` parses it.

    Only the 16-byte header is read (never unmarshalled, never run).  Exact or nothing: the
    cache tag and magic number of the interpreter cuaudit parses with (another version's parser
    may disagree), a timestamp header naming the source's mtime and size, or a checked hash
    header naming its hash as computed here; anything else (no file, another tag, a stale or
    unchecked one, a short or odd header, a source too large to parse) is parsed as before.
    """
    import importlib.util

    from cuaudit.formats.python import MAX_SOURCE_BYTES
    from cuaudit.inputs.artifact import read_regular

    tag = sys.implementation.cache_tag
    source = reader.fs_path
    if (tag is None or source is None or reader.artifact.ref.kind is not ArtifactKind.INSTALLED
            or not source.endswith(".py")):
        return False
    folder, name = os.path.split(source)
    # read like any other installed file: a FIFO or a device named like a pyc must not block the scan
    head = read_regular(os.path.join(folder, "__pycache__", f"{name[:-3]}.{tag}.pyc"), 16)
    try:
        st = os.stat(source)
    except (OSError, ValueError):
        return False
    if head is None or len(head) != 16 or head[:4] != importlib.util.MAGIC_NUMBER or st.st_size > MAX_SOURCE_BYTES:
        return False
    flags = int.from_bytes(head[4:8], "little")
    if flags == _TIMESTAMP_PYC:
        return (int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
                and int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF)
    if flags == _CHECKED_HASH_PYC:
        data = reader.read(MAX_SOURCE_BYTES + 1)
        return len(data) <= MAX_SOURCE_BYTES and importlib.util.source_hash(data) == head[8:16]
    return False
