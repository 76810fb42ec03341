"""Formats: each member is decoded and parsed once, and every extractor reads that.

``MemberReader.python()``, ``.toml()`` and ``.elf()`` (in :mod:`cuaudit.facts`)
return the parse of the member they read, computed on first use and shared by
every extractor that runs on that member in the same pass.  A parse never
depends on which extractor asked first or on which rules are selected.

A format either raises :class:`cuaudit.model.InputError` (the member cannot be
read as that format at all: not text, not an ELF image) or returns an object
that carries its own ``error`` (a Python syntax error, a TOML error): the
object is still usable (an extractor sees an empty tree), and the engine's
format check (``facts/format_check.py``) is the one place that turns such an
``error`` into a CU0xx finding, whatever rules are selected.

Modules: ``python.py`` (decoded text, one ``ast``), ``toml.py`` (one table),
``elf.py`` (one image: headers, dynamic section, symbols and versions, notes,
sections such as ``.nv_fatbin``, read lazily from the bytes in hand).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FormatError:
    """Why a member parsed only in part: the CU0xx code, a message, and where."""

    code: str
    message: str
    line: int | None = None
    column: int | None = None
