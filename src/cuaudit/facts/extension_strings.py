"""Dotted names in compiled extension modules: the modules they may import.

A Cython module imports what it ``cimport``s and ``import``s at module
init, by name: ``cupy/cuda/cub.so`` imports ``cupy.cuda.common``, which is
why ``import cupy.cuda; cupy.cuda.common`` works although no Python file
imports it.  The package model (``cuaudit.analysis.module_tree``) treats every dotted
string of an extension module that names a known module as an import:
it can only make the model say "reachable" more often, never invent a trap.

A pass over the member's ELF image (:mod:`cuaudit.formats.elf`): the
read-only data sections only.  Strings are read as they are stored (Cython <= 3.1 keeps them as plain C
strings).  Cython 3.2 compresses a module's strings into one zlib blob; the
blobs found in the file are inflated too.

The same strings say which NumPy headers a module's ``import_array()`` was
compiled from (:func:`numpy_c_api`): the C literals of NumPy's
``_import_array``/``_import_umath`` differ between 1.x and 2.x, and 2.x
spells the C-API version it targets in its error message.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

from cuaudit.facts import Extractor, MemberReader
from cuaudit.formats.elf import SHT_NOBITS
from cuaudit.model import Member, MemberKind

_DOTTED = re.compile(rb"[A-Za-z_][A-Za-z0-9_]{0,64}(?:\.[A-Za-z_][A-Za-z0-9_]{0,64}){1,8}")
#: the bytes a dotted name is made of, as "a" (and "." as itself); every other byte as " "
_RUN_BYTES = bytes(ord("a") if chr(b).isascii() and (chr(b).isalnum() or b == ord("_")) else b if b == ord(".")
                   else ord(" ") for b in range(256))
_ZLIB_HEADERS = (b"\x78\x9c", b"\x78\xda")  # zlib.compress() defaults and level 9
_SECTIONS = (".rodata", ".data.rel.ro", ".data", ".rdata")
#: extension modules above this size are not scanned (they are libraries, not Cython modules)
MAX_SIZE = 256 * 1024**2


@dataclass(frozen=True)
class ExtensionModuleStrings:
    """Dotted identifiers (``a.b``, ``a.b.c``) found in an extension module, and the
    plain identifiers stored as separate C strings (Cython's ``from a import b``
    keeps ``a`` and ``b`` apart: ``cupy/_core/fusion.so`` holds ``new_fusion``)."""

    dotted: tuple[str, ...]
    identifiers: tuple[str, ...] = ()
    #: dotted names that can be import evidence: whole C strings (``"cupy.cuda.common"``), and
    #: names in compressed blobs outside prose (``>>> import matplotlib.pyplot as plt`` in a
    #: docstring of numpy's ``_multiarray_umath`` imports nothing); None in facts of version 2
    imports: tuple[str, ...] | None = None
    #: "1.x" or "2.x": the NumPy headers whose ``import_array()``/``import_umath()`` the module holds;
    #: None when it holds neither (or facts of version < 5)
    numpy_headers: str | None = None
    #: "X.Y": the oldest NumPy whose C-API a 2.x-header module accepts (its NPY_TARGET_VERSION)
    numpy_target: str | None = None


def is_extension_module_name(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    if name.endswith(".pyd") or ".cpython-" in name or ".abi3." in name or ".pypy" in name:
        return True
    stem = name[:-3] if name.endswith(".so") else ""
    return bool(stem) and stem.isidentifier() and not stem.startswith("lib")


_IDENT = re.compile(rb"[A-Za-z_][A-Za-z0-9_]{1,64}")


def c_strings(data: bytes) -> set[bytes]:
    """The distinct strings of ``data`` that a NUL ends and a NUL starts (the first and last run of
    bytes are not: nothing says they are whole)."""
    return set(data.split(b"\0")[1:-1])


def identifier_strings(data: bytes, strings: "set[bytes] | None" = None) -> tuple[str, ...]:
    """Identifiers stored as whole C strings (``strings``: :func:`c_strings` of ``data``, when in hand)."""
    found = c_strings(data) if strings is None else strings
    return tuple(sorted(s.decode("ascii") for s in found if 2 <= len(s) <= 65 and _IDENT.fullmatch(s)))


#: a dotted name in running text: after "import "/"from "/">>> " or a quote, or before " import"/" as "
_PROSE_BEFORE = (b"import ", b"from ", b">>> ", b"`", b"'", b'"', b"... ")
_PROSE_AFTER = (b" import", b" as ", b"`", b"(", b"'", b'"')


def import_evidence(data: bytes, blobs: "list[bytes] | None" = None,
                    strings: "set[bytes] | None" = None) -> tuple[str, ...]:
    """Dotted names that a module may import by: whole C strings, and blob names outside prose.

    ``blobs``: the compressed blobs of ``data`` inflated (:func:`inflated_blobs`), and ``strings``
    its :func:`c_strings`, when in hand."""
    found = {s for s in (c_strings(data) if strings is None else strings) if b"." in s and _DOTTED.fullmatch(s)}
    for out in inflated_blobs(data) if blobs is None else blobs:
        # a dotted name lies within one run of name bytes that holds a dot (see _dotted_in)
        for m in (m for start, end in _dotted_runs(out) for m in _dotted_matches(out, start, end)):
            name = m.group()
            if name in found:
                continue  # already evidence: whether this mention is prose changes nothing
            before, after = out[max(0, m.start() - 8) : m.start()], out[m.end() : m.end() + 8]
            if before.endswith(_PROSE_BEFORE) or after.startswith(_PROSE_AFTER):
                continue
            found.add(name)
    return tuple(sorted(name.decode("ascii") for name in found))


def inflated_blobs(data: bytes) -> list[bytes]:
    """What the zlib streams in ``data`` inflate to (Cython 3.2's string tables), in order."""
    return list(_inflated_blobs(data))


def _inflated_blobs(data: bytes):
    for header in _ZLIB_HEADERS:
        start = 0
        while True:
            pos = data.find(header, start)
            if pos < 0:
                break
            start = pos + 1
            try:
                d = zlib.decompressobj()
                out = d.decompress(data[pos : pos + (4 << 20)], 16 << 20)
            except zlib.error:
                continue
            if len(out) >= 64 and d.eof:
                yield out


def _dotted_runs(data: bytes) -> list[tuple[int, int]]:
    """[start, end) of each whole run of the bytes a dotted name is made of that holds a dot, in order:
    no match of ``_DOTTED`` crosses the end of one.  Found from the dots, with ``find`` (an expression
    with a look-behind tried at every byte cost 11 ms a MB)."""
    runs = data.translate(_RUN_BYTES)
    find, rfind = runs.find, runs.rfind
    out = []
    dot = find(b".")
    while dot >= 0:
        end = find(b" ", dot)
        if end < 0:
            end = len(runs)
        out.append((rfind(b" ", 0, dot) + 1, end))
        dot = find(b".", end)
    return out


def _dotted_matches(data: bytes, start: int, end: int):
    """``_DOTTED.finditer(data, start, end)`` over one run (see :func:`_dotted_runs`), tried only where
    a match may start: a name part is at most 65 bytes, so at most 65 bytes before a dot.  The
    expression itself backtracks 65 bytes at every byte of a long part (Cython 3.2's blobs are
    all their strings run together: 0.04 s of cupy 14.2.0's 0.17 s)."""
    find, match = data.find, _DOTTED.match
    pos = start
    while True:
        dot = find(b".", pos, end)
        if dot < 0:
            return
        for at in range(max(pos, dot - 65), dot):
            found = match(data, at, end)
            if found:
                yield found
                pos = found.end()
                break
        else:
            pos = dot + 1


def _dotted_in(data: bytes) -> set[str]:
    # _DOTTED backtracks up to 65 bytes at every letter of every string: run it only over the
    # runs of name bytes that hold a dot (cupy 14.2.0's extension modules: 0.33 -> 0.1 s), each once
    runs = {data[start:end] for start, end in _dotted_runs(data)}
    return {m.group().decode("ascii") for run in runs for m in _dotted_matches(run, 0, len(run))}


def dotted_strings(data: bytes, blobs: "list[bytes] | None" = None) -> tuple[str, ...]:
    found = _dotted_in(data)
    for out in inflated_blobs(data) if blobs is None else blobs:
        found |= _dotted_in(out)
    return tuple(sorted(found))


#: NumPy 2.x headers import the new module path first (and fall back to the old one)
_NUMPY2_IMPORT = b"numpy._core._multiarray_umath\0"
#: 1.x headers only: _import_array's feature-version error (2.x rewords it) and _import_umath's error
_NUMPY1_MARKS = (b"module compiled against API version 0x%x but this version of numpy is 0x%x",
                 b"numpy.core._multiarray_umath failed to import")
#: 2.x _import_array: NPY_FEATURE_VERSION_STRING is pasted into the literal at compile time
_NUMPY2_TARGET = re.compile(rb"module was compiled against NumPy C-API version 0x%x \(NumPy (\d+\.\d+)\)")


def numpy_c_api(data: bytes) -> tuple[str | None, str | None]:
    """(headers "1.x"/"2.x", target "X.Y") of the NumPy C-API import compiled into ``data``.

    Cython's own ``numpy/__init__.pxd`` says "numpy.core.multiarray failed to import" under
    either major, so only the header's literals are read.  1.x headers keep their target
    (NPY_FEATURE_VERSION) only as an immediate in machine code: it is not recovered."""
    if _NUMPY2_IMPORT in data:
        target = _NUMPY2_TARGET.search(data)
        return "2.x", target.group(1).decode("ascii") if target else None
    if any(mark in data for mark in _NUMPY1_MARKS):
        return "1.x", None
    return None, None


class ExtensionStringsExtractor(Extractor):
    name = "extension_strings"
    version = 5  # 3: read through the ELF image; 4: `imports` (whole strings, no prose); 5: numpy_c_api

    def applies(self, member: Member) -> bool:
        return member.kind is MemberKind.ELF and member.size <= MAX_SIZE and is_extension_module_name(member.path)

    def extract(self, reader: MemberReader) -> ExtensionModuleStrings:
        # Only the read-only data holds the strings; device code (.nv_fatbin, often 90% of a
        # CUDA extension) and machine code are skipped.
        image = reader.elf()
        data = b"\0".join(image.section_bytes(s) for s in image.sections() if s.name in _SECTIONS and s.type != SHT_NOBITS)
        blobs, strings = inflated_blobs(data), c_strings(data)
        return ExtensionModuleStrings(dotted_strings(data, blobs), identifier_strings(data, strings),
                                      import_evidence(data, blobs, strings), *numpy_c_api(data))
