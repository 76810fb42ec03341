"""Facts: what the rules need, extracted once per member and cached by content.

An extractor is a subclass of :class:`Extractor` in a module of this package
(``elf.py``, ``python_source.py`` ...); defining it registers it.  It is pure:
it reads one member through a :class:`MemberReader` and returns a picklable
value (a frozen dataclass), or raises :class:`InputError` when the member is
not what it should be (a truncated ELF, a ``.py`` that is not text...).  The
engine turns that into a CU0xx finding for that member and goes on.

The cache key is ``(extractor name, extractor version, member content key)``:
bump ``version`` whenever the shape or meaning of the facts changes.
"""

from __future__ import annotations

import io
import mmap
import os
from dataclasses import MISSING, dataclass, fields, is_dataclass
from typing import IO, TYPE_CHECKING, Any, ClassVar, TypeVar

from cuaudit.model import InputError, Member

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.formats import FormatError
    from cuaudit.formats.elf import ElfImage
    from cuaudit.formats.python import PythonModule
    from cuaudit.formats.toml import TomlDocument

_REGISTRY: dict[str, type["Extractor"]] = {}


class MemberReader:
    """Read access to one member, however its artifact stores it.

    ``open()`` streams (a wheel member inflates as it is read: read only what
    you need); ``mmap()`` maps a file on disk, or returns None for archive
    members; ``read()`` reads it all (bounded by ``limit``).
    """

    def __init__(self, artifact: "Any", member: Member, data: bytes | None = None) -> None:
        self.artifact = artifact
        self.member = member
        #: the member's bytes, already inflated once for several extractors (archive members)
        self._data = data
        #: what extractors attached in :meth:`Extractor.prepare`, by extractor name
        self.prepared: dict[str, Any] = {}
        #: extractors whose fact of this member rests on more than its path and bytes (see :meth:`read_beside`)
        self.beside: set[str] = set()

    @property
    def path(self) -> str:
        return self.member.path

    @property
    def fs_path(self) -> str | None:
        return self.artifact.fs_path(self.member.path)

    def open(self) -> IO[bytes]:
        if self._data is not None:
            return io.BytesIO(self._data)
        return self.artifact.open_member(self.member.path)

    def read(self, limit: int | None = None) -> bytes:
        with self.open() as fh:
            data = fh.read(-1 if limit is None else limit)
        return data

    def head(self, n: int) -> bytes:
        with self.open() as fh:
            return fh.read(n)

    def read_beside(self, extractor: str) -> None:
        """Say that ``extractor``'s fact of this member rests on something beside its path and bytes
        (the format check's ``__pycache__`` file): the cache keeps it under the member's identity
        only, never under its content, where another member of the same bytes would find it."""
        self.beside.add(extractor)

    def mmap(self) -> mmap.mmap | None:
        fs_path = self.fs_path
        if fs_path is None:
            return None
        with open(fs_path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                return None
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)

    # -- formats: one parse per member, shared by every extractor of this pass --------

    def _format(self, kind: str, parse: "Any") -> Any:
        cache = self.__dict__.setdefault("_formats", {})
        if kind not in cache:
            try:
                cache[kind] = (True, parse())
            except Exception as exc:  # noqa: BLE001 - re-raised to every extractor that asks
                cache[kind] = (False, exc)
        ok, value = cache[kind]
        if not ok:
            raise value
        return value

    def python(self) -> "PythonModule":
        """The member as Python source: decoded text and one ``ast`` (see formats/python.py)."""
        from cuaudit.formats.python import MAX_SOURCE_BYTES, parse_python

        return self._format("python", lambda: parse_python(self.read(MAX_SOURCE_BYTES + 1), self.path))

    def python_error(self) -> "FormatError | None":
        """``python().error`` (raising as :meth:`python` raises for what is not text), without a
        tree where this pass has none and none is needed: a source
        :func:`cuaudit.formats.python.compiles` takes has no error; any other is parsed to say why."""
        if "python" not in self.__dict__.get("_formats", {}):
            from cuaudit.formats.python import MAX_SOURCE_BYTES, compiles, decode_python

            if compiles(decode_python(self.read(MAX_SOURCE_BYTES + 1), self.path), self.path):
                return None
        return self.python().error

    def python_text(self) -> str:
        """The text :meth:`python` parses (raising as it raises for what is not text), without a
        parse: the parsed module's when this pass has one."""
        from cuaudit.formats.python import MAX_SOURCE_BYTES, decode_python

        done = self.__dict__.get("_formats", {}).get("python")
        if done is not None and done[0]:
            return done[1].text
        return decode_python(self.read(MAX_SOURCE_BYTES + 1), self.path)

    def toml(self) -> "TomlDocument":
        """The member as a TOML document (see formats/toml.py)."""
        from cuaudit.formats.toml import MAX_TOML_BYTES, parse_toml

        return self._format("toml", lambda: parse_toml(self.read(MAX_TOML_BYTES + 1), self.path))

    def elf(self) -> "ElfImage":
        """The member as one ELF image (see formats/elf.py), over the bytes in hand.

        Shared bytes when the engine inflated the member for several extractors,
        a mapping of a file on disk, or else a forward-only stream of the archive
        member that the passes read as far as they need (the linking view stops
        at the last dynamic table).
        """
        from cuaudit.formats import elf

        def parse() -> "ElfImage":
            if self._data is not None:
                return elf.image_of_bytes(self._data, self.path)
            fs_path = self.fs_path
            if fs_path is not None:
                return elf.image_of_bytes(elf.map_file(fs_path), self.path)
            return elf.image_of_stream(self.open, self.member.size, self.path)

        return self._format("elf", parse)

    def text(self, limit: int = 16 * 1024 * 1024) -> str:
        """The member as text (UTF-8, BOM and PEP 263 declarations honoured)."""
        data = self.read(limit + 1)
        if len(data) > limit:
            raise InputError("CU004", f"{self.path}: larger than {limit} bytes, not read as text")
        try:
            import tokenize

            if self.member.kind.value in ("python", "stub", "build") and self.path.endswith((".py", ".pyi")):
                encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
                return data.decode(encoding)
            return data.decode("utf-8-sig")
        except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
            raise InputError("CU006", f"{self.path}: not valid text ({exc})") from exc


class CompactState:
    """Base of a frozen dataclass fact that holds only the fields not left at their defaults.

    Decorate the dataclass with :func:`compact`: its ``__init__`` stores a field in the
    instance only when the value differs from the default (by type or value), and the class
    attribute a dataclass keeps for each default answers for the rest.  The instance dict is
    then the pickled state as it is (no ``__getstate__`` call per object), and unpickling sets
    only what was stored.  Most of an import-time effect's fields are empty: an environment's
    programs (4.9 M effects and conditions on the 88-distribution accuracy-venv) are built,
    pickled and decoded several times faster than with a dataclass's own ``__init__``, which
    sets every field through ``object.__setattr__``.
    """

    __slots__ = ()


_T = TypeVar("_T")


def compact(cls: type[_T]) -> type[_T]:
    """Give a frozen :class:`CompactState` dataclass the ``__init__`` that leaves defaults out.

    Same signature as the dataclass's own; generated once per class, the way ``dataclasses``
    generates its methods (a loop over the fields per object cost more than the fields did).
    """
    if not (issubclass(cls, CompactState) and is_dataclass(cls)) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: compact() takes a CompactState dataclass without __post_init__")
    params, body = [], ["    d = self.__dict__"]
    namespace: dict[str, Any] = {}
    for i, f in enumerate(fields(cls)):
        if f.default_factory is not MISSING or not f.init or f.kw_only:
            raise TypeError(f"{cls.__name__}.{f.name}: compact() takes plain positional fields")
        if f.default is MISSING:
            params.append(f.name)
            body.append(f"    d[{f.name!r}] = {f.name}")
        else:
            namespace[f"_d{i}"], namespace[f"_t{i}"] = f.default, type(f.default)
            params.append(f"{f.name}=_d{i}")
            # the same default of another type is kept (False is not the level 0)
            body.append(f"    if {f.name} is not _d{i} and ({f.name}.__class__ is not _t{i} or {f.name} != _d{i}):\n"
                        f"        d[{f.name!r}] = {f.name}")
    exec(f"def __init__(self, {', '.join(params)}) -> None:\n" + "\n".join(body), namespace)  # noqa: S102
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    cls.__init__ = init  # type: ignore[misc]
    return cls


@dataclass(frozen=True)
class WithProblems:
    """A fact that was read only in part, with the CU0xx problems met on the way.

    The engine keeps ``value`` as the fact and reports each problem (code,
    message, evidence) for the member, the same way whatever rules are selected
    (the facts themselves are cached with their problems).
    """

    value: Any
    problems: tuple[tuple[str, str, tuple[tuple[str, Any], ...]], ...]


class Extractor:
    """Base class of fact extractors."""

    name: ClassVar[str]
    version: ClassVar[int] = 1
    #: probe extractors import or run audited code; only with --probe
    probe: ClassVar[bool] = False
    #: facts that rules and analyses read for some members only (a module's program, its
    #: bindings and imports: what an import reaches): not extracted up front, but when first
    #: read, or in batches a rule asks for (``extraction.Facts``, ``RuleContext.prefetch``). Its
    #: problems must be the format check's too (one parse of the member fails alike), so that
    #: leaving a member unread reports the same findings.
    on_demand: ClassVar[bool] = False
    #: an on-demand extractor whose fact is extracted whenever another on-demand fact of its member
    #: parses it (where :meth:`comes_along` says so), saving a parse later: one that costs little
    #: beside the parse (a walk of module-level statements), or one a rule reads for every member
    extracted_along: ClassVar[bool] = False
    #: whether extracting always parses the member (False: it may answer from a look at the bytes);
    #: ``extracted_along`` facts come along only with an extractor that parses
    parses: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = getattr(cls, "name", None)
        if not name:
            raise TypeError(f"{cls.__name__}: extractors need a name")
        _REGISTRY[name] = cls

    def applies(self, member: Member) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def reads_whole(cls, member: Member) -> bool:
        """Whether this extractor reads all of ``member`` (or at random): the engine inflates an
        archive member once for several such extractors.  ELF passes that read a prefix, or go
        once front to back through the member's shared image, say False."""
        return True

    @classmethod
    def answers_beside(cls, reader: MemberReader) -> bool:
        """Whether this member's fact will be answered from beside it, cheaply (the format check of
        an installed source whose ``__pycache__`` file vouches for it): the engine then does not hash
        the member to look the fact up by content.  One that says True calls
        :meth:`MemberReader.read_beside` (the answer is known once asked)."""
        return False

    @classmethod
    def deferred(cls, member: Member) -> bool:
        """Whether this member's fact waits to be read (of an installed distribution, see
        :attr:`on_demand`); an extractor may defer some members only (the format check: the Python
        sources, whose parse it can share with the passes read on demand)."""
        return cls.on_demand

    @classmethod
    def comes_along(cls, member: Member) -> bool:
        """Whether an ``extracted_along`` fact of this member (an installed distribution's: the
        members whose on-demand facts wait to be read) comes along with another one's parse."""
        return True

    @classmethod
    def last(cls, member: Member) -> bool:
        """Whether this member's fact is extracted after its other facts of the same call: one that
        uses a parse they made, and answers without one where they made none (the format check
        of a Python source)."""
        return False

    def prepare(self, reader: MemberReader) -> None:
        """Called for every extractor of a member before any of them extracts: a pass that
        watches a streamed member go by attaches here, so that it sees the bytes the passes
        before it read (one inflation for all).  Problems are left to :meth:`extract`."""

    def extract(self, reader: MemberReader) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


_loaded = False


def load_all() -> None:
    global _loaded
    if _loaded:
        return
    from cuaudit.discovery import import_submodules

    import_submodules(__name__, __path__)
    _loaded = True


def get(name: str) -> type[Extractor]:
    load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown extractor {name!r}") from None


def registered(name: str) -> type[Extractor] | None:
    """The extractor registered under ``name`` so far, importing nothing (None: not yet, or no such)."""
    return _REGISTRY.get(name)


def all_extractors() -> dict[str, type[Extractor]]:
    load_all()
    return dict(_REGISTRY)


def deferring() -> list[type[Extractor]]:
    """The extractors whose facts of some members wait to be read (:meth:`Extractor.deferred` may say True)."""
    return [cls for cls in all_extractors().values()
            if cls.on_demand or getattr(cls.deferred, "__func__", None) is not Extractor.deferred.__func__]


def flagged(attribute: str) -> list[str]:
    """Names of the extractors whose class sets ``attribute`` (``on_demand``, ``extracted_along``)."""
    return [name for name, cls in all_extractors().items() if getattr(cls, attribute)]
