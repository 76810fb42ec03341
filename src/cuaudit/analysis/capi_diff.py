"""`cuaudit diff OLD NEW`: what changed in the Cython C-API between two releases, and whom it breaks.

Both sides are indexed like an audit (``CapiIndex``): the C functions and
variables of every module's ``__pyx_capi__``, the extension types and their
sizes, and the module list.  Changes are triaged: additions are harmless
(INFO), anything a consumer compiled against OLD trips over at import is
breaking (ERROR); a public Python module removed is a WARNING (Python
callers break, compiled ones do not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from cuaudit.names import TEST_FOLDERS
from cuaudit.analysis.capi_index import CapiIndex, Provider, import_problems
from cuaudit.model import Finding, Fix, Location


@dataclass
class Side:
    """One side of the diff: its artifacts and their index."""

    label: str
    artifacts: list[Any]
    index: CapiIndex


def _capi(index: CapiIndex, module: str) -> tuple[Provider | None, dict | None]:
    for p in index.providers(module):
        table = index.exports_of(p)
        if table is not None:
            return p, table
    provs = index.providers(module)
    return (provs[0] if provs else None), None


def _public(module: str) -> bool:
    parts = module.split(".")
    return not any(p.startswith("_") for p in parts) and not any(p in TEST_FOLDERS for p in parts)


def _moved_to(module: str, table: dict, new: CapiIndex) -> str | None:
    """The NEW module exporting most of OLD ``module``'s names (at least 80%), if any."""
    best, score = None, 0.0
    names = set(table)
    if not names:
        return None
    for other, provs in new.modules.items():
        if other == module:
            continue
        for p in provs:
            t = new.exports_of(p)
            if not t:
                continue
            s = len(names & set(t)) / len(names)
            if s > score:
                best, score = other, s
    return best if score >= 0.8 else None


def diff_findings(old: Side, new: Side, consumers: Iterable[Any], consumer_facts, get: Callable[[str], Any]) -> list[Finding]:
    """CU310-CU316 findings; ``get`` is the rule registry's lookup (rules sit above analysis)."""
    out: list[Finding] = []
    removed_rule, changed_rule, added_rule = get("CU310"), get("CU311"), get("CU312")
    module_rule, type_rule, pymod_rule, consumer_rule = get("CU313"), get("CU314"), get("CU315"), get("CU316")
    seen_modules: set[str] = set()

    def where(p: Provider | None, side: Side, symbol: str) -> Location:
        if p is None:
            return Location(side.artifacts[0].ref, None, symbol=symbol)
        return Location(p.ref, p.member, symbol=symbol)

    for module in sorted(set(old.index.modules) | set(new.index.modules)):
        if any(part in TEST_FOLDERS for part in module.split(".")):
            continue  # test modules are nobody's provider
        op, ot = _capi(old.index, module)
        np_, nt = _capi(new.index, module)
        if ot is None and nt is None:
            continue
        if ot is None:
            if nt:
                out.append(added_rule.finding(
                    where(np_, new, module),
                    f"{module} gains a C-API in {new.label}: {len(nt)} functions/variables (harmless)",
                    evidence={"triage": "harmless", "module": module, "added": sorted(nt)}, key=module,
                ))
            continue
        if nt is None:
            seen_modules.add(module)
            moved = _moved_to(module, ot, new.index)
            if np_ is None:
                msg = f"{module} (with a C-API of {len(ot)} functions/variables) is removed in {new.label}"
            else:
                msg = (f"{module} loses its __pyx_capi__ in {new.label} ({len(ot)} functions/variables): "
                       f"every consumer that cimports from it fails at import with AttributeError")
            fix = (f"keep {module} re-exporting the C-API of {moved} (`__pyx_capi__ = {moved.rsplit('.', 1)[-1]}.__pyx_capi__`), "
                   f"or release this as a major version" if moved else f"keep {module}'s C-API or release this as a major version")
            if moved:
                msg += f"; the functions moved to {moved}"
            out.append(module_rule.finding(
                where(np_ or op, new if np_ else old, module), msg, fix=Fix(fix),
                evidence={"triage": "breaking", "module": module, "moved_to": moved, "functions": len(ot)}, key=module,
            ))
            continue
        for name in sorted(set(ot) - set(nt)):
            out.append(removed_rule.finding(
                where(np_, new, f"{module}.{name}"),
                f"{module}.{name} is no longer exported in {new.label} (was `{ot[name].signature}`): breaking",
                fix=Fix(f"keep exporting {module}.{name}, or release this as a major version"),
                evidence={"triage": "breaking", "module": module, "name": name, "old": ot[name].signature},
                key=f"{module}.{name}",
            ))
        for name in sorted(set(nt) - set(ot)):
            out.append(added_rule.finding(
                where(np_, new, f"{module}.{name}"),
                f"{module}.{name} is new in {new.label} (`{nt[name].signature}`): harmless",
                evidence={"triage": "harmless", "module": module, "name": name, "new": nt[name].signature},
                key=f"{module}.{name}",
            ))
        for name in sorted(set(ot) & set(nt)):
            if ot[name].signature != nt[name].signature:
                out.append(changed_rule.finding(
                    where(np_, new, f"{module}.{name}"),
                    f"{module}.{name} changes signature in {new.label}: `{ot[name].signature}` -> "
                    f"`{nt[name].signature}`: consumers built against {old.label} fail at import",
                    fix=Fix(f"keep the old signature under the old name, or release this as a major version"),
                    evidence={"triage": "breaking", "module": module, "name": name,
                              "old": ot[name].signature, "new": nt[name].signature},
                    key=f"{module}.{name}",
                ))

    # Extension types resized.
    def typedefs(index: CapiIndex) -> dict[str, tuple[Provider, int]]:
        out_t: dict[str, tuple[Provider, int]] = {}
        for provs in index.modules.values():
            for p in provs:
                if p.facts:
                    for t in p.facts.types:
                        if t.size is not None:
                            out_t.setdefault(t.name, (p, t.size))
        return out_t

    otypes, ntypes = typedefs(old.index), typedefs(new.index)
    for name in sorted(set(otypes) & set(ntypes)):
        (op, osize), (np_, nsize) = otypes[name], ntypes[name]
        if osize != nsize:
            out.append(type_rule.finding(
                where(np_, new, name),
                f"extension type {name} changes size in {new.label}: {osize} -> {nsize} bytes; consumers that "
                f"cimport it fail at import ('size changed, may indicate binary incompatibility')",
                fix=Fix("keep the struct layout (add fields only in a major version)"),
                evidence={"triage": "breaking", "type": name, "old_size": osize, "new_size": nsize},
                key=name,
            ))

    # Public Python modules removed.
    for module in sorted(set(old.index.modules) - set(new.index.modules)):
        if module in seen_modules or not _public(module):
            continue
        parent = module.rsplit(".", 1)[0] if "." in module else ""
        if parent and parent not in old.index.modules:
            continue
        p = old.index.providers(module)[0]
        out.append(pymod_rule.finding(
            Location(p.ref, p.member, symbol=module),
            f"public module {module} is removed in {new.label}: `import {module}` fails",
            fix=Fix(f"keep a {module} module (a shim importing from the new location) for a deprecation period"),
            evidence={"triage": "breaking", "module": module}, key=module,
        ))

    # Consumers the change breaks.
    for art in consumers:
        def build(side: Side) -> CapiIndex:
            return CapiIndex.build(list(side.artifacts) + [art], consumer_facts(side, art))

        oi, ni = build(old), build(new)
        before = {(p.kind, p.module, tuple(i.name for i in p.imports)) for c in oi.consumers() if c.artifact is art
                  for p in import_problems(c, oi)}
        for c in ni.consumers():
            if c.artifact is not art:
                continue
            for p in import_problems(c, ni):
                if (p.kind, p.module, tuple(i.name for i in p.imports)) in before:
                    continue
                names = ", ".join(i.name for i in p.imports[:5]) or (p.type_import.name if p.type_import else "")
                reason = {
                    "no-module": "the module no longer exists",
                    "no-capi": "it has no __pyx_capi__",
                    "missing": "it no longer exports them",
                    "signature": f"the signature changed to `{p.found[0] if p.found else ''}`",
                    "type-size": f"the type's size changed to {p.actual_size}",
                }[p.kind]
                out.append(consumer_rule.finding(
                    Location(c.ref, c.member, symbol=p.module),
                    f"{c.dist} breaks with {new.label}: {c.module} cimports {names} from {p.module}, and {reason}",
                    fix=Fix(f"keep {c.dist} on {old.label} (pin it), or rebuild it against {new.label}"),
                    evidence={"triage": "breaking", "consumer": c.dist, "module": p.module, "problem": p.kind},
                    key=f"{p.module}:{p.kind}",
                ))
    return out
