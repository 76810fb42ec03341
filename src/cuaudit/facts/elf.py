"""ELF facts for the dynamic loader: a pass over the member's one image (:mod:`cuaudit.formats.elf`).

Everything comes from the image's linking view: the program headers and the
``DT_*`` entries of ``PT_DYNAMIC`` (their addresses translated to file
offsets through the ``PT_LOAD`` segments), never from the section table at
the end of the file, so a streamed wheel member is inflated no further than
its last dynamic table (counted in :attr:`ElfFacts.passes`) and an installed
``libcublasLt.so.12`` (749 MB) costs a handful of page faults.

Nothing is loaded, no subprocess runs (no readelf/objdump): results do not
depend on the machine's tools.

The section table is optional information here: it is read when it is cheap
(the file is mapped, the member is small, or the stream is already near it);
otherwise :attr:`ElfFacts.sections` is ``None`` and rules that need
``.nv_fatbin`` say the evidence is missing.  A section table that does not
parse leaves ``sections`` ``None`` and is reported (CU005) with the facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Callable

from cuaudit.facts import Extractor, InputError, MemberReader, WithProblems
from cuaudit.formats.elf import (
    INTERESTING_SECTION_PREFIXES, ElfImage, VersionNeed, image_of_bytes, image_of_stream, map_file,
)
from cuaudit.model import Member, MemberKind

__all__ = ["ElfFacts", "SectionInfo", "DynamicEntry", "VersionNeed", "ElfExtractor", "facts_of",
           "read_elf_file", "read_elf_bytes", "read_elf_stream"]


@dataclass(frozen=True)
class SectionInfo:
    name: str
    type: int
    offset: int
    size: int
    addr: int


@dataclass(frozen=True)
class DynamicEntry:
    """Where the dynamic section lies in the file (for in-place edits)."""

    offset: int
    size: int
    entry_size: int


@dataclass(frozen=True)
class ElfFacts:
    """What the dynamic loader needs to know about one ELF file.

    ``imports`` are the undefined dynamic symbols (what the file needs from
    others); ``import_versions[i]`` is the version of ``imports[i]`` ('' when
    unversioned) and ``import_files[i]`` the library file the version belongs
    to (``.gnu.version_r``'s ``vn_file``: ``libcublas.so.11``), or ''.
    ``weak_imports`` holds the indexes of weak undefined symbols (the loader
    accepts them missing).  ``exports`` are the defined global/weak dynamic
    symbols, ``export_versions`` their versions.  ``sections`` is ``None``
    when the section table was not read (see the module doc).
    """

    elf_class: int
    little_endian: bool
    machine: str
    elf_type: str
    soname: str
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    imports: tuple[str, ...]
    import_versions: tuple[str, ...]
    import_files: tuple[str, ...]
    weak_imports: frozenset[int]
    exports: tuple[str, ...]
    export_versions: tuple[str, ...]
    version_needs: tuple[VersionNeed, ...]
    version_defs: tuple[str, ...]
    symbol_count: int
    dynamic: DynamicEntry | None
    sections: tuple[SectionInfo, ...] | None
    size: int
    passes: int = 1

    @property
    def is_python_extension(self) -> bool:
        return any(n.startswith("PyInit_") for n in self.exports)

    def needs_from(self, library: str) -> tuple[str, ...]:
        """Imports bound by symbol version to ``library`` (a DT_NEEDED name)."""
        return tuple(n for n, f in zip(self.imports, self.import_files) if f == library)

    def section(self, name: str) -> SectionInfo | None:
        for s in self.sections or ():
            if s.name == name:
                return s
        return None


def facts_of(image: ElfImage) -> ElfFacts:
    """The loader's facts of one image (raises InputError CU005 when its dynamic part is corrupt)."""
    return _facts(image)[0]


def _facts(image: ElfImage) -> tuple[ElfFacts, InputError | None]:
    link = image.linking()
    problem = None
    try:
        found = image.sections_if_cheap()
    except InputError as exc:
        found, problem = None, exc
    sections = None
    if found is not None:
        sections = tuple(SectionInfo(s.name, s.type, s.offset, s.size, s.addr) for s in found
                         if s.name.startswith(INTERESTING_SECTION_PREFIXES))
    dyn = link.dynamic
    return ElfFacts(
        elf_class=image.elf_class,
        little_endian=image.little_endian,
        machine=image.machine_name,
        elf_type=image.type_name,
        soname=link.soname,
        needed=link.needed,
        rpath=link.rpath,
        runpath=link.runpath,
        imports=link.imports,
        import_versions=link.import_versions,
        import_files=link.import_files,
        weak_imports=link.weak_imports,
        exports=link.exports,
        export_versions=link.export_versions,
        version_needs=link.version_needs,
        version_defs=link.version_defs,
        symbol_count=link.symbol_count,
        dynamic=DynamicEntry(dyn.offset, dyn.size, dyn.entry_size) if dyn else None,
        sections=sections,
        size=image.size,
        passes=image.passes,
    ), problem


# -- entry points ------------------------------------------------------------------------


def read_elf_file(path: str) -> ElfFacts:
    """Facts of an ELF file on disk (mapped, never read whole)."""
    mm = map_file(path)
    try:
        return facts_of(image_of_bytes(mm, path))
    finally:
        mm.close()


def read_elf_bytes(data: bytes, path: str = "") -> ElfFacts:
    return facts_of(image_of_bytes(data, path))


def read_elf_stream(opener: Callable[[], IO[bytes]], size: int, path: str = "") -> ElfFacts:
    image = image_of_stream(opener, size, path)
    try:
        return facts_of(image)
    finally:
        image.close()


class ElfExtractor(Extractor):
    """Dynamic-section facts of every ELF member (``.so``, ``.so.N``, sniffed files)."""

    name = "elf"
    version = 3  # 2: the image's reader (string tables end with NUL, section tables checked); 3: .init_array kept

    @classmethod
    def reads_whole(cls, member: Member) -> bool:
        return False  # a pass over the member's image: a prefix, or one forward pass

    def applies(self, member: Member) -> bool:
        return member.kind is MemberKind.ELF

    def extract(self, reader: MemberReader) -> ElfFacts | WithProblems:
        facts, problem = _facts(reader.elf())
        if problem is None:
            return facts
        return WithProblems(facts, ((problem.code, problem.message, tuple(problem.detail.items())),))
