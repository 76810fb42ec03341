"""Rules: small classes over facts that yield findings.

One module per family (``imports.py`` CU1xx, ``linkage.py`` CU2xx, ...).  A
rule is a subclass of :class:`Rule`; defining it registers it.  Its docstring
*is* its documentation, in fixed sections (ruff's layout)::

    ## What it does
    ## Why is this bad?
    ## Example
    ## Use instead
    ## Fix safety

``cuaudit rule CODE``, ``cuaudit rules`` and ``docs/rules/`` all render this
same text.  A rule never reads files: it asks ``ctx`` for facts, which the
engine extracted (or took from the cache) beforehand.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Iterator, Mapping, NamedTuple

from cuaudit.model import Finding, Fix, Location, Severity

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.context import RuleContext

DOC_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety", "Options", "References")

FAMILIES = {
    "CU0": "Problems with the input itself",
    "CU1": "Submodule attribute traps",
    "CU2": "Linking and loading",
    "CU3": "Cython C-API",
    "CU4": "NEP 50 promotion",
    "CU5": "Build-time GPU detection and missing device code",
    "CU6": "Device code coverage",
}

_REGISTRY: dict[str, type["Rule"]] = {}
_CODE = re.compile(r"^CU\d{3}$")


@dataclass(frozen=True)
class RuleDoc:
    code: str
    name: str
    summary: str
    severity: Severity
    family: str
    sections: Mapping[str, str]

    def markdown(self) -> str:
        out = [f"# {self.code} `{self.name}`", "", f"*{self.summary}*", ""]
        out.append(f"Default severity: **{self.severity}**. Family: {self.family}.")
        for title in DOC_SECTIONS:
            body = self.sections.get(title)
            if body:
                out += ["", f"## {title}", body]
        return "\n".join(out) + "\n"


class Rule:
    """Base class of every rule.  Subclasses set the class attributes below."""

    code: ClassVar[str]
    name: ClassVar[str]  # kebab-case, like ruff's rule names
    summary: ClassVar[str]  # one line
    severity: ClassVar[Severity] = Severity.WARNING
    #: names of the extractors whose facts the rule reads; the engine only
    #: extracts what the selected rules need.
    needs: ClassVar[tuple[str, ...]] = ()
    #: on-demand extractors of ``needs`` whose facts :meth:`check` reads only where :meth:`ahead`
    #: named them: once those are in, the facts of these extractors still pending (never named)
    #: keep no worker waiting for this rule (``RuleRun._let_idle_workers_go``)
    ahead_reads: ClassVar[tuple[str, ...]] = ()
    #: rules that only report problems found by inputs/extractors (CU0xx)
    emitted_by_engine: ClassVar[bool] = False
    #: configuration the rule reads, as "<family>.<option>" or "allow.<list>" (its doc's Options section)
    options: ClassVar[tuple[str, ...]] = ()
    #: where the failure it finds is documented (incidents, specifications): its doc's References section
    references: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "code" not in cls.__dict__:
            return  # an intermediate base class of a family
        if not _CODE.match(getattr(cls, "code", "")):
            raise TypeError(f"{cls.__name__}: code must look like CU123")
        if cls.code in _REGISTRY and _REGISTRY[cls.code].__qualname__ != cls.__qualname__:
            raise TypeError(f"{cls.code} registered twice ({_REGISTRY[cls.code].__name__}, {cls.__name__})")
        missing = [s for s in DOC_SECTIONS[:3] if f"## {s}" not in (cls.__doc__ or "")]
        if missing:
            raise TypeError(f"{cls.code}: docstring lacks sections {missing}")
        _REGISTRY[cls.code] = cls

    # -- what a rule does -------------------------------------------------
    def check(self, ctx: "RuleContext") -> Iterable[Finding]:
        """Yield findings.  Engine-emitted rules (CU0xx) yield nothing here."""
        return ()

    def ahead(self, ctx: "RuleContext") -> None:
        """Name the facts read on demand that :meth:`check` will read in bulk, with
        ``ctx.prefetch(..., ahead=True)``: the engine asks every rule before any runs, and the
        workers extract them while the parent computes what other rules read (nothing else
        changes; a rule that names nothing loses nothing)."""

    # -- helpers ------------------------------------------------------------
    @classmethod
    def finding(
        cls,
        location: Location,
        message: str,
        *,
        fix: Fix | str | None = None,
        evidence: Mapping[str, Any] | None = None,
        key: str = "",
        severity: Severity | None = None,
        origin: str = "static",
    ) -> Finding:
        if isinstance(fix, str):
            fix = Fix(fix)
        return Finding(
            code=cls.code,
            severity=severity or cls.severity,
            message=message,
            location=location,
            fix=fix,
            evidence=dict(evidence or {}),
            key=key,
            origin=origin,
        )

    @classmethod
    def doc(cls) -> RuleDoc:
        return RuleDoc(
            code=cls.code,
            name=cls.name,
            summary=cls.summary,
            severity=cls.severity,
            family=FAMILIES.get(cls.code[:3], ""),
            sections={**_sections(cls.__doc__ or ""), **_declared_sections(cls)},
        )


def _declared_sections(cls: type[Rule]) -> dict[str, str]:
    """Options and References, rendered from what the rule declares as data."""
    out: dict[str, str] = {}
    if cls.options:
        families, lists = family_options(), allow_lists()
        lines = []
        for opt in cls.options:
            table, _, key = opt.partition(".")
            if table == "allow":
                lines.append(f"- `[tool.cuaudit.allow] {key}` (list): {lists[key]}")
            else:
                spec = families[table][key]
                lines.append(f"- `[tool.cuaudit.{table}] {key}` ({spec.type.__name__}): {spec.doc}")
        out["Options"] = "\n".join(lines)
    if cls.references:
        out["References"] = "\n".join(f"- <{r}>" for r in cls.references)
    return out


def _sections(doc: str) -> dict[str, str]:
    text = inspect.cleandoc(doc)
    out: dict[str, str] = {}
    current = None
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("## "):
            if current:
                out[current] = "\n".join(lines).strip()
            current, lines = line[3:].strip(), []
        elif current:
            lines.append(line)
    if current:
        out[current] = "\n".join(lines).strip()
    return out


_loaded = False


def load_all() -> None:
    """Import every family module in this package (defining a rule registers it)."""
    global _loaded
    if _loaded:
        return
    from cuaudit.discovery import import_submodules

    import_submodules(__name__, __path__)
    _loaded = True


# -- the index: what an audit needs to know about rules before importing any -------------------
#
# Importing every family module (and the facts and analysis modules they import) was most
# of a small check's start-up: 0.13 s of fastrlock's 0.22 s.  ``_index.py`` holds what
# selection, validation, snapshots and reports read (code, name, needs, family tables);
# a rule's module is imported when its class is asked for.  It is generated with the rule
# docs (``scripts/gen_rule_docs.py``), and ``tests/test_registry.py`` fails while it is stale.


class RuleInfo(NamedTuple):
    """What the index knows of one rule without importing it."""

    module: str
    qualname: str
    name: str
    needs: tuple[str, ...]
    emitted_by_engine: bool


def _info_of(cls: type[Rule]) -> RuleInfo:
    return RuleInfo(cls.__module__, cls.__qualname__, cls.name, tuple(cls.needs), bool(cls.emitted_by_engine))


def index_data() -> dict[str, Any]:
    """The index, computed from the rule classes themselves (what ``_index.py`` must hold)."""
    import sys

    load_all()
    own = {c: cls for c, cls in _REGISTRY.items() if cls.__module__.startswith(__name__ + ".")}
    modules = sorted({cls.__module__ for cls in own.values()})
    return {
        "RULES": {c: tuple(_info_of(own[c])) for c in sorted(own)},
        "TABLES": {m.rsplit(".", 1)[-1]: m for m in modules},
        "ALLOW_LISTS": {n: m for m in modules for n in sorted(getattr(sys.modules[m], "ALLOW_LISTS", {}))},
    }


def index_source() -> str:
    """The text of ``_index.py``."""
    data = index_data()
    out = ['"""Generated by scripts/gen_rule_docs.py from the rule classes: do not edit by hand.',
           "",
           "What selecting rules, validating a configuration and reporting need, without importing",
           'every family module (see ``cuaudit.rules.RuleInfo``)."""', "",
           "#: code -> (module, class, name, needs, emitted_by_engine)", "RULES = {"]
    out += [f"    {c!r}: {v!r}," for c, v in data["RULES"].items()]
    out += ["}", "#: [tool.cuaudit.<table>] -> the family module that declares its OPTIONS", "TABLES = {"]
    out += [f"    {t!r}: {m!r}," for t, m in data["TABLES"].items()]
    out += ["}", "#: [tool.cuaudit.allow] list name -> the family module that declares it", "ALLOW_LISTS = {"]
    out += [f"    {n!r}: {m!r}," for n, m in data["ALLOW_LISTS"].items()]
    out += ["}", ""]
    return "\n".join(out)


def _rule_index() -> Any:
    import importlib

    return importlib.import_module(__name__ + "._index")


def known_codes() -> list[str]:
    """Every rule code: cuaudit's (from the index) and those of rules defined elsewhere (a test's)."""
    return sorted(set(_rule_index().RULES) | set(_REGISTRY))


def info(code: str) -> RuleInfo:
    """Module, name and needs of a rule, without importing its module when it is one of cuaudit's."""
    code = code.upper()
    cls = _REGISTRY.get(code)
    if cls is not None:
        return _info_of(cls)
    entry = _rule_index().RULES.get(code)
    if entry is None:
        raise KeyError(f"unknown rule {code!r}")
    return RuleInfo(*entry)


def all_rules() -> list[type[Rule]]:
    load_all()
    return [_REGISTRY[c] for c in sorted(_REGISTRY)]


def get(code: str) -> type[Rule]:
    """The rule class of a code, importing only its family's module."""
    code = code.upper()
    if code not in _REGISTRY:
        entry = _rule_index().RULES.get(code)
        if entry is not None:
            import importlib

            importlib.import_module(entry[0])
        if code not in _REGISTRY:
            load_all()  # an index older than the rules: `tests/test_registry.py` says so
    try:
        return _REGISTRY[code]
    except KeyError:
        raise KeyError(f"unknown rule {code!r}") from None


def by_name_or_code(ident: str) -> type[Rule]:
    load_all()
    for cls in _REGISTRY.values():
        if cls.name == ident:
            return cls
    return get(ident)


def family_options() -> dict[str, Mapping[str, Any]]:
    """``[tool.cuaudit.<family>]`` tables: family module name -> its declared ``OPTIONS``."""
    load_all()
    import sys

    out: dict[str, Mapping[str, Any]] = {}
    for name in sorted({cls.__module__ for cls in _REGISTRY.values()}):
        module = sys.modules[name]
        out[name.rsplit(".", 1)[-1]] = dict(getattr(module, "OPTIONS", {}))
    return out


def allow_lists() -> dict[str, str]:
    """``[tool.cuaudit.allow]`` names the families read (``ALLOW_LISTS``: name -> what it holds)."""
    load_all()
    import sys

    out: dict[str, str] = {}
    for name in sorted({cls.__module__ for cls in _REGISTRY.values()}):
        out.update(getattr(sys.modules[name], "ALLOW_LISTS", {}))
    return out


class _FamilyTables(Mapping):
    """Family table -> its declared ``OPTIONS``, importing a family's module only when its table is read."""

    def __init__(self, modules: Mapping[str, str]) -> None:
        self._modules = dict(modules)

    def __getitem__(self, table: str) -> Mapping[str, Any]:
        import importlib

        return dict(getattr(importlib.import_module(self._modules[table]), "OPTIONS", {}))

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._modules))

    def __len__(self) -> int:
        return len(self._modules)


def validate_config(config: Any) -> None:
    """Check a configuration against the rules: selectors, family tables, allow-lists (ConfigError).

    From the index: only the families whose tables the configuration sets are imported."""
    import sys

    from cuaudit.config import validate

    index = _rule_index()
    tables, allow = dict(index.TABLES), set(index.ALLOW_LISTS)
    for module in sorted({cls.__module__ for cls in _REGISTRY.values()} - set(index.TABLES.values())):
        tables.setdefault(module.rsplit(".", 1)[-1], module)  # rules defined elsewhere (a test's)
        allow |= set(getattr(sys.modules.get(module), "ALLOW_LISTS", {}))
    validate(config, codes=known_codes(), families=_FamilyTables(tables), allow_lists=allow)


def matches(code: str, prefixes: Iterable[str]) -> bool:
    """``CU2`` selects CU2xx, ``CU201`` selects itself, ``ALL``/``CU`` everything."""
    return any(p == "ALL" or code.startswith(p) for p in prefixes)


def selected_codes(select: Iterable[str], ignore: Iterable[str]) -> list[str]:
    """Codes selected by prefix; the longer (more specific) prefix wins, as in ruff.  Imports no rule."""
    sel, ign = list(select), list(ignore)
    out = []
    for code in known_codes():
        s = max((len(p) for p in sel if p == "ALL" or code.startswith(p)), default=-1)
        i = max((len(p) for p in ign if p == "ALL" or code.startswith(p)), default=-1)
        if s >= 0 and s > i:
            out.append(code)
    return out


def select(select: Iterable[str], ignore: Iterable[str]) -> Iterator[type[Rule]]:
    """The rule classes of :func:`selected_codes`."""
    for code in selected_codes(select, ignore):
        yield get(code)
