"""x86-64 machine code as instruction text, through capstone's engine.

The Cython reader (:mod:`cuaudit.facts.cython_code`) needs one thing of capstone: an address,
size, mnemonic and operand text for each instruction of a range (``disasm_lite``), with data skipped.
The ``capstone`` package's Python binding costs 27 ms to import (the constants of its twenty
architectures, ``ctypes.util``, ``inspect``, ``sysconfig``), a sixth of the check of a small wheel
that holds one Cython module (fastrlock's: 0.15 s in all; benchmarks/RESULTS.md, twentieth
session), where loading its library costs 3 ms.  So :func:`disassembler` opens the engine of the
installed ``capstone`` wheel through its C API (four functions), and falls back to the binding
itself wherever that is not certain to give the same answers: a capstone other than 5.x (the
layout of ``cs_insn`` is 5.x's), a library not where the wheel keeps it, or any failure to load or
open it.  Both give the same tuples (``tests/test_x86.py`` holds them equal on real code).
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Iterator, Protocol

#: capstone's constants (capstone.h, 5.x): x86, 64-bit mode, the SKIPDATA option turned on
_CS_ARCH_X86, _CS_MODE_64, _CS_OPT_SKIPDATA, _CS_OPT_ON = 3, 8, 5, 3
#: the only engine version whose ``cs_insn`` layout :class:`_Insn` mirrors
_MAJOR = 5
#: where the ``capstone`` wheel keeps its engine, inside the package's folder (Linux)
_LIBRARY = os.path.join("lib", "libcapstone.so")


class Disassembler(Protocol):
    def disasm_lite(self, code: bytes, offset: int) -> Iterator[tuple[int, int, str, str]]: ...


class _Insn(ctypes.Structure):
    """``cs_insn`` of capstone 5.x (the detail pointer is never followed: details stay off)."""

    _fields_ = (
        ("id", ctypes.c_uint),
        ("address", ctypes.c_uint64),
        ("size", ctypes.c_uint16),
        ("bytes", ctypes.c_ubyte * 24),
        ("mnemonic", ctypes.c_char * 32),
        ("op_str", ctypes.c_char * 160),
        ("detail", ctypes.c_void_p),
    )


class EngineError(RuntimeError):
    """capstone's engine refused a range (its ``cs_errno``); capstone's binding raises ``CsError`` there."""


class _Engine:
    """One handle of capstone's engine, x86-64 with data skipped: ``disasm_lite`` as capstone's
    binding has it (the whole range decoded at once, one tuple per instruction)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        handle = ctypes.c_size_t()
        lib.cs_open.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)]
        lib.cs_option.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_size_t]
        lib.cs_disasm.argtypes = [ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64,
                                  ctypes.c_size_t, ctypes.POINTER(ctypes.POINTER(_Insn))]
        lib.cs_disasm.restype = ctypes.c_size_t
        lib.cs_free.argtypes = [ctypes.POINTER(_Insn), ctypes.c_size_t]
        lib.cs_errno.argtypes = [ctypes.c_size_t]
        if lib.cs_open(_CS_ARCH_X86, _CS_MODE_64, ctypes.byref(handle)) != 0:
            raise OSError("cs_open failed")
        if lib.cs_option(handle, _CS_OPT_SKIPDATA, _CS_OPT_ON) != 0:
            raise OSError("cs_option(CS_OPT_SKIPDATA) failed")
        self._lib, self._handle = lib, handle

    def disasm_lite(self, code: bytes, offset: int) -> Iterator[tuple[int, int, str, str]]:
        if type(code) is not bytes:
            code = bytes(code)  # a bytearray or memoryview, as the binding takes them
        lib = self._lib
        insns = ctypes.POINTER(_Insn)()
        count = lib.cs_disasm(self._handle, code, len(code), offset, 0, ctypes.byref(insns))
        if not count:
            status = lib.cs_errno(self._handle)
            if status:
                raise EngineError(f"capstone error {status}")
            return
        try:
            for i in range(count):
                insn = insns[i]
                yield insn.address, insn.size, insn.mnemonic.decode("ascii"), insn.op_str.decode("ascii")
        finally:
            lib.cs_free(insns, count)


def _engine_library() -> str | None:
    """The path of the installed ``capstone`` wheel's engine, found without importing the package."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("capstone")
    except (ImportError, ValueError):
        return None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = os.path.join(folder, _LIBRARY)
        if os.path.isfile(path):
            return path
    return None


def _open_engine() -> _Engine | None:
    """The engine opened through its C API, or None where the binding must answer instead."""
    path = _engine_library()
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
        major, minor = ctypes.c_int(), ctypes.c_int()
        lib.cs_version.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
        lib.cs_version(ctypes.byref(major), ctypes.byref(minor))
        if major.value != _MAJOR:
            return None
        return _Engine(lib)
    except (OSError, AttributeError):  # not loadable, a symbol missing, cs_open refused
        return None


def _binding() -> Any:
    import capstone

    cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    cs.skipdata = True
    return cs


def disassembler(*, through_binding: bool = False) -> Disassembler:
    """A new x86-64 disassembler with data skipped: capstone's engine opened directly, else
    capstone's own binding (``through_binding=True``: the binding, always)."""
    engine = None if through_binding else _open_engine()
    return engine if engine is not None else _binding()
