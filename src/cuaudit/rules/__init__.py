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
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Iterator, Mapping

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


def all_rules() -> list[type[Rule]]:
    load_all()
    return [_REGISTRY[c] for c in sorted(_REGISTRY)]


def get(code: str) -> type[Rule]:
    load_all()
    try:
        return _REGISTRY[code.upper()]
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


def validate_config(config: Any) -> None:
    """Check a configuration against the rules: selectors, family tables, allow-lists (ConfigError)."""
    from cuaudit.config import validate

    validate(config, codes=[c.code for c in all_rules()], families=family_options(), allow_lists=allow_lists())


def matches(code: str, prefixes: Iterable[str]) -> bool:
    """``CU2`` selects CU2xx, ``CU201`` selects itself, ``ALL``/``CU`` everything."""
    return any(p == "ALL" or code.startswith(p) for p in prefixes)


def select(select: Iterable[str], ignore: Iterable[str]) -> Iterator[type[Rule]]:
    """Rules selected by prefix; the longer (more specific) prefix wins, as in ruff."""
    sel, ign = list(select), list(ignore)
    for cls in all_rules():
        s = max((len(p) for p in sel if p == "ALL" or cls.code.startswith(p)), default=-1)
        i = max((len(p) for p in ign if p == "ALL" or cls.code.startswith(p)), default=-1)
        if s >= 0 and s > i:
            yield cls
