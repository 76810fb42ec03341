"""Python source facts: what a module binds, imports and reaches through attributes.

One :class:`PythonSourceFacts` per ``.py``/``.pyi`` member, read with
:mod:`ast` (never imported).  It is general on purpose: the submodule-trap
rules (CU1xx) read the module-level bindings, ``__getattr__`` and lazy-loader
tables, the imports and the attribute chains; other families read the imports
and positions.

What "binds at module level" means here is what ``import pkg`` leaves in
``pkg.__dict__``: imports (``import a.b`` binds ``a``; ``from . import x``
binds ``x``), assignments, ``def``/``class``, ``for``/``with`` targets and
names bound in module-level ``if``/``try`` blocks (marked ``conditional``).
Things that bind names a static reader cannot see (``globals()[...] = ...``,
``sys.modules[__name__] = ...``, ``exec``) are recorded as ``dynamic`` so that
rules stay silent rather than guess.

It is a pass over the member's one parse (``MemberReader.python()``, see
:mod:`cuaudit.formats.python`).  A file that does not parse gives a fact with
``syntax_error`` set (its imports are then unknown), from the same error and
the same empty tree every other extractor sees; the engine's format check
reports it (CU006).  Only a file that is not text at all makes this extractor
fail (CU006 too).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping

from cuaudit.facts import CompactState, Extractor, MemberReader, compact
from cuaudit.formats.python import LEAVES, PUSH_CHILDREN, PythonModule, parse_python_text, preorder, walk
from cuaudit.model import Member, MemberKind

# -- the facts -------------------------------------------------------------------


@compact
@dataclass(frozen=True)
class Binding(CompactState):
    """A name bound in the module namespace at import time."""

    name: str
    kind: str  # import | from | assign | def | class | target | lazy
    line: int
    conditional: bool = False  # inside a module-level if/try/with/for/while


@compact
@dataclass(frozen=True)
class ImportRecord(CompactState):
    """One imported name, anywhere in the module.

    ``import a.b as c`` -> kind="import", module="a.b", asname="c";
    ``from ..x import y as z`` -> kind="from", module="x", level=2, name="y", asname="z".
    """

    kind: str  # "import" | "from"
    module: str
    name: str | None
    asname: str | None
    level: int
    line: int
    column: int  # 1-based, characters
    end_line: int
    end_column: int
    scope: str  # "module", or the dotted name of the enclosing def/class
    conditional: bool  # inside if/try/with/loop (module level) or in a def/class
    type_checking: bool  # under ``if TYPE_CHECKING:`` (never runs)
    starts_line: bool  # the statement is the first thing on its line (an edit can go after it)
    indent: str  # the whitespace before the statement on its line
    caught: tuple[str, ...] = ()  # exceptions caught by the enclosing try blocks
    #: platform tests around it, e.g. ("sys.platform == 'emscripten'",); see :func:`platform_allows`
    platform: tuple[tuple[str, str, bool], ...] = ()

    @property
    def bound_name(self) -> str:
        """The local name this import binds."""
        if self.kind == "import":
            return self.asname or self.module.split(".")[0]
        return self.asname or (self.name or "")


@dataclass(frozen=True)
class GetattrInfo:
    """A module-level ``__getattr__`` (PEP 562) and the names it serves.

    ``handled``: names it returns something for (compared with the parameter,
    keys of the tables it looks the name up in, lazy-loader lists).
    ``raising``: names it is written to refuse (a branch that only raises).
    ``generic``: it imports whatever submodule it is asked for
    (``importlib.import_module(f".{name}", __name__)`` with no filter).
    ``fallback``: what happens to any other name: ``"AttributeError"`` when
    the function ends by raising it, ``"unknown"`` otherwise.
    """

    line: int
    handled: tuple[str, ...]
    raising: tuple[str, ...] = ()
    generic: bool = False
    fallback: str = "unknown"
    source: str = "def"  # def | lazy_loader.attach | lazy_loader.attach_stub
    #: ``getattr(<delegate>, name)``: the local name (or dotted path: ``linear_operator.utils``)
    #: of the module it forwards to
    delegate: str | None = None


@dataclass(frozen=True)
class LazyAttach:
    """``__getattr__, __dir__, __all__ = lazy_loader.attach(...)`` / ``attach_stub(...)``."""

    kind: str  # "attach" | "attach_stub"
    line: int
    submodules: tuple[str, ...] | None  # None: not statically known
    submod_attrs: Mapping[str, tuple[str, ...]] | None


@compact
@dataclass(frozen=True)
class AttributeChain(CompactState):
    """``root.a.b.c`` (the longest chain at this spot), with where it is.

    ``guard`` names the enclosing check that turns an AttributeError into an
    answer: ``"except"`` (a try whose handler catches AttributeError),
    ``"hasattr"`` / ``"getattr-default"`` (the last attribute is the string of
    such a call); ``guard_line`` is the line of that try or call.
    """

    root: str
    attrs: tuple[str, ...]
    line: int
    column: int
    end_line: int
    end_column: int
    scope: str
    shadowed: bool = False  # the root is a parameter or assigned local of the enclosing function (imports are not)
    guard: str = ""
    guard_line: int = 0
    caught: tuple[str, ...] = ()


@dataclass(frozen=True)
class SyntaxProblem:
    message: str
    line: int
    column: int


@dataclass(frozen=True)
class PythonSourceFacts:
    """Everything :class:`PythonSourceExtractor` learnt about one Python file."""

    bindings: tuple[Binding, ...] = ()
    imports: tuple[ImportRecord, ...] = ()
    all_names: tuple[str, ...] | None = None  # a static ``__all__``
    getattr: GetattrInfo | None = None
    lazy: LazyAttach | None = None
    chains: tuple[AttributeChain, ...] = ()
    #: module-level literal tables of strings (lists, tuples, sets, dict keys)
    string_tables: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: (line, what) for bindings a static reader cannot follow
    dynamic: tuple[tuple[int, str], ...] = ()
    #: module names passed as literals to importlib.import_module/__import__ at module level
    dynamic_imports: tuple[str, ...] = ()
    #: (name, line) of module-level ``del name`` statements
    deleted: tuple[tuple[str, int], ...] = ()
    syntax_error: SyntaxProblem | None = None
    line_count: int = 0
    ends_with_newline: bool = True

    # -- conveniences for rules -------------------------------------------------
    def bound_names(self) -> frozenset[str]:
        return frozenset(b.name for b in self.bindings)

    def module_level_imports(self) -> Iterator[ImportRecord]:
        """Imports that run when the module is imported (not in defs, not TYPE_CHECKING)."""
        for imp in self.imports:
            if imp.scope == "module" and not imp.type_checking:
                yield imp

    @property
    def star_imports(self) -> tuple[ImportRecord, ...]:
        return tuple(i for i in self.imports if i.kind == "from" and i.name == "*" and i.scope == "module")


# -- the extractor ----------------------------------------------------------------------


class PythonSourceExtractor(Extractor):
    """Module-level bindings, imports, ``__getattr__``, lazy tables and attribute chains."""

    name = "python_source"
    on_demand = True
    version = 10  # 10: a __getattr__ may forward to a dotted module path

    def applies(self, member: Member) -> bool:
        if member.kind not in (MemberKind.PYTHON, MemberKind.STUB, MemberKind.BUILD) or not member.path.endswith((".py", ".pyi")):
            return False
        # A package's own test suite (pkg/tests/..., pkg/sub/tests/...) is never imported by
        # the package and is not API: numpy 2.0 ships 40% of its .py files there.
        return not _IN_PACKAGE_TESTS.search(member.path)

    def extract(self, reader: MemberReader) -> PythonSourceFacts:
        return python_source_facts(reader.python())


def parse_python_source(text: str) -> PythonSourceFacts:
    """The facts of one module's source text (pure; used by tests and the stdlib reader)."""
    return python_source_facts(parse_python_text(text))


def python_source_facts(module: PythonModule) -> PythonSourceFacts:
    """The facts of one parsed module."""
    lines, text = module.lines, module.text
    ends_nl = text.endswith(("\n", "\r")) or not text
    if module.error is not None:
        err = module.error
        return PythonSourceFacts(syntax_error=SyntaxProblem(err.message, err.line or 0, err.column or 0),
                                 line_count=len(lines), ends_with_newline=ends_nl)
    return _Visitor(module).run(module.tree, len(lines), ends_nl)


# -- implementation ------------------------------------------------------------------------

#: a try whose handlers name AttributeError is an attribute check (the seed's snippet); a
#: broad `except Exception` is error handling, and its accesses stay ordinary CU104 material
_CATCH_ALL = ("AttributeError",)
#: the fields of the nodes that store names (``Name`` in a ``Store`` context, in tuples, lists
#: and starred targets): the only places a function's locals come from
_STORE_FIELDS: Mapping[type, tuple[str, ...]] = {
    ast.Assign: ("targets",), ast.AugAssign: ("target",), ast.AnnAssign: ("target",), ast.For: ("target",),
    ast.AsyncFor: ("target",), ast.comprehension: ("target",), ast.NamedExpr: ("target",),
    ast.withitem: ("optional_vars",),
}
#: the node types `_walk_nested` treats on their own; every other node only passes the walk on
_NESTED_SPECIAL = frozenset({
    ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Import, ast.ImportFrom, ast.If,
    ast.AnnAssign, ast.Try, getattr(ast, "TryStar", ast.Try), ast.Call, ast.Attribute, ast.Global, *_STORE_FIELDS,
})
_TRY_STAR = getattr(ast, "TryStar", ast.Try)
#: the names of the calls `_Visitor._dynamic_value` records
_DYNAMIC_CALLS = ("exec", "update", "setattr", "import_module", "__import__")
_NAMES_AND_GLOBALS = frozenset({ast.Name, ast.Global})
#: `_walk_nested` steps on `global` statements (a function's locals leave their names out)
_NESTED_LEAVES = LEAVES - {ast.Global}
#: what a def or lambda evaluates where it is defined, besides its decorators
_SIGNATURE_FIELDS = ("args", "returns", "type_params")


def _signature_nodes(node: ast.AST) -> list[ast.AST]:
    """The nodes of a function's signature: ``type_params`` (3.12+) is a list of nodes, the
    others one node or None."""
    out: list[ast.AST] = []
    for f in _SIGNATURE_FIELDS:
        v = getattr(node, f, None)
        if type(v) is list:
            out.extend(v)
        elif v is not None:
            out.append(v)
    return out

#: where ``_walk_nested`` is: (scope, enclosing functions, guard, caught, inside a def or class)
_Context = tuple[str, tuple[ast.AST, ...], Any, tuple[str, ...], bool]
_IN_PACKAGE_TESTS = re.compile(r"[^/]+/(tests|test)/")


def _strings(node: ast.AST | None, tables: Mapping[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    """The strings a literal (or a module-level table of them) holds, or None."""
    if node is None:
        return None
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        out: list[str] = []
        for elt in node.elts:
            if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                out.append(elt.value)
            elif isinstance(elt, ast.Starred):
                inner = _strings(elt.value, tables)
                if inner is None:
                    return None
                out += inner
            else:
                return None
        return tuple(out)
    if isinstance(node, ast.Dict):
        out = []
        for k, v in zip(node.keys, node.values):
            if k is None:  # {**other}
                inner = _strings(v, tables)
                if inner is None:
                    return None
                out += inner
            elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                out.append(k.value)
            else:
                return None
        return tuple(out)
    if isinstance(node, ast.Name):
        return tables.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.BitOr)):
        a, b = _strings(node.left, tables), _strings(node.right, tables)
        return None if a is None or b is None else a + b
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("set", "frozenset", "list", "tuple", "sorted", "dict") and len(node.args) == 1:
        return _strings(node.args[0], tables)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "keys" and not node.args:
        return _strings(node.func.value, tables)
    return None


def _dict_values(node: ast.AST, tables: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]] | None:
    if isinstance(node, ast.Name):
        return None
    if not isinstance(node, ast.Dict):
        return None
    out: dict[str, tuple[str, ...]] = {}
    for k, v in zip(node.keys, node.values):
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            return None
        vals = _strings(v, tables)
        if vals is None:
            return None
        out[k.value] = vals
    return out


def _exc_names(handler: ast.ExceptHandler) -> tuple[str, ...]:
    t = handler.type
    if t is None:
        return ("*",)
    elts = t.elts if isinstance(t, ast.Tuple) else [t]
    out = []
    for e in elts:
        if isinstance(e, ast.Name):
            out.append(e.id)
        elif isinstance(e, ast.Attribute):
            out.append(e.attr)
    return tuple(out)


def _platform_test(test: ast.AST) -> tuple[str, str] | None:
    """``sys.platform == "emscripten"``, ``sys.platform.startswith("win")``, ``os.name == "nt"``."""
    negate = False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq)):
        left, right = test.left, test.comparators[0]
        negate = isinstance(test.ops[0], ast.NotEq)
        if isinstance(left, ast.Attribute) and isinstance(left.value, ast.Name) and isinstance(right, ast.Constant) and isinstance(right.value, str):
            what = f"{left.value.id}.{left.attr}"
            if what in ("sys.platform", "os.name") and not negate:
                return what, right.value
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr == "startswith":
        base = test.func.value
        if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and f"{base.value.id}.{base.attr}" == "sys.platform":
            if test.args and isinstance(test.args[0], ast.Constant) and isinstance(test.args[0].value, str):
                return "sys.platform.startswith", test.args[0].value
    return None


def platform_allows(conditions: tuple[tuple[str, str, bool], ...], sys_platform: str, os_name: str) -> bool:
    """Whether imports under these platform tests run on the given platform."""
    for what, value, must in conditions:
        if what == "sys.platform":
            holds = sys_platform == value
        elif what == "sys.platform.startswith":
            holds = sys_platform.startswith(value)
        elif what == "os.name":
            holds = os_name == value
        else:
            continue
        if holds != must:
            return False
    return True


def _is_type_checking(test: ast.AST) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    if isinstance(test, ast.Attribute):
        return test.attr == "TYPE_CHECKING"
    return False


def _target_names(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, (ast.Tuple, ast.List)):
        for e in node.elts:
            yield from _target_names(e)
    elif isinstance(node, ast.Starred):
        yield from _target_names(node.value)


def _chain(node: ast.Attribute) -> tuple[str, tuple[str, ...]] | None:
    attrs: list[str] = []
    cur: ast.AST = node
    while isinstance(cur, ast.Attribute):
        attrs.append(cur.attr)
        cur = cur.value
    if isinstance(cur, ast.Name):
        return cur.id, tuple(reversed(attrs))
    return None


class _Visitor:
    def __init__(self, module: PythonModule) -> None:
        self.lines = module.lines
        # Exact prefilters of two walks of every module-level statement: a `:=` is in the text of
        # any walrus; the names `_dynamic_value` looks for are in the text of any call of them
        # (an ASCII text: no other spelling normalizes to them)
        self.has_walrus = ":=" in module.text
        self.dynamic_calls_possible = not module.text.isascii() or any(word in module.text for word in _DYNAMIC_CALLS)
        #: ast columns are UTF-8 byte offsets; Locations and Edits count characters (1-based)
        self._col = module.column
        self.bindings: list[Binding] = []
        self.imports: list[ImportRecord] = []
        #: attribute chains as ``_walk_nested`` finds them: (root, attrs, node, scope, functions, guard, caught)
        self.found_chains: list[tuple[str, tuple[str, ...], ast.AST, str, tuple[ast.AST, ...], Any, tuple[str, ...]]] = []
        self.locals_of: dict[ast.AST, frozenset[str]] = {}
        #: per function (def or lambda): the names stored and declared global anywhere in its
        #: body, nested scopes included, as ``_walk_nested`` passes them
        self.stored: dict[ast.AST, set[str]] = {}
        self.globals_of: dict[ast.AST, set[str]] = {}
        self.tables: dict[str, tuple[str, ...]] = {}
        self.dynamic: list[tuple[int, str]] = []
        self.dynamic_imports: list[str] = []
        self.deleted: list[tuple[str, int]] = []
        self.all_names: tuple[str, ...] | None = None
        self.all_dynamic = False
        self.getattr_def: ast.FunctionDef | ast.AsyncFunctionDef | None = None
        self.lazy: LazyAttach | None = None
        self.lazy_modules: set[str] = set()  # local names of the lazy_loader module
        self.lazy_funcs: dict[str, str] = {}  # local name -> attach | attach_stub
        self.loop_vars: dict[str, tuple[str, ...]] = {}
        self.platform: list[tuple[str, str, bool]] = []  # enclosing (what, value, must_equal)  # module-level for-loop variable -> its strings

    # -- positions -----------------------------------------------------------------
    def _starts_line(self, node: ast.stmt) -> tuple[bool, str]:
        if not (1 <= node.lineno <= len(self.lines)):
            return False, ""
        text = self.lines[node.lineno - 1]
        prefix = text.encode("utf-8")[: node.col_offset].decode("utf-8", "replace")
        return (prefix.strip() == "", prefix if prefix.strip() == "" else "")

    # -- the walk ----------------------------------------------------------------------
    def run(self, tree: ast.Module, line_count: int, ends_nl: bool) -> PythonSourceFacts:
        self.future_annotations = any(
            isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
            for n in tree.body
        )
        self._module_block(tree.body, conditional=False, type_checking=False, caught=())
        self._walk_nested(tree.body)
        getattr_info = self._getattr_info()
        imported_names = {i.bound_name for i in self.imports}
        if self.all_dynamic:
            all_names = None
        else:
            all_names = self.all_names
        return PythonSourceFacts(
            bindings=tuple(self.bindings),
            imports=tuple(sorted(self.imports, key=lambda i: (i.line, i.column))),
            all_names=all_names,
            getattr=getattr_info,
            lazy=self.lazy,
            # Only chains rooted at a name some import binds can reach a submodule; the rest
            # (every `self.x.y`) were 90% of a 156 MB cache for one environment's sources.
            chains=self._chains(imported_names),
            string_tables=dict(self.tables),
            dynamic=tuple(self.dynamic),
            dynamic_imports=tuple(self.dynamic_imports),
            deleted=tuple(self.deleted),
            line_count=line_count,
            ends_with_newline=ends_nl,
        )

    def _bind(self, name: str, kind: str, line: int, conditional: bool) -> None:
        self.bindings.append(Binding(name, kind, line, conditional))

    def _record_import(self, node: ast.Import | ast.ImportFrom, scope: str, conditional: bool, type_checking: bool, caught: tuple[str, ...]) -> list[ImportRecord]:
        starts, indent = self._starts_line(node)
        common = dict(
            platform=tuple(self.platform),
            line=node.lineno,
            column=self._col(node.lineno, node.col_offset),
            end_line=node.end_lineno or node.lineno,
            end_column=self._col(node.end_lineno or node.lineno, node.end_col_offset or 0),
            scope=scope,
            conditional=conditional,
            type_checking=type_checking,
            starts_line=starts,
            indent=indent,
            caught=caught,
        )
        out = []
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.append(ImportRecord("import", alias.name, None, alias.asname, 0, **common))
        else:
            for alias in node.names:
                out.append(ImportRecord("from", node.module or "", alias.name, alias.asname, node.level or 0, **common))
        self.imports += out
        return out

    def _module_block(self, body: list[ast.stmt], *, conditional: bool, type_checking: bool, caught: tuple[str, ...]) -> None:
        """Statements that run at import time: their bindings, imports, tables."""
        for node in body:
            line = node.lineno
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for rec in self._record_import(node, "module", conditional, type_checking, caught):
                    if type_checking:
                        continue
                    if rec.kind == "from" and rec.name == "*":
                        continue
                    self._bind(rec.bound_name, rec.kind, line, conditional)
                    if rec.kind == "import" and rec.module.split(".")[0] in ("lazy_loader",):
                        self.lazy_modules.add(rec.bound_name)
                    if rec.kind == "from" and rec.module == "lazy_loader" and rec.name in ("attach", "attach_stub"):
                        self.lazy_funcs[rec.bound_name] = rec.name
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._bind(node.name, "def", line, conditional)
                if node.name == "__getattr__" and not type_checking:
                    self.getattr_def = node
            elif isinstance(node, ast.ClassDef):
                self._bind(node.name, "class", line, conditional)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = node.value
                for t in targets:
                    for name in _target_names(t):
                        self._bind(name, "assign", line, conditional)
                    self._dynamic_target(t, line)
                    if isinstance(t, ast.Name) and value is not None:
                        vals = _strings(value, self.tables)
                        if t.id == "__all__":
                            if isinstance(node, ast.AugAssign):
                                if vals is None or self.all_names is None:
                                    self.all_dynamic = True
                                else:
                                    self.all_names = self.all_names + vals
                            elif vals is None:
                                self.all_dynamic = True
                            else:
                                self.all_names = vals
                        elif vals is not None and not isinstance(node, ast.AugAssign):
                            self.tables[t.id] = vals
                        elif isinstance(node, ast.AugAssign) and vals is not None and t.id in self.tables:
                            self.tables[t.id] = self.tables[t.id] + vals
                if value is not None:
                    self._lazy_call(value, targets, line)
                    self._dynamic_value(value, line)
            elif isinstance(node, ast.If):
                tc = _is_type_checking(node.test)
                plat = _platform_test(node.test)
                if plat:
                    self.platform.append((plat[0], plat[1], True))
                self._module_block(node.body, conditional=True, type_checking=type_checking or tc, caught=caught)
                if plat:
                    self.platform[-1] = (plat[0], plat[1], False)
                self._module_block(node.orelse, conditional=True, type_checking=type_checking, caught=caught)
                if plat:
                    self.platform.pop()
            elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
                names = tuple(n for h in node.handlers for n in _exc_names(h))
                self._module_block(node.body, conditional=True, type_checking=type_checking, caught=caught + names)
                for h in node.handlers:
                    if h.name:
                        self._bind(h.name, "target", h.lineno, True)
                    self._module_block(h.body, conditional=True, type_checking=type_checking, caught=caught)
                self._module_block(node.orelse, conditional=True, type_checking=type_checking, caught=caught)
                self._module_block(node.finalbody, conditional=True, type_checking=type_checking, caught=caught)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                for name in _target_names(node.target):
                    self._bind(name, "target", line, True)
                loop_values = _strings(node.iter, self.tables) if isinstance(node.target, ast.Name) else None
                if loop_values is not None:
                    self.loop_vars[node.target.id] = loop_values
                self._module_block(node.body, conditional=True, type_checking=type_checking, caught=caught)
                if loop_values is not None:
                    self.loop_vars.pop(node.target.id, None)
                self._module_block(node.orelse, conditional=True, type_checking=type_checking, caught=caught)
            elif isinstance(node, ast.While):
                self._module_block(node.body, conditional=True, type_checking=type_checking, caught=caught)
                self._module_block(node.orelse, conditional=True, type_checking=type_checking, caught=caught)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        for name in _target_names(item.optional_vars):
                            self._bind(name, "target", line, conditional)
                self._module_block(node.body, conditional=conditional, type_checking=type_checking, caught=caught)
            elif isinstance(node, ast.Match):
                for case in node.cases:
                    self._module_block(case.body, conditional=True, type_checking=type_checking, caught=caught)
            elif isinstance(node, ast.Expr):
                self._lazy_call(node.value, [], line)
                self._dynamic_value(node.value, line)
            elif isinstance(node, ast.Delete):
                for t in node.targets:
                    for name in _target_names(t):
                        self.deleted.append((name, line))
            # walrus targets at module level
            if not self.has_walrus or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.Try, ast.For, ast.While, ast.With)):
                continue
            for sub in walk(node):
                if isinstance(sub, ast.NamedExpr) and isinstance(sub.target, ast.Name):
                    self._bind(sub.target.id, "assign", line, True)

    def _dynamic_target(self, target: ast.AST, line: int) -> None:
        # globals()["x"] = ..., vars()[...] = ..., sys.modules[__name__] = ...
        if isinstance(target, ast.Subscript):
            base = target.value
            if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id in ("globals", "vars", "locals"):
                key = target.slice
                # numpy: `for ta in ["float96", ...]: globals()[ta] = ...` binds known names
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    self._bind(key.value, "assign", line, True)
                elif isinstance(key, ast.Name) and key.id in self.loop_vars:
                    for name in self.loop_vars[key.id]:
                        self._bind(name, "assign", line, True)
                else:
                    self.dynamic.append((line, f"{base.func.id}()[...] assignment"))
            elif isinstance(base, ast.Attribute) and base.attr == "modules":
                # only `sys.modules[__name__] = obj` changes what `import pkg` gives
                # (importlib itself stores its _bootstrap under other names)
                if isinstance(target.slice, ast.Name) and target.slice.id == "__name__":
                    self.dynamic.append((line, "the module replaces itself in sys.modules"))
            elif isinstance(base, ast.Attribute) and base.attr == "__dict__":
                self.dynamic.append((line, "__dict__ assignment"))

    def _dynamic_value(self, value: ast.AST, line: int) -> None:
        if not self.dynamic_calls_possible:
            return
        for sub in walk(value):
            if not isinstance(sub, ast.Call):
                continue
            f = sub.func
            fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if fname in ("exec",):
                self.dynamic.append((line, "exec()"))
            elif fname == "update" and isinstance(f, ast.Attribute):
                base = f.value
                if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id in ("globals", "vars"):
                    self.dynamic.append((line, f"{base.func.id}().update()"))
                elif isinstance(base, ast.Attribute) and base.attr == "__dict__":
                    self.dynamic.append((line, "__dict__.update()"))
            elif fname == "setattr" and sub.args:
                self.dynamic.append((line, "setattr()"))
            elif fname in ("import_module", "__import__") and sub.args:
                arg = sub.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    if arg.value.startswith("."):
                        pkg = sub.args[1] if len(sub.args) > 1 else None
                        if isinstance(pkg, ast.Name) and pkg.id in ("__name__", "__package__"):
                            self.dynamic_imports.append(arg.value)  # resolved by the package model
                    else:
                        self.dynamic_imports.append(arg.value)
                else:
                    self.dynamic.append((line, f"{fname}() of a computed name"))

    def _lazy_call(self, value: ast.AST, targets: list[ast.AST], line: int) -> None:
        if not isinstance(value, ast.Call):
            return
        f = value.func
        kind = None
        if isinstance(f, ast.Attribute) and f.attr in ("attach", "attach_stub") and isinstance(f.value, ast.Name) and f.value.id in self.lazy_modules:
            kind = f.attr
        elif isinstance(f, ast.Name) and f.id in self.lazy_funcs:
            kind = self.lazy_funcs[f.id]
        if kind is None:
            return
        submodules: tuple[str, ...] | None = ()
        attrs: dict[str, tuple[str, ...]] | None = {}
        if kind == "attach":
            kw = {k.arg: k.value for k in value.keywords if k.arg}
            sub_node = kw.get("submodules", value.args[1] if len(value.args) > 1 else None)
            attr_node = kw.get("submod_attrs", value.args[2] if len(value.args) > 2 else None)
            submodules = () if sub_node is None or (isinstance(sub_node, ast.Constant) and sub_node.value is None) else _strings(sub_node, self.tables)
            if attr_node is None or (isinstance(attr_node, ast.Constant) and attr_node.value is None):
                attrs = {}
            else:
                attrs = _dict_values(attr_node, self.tables)
        else:
            submodules, attrs = None, None  # read from the .pyi by the package model
        self.lazy = LazyAttach(kind, line, submodules, attrs)
        for t in targets:
            for name in _target_names(t):
                self._bind(name, "lazy", line, False)

    # -- everything below module level: imports, chains -----------------------------------
    def _walk_nested(self, roots: list[ast.stmt]) -> None:
        """Imports inside defs/classes and attribute chains everywhere, with their guards.

        Depth first in source order with an explicit stack: a context on the stack (scope,
        enclosing functions, guard, caught, in a def) holds for the nodes popped after it, until
        the next one (a recursive call per node was most of this pass).  A chain is kept as it
        is found and made a fact at the end, once the imports say whether its root can reach a
        module at all (nine chains in ten are ``self.x.y``): only then are its columns counted.
        The same walk notes, for each enclosing function, the names stored and declared
        ``global`` in its body (what ``_own_locals`` is made of): a walk of every function body
        of its own for them cost a third of this pass.  The parts of a function body this walk
        does not enter (annotations, defaults, ``if TYPE_CHECKING:`` bodies, ``except`` types,
        a nested class's keywords) are walked for those names alone.
        """
        ctx: _Context = ("module", (), None, (), False)
        scope, functions, guard, caught, in_def = ctx
        stack: list[ast.AST | _Context] = list(roots)[::-1]
        pop, push, extend, found = stack.pop, stack.append, stack.extend, self.found_chains.append
        special, leaves, pushers = _NESTED_SPECIAL, _NESTED_LEAVES, PUSH_CHILDREN
        store_fields, stored, name_type, attribute_type = _STORE_FIELDS, self.stored, ast.Name, ast.Attribute
        future_annotations = self.future_annotations
        unwalked = self._stores_in
        while stack:
            node = pop()
            t = type(node)
            if t in leaves:  # names and constants, most of a tree: nothing below them
                continue
            if t is tuple:
                ctx = node  # type: ignore[assignment]
                scope, functions, guard, caught, in_def = ctx
                continue
            if t in special:
                if t in store_fields:
                    if functions:
                        for field in store_fields[t]:
                            value = getattr(node, field)
                            for target in value if type(value) is list else (value,):
                                if type(target) is name_type:
                                    for f in functions:
                                        stored[f].add(target.id)
                                elif target is not None:
                                    for f in functions:
                                        stored[f].update(_target_names(target))
                    if t is not ast.AnnAssign:
                        pushers[t](node, extend, push)
                        continue
                # the most frequent first
                if t is attribute_type:  # the chain `root.a.b` (the inner attributes not walked again)
                    attrs_rev = [node.attr]
                    cur = node.value
                    while type(cur) is attribute_type:
                        attrs_rev.append(cur.attr)
                        cur = cur.value
                    if type(cur) is name_type:
                        found((cur.id, tuple(attrs_rev[::-1]), node, scope, functions, guard, caught))
                        continue
                    pushers[t](node, extend, push)
                    continue
                if t is ast.Call:
                    func = node.func
                    if type(func) is not name_type or func.id not in ("hasattr", "getattr"):
                        pushers[t](node, extend, push)
                        continue
                    args = node.args
                    if (
                        len(args) >= 2
                        and isinstance(args[1], ast.Constant)
                        and isinstance(args[1].value, str)
                        and (node.func.id == "hasattr" or len(args) >= 3)
                    ):
                        base = args[0]
                        root_attrs = _chain(base) if isinstance(base, ast.Attribute) else ((base.id, ()) if isinstance(base, ast.Name) else None)
                        if root_attrs is not None and args[1].value.isidentifier():
                            root, attrs = root_attrs
                            kind = "hasattr" if node.func.id == "hasattr" else "getattr-default"
                            found((root, attrs + (args[1].value,), node, scope, functions, (kind, node.lineno, ()), caught))
                            if functions and node.keywords:
                                unwalked(node.keywords, functions)
                            extend(args[2:][::-1])
                            continue
                if t is ast.FunctionDef or t is ast.AsyncFunctionDef or t is ast.Lambda:
                    name = getattr(node, "name", "<lambda>")
                    inner = f"{name}" if scope == "module" else f"{scope}.{name}"
                    body = node.body if isinstance(node.body, list) else [node.body]
                    stored[node], self.globals_of[node] = set(), set()
                    if functions:  # defaults and annotations are evaluated in the enclosing function
                        unwalked(_signature_nodes(node), functions)
                    push(ctx)  # after the body
                    extend(body[::-1])
                    push((inner, functions + (node,), guard, caught, True))
                    extend(getattr(node, "decorator_list", [])[::-1])  # in the enclosing scope
                    continue
                if t is ast.ClassDef:
                    inner = node.name if scope == "module" else f"{scope}.{node.name}"
                    if functions and node.keywords:
                        unwalked(node.keywords, functions)
                    push(ctx)
                    extend(node.body[::-1])
                    push((inner, functions, guard, caught, True))
                    extend((node.decorator_list + node.bases)[::-1])
                    continue
                if t is ast.Import or t is ast.ImportFrom:
                    if in_def:
                        self._record_import(node, scope, True, False, caught)
                    continue
                if t is ast.If and _is_type_checking(node.test):
                    if functions:
                        unwalked([node.test, *node.body], functions)
                    extend(node.orelse[::-1])  # the body never runs
                    continue
                if t is ast.AnnAssign:
                    # annotations are not evaluated under `from __future__ import annotations`
                    # (and never for local variables)
                    parts = [node.target] + ([node.value] if node.value is not None else [])
                    if not future_annotations and not in_def:
                        parts.append(node.annotation)
                    elif functions:
                        unwalked([node.annotation], functions)
                    extend(parts[::-1])
                    continue
                if t is ast.Try or t is _TRY_STAR:
                    names = tuple(n for h in node.handlers for n in _exc_names(h))
                    body_guard = ("except", node.lineno, names) if any(n in _CATCH_ALL for n in names) else guard
                    if functions:
                        unwalked([h.type for h in node.handlers if h.type is not None], functions)
                    extend((node.orelse + node.finalbody)[::-1])
                    for h in reversed(node.handlers):
                        extend(h.body[::-1])
                    push(ctx)
                    extend(node.body[::-1])
                    push((scope, functions, body_guard, caught + names, in_def))
                    continue
                if t is ast.Global:
                    for f in functions:
                        self.globals_of[f].update(node.names)
                    continue
            # most nodes: nothing of their own, only children
            pushers[t](node, extend, push)

    def _stores_in(self, nodes: list[ast.AST], functions: tuple[ast.AST, ...]) -> None:
        """Note the names stored and declared global in ``nodes`` (parts of the body of each of
        ``functions`` that ``_walk_nested`` does not enter)."""
        for n in preorder(nodes, _NAMES_AND_GLOBALS):
            if type(n) is ast.Name:
                if type(n.ctx) is ast.Store:
                    for f in functions:
                        self.stored[f].add(n.id)
            else:
                for f in functions:
                    self.globals_of[f].update(n.names)

    def _chains(self, roots: set[str]) -> tuple[AttributeChain, ...]:
        """The chains found whose root is one of ``roots``, as facts, in the order found."""
        col = self._col
        own_locals = self._own_locals
        out = []
        for root, attrs, node, scope, functions, guard, caught in self.found_chains:
            if root not in roots:
                continue
            g, gl, _ = guard if guard else ("", 0, ())
            end_line = getattr(node, "end_lineno", None) or node.lineno
            shadowed = False
            for f in functions:
                if root in own_locals(f):
                    shadowed = True
                    break
            out.append(AttributeChain(
                root=root,
                attrs=attrs,
                line=node.lineno,
                column=col(node.lineno, node.col_offset),
                end_line=end_line,
                end_column=col(end_line, getattr(node, "end_col_offset", 0) or 0),
                scope=scope,
                shadowed=shadowed,
                guard=g,
                guard_line=gl,
                caught=tuple(caught),
            ))
        return tuple(out)

    def _own_locals(self, func: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> frozenset[str]:
        """A function's parameters and the names stored anywhere in its body (nested scopes
        included), less its ``global`` names; once per function, when first asked."""
        known = self.locals_of.get(func)
        if known is not None:
            return known
        args = func.args
        assigned = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        if args.vararg:
            assigned.add(args.vararg.arg)
        if args.kwarg:
            assigned.add(args.kwarg.arg)
        assigned |= self.stored[func]
        known = self.locals_of[func] = frozenset(assigned - self.globals_of[func])
        return known

    # -- __getattr__ -----------------------------------------------------------------------
    def _getattr_info(self) -> GetattrInfo | None:
        node = self.getattr_def
        if node is None:
            if self.lazy is not None:
                handled: tuple[str, ...] = ()
                if self.lazy.submodules is not None:
                    handled += self.lazy.submodules
                if self.lazy.submod_attrs is not None:
                    for mod, names in self.lazy.submod_attrs.items():
                        handled += tuple(names)
                return GetattrInfo(
                    self.lazy.line, tuple(dict.fromkeys(handled)), fallback="AttributeError",
                    source=f"lazy_loader.{self.lazy.kind}",
                )
            return None
        if not node.args.args and not node.args.posonlyargs:
            return GetattrInfo(node.lineno, (), fallback="unknown")
        param = (node.args.posonlyargs + node.args.args)[0].arg
        handled: list[str] = []
        raising: list[str] = []
        generic = False

        def names_tested(test: ast.AST) -> tuple[str, ...] | None:
            """Names a condition selects: ``name == 'x'``, ``name in (...)``, ``name in TABLE``."""
            if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
                out: list[str] = []
                for v in test.values:
                    got = names_tested(v)
                    if got is None:
                        return None
                    out += got
                return tuple(out)
            if isinstance(test, ast.Compare) and len(test.ops) == 1:
                left, op, right = test.left, test.ops[0], test.comparators[0]
                if isinstance(right, ast.Name) and right.id == param:
                    left, right = right, left
                if not (isinstance(left, ast.Name) and left.id == param):
                    return None
                if isinstance(op, ast.Eq) and isinstance(right, ast.Constant) and isinstance(right.value, str):
                    return (right.value,)
                if isinstance(op, ast.In):
                    return _strings(right, self.tables)
            return None

        def static_truth(test: ast.AST) -> bool | None:
            """``"x" in TABLE`` with a literal module-level table: decided statically."""
            if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.In, ast.NotIn)):
                left, right = test.left, test.comparators[0]
                table = _strings(right, self.tables)
                if isinstance(left, ast.Constant) and isinstance(left.value, str) and table is not None:
                    inside = left.value in table
                    return inside if isinstance(test.ops[0], ast.In) else not inside
            return None

        def ends_in_raise(body: list[ast.stmt]) -> bool:
            # numpy 2.0: `if attr == "distutils": if 'distutils' in __numpy_submodules__: ... else: raise`
            if not body:
                return False
            last = body[-1]
            if isinstance(last, ast.Raise):
                return True
            if isinstance(last, ast.If):
                truth = static_truth(last.test)
                if truth is not None:
                    return ends_in_raise(last.body if truth else last.orelse)
            return False

        def visit(stmts: list[ast.stmt]) -> None:
            nonlocal generic
            for st in stmts:
                if isinstance(st, ast.If):
                    got = names_tested(st.test)
                    if got is not None:
                        (raising if ends_in_raise(st.body) else handled).extend(got)
                    visit(st.body)
                    visit(st.orelse)
                elif isinstance(st, ast.Match) and isinstance(st.subject, ast.Name) and st.subject.id == param:
                    for case in st.cases:
                        for sub in ast.walk(case.pattern):
                            if isinstance(sub, ast.MatchValue) and isinstance(sub.value, ast.Constant) and isinstance(sub.value.value, str):
                                (raising if ends_in_raise(case.body) else handled).append(sub.value.value)
                        visit(case.body)
                elif isinstance(st, (ast.Try, ast.With, ast.For, ast.While)):
                    visit(getattr(st, "body", []))
                    for h in getattr(st, "handlers", []):
                        visit(h.body)
                    visit(getattr(st, "orelse", []))
                    visit(getattr(st, "finalbody", []))
            return None

        visit(node.body)
        # Table lookups anywhere: TABLE[name], TABLE.get(name), and imports of the name itself.
        for sub in ast.walk(node):
            if isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Name) and sub.slice.id == param:
                keys = _strings(sub.value, self.tables)
                if keys:
                    handled.extend(keys)
            elif isinstance(sub, ast.Call):
                f = sub.func
                if isinstance(f, ast.Attribute) and f.attr == "get" and sub.args and isinstance(sub.args[0], ast.Name) and sub.args[0].id == param:
                    keys = _strings(f.value, self.tables)
                    if keys:
                        handled.extend(keys)
                fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if fname in ("import_module", "__import__") and sub.args and any(
                    isinstance(n, ast.Name) and n.id == param for n in ast.walk(sub.args[0])
                ):
                    generic = True
        # numpy.core: `def __getattr__(name): return getattr(_core, name)` forwards to another module
        delegate = None
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "getattr"
                and len(sub.args) == 2 and isinstance(sub.args[0], (ast.Name, ast.Attribute))
                and isinstance(sub.args[1], ast.Name) and sub.args[1].id == param
            ):
                # gpytorch.utils: `getattr(linear_operator.utils, name)`, a dotted module path
                chain = (sub.args[0].id, ()) if isinstance(sub.args[0], ast.Name) else _chain(sub.args[0])
                if chain is not None:
                    delegate = ".".join((chain[0],) + chain[1])
                break
        explicit = [h for h in handled if h not in raising]
        # an import of f".{name}" guarded by a membership test serves only those names
        if generic and (explicit or raising):
            generic = not _guarded_import(node, param)
        fallback = "AttributeError" if _raises(node.body, "AttributeError") else "unknown"
        return GetattrInfo(
            node.lineno, tuple(dict.fromkeys(explicit)), tuple(dict.fromkeys(raising)), generic, fallback,
            delegate=delegate,
        )


def _guarded_import(func: ast.AST, param: str) -> bool:
    """True when every name-computed import sits inside an ``if`` that tests the parameter."""

    def walk(stmts: Iterable[ast.stmt], guarded: bool) -> bool:
        for st in stmts:
            if isinstance(st, ast.If):
                tests = any(isinstance(n, ast.Name) and n.id == param for n in ast.walk(st.test))
                if not walk(st.body, guarded or tests) or not walk(st.orelse, guarded):
                    return False
                continue
            if isinstance(st, (ast.Try, ast.With, ast.For, ast.While)):
                parts = list(getattr(st, "body", [])) + list(getattr(st, "orelse", [])) + list(getattr(st, "finalbody", []))
                for h in getattr(st, "handlers", []):
                    parts += h.body
                if not walk(parts, guarded):
                    return False
                continue
            for sub in ast.walk(st):
                if isinstance(sub, ast.Call):
                    f = sub.func
                    fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                    if fname in ("import_module", "__import__") and sub.args and any(
                        isinstance(n, ast.Name) and n.id == param for n in ast.walk(sub.args[0])
                    ) and not guarded:
                        return False
        return True

    return walk(getattr(func, "body", []), False)


def _raises(body: list[ast.stmt], exc: str) -> bool:
    for st in body:
        for sub in ast.walk(st):
            if isinstance(sub, ast.Raise) and sub.exc is not None:
                e = sub.exc.func if isinstance(sub.exc, ast.Call) else sub.exc
                if (isinstance(e, ast.Name) and e.id == exc) or (isinstance(e, ast.Attribute) and e.attr == exc):
                    return True
    return False
