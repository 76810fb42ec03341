"""Cython C-API facts, read from compiled extension modules without running them.

A Cython module that declares ``cdef api`` functions (or anything in a
``.pxd``) exports them as capsules in its ``__pyx_capi__`` dict; a module
that ``cimport``s it imports each one by name and checks the capsule's
signature string at import time.  When the provider changes, the consumer
fails at ``import`` — the seed incident: cuda-python 12.6.1 turned
``cuda.ccudart`` into a shim without ``__pyx_capi__`` and RMM, cuDF, cuGraph
stopped importing (``AttributeError: module 'cuda.ccudart' has no attribute
'__pyx_capi__'``).

What the generated C code looks like (Cython 0.29 - 3.1)::

    mod = PyImport_ImportModule("cuda.ccudart");
    __Pyx_ImportFunction_3_0_11(mod, "cudaMemcpyAsync", &ptr, "cudaError_t (void *, ...)");
    tp = __Pyx_ImportType_3_0_11(mod, "cuda.ccudart", "Foo", sizeof(struct Foo), align, check_size);
    __Pyx_ExportFunction("cudaMalloc", (void (*)(void))f, "cudaError_t (void **, size_t)");

The strings are plain C strings; the pairs (name, signature), the providing
module and the expected struct size are only joined at the call sites.  We
find the calls to ``PyImport_ImportModule`` (through its PLT stub or GOT
slot), disassemble forward with capstone, track what each argument register
holds (a string address, an immediate, the imported module), and read every
call that receives the imported module as its first argument.  Exports are
the call sites of the helper that calls ``PyCapsule_New`` with a signature.

Cython 3.2 keeps the names and signatures of a module's imports and exports
in one bytes constant (``sig\\0sig\\0...\\0name\\0name...``), stored with all
the module's other string constants in one zlib-compressed blob; see
:mod:`cuaudit.facts.cython_blob`.

A pass over the member's ELF image (:mod:`cuaudit.formats.elf`).  The
readers: :mod:`cuaudit.facts.cython_tables` (up to 3.1) and
:mod:`cuaudit.facts.cython_blob` (3.2+), both over
:mod:`cuaudit.facts.cython_code` (the x86-64 view, call sites, registers).
Only x86-64 ELF is read; anything else is a CU009 ``InputError``, and a
module read only in part is CU009 with its facts (``WithProblems``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cuaudit.facts import Extractor, MemberReader, WithProblems
from cuaudit.facts import cython_blob
from cuaudit.facts.cython_code import (  # noqa: F401 - the records are part of this module's facts
    CHECK_SIZE, CExport, CImport, TypeDef, TypeImport, _Image, _IMPORTED, _prime_calls, _Tracker, scan_markers,
)
from cuaudit.facts.cython_tables import (
    _python_name_used, _read_exports, _read_imports, _read_typedefs, _reexport_candidates,
)
from cuaudit.formats.elf import ElfImage, image_of_bytes
from cuaudit.model import Member, MemberKind

# -- facts ----------------------------------------------------------------------


@dataclass(frozen=True)
class CythonModule:
    """The C-API facts of one compiled Cython module."""

    module: str  # dotted import name, from the member path
    cython: str  # "3.0.11", "0.29.37", ... ("" when no ABI marker was found)
    #: False: an extension module that is not Cython (so it has no ``__pyx_capi__``)
    is_cython: bool = True
    exports: tuple[CExport, ...] = ()
    has_capi: bool = False  # the module creates a __pyx_capi__ dict
    imports: tuple[CImport, ...] = ()
    type_imports: tuple[TypeImport, ...] = ()
    types: tuple[TypeDef, ...] = ()
    #: things the static reader could not recover (each a sentence)
    unresolved: tuple[str, ...] = ()
    #: the module sets ``__pyx_capi__`` from Python code (``__pyx_capi__ = other.__pyx_capi__``,
    #: cuda-python 12.6.2.post1's ``cuda.ccudart``); these are the module names it may take it from
    reexport_candidates: tuple[str, ...] = ()
    #: signatures of exported variables whose names are Python objects the static
    #: reader does not resolve (Cython 3.1 ``__Pyx_ExportVoidPtr(PyObject *name, ...)``)
    unnamed_variable_exports: tuple[str, ...] = ()

    @property
    def cimported_modules(self) -> tuple[str, ...]:
        return tuple(sorted({i.module for i in self.imports} | {t.module for t in self.type_imports}))


_EXT = re.compile(r"(\.cpython-[^./]*|\.abi3|\.cp\d+[^./]*)?\.so$")


def module_name_for(path: str) -> str:
    """``cuda/ccudart.cpython-311-x86_64-linux-gnu.so`` -> ``cuda.ccudart``."""
    p = path
    for prefix in ("site-packages/", "dist-packages/"):
        if prefix in p:
            p = p.split(prefix, 1)[1]
    return _EXT.sub("", p).replace("/", ".")

# -- the extractor ------------------------------------------------------------------------


class CythonCapiExtractor(Extractor):
    """C-API exports, imports and extension types of a compiled Cython module."""

    name = "cython-capi"
    version = 4  # bump whenever the reader finds more or different facts (the cache is keyed on it); 3: no PyInit_, not read; 4: a mapped non-x86 module's Cython markers found (`in` compared single bytes of a mapping)

    def applies(self, member: Member) -> bool:
        # Python extension modules only: a Cython module is never a versioned
        # shared library (libcublasLt.so.12), and reading those (hundreds of MB in
        # the torch and nvidia-* wheels) would cost the whole member for nothing.
        if member.kind is not MemberKind.ELF or not member.path.endswith(".so"):
            return False
        name = member.path.rsplit("/", 1)[-1]
        return ".cpython-" in name or ".abi3." in name or not name.startswith("lib")

    def extract(self, reader: MemberReader) -> CythonModule | WithProblems:
        module = read_image(reader.elf())
        if not module.unresolved:
            return module
        # read only in part: said for the member whatever rule asked (CU009), with the facts read
        message = (f"Cython C-API of {module.module} (Cython {module.cython or 'unknown'}) read only in part: "
                   + "; ".join(module.unresolved[:3]) + " (--probe reads the imports by importing the module)")
        return WithProblems(module, (("CU009", message, (("notes", module.unresolved),)),))


def read_module(data: bytes, path: str) -> CythonModule:
    """The C-API facts of one extension module held in memory (``is_cython=False`` when it is not Cython)."""
    return read_image(image_of_bytes(data, path))


def _exports_module_init(elf: ElfImage) -> bool:
    """Whether the image may be a Python extension module: its ``.dynsym`` names a ``PyInit_*``
    (every CPython 3 extension module exports its init function, Cython's included).  True when
    the symbol table is missing or unreadable: the full reader then decides (and reports)."""
    try:
        names = elf.dynsym_names()
    except Exception:  # noqa: BLE001 - the full reader meets (and reports) the same problem
        return True
    return not names or any(n.startswith("PyInit_") for n in names)


def read_image(elf: ElfImage) -> CythonModule:
    """The C-API facts of one extension module's ELF image."""
    path = elf.path
    if not elf.is_x86_64:
        foreign = scan_markers(elf, elf.whole(), device_code_as_zeros=False)
        if not (foreign.abi or {b"cython_runtime", b"__pyx_"} & foreign.found):
            # another machine, and not Cython either: nothing to say (CU009 is for Cython modules)
            return CythonModule(module=module_name_for(path), cython="", is_cython=False)
    if not _exports_module_init(elf):
        # not a Python extension module at all (a PJRT plugin, a library without the `lib` prefix):
        # no Cython either, known from its dynamic symbols without copying it whole (jax's 500 MB
        # xla_cuda_plugin.so took a worker to 875 MB and 2.2 s)
        return CythonModule(module=module_name_for(path), cython="", is_cython=False)
    image = _Image(elf)
    # Not Cython (no ABI marker, no capi name): nothing to say, and nothing to read further.
    abi = image.markers().abi
    has_capi_name = image.has(b"__pyx_capi__\x00")
    cython = ""
    if abi:
        cython = ".".join(g.decode() for g in abi[:3])  # type: ignore[union-attr]
        if abi[3]:
            cython += abi[3].decode() + abi[4].decode()  # type: ignore[union-attr]
    else:
        # No ABI marker (a module without extension types): a Cython 3.2+ module keeps
        # its names in a compressed blob.
        imported = image.imported_functions(_IMPORTED)
        _prime_calls(image, imported)
        located = cython_blob.locate(image, _Tracker(image), imported)
        if located and (b"cython_runtime" in located[1] or b"__pyx_capi__" in located[1] or image.has(b"cython_runtime\x00")):
            cython = "3.2+"
        elif has_capi_name:
            pass  # Cython up to 3.1 without an ABI marker
        elif not image.has(b"cython_runtime\x00") and not image.has(b"__pyx_"):
            return CythonModule(module=module_name_for(path), cython="", is_cython=False)
        elif image.has(b"__pyx_capi__"):
            # the name inside an uncompressed 3.2+ string table: not read
            return CythonModule(module=module_name_for(path), cython="3.2+", has_capi=True,
                                unresolved=("uncompressed Cython 3.2+ string table: C-API not read",))
        else:
            return CythonModule(module=module_name_for(path), cython="")
    module = module_name_for(path)
    unresolved: list[str] = []
    unnamed: list[str] = []
    generation = (3, 2) if cython == "3.2+" else tuple(int(x) for x in cython.split(".")[:2]) if cython else (0, 0)
    imported = image.imported_functions(_IMPORTED)
    tracker = _Tracker(image)
    _prime_calls(image, imported)
    if generation >= (3, 2):
        exports, imports, type_imports, notes, has_capi, reexport = cython_blob.read(image, tracker, imported, module)
        unresolved += notes
    else:
        reexport = ()
        imports, type_imports, notes = _read_imports(image, tracker, imported)
        unresolved += notes
        exports, has_capi, notes = _read_exports(image, tracker, imported, unnamed)
        unresolved += notes
    types = _read_typedefs(image, module)
    if generation < (3, 2):
        reexport = ()
    if not exports and has_capi_name and generation < (3, 2) and (
        not imports or _python_name_used(image, b"__pyx_capi__")
    ):
        # The name without any import of a C function (which is what passes it to
        # PyObject_GetAttrString in consumers): a Python-level __pyx_capi__.
        reexport = _reexport_candidates(image)
    return CythonModule(
        module=module,
        cython=cython,
        exports=tuple(sorted(set(exports))),
        has_capi=has_capi or bool(exports),
        imports=tuple(sorted(set(imports))),
        type_imports=tuple(sorted(set(type_imports))),
        types=tuple(sorted(set(types))),
        unresolved=tuple(unresolved),
        reexport_candidates=reexport,
        unnamed_variable_exports=tuple(sorted(unnamed)),
    )
