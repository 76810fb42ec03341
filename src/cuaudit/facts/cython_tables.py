"""Cython up to 3.1: C-API imports, exports and extension types read at their call sites.

The names and signatures are plain C strings passed to Cython's helpers
(``__Pyx_ImportFunction(mod, "name", &ptr, "sig")``, ``__Pyx_ExportFunction``,
``__Pyx_ImportType``); the readers here follow the calls after
``PyImport_ImportModule`` and to ``PyCapsule_New`` with the register tracker of
:mod:`cuaudit.facts.cython_code`.  :mod:`cuaudit.facts.cython_blob` reuses the
import reader for what Cython 3.2 still passes as plain strings (type imports).
"""

from __future__ import annotations

import re
import struct

from cuaudit.facts.cython_code import (
    CHECK_SIZE, CallSite, CExport, CImport, TypeDef, TypeImport, _call_sites, _function_of, _IDENT, _Image,
    _looks_like_signature, _scan_runs, _str, _Tracker,
)

_NAME_STR = re.compile(rb"(?<![\x21-\x7e])([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\x00")


def _python_name_used(image: _Image, name: bytes) -> bool:
    """Whether ``name`` is a Python-level identifier of the module (an entry of its string table).

    Consumers pass ``"__pyx_capi__"`` as a C string to ``PyObject_GetAttrString``
    (referenced from code only); a module that assigns ``__pyx_capi__`` in
    Python code has it in its string table, a relocated pointer in data.
    """
    _addr, ro = image.section_bytes(".rodata")
    ro_addr = _addr
    targets = set()
    start = 0
    while True:
        i = ro.find(name + b"\0", start)
        if i < 0:
            break
        targets.add(ro_addr + i)
        start = i + 1
    if not targets:
        return False
    return any(v in targets for v in image.rela_relative().values())


def _reexport_candidates(image: _Image) -> tuple[str, ...]:
    """Dotted names a module that assigns ``__pyx_capi__`` in Python code may take it from.

    ``from cuda.bindings import cyruntime; __pyx_capi__ = cyruntime.__pyx_capi__``
    leaves the strings ``cuda.bindings`` and ``cyruntime``: every dotted string,
    and every dotted string joined with every identifier (the rules keep those
    that are modules with a C-API).
    """
    _addr, ro = image.section_bytes(".rodata")
    dotted: set[str] = set()
    idents: set[str] = set()
    for m in _NAME_STR.finditer(ro):
        text = m.group(1).decode()
        if len(text) > 200 or text.startswith("__pyx"):
            continue
        (dotted if "." in text else idents).add(text)
    out = set(dotted)
    if len(dotted) * len(idents) < 200_000:
        out |= {f"{d}.{i}" for d in dotted for i in idents}
    return tuple(sorted(out))


def _read_imports(
    image: _Image, tracker: _Tracker, imported, loops: list | None = None
) -> tuple[list[CImport], list[TypeImport], list[str]]:
    """Imports of functions, variables and types: the calls that take a just-imported module."""
    stubs, slots = imported["PyImport_ImportModule"]
    sites = _call_sites(image, stubs, slots)
    imports: list[CImport] = []
    type_imports: list[TypeImport] = []
    notes: list[str] = []
    if not sites:
        return imports, type_imports, notes
    targets = stubs | {-s for s in slots}
    fmt_stubs, fmt_slots = imported["PyErr_Format"]
    warn_stubs, warn_slots = imported["PyErr_WarnFormat"]
    snp_stubs, snp_slots = imported["PyOS_snprintf"]
    formats = fmt_stubs | {-s for s in fmt_slots}
    # Cython 3.1 warns with PyErr_WarnFormat(NULL, 0, fmt, ...); 0.29/3.0 format the
    # warning with PyOS_snprintf(buf, 200, fmt, ...) first: same argument registers.
    warns = warn_stubs | {-s for s in warn_slots} | snp_stubs | {-s for s in snp_slots}
    lk_stubs, lk_slots = imported.get("PyDict_GetItemString", (set(), set()))
    lookups = lk_stubs | {-s for s in lk_slots}
    current: list[str | None] = [None]
    # Helpers inlined into the module init leave no call taking the module; their
    # error messages still name everything: (module, name, signature) or
    # (module, class, expected size).
    inlined_sigs: dict[tuple[str, str], tuple[str, str]] = {}
    inlined_names: dict[tuple[str, str], str] = {}
    inlined_types: dict[tuple[str, str], list] = {}

    def on_error(site: CallSite, warn: bool) -> None:
        a = site.args
        fmt = _str(image, a.get("rdx" if warn else "rsi")) or ""
        if "size changed" in fmt:
            mod, cls, size = (a.get(r) for r in (("rcx", "r8", "r9") if warn else ("rdx", "rcx", "r8")))
            mod_s, cls_s = _str(image, mod), _str(image, cls)
            if mod_s and cls_s and size and size[0] == "imm":
                entry = inlined_types.setdefault((mod_s, cls_s), [size[1], []])
                entry[1].append("warn" if warn else "error")
        elif current[0] and ("does not export expected C" in fmt or "has wrong signature" in fmt):
            name = _str(image, a.get("rcx"))
            if not name or not _IDENT.match(name):
                return
            kind = "variable" if "C variable" in fmt else "function"
            inlined_names[(current[0], name)] = kind
            if "has wrong signature" in fmt:
                sig = _str(image, a.get("r8"))
                if sig is not None:
                    inlined_sigs[(current[0], name)] = (sig, kind)

    def on_call(site: CallSite):
        if site.target in targets:
            name = _str(image, site.args.get("rdi"))
            current[0] = name
            if name is None:
                notes.append(f"module name of the import at {site.address:#x} not recovered")
                return ("module", None)
            return ("module", name)
        if site.target in formats or site.target in warns:
            on_error(site, site.target in warns)
            return None
        args = site.args
        mod, rsi, rdx, rcx = args.get("rdi"), args.get("rsi"), args.get("rdx"), args.get("rcx")
        if (loops is not None and site.target in lookups and rsi and rsi[0] == "memoff" and current[0]):
            # Cython 3.2+ with the import helper inlined in the loop:
            # PyDict_GetItemString(capi, names + i) with the signatures pointer in another register
            sigs = [v[2] for v in site.args.values() if v[0] == "memoff" and v[1] == rsi[1] and v[2] < rsi[2]]
            if sigs:
                loops.append((current[0], rsi[1], rsi[2] - max(sigs) - 1, None))
            return None
        if loops is not None and rsi and rcx and rsi[0] == "memoff" and rcx[0] == "memoff" and rsi[1] == rcx[1]:
            # Cython 3.2: helper(target, names, ptr, signatures) over one bytes constant
            what = _str(image, site.args.get("r8"))
            owner = mod[1] if mod and mod[0] == "module" else None
            loops.append((owner, rsi[1], rsi[2] - rcx[2] - 1, what))
            return None
        if not mod or mod[0] != "module" or mod[1] is None:
            return None
        a_str = _str(image, rsi)
        if a_str is None:
            return None
        c_str = _str(image, rcx)
        if c_str is not None and _IDENT.match(a_str) and _looks_like_signature(c_str):
            what = _str(image, site.args.get("r8"))
            kind = "variable" if what == "pointer" else "function"
            if what is None and "(" not in c_str:
                kind = "variable"
            imports.append(CImport(mod[1], a_str, c_str, kind))
            return None
        if c_str is None and _IDENT.match(a_str) and site.target > 0 and not (rcx and rcx[0] == "imm"):
            # the helper specialised for one signature (ImportVoidPtr.constprop): its
            # own error message holds the signature
            found = helper_signature(site.target)
            if found is not None:
                imports.append(CImport(mod[1], a_str, found[0], found[1]))
                return None
        b_str = _str(image, rdx)
        if b_str is not None and rcx and rcx[0] == "imm":
            r9 = site.args.get("r9")
            check = CHECK_SIZE.get(r9[1], "") if r9 and r9[0] == "imm" else ""
            if not check and site.target > 0:
                check = helper_check_size(site.target)
            type_imports.append(TypeImport(a_str, b_str, rcx[1], check))
        return None

    helper_checks: dict[int, str] = {}
    helper_sigs: dict[int, tuple[str, str] | None] = {}

    def helper_signature(target: int) -> tuple[str, str] | None:
        if target in helper_sigs:
            return helper_sigs[target]
        end = next((x for x in image.function_starts() if x > target), target + 2048)
        found: list[tuple[str, str]] = []

        def look(site: CallSite):
            if site.target in formats:
                fmt = _str(image, site.args.get("rsi")) or ""
                if "has wrong signature" in fmt:
                    sig = _str(image, site.args.get("r8"))
                    if sig is not None:
                        found.append((sig, "variable" if "C variable" in fmt else "function"))
            return None

        tracker.run(target, min(end, target + 4096), look)
        helper_sigs[target] = found[0] if len(set(found)) == 1 else None
        return helper_sigs[target]


    def helper_check_size(target: int) -> str:
        """check_size of a type-import helper GCC specialised for one constant (constprop clone)."""
        if target in helper_checks:
            return helper_checks[target]
        import bisect

        starts = image.function_starts()
        i = bisect.bisect_right(starts, target)
        end = starts[i] if i < len(starts) else target + 2048
        seen: list[str] = []

        def look(site: CallSite):
            if site.target in formats or site.target in warns:
                warn = site.target in warns
                fmt = _str(image, site.args.get("rdx" if warn else "rsi")) or ""
                if "size changed" in fmt:
                    seen.append("warn" if warn else "error")
            return None

        tracker.run(target, min(end, target + 8192), look)
        check = "warn" if "warn" in seen else "error" if seen.count("error") >= 2 else "ignore" if seen else ""
        helper_checks[target] = check
        return check

    _scan_runs(tracker, sites, on_call)
    known = {(i.module, i.name) for i in imports}
    for (mod, name), (sig, kind) in inlined_sigs.items():
        if (mod, name) not in known:
            imports.append(CImport(mod, name, sig, kind))
    for (mod, name) in inlined_names:
        if (mod, name) not in known and (mod, name) not in inlined_sigs:
            notes.append(f"signature of {mod}.{name} not recovered")
    known_types = {(t.module, t.name) for t in type_imports}
    for (mod, cls), (size, checks) in inlined_types.items():
        if (mod, cls) not in known_types:
            # One error format: the "smaller" check every import has; a second one
            # is check_size='error', a warning is 'warn', neither is 'ignore'.
            check = "warn" if "warn" in checks else "error" if checks.count("error") >= 2 else "ignore"
            type_imports.append(TypeImport(mod, cls, size, check))
    return imports, type_imports, notes


def _python_names(image: _Image) -> dict[int, str]:
    """Address of a module's ``PyObject *`` string constant -> its text (Cython 0.29/3.0).

    Their ``__pyx_string_tab`` entries are ``{&__pyx_n_s_name, __pyx_k_name, sizeof, ...}``:
    two relocated pointers side by side.
    """
    cached = getattr(image, "_pynames", None)
    if cached is not None:
        return cached
    relocs = image.rela_relative()
    out: dict[int, str] = {}
    for where, value in relocs.items():
        s_ptr = relocs.get(where + 8)
        if s_ptr is None or image.in_section(value, ".rodata") or not image.in_section(s_ptr, ".rodata"):
            continue
        text = image.cstr(s_ptr, 512)
        if text and _IDENT.match(text):
            out.setdefault(value, text)
    image._pynames = out
    return out


def _export_helpers(image: _Image, tracker: _Tracker, sites: list[int]) -> tuple[set[int], list[int]]:
    """Functions that call ``PyCapsule_New`` with a signature they were given, and inlined calls."""
    import bisect

    starts = image.function_starts()
    helpers: set[int] = set()
    inline_sites: list[int] = []
    for s in sites:
        regs: dict = {}

        def grab(site: CallSite, regs=regs, s=s):
            if site.address == s:
                regs.update(site.args)
            return None

        tracker.run(tracker.aligned_start(s, 48), s + 6, grab)
        if _str(image, regs.get("rsi")) is not None:
            inline_sites.append(s)
        elif starts:
            i = bisect.bisect_right(starts, s) - 1
            if i >= 0:
                helpers.add(starts[i])
    return helpers, inline_sites


def _read_exports(image: _Image, tracker: _Tracker, imported, unnamed: list[str]) -> tuple[list[CExport], bool, list[str]]:
    """``__Pyx_ExportFunction(name, f, sig)`` / ``__Pyx_ExportVoidPtr(name, p, sig)`` call sites."""
    stubs, slots = imported["PyCapsule_New"]
    sites = _call_sites(image, stubs, slots)
    exports: list[CExport] = []
    notes: list[str] = []
    if not sites:
        return exports, False, notes
    has_capi = image.has(b"__pyx_capi__\x00")
    helpers, inline_sites = _export_helpers(image, tracker, sites)
    constprop: dict[int, str] = {}
    # Exports through a helper: every call to it passes (name, pointer, signature).
    # One linear pass over the block of calls: a signature used twice is often
    # kept in a callee-saved register loaded long before.
    def on_export(site: CallSite):
        if site.target not in helpers:
            return None
        regs = site.args
        name, sig = _str(image, regs.get("rdi")), _str(image, regs.get("rdx"))
        if name is None and regs.get("rdi") and regs["rdi"][0] == "mem":
            # the name as a Python string object (variables, Cython 0.29/3.0)
            name = _python_names(image).get(regs["rdi"][1])
        if name is None or sig is None or not _IDENT.match(name):
            if sig is not None:
                ptr = regs.get("rsi")
                if ptr and ptr[0] == "addr" and not image.in_section(ptr[1], ".text"):
                    unnamed.append(sig)
                else:
                    notes.append(f"export at {site.address:#x}: name not recovered")
            elif name is not None:
                notes.append(f"export at {site.address:#x}: signature not recovered")
            return None
        ptr = regs.get("rsi")
        kind = "function"
        if ptr and ptr[0] == "addr" and not image.in_section(ptr[1], ".text"):
            kind = "variable"
        exports.append(CExport(name, sig, kind))
        return None

    _scan_runs(tracker, _call_sites(image, helpers, set()), on_export, back=1024)
    # Exports with the helper inlined: PyCapsule_New(f, sig, 0) then PyDict_SetItemString(d, name, cobj).
    if inline_sites:
        set_stubs, set_slots = imported["PyDict_SetItemString"]
        set_targets = set_stubs | {-s for s in set_slots}
        obj_stubs, obj_slots = imported["PyDict_SetItem"]
        set_targets |= obj_stubs | {-s for s in obj_slots}
        for s in inline_sites:
            pending: dict = {}

            def walk(site: CallSite, pending=pending, s=s):
                if site.address == s:
                    pending["sig"] = _str(image, site.args.get("rsi"))
                    pending["ptr"] = site.args.get("rdi")
                elif "sig" in pending and site.target in set_targets and "name" not in pending:
                    key = site.args.get("rsi")
                    pending["name"] = _str(image, key)
                    if pending["name"] is None and key and key[0] == "mem":
                        pending["name"] = _python_names(image).get(key[1])
                return None

            tracker.run(tracker.aligned_start(s, 512), s + 96, walk)
            ptr = pending.get("ptr")
            kind = "variable" if ptr and ptr[0] == "addr" and not image.in_section(ptr[1], ".text") else "function"
            if pending.get("sig") and pending.get("name") and _IDENT.match(pending["name"]):
                exports.append(CExport(pending["name"], pending["sig"], kind))
            elif pending.get("sig") and ptr and ptr[0] == "addr":
                if kind == "variable":
                    unnamed.append(pending["sig"])
            elif pending.get("sig"):
                # GCC specialised the helper for one signature (ExportVoidPtr.constprop):
                # the callers pass (name, pointer)
                start = _function_of(image, s)
                if start is not None:
                    constprop[start] = pending["sig"]
    if constprop:
        def on_constprop(site: CallSite):
            sig = constprop.get(site.target)
            if sig is None:
                return None
            key, ptr = site.args.get("rdi"), site.args.get("rsi")
            name = _str(image, key)
            if name is None and key and key[0] == "mem":
                name = _python_names(image).get(key[1])
            kind = "variable" if ptr and ptr[0] == "addr" and not image.in_section(ptr[1], ".text") else "function"
            if name and _IDENT.match(name):
                exports.append(CExport(name, sig, kind))
            elif kind == "variable":
                unnamed.append(sig)
            return None

        _scan_runs(tracker, _call_sites(image, set(constprop), set()), on_constprop, back=512)
    return exports, has_capi, notes


def _read_typedefs(image: _Image, module: str) -> list[TypeDef]:
    """Static ``PyTypeObject``s of the module: ``tp_name`` (a relocated pointer) then ``tp_basicsize``."""
    out: list[TypeDef] = []
    prefix = module + "."
    # a tp_name is a C string that starts with the module's name: its bytes are looked at before
    # it is read as text (most relocated pointers in data point at anything else)
    head = prefix.encode("utf-8")
    data, offset = image.data, image.offset
    for where, value in image.rela_relative().items():
        if not image.in_section(where, ".data", ".data.rel.ro", ".data.rel"):
            continue
        at = offset(value)
        if at is None or data[at : at + len(head)] != head:  # (a mapping has no startswith)
            continue
        name = image.cstr(value, 512)
        if not name or not _IDENT.match(name[len(prefix) :]):
            continue
        off = offset(where + 8)
        if off is None or off + 16 > len(data):  # a segment that claims more than the file holds
            continue
        # A PyTypeObject: tp_name at +24, tp_basicsize at +32, tp_itemsize at +40.
        size, itemsize = struct.unpack_from("<qq", image.data, off)
        if 16 <= size < 1 << 20 and 0 <= itemsize < 1 << 16:
            out.append(TypeDef(name, size))
    return out
