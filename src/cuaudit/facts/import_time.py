"""What a module executes when it is imported, as a short program the package model runs.

:mod:`cuaudit.facts.python_source` says what a module binds and imports;
this pass keeps what that summary loses and the interpreter does not:

- the *order* of module-level effects (an import of ``pkg.series`` followed by
  ``from .series import series`` leaves the function, not the module, in
  ``pkg.series``: sympy);
- the *condition* each effect runs under, as source text the package model
  evaluates for the audited interpreter (``TYPE_CHECKING`` is false, a
  module constant, a platform or version test, an environment variable that
  is unset by default) or keeps as "either way" (anyio's
  ``if TYPE_CHECKING or not install_lazy_importer():``), and the imports of
  the ``try`` an ``except ImportError`` fallback stands in for;
- the functions and methods called at module level and what their bodies
  import (setuptools' ``monkey.patch_all()``, sqlalchemy's registry), so the
  model can follow them to a bounded depth;
- a module that replaces itself in ``sys.modules`` with an instance of its
  own class after copying its ``__dict__`` (Pygments' ``lexers``), and the
  ``__getattr__`` of that class;
- what a ``__getattr__`` falls back to when its tables do not hold the name:
  ``raise AttributeError``, or a call to a function that raises it
  (pydantic's ``_getattr_migration``).

A pass over the member's one parse (``reader.python()``); pure and
picklable; a file that does not parse gives ``None`` (its syntax error is
reported once, by the format layer and python_source).
"""

from __future__ import annotations

import ast
import dataclasses
import pickle
from dataclasses import dataclass, field
from typing import Iterator

from cuaudit.facts import CompactState, Extractor, MemberReader, compact
from cuaudit.formats.python import child_nodes, preorder, walk
from cuaudit.heap import gc_paused
from cuaudit.model import Member, MemberKind


@compact
@dataclass(frozen=True)
class Condition(CompactState):
    """One test an effect runs under: ``expr`` (source text) must be ``truth``.

    ``try_imports``: for an ``except ImportError`` handler, the modules the
    ``try`` body imports (``(module, name, level)``); the handler runs only if
    one of them fails.  ``<try-else>``: the ``else`` of such a ``try`` (runs
    only if none failed).
    """

    expr: str
    truth: bool
    line: int
    try_imports: tuple[tuple[str, str, int], ...] = ()
    #: a handler (or ``else``) of a ``try`` that catches ImportError: the ``try``'s line
    try_line: int = 0


@compact
@dataclass(frozen=True)
class Effect(CompactState):
    """One thing the interpreter does at import time.

    kind: ``import`` (``module``/``name``/``level``, binds ``bound``), ``bind``
    (an assignment, ``def`` or ``class`` binds ``bound``; ``value`` names the
    callable whose result it binds, if any), ``call`` (``callee`` is the dotted
    name called, ``args`` its literal string arguments), ``dynamic-import``
    (``importlib.import_module``/``__import__``: ``module`` is the literal
    name, empty when computed), ``del`` (``bound``).
    """

    kind: str
    line: int
    conditions: tuple[Condition, ...] = ()
    #: the lines of the ``try`` blocks (and ``with suppress(ImportError)``) around it that
    #: catch an ImportError without re-raising it, outermost first: a failed import there
    #: does not fail the module, it skips the rest of that block
    try_lines: tuple[int, ...] = ()
    module: str = ""
    name: str = ""
    level: int = 0
    bound: str = ""
    callee: str = ""
    args: tuple[str, ...] = ()
    value: str = ""
    #: a call's keyword arguments that are string literals (``lextab="generic_lextab"``)
    kwargs: tuple[tuple[str, str], ...] = ()
    #: a dynamic import of a computed name: that name's expression, as source text
    #: (astropy's ``".constants." + phys_version``)
    expr: str = ""
    #: a dynamic import's literal ``package`` argument (``import_module(".x", "astropy")``)
    package: str = ""
    #: a computed name read inside ``for <loop_var> in <literal strings>``: the values it takes
    #: (requests' ``for lib in ("chardet", "charset_normalizer"): import_module(lib)``)
    loop_var: str = ""
    loop_values: tuple[str, ...] = ()


@compact
@dataclass(frozen=True)
class FunctionBody(CompactState):
    """A function or method: the effects of running it (conditions inside it are ignored)."""

    name: str  # "f", or "Class.method"
    line: int
    effects: tuple[Effect, ...]
    #: every path ends in ``raise AttributeError`` (a factory counts when the function it returns does)
    raises_attribute_error: bool = False
    #: the name of a nested function it returns (a factory)
    returns_function: str = ""
    #: positional parameter names (``self`` included for methods)
    params: tuple[str, ...] = ()
    #: the expression of its final ``return`` (source text), when every statement before it is a
    #: docstring or an ``if`` that raises: what a call evaluates to (``cls.validate(cls._value)``);
    #: kept for class methods only
    returns: str = ""
    is_classmethod: bool = False


@dataclass(frozen=True)
class ClassModel:
    """A module-level class: its bases (dotted, as written) and its literal class attributes."""

    name: str
    bases: tuple[str, ...] = ()
    #: ``_value = "codata2022"``: string attributes
    strings: tuple[tuple[str, str], ...] = ()
    #: ``_versions = dict(codata2022="codata2022", ...)``: string-to-string tables
    tables: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()


@dataclass(frozen=True)
class GetattrModel:
    """A ``__getattr__``: the tables it looks the name up in, and what it does otherwise.

    ``fallback``: ``raise`` (AttributeError), ``call`` (returns ``fallback_callee(name)``),
    ``unknown``.
    """

    line: int
    tables: tuple[str, ...] = ()
    literals: tuple[str, ...] = ()
    fallback: str = "unknown"
    fallback_callee: str = ""
    #: it imports ``<prefix><name>`` (``"pkg.plugins."``; ``"."``: relative to the module itself)
    imports_prefix: str = ""
    #: that import sits in a ``try`` whose ``except ImportError`` raises AttributeError (imageio's plugins)
    import_error_raises: bool = False
    #: objects whose attributes it serves for any name (``if hasattr(linear_operator.utils, name):
    #: return getattr(linear_operator.utils, name)``): its tables do not bound what it serves
    delegates: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModuleSwap:
    """``sys.modules[__name__] = <instance of cls>``; ``copies_dict``: the old ``__dict__`` is copied over."""

    line: int
    cls: str
    copies_dict: bool


@dataclass(frozen=True)
class ImportTimeFacts:
    """A module's import-time program.

    Its pickle keeps the function bodies as a pickle of their own, decoded when first read
    (``functions``, or :meth:`function` of a name it has): they are two thirds of a program's
    pickle (29.5 of 43 MB on the accuracy-venv) and most are never called at import time.
    """

    effects: tuple[Effect, ...] = ()
    #: (a factory, not a default: no class attribute stands in for bodies not decoded yet)
    functions: tuple[FunctionBody, ...] = field(default_factory=tuple)
    #: module-level names bound once, unconditionally, to a literal (for conditions)
    constants: tuple[tuple[str, object], ...] = ()
    getattr: GetattrModel | None = None
    swap: ModuleSwap | None = None
    #: the swap class's ``__getattr__`` (what the replacement answers for missing names)
    swap_getattr: GetattrModel | None = None
    #: module-level literal dict keys / string collections, by name (tables ``__getattr__`` consults)
    tables: tuple[tuple[str, tuple[str, ...]], ...] = field(default_factory=tuple)
    #: module-level classes with their literal attributes (for computed module names)
    classes: tuple[ClassModel, ...] = ()
    #: names a computed module name reads, bound once at module level without a condition: their
    #: expressions as source text (``phys_version = astropy.physical_constants.get()``)
    values: tuple[tuple[str, str], ...] = ()

    def class_model(self, name: str) -> ClassModel | None:
        for c in self.classes:
            if c.name == name:
                return c
        return None

    def function(self, name: str) -> FunctionBody | None:
        names = self.__dict__.get("_function_names")
        if names is not None and name not in names:
            return None  # what most lookups ask (is this callee a function here?), without decoding bodies
        for f in self.functions:
            if f.name == name:
                return f
        return None

    def keyword_calls(self) -> tuple[Effect, ...]:
        """The calls that pass keyword arguments, at module level and then in each function, in
        program order (read without decoding the bodies)."""
        got = self.__dict__.get("_keyword_calls")
        if got is None:
            got = tuple(e for effects in [self.effects] + [f.effects for f in self.functions]
                        for e in effects if e.kind == "call" and e.kwargs)
            object.__setattr__(self, "_keyword_calls", got)
        return got

    def __reduce__(self) -> tuple:
        bodies = self.__dict__.get("_bodies")
        if bodies is None:
            bodies = pickle.dumps(self.functions, protocol=pickle.HIGHEST_PROTOCOL)
            names = tuple(f.name for f in self.functions)
        else:
            names = self.__dict__["_function_names"]
        state = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "functions"}
        state["_keyword_calls"] = self.keyword_calls()
        return (_program, (state, names, bodies))

    def __getattr__(self, name: str) -> object:
        bodies = self.__dict__.get("_bodies") if name == "functions" else None
        if bodies is None:
            raise AttributeError(name)
        with gc_paused():  # decoded facts live on (see Facts.get)
            functions = pickle.loads(bodies)
        object.__setattr__(self, "functions", functions)
        return functions

    def table(self, name: str) -> tuple[str, ...] | None:
        for n, keys in self.tables:
            if n == name:
                return keys
        return None


def _program(state: dict, names: tuple[str, ...], bodies: bytes) -> ImportTimeFacts:
    """An :class:`ImportTimeFacts` from its pickle, its function bodies left undecoded."""
    prog = object.__new__(ImportTimeFacts)
    prog.__dict__.update(state)
    prog.__dict__["_function_names"] = names
    prog.__dict__["_bodies"] = bodies
    return prog


class ImportTimeExtractor(Extractor):
    """The import-time program of a Python module (order, conditions, calls, swaps)."""

    name = "import_time"
    on_demand = True
    version = 10  # 10: function bodies pickled apart, decoded when read; 9: computed names read in loops over literals; 8: globals().update(<module>.__dict__), computed module names with classes and values; 7: try blocks, failed-import guards, __getattr__ delegates, call keywords

    def applies(self, member: Member) -> bool:
        return member.kind in (MemberKind.PYTHON, MemberKind.BUILD) and member.path.endswith(".py")

    def extract(self, reader: MemberReader) -> ImportTimeFacts | None:
        module = reader.python()  # the one parse shared with python_source
        return _Reader().run(module.tree) if module.ok else None


def parse_import_time(text: str) -> ImportTimeFacts | None:
    """The program of one module's source text (pure; for tests)."""
    from cuaudit.formats.python import parse_python_text

    module = parse_python_text(text)
    return _Reader().run(module.tree) if module.ok else None


# -- implementation ----------------------------------------------------------------------


def dotted(node: ast.AST) -> str:
    """``a.b.c`` for a Name/Attribute chain, else ""."""
    t = type(node)
    if t is ast.Name:
        return node.id  # type: ignore[attr-defined, no-any-return]  # most callees
    parts: list[str] = []
    while t is ast.Attribute:
        parts.append(node.attr)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
        t = type(node)
    if t is ast.Name:
        parts.append(node.id)  # type: ignore[attr-defined]
        return ".".join(reversed(parts))
    return ""


def _literal_strings(args: list[ast.expr]) -> tuple[str, ...]:
    """Positional arguments: the string of a literal, "" for anything else (positions are kept)."""
    if len(args) == 1:  # most calls: no comprehension (a tuple of its own, as the comprehension makes)
        a = args[0]
        value = a.value if type(a) is ast.Constant and type(a.value) is str else ""  # type: ignore[attr-defined]
        return (value,)
    return tuple([a.value if type(a) is ast.Constant and type(a.value) is str else "" for a in args])  # type: ignore[attr-defined]


def _table_keys(node: ast.AST) -> tuple[str, ...] | None:
    if isinstance(node, ast.Dict):
        keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        return tuple(keys) if len(keys) == len(node.keys) else None
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        vals = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return tuple(vals) if len(vals) == len(node.elts) else None
    if isinstance(node, ast.Call) and dotted(node.func) in ("frozenset", "set", "tuple", "list", "dict") and node.args:
        return _table_keys(node.args[0])
    return None


def _import_effects(node: ast.Import | ast.ImportFrom, conds: tuple[Condition, ...]) -> Iterator[Effect]:
    if isinstance(node, ast.Import):
        for a in node.names:
            yield Effect("import", node.lineno, conds, module=a.name, bound=a.asname or a.name.split(".")[0], name="" if not a.asname else "as")
    else:
        for a in node.names:
            yield Effect("import", node.lineno, conds, module=node.module or "", name=a.name, level=node.level or 0,
                         bound=a.asname or a.name)


#: what a function body's walk keeps: the effects of calling it come from these
_FUNCTION_EFFECT_NODES = frozenset({ast.Import, ast.ImportFrom, ast.Call, ast.Assign})


#: what a function body's walk leaves out: nested classes and lambdas; of a nested def only its
#: decorators run when the function is called
_FUNCTION_SCOPE = {ast.FunctionDef: ("decorator_list",), ast.AsyncFunctionDef: ("decorator_list",),
                   ast.ClassDef: (), ast.Lambda: ()}


def _own_nodes(body: list[ast.stmt]) -> list[ast.AST]:
    """The imports, calls and assignments of a function body that run when it is called, in
    source order (one shared walk: every function of an environment goes through here)."""
    return preorder(body, _FUNCTION_EFFECT_NODES, _FUNCTION_SCOPE)


def _calls_in(node: ast.AST, conds: tuple[Condition, ...]) -> list[Effect]:
    """Calls (and dynamic imports) evaluated by an expression, not entering lambdas, in source order."""
    effects = (_call_effect(n, conds) for n in preorder([node], _CALL, _NOT_LAMBDAS))  # type: ignore[arg-type]
    return [e for e in effects if e is not None]


_CALL = frozenset({ast.Call})
_DYNAMIC_IMPORTS = ("import_module", "__import__")
_NOT_LAMBDAS: dict[type, tuple[str, ...]] = {ast.Lambda: ()}


def _call_effect(n: ast.Call, conds: tuple[Condition, ...]) -> Effect | None:
    func = n.func
    name = func.id if type(func) is ast.Name else dotted(func)  # type: ignore[attr-defined]
    if name.endswith(_DYNAMIC_IMPORTS) and name.rpartition(".")[2] in _DYNAMIC_IMPORTS and n.args:
        arg = n.args[0]
        literal = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else ""
        package = ""
        if len(n.args) > 1 and isinstance(n.args[1], ast.Name):
            package = n.args[1].id
        for kw in n.keywords:
            if kw.arg == "package" and isinstance(kw.value, ast.Name):
                package = kw.value.id
        # `__import__(place)` with `place` a parameter: the caller's literal (numpy's add_newdoc)
        variable = arg.id if isinstance(arg, ast.Name) else ""
        given = n.args[1] if len(n.args) > 1 else next((k.value for k in n.keywords if k.arg == "package"), None)
        expr = ast.unparse(arg) if not literal else ""
        return Effect("dynamic-import", n.lineno, conds, module=literal, name=package, bound=variable, callee=name,
                      expr=expr if len(expr) <= 200 else "",
                      package=given.value if isinstance(given, ast.Constant) and isinstance(given.value, str) else "")
    if name:
        # the state Effect("call", line, conds, callee=name, args=..., kwargs=...) stores (its compact
        # __init__ leaves the empty tuples out), in its field order: most effects of an environment
        # are calls, and the generated __init__ with its sixteen defaults cost twice this
        call = _new_effect(Effect)
        state = call.__dict__
        state["kind"] = "call"
        state["line"] = n.lineno
        if conds:
            state["conditions"] = conds
        state["callee"] = name
        if n.args:
            args = _literal_strings(n.args)
            if args:
                state["args"] = args
        if n.keywords:
            kwargs = tuple([(k.arg, k.value.value) for k in n.keywords  # type: ignore[attr-defined]
                            if k.arg and type(k.value) is ast.Constant and type(k.value.value) is str])
            if kwargs:
                state["kwargs"] = kwargs
        return call
    return None


_new_effect = object.__new__


def _globals_update(node: ast.AST) -> str | None:
    """The source of ``globals().update(X.__dict__)`` / ``globals().update(vars(X))``: ``X`` as text; else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
            and len(node.args) == 1):
        return None
    owner = node.func.value
    if not (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "globals"):
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Attribute) and arg.attr == "__dict__":
        return ast.unparse(arg.value)
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id == "vars" and len(arg.args) == 1:
        return ast.unparse(arg.args[0])
    return None


def _over_literals(effects: list[Effect], loops: list[ast.For | ast.AsyncFor], scope: ast.AST | None = None) -> list[Effect]:
    """Computed dynamic imports that read the variable of a ``for`` over literal strings get the
    values it takes; a variable also bound elsewhere in ``scope`` (or in the loop's body) gets none."""
    if not any(e.kind == "dynamic-import" and e.expr and not e.loop_var for e in effects):
        return effects
    values: dict[str, tuple[str, ...]] = {}
    for loop in loops:
        keys = _table_keys(loop.iter) if isinstance(loop.target, ast.Name) else None
        if keys is not None and loop.target.id not in values:  # type: ignore[union-attr]
            values[loop.target.id] = keys  # type: ignore[union-attr]
    if not values:
        return effects
    stores: dict[str, int] = {}
    for n in ast.walk(scope) if scope is not None else (n for loop in loops for st in loop.body for n in ast.walk(st)):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in values:
            stores[n.id] = stores.get(n.id, 0) + 1
    out = []
    for e in effects:
        if e.kind == "dynamic-import" and e.expr and not e.loop_var:
            read = [n.id for n in ast.walk(ast.parse(e.expr, mode="eval")) if isinstance(n, ast.Name) and n.id in values]
            # a scope's own loop binds its variable once; in a module-level body, not at all
            if len(set(read)) == 1 and stores.get(read[0], 0) == (1 if scope is not None else 0):
                e = dataclasses.replace(e, loop_var=read[0], loop_values=values[read[0]])
        out.append(e)
    return out


def _class_model(node: ast.ClassDef) -> ClassModel:
    strings: list[tuple[str, str]] = []
    tables: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    for item in node.body:
        if not (isinstance(item, ast.Assign) and len(item.targets) == 1 and isinstance(item.targets[0], ast.Name)):
            continue
        name, value = item.targets[0].id, item.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            strings.append((name, value.value))
            continue
        pairs: list[tuple[object, ast.expr]] = []
        if isinstance(value, ast.Dict):
            pairs = [(k.value if isinstance(k, ast.Constant) else None, v) for k, v in zip(value.keys, value.values)]
        elif isinstance(value, ast.Call) and dotted(value.func) == "dict" and not value.args:
            pairs = [(k.arg, k.value) for k in value.keywords]
        else:
            continue
        if pairs and all(isinstance(k, str) and isinstance(v, ast.Constant) and isinstance(v.value, str) for k, v in pairs):
            tables.append((name, tuple((k, v.value) for k, v in pairs)))  # type: ignore[union-attr]
    return ClassModel(node.name, tuple(dotted(b) for b in node.bases if dotted(b)), tuple(strings), tuple(tables))


def _returns(body: list[ast.stmt]) -> str:
    """The final ``return``'s expression when what comes before only raises (``if x not in t: raise``)."""
    if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
        return ""
    for st in body[:-1]:
        docstring = isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)
        guard = isinstance(st, ast.If) and not st.orelse and _ends_in_raise(st.body) and len(st.body) == 1
        if not (docstring or guard):
            return ""
    text = ast.unparse(body[-1].value)
    return text if len(text) <= 200 else ""


def _ends_in_raise_attribute_error(body: list[ast.stmt]) -> bool:
    if not body:
        return False
    last = body[-1]
    if isinstance(last, ast.Raise) and last.exc is not None:
        exc = last.exc.func if isinstance(last.exc, ast.Call) else last.exc
        return dotted(exc).rpartition(".")[2] == "AttributeError"
    if isinstance(last, ast.If):
        return _ends_in_raise_attribute_error(last.body) and _ends_in_raise_attribute_error(last.orelse)
    return False


def _catches_import_error(node: ast.expr | None) -> bool:
    """An ``except`` clause's type (None: bare) that catches ImportError."""
    if node is None:
        return True
    types = node.elts if isinstance(node, ast.Tuple) else [node]
    return any(dotted(t).rpartition(".")[2] in ("ImportError", "ModuleNotFoundError", "Exception", "BaseException") for t in types)


def _ends_in_raise(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Raise)


class _Reader:
    def __init__(self) -> None:
        self.effects: list[Effect] = []
        self.functions: list[FunctionBody] = []
        self.constants: dict[str, object] = {}
        self.assigned: dict[str, int] = {}
        self.tables: dict[str, tuple[str, ...]] = {}
        self.getattr_def: ast.FunctionDef | None = None
        self.classes: dict[str, ast.ClassDef] = {}
        self.swap_line = 0
        self.swap_value: ast.AST | None = None
        self.swap_names: set[str] = set()
        self.dict_copies: set[str] = set()  # names whose __dict__ is updated from another module's
        self.class_models: list[ClassModel] = []
        self.value_nodes: dict[str, ast.expr] = {}  # unconditional module-level `name = <expr>`

    def run(self, tree: ast.Module) -> ImportTimeFacts:
        self.block(tree.body, ())
        getattr_model = self.getattr_model(self.getattr_def, method=False) if self.getattr_def else None
        swap = swap_getattr = None
        if self.swap_line:
            cls, copies = self.swap_target()
            swap = ModuleSwap(self.swap_line, cls, copies)
            cdef = self.classes.get(cls)
            if cdef is not None:
                for item in cdef.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "__getattr__":
                        swap_getattr = self.getattr_model(item, method=True)
        consts = tuple((k, v) for k, v in self.constants.items() if self.assigned.get(k) == 1)
        # the names computed module names read (only those: source text of every binding would be bulk)
        read: set[str] = set()
        for e in self.effects + [e for f in self.functions for e in f.effects]:
            if e.kind == "dynamic-import" and e.expr:
                read.update(n.id for n in ast.walk(ast.parse(e.expr, mode="eval")) if isinstance(n, ast.Name))
        values = tuple((n, ast.unparse(self.value_nodes[n])) for n in sorted(read)
                       if n in self.value_nodes and self.assigned.get(n) == 1)
        return ImportTimeFacts(tuple(self.effects), tuple(self.functions), consts, getattr_model, swap, swap_getattr,
                               tuple(sorted(self.tables.items())), tuple(self.class_models), values)

    # -- module level ------------------------------------------------------------------
    def block(self, body: list[ast.stmt], conds: tuple[Condition, ...]) -> None:
        for node in body:
            self.statement(node, conds)

    def guarded_block(self, body: list[ast.stmt], conds: tuple[Condition, ...], try_line: int) -> None:
        """A block whose ImportError is caught at ``try_line`` (0: not caught)."""
        start = len(self.effects)
        self.block(body, conds)
        if try_line:
            for i in range(start, len(self.effects)):
                e = self.effects[i]
                self.effects[i] = dataclasses.replace(e, try_lines=(try_line,) + e.try_lines)

    def bind(self, name: str, line: int, conds: tuple[Condition, ...], value: str = "") -> None:
        self.assigned[name] = self.assigned.get(name, 0) + 1
        self.effects.append(Effect("bind", line, conds, bound=name, value=value))

    def statement(self, node: ast.stmt, conds: tuple[Condition, ...]) -> None:
        line = node.lineno
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self.effects.extend(_import_effects(node, conds))
            for e in self.effects[-len(node.names):]:
                self.assigned[e.bound] = self.assigned.get(e.bound, 0) + 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                self.effects.extend(_calls_in(d, conds))
            self.functions.append(self.function(node, node.name))
            self.bind(node.name, line, conds)
            if node.name == "__getattr__" and not conds:
                self.getattr_def = node
        elif isinstance(node, ast.ClassDef):
            for d in node.decorator_list + node.bases:
                self.effects.extend(_calls_in(d, conds))
            self.classes[node.name] = node
            if not conds:
                self.class_models.append(_class_model(node))
            self.class_body(node, node.name, conds)
            self.bind(node.name, line, conds)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            if value is not None:
                self.effects.extend(_calls_in(value, conds))
            for t in targets:
                if isinstance(t, ast.Name):
                    # the class of an instance (`_reg = _Registry()`) or an alias (`f = _reg.f`)
                    called = dotted(value.func) if isinstance(value, ast.Call) else dotted(value) if value is not None else ""
                    self.bind(t.id, line, conds, called)
                    if isinstance(value, ast.Constant) and not conds and not isinstance(node, ast.AugAssign):
                        self.constants[t.id] = value.value
                    if value is not None and not conds and isinstance(node, ast.Assign):
                        self.value_nodes[t.id] = value
                    keys = _table_keys(value) if value is not None else None
                    if keys is not None:
                        self.tables[t.id] = keys
                elif isinstance(t, (ast.Tuple, ast.List)):
                    for e in t.elts:
                        if isinstance(e, ast.Name):
                            self.bind(e.id, line, conds)
                elif isinstance(t, ast.Subscript) and dotted(t.value) == "sys.modules" and isinstance(t.slice, ast.Name) and t.slice.id == "__name__":
                    self.swap_line, self.swap_value = line, value
                    # `new = sys.modules[__name__] = _Mod(__name__)`: `new` is the replacement too
                    self.swap_names = {x.id for x in targets if isinstance(x, ast.Name)}
        elif isinstance(node, ast.Expr):
            self.effects.extend(_calls_in(node.value, conds))
            call = node.value
            source = _globals_update(call)
            if source is not None:
                self.effects.append(Effect("globals-update", line, conds, value=source))
            # new.__dict__.update(old.__dict__): the replacement keeps what the module bound
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "update":
                owner = call.func.value
                if isinstance(owner, ast.Attribute) and owner.attr == "__dict__" and isinstance(owner.value, ast.Name):
                    self.dict_copies.add(owner.value.id)
        elif isinstance(node, ast.If):
            self.effects.extend(_calls_in(node.test, conds))
            text = ast.unparse(node.test)
            self.block(node.body, conds + (Condition(text, True, line),))
            self.block(node.orelse, conds + (Condition(text, False, line),))
        elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            guards = any(_catches_import_error(h.type) and not _ends_in_raise(h.body) for h in node.handlers)
            self.guarded_block(node.body, conds, line if guards else 0)
            tried = tuple((e.module, e.name, e.level) for e in self.effects_of(node.body) if e.kind == "import")
            for h in node.handlers:
                names = {dotted(t) for t in ([h.type] if not isinstance(h.type, ast.Tuple) else h.type.elts)} if h.type is not None else {""}
                try_line = line if _catches_import_error(h.type) else 0
                if names & {"ImportError", "ModuleNotFoundError"} and tried:
                    cond = Condition("<except ImportError>", True, h.lineno, tried, try_line)
                else:
                    cond = Condition(f"<except {ast.unparse(h.type) if h.type is not None else ''}>".replace(" >", ">"), True, h.lineno,
                                     try_line=try_line)
                if h.name:
                    self.bind(h.name, h.lineno, conds + (cond,))
                self.block(h.body, conds + (cond,))
            self.block(node.orelse, conds + ((Condition("<try-else>", True, line, try_line=line),) if guards else ()))
            self.block(node.finalbody, conds)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            loop = Condition(f"<loop at line {line}>", True, line)
            if isinstance(node, ast.While):
                self.effects.extend(_calls_in(node.test, conds))
            else:
                self.effects.extend(_calls_in(node.iter, conds))
                for n in ast.walk(node.target):
                    if isinstance(n, ast.Name):
                        self.bind(n.id, line, conds + (loop,))
            start = len(self.effects)
            self.block(node.body, conds + (loop,))
            if not isinstance(node, ast.While):
                self.effects[start:] = _over_literals(self.effects[start:], [node])
            self.block(node.orelse, conds + (loop,))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            suppresses = False
            for item in node.items:
                self.effects.extend(_calls_in(item.context_expr, conds))
                if isinstance(item.optional_vars, ast.Name):
                    self.bind(item.optional_vars.id, line, conds)
                ctx = item.context_expr
                # numcodecs: `with suppress(ImportError): from .msgpacks import MsgPack`
                if isinstance(ctx, ast.Call) and dotted(ctx.func).rpartition(".")[2] == "suppress":
                    suppresses = suppresses or any(_catches_import_error(a) for a in ctx.args)
            self.guarded_block(node.body, conds, line if suppresses else 0)
        elif isinstance(node, ast.Match):
            for case in node.cases:
                self.block(case.body, conds + (Condition(f"<match case at line {case.pattern.lineno}>", True, case.pattern.lineno),))
        elif isinstance(node, ast.Delete):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    self.effects.append(Effect("del", line, conds, bound=t.id))
        elif isinstance(node, (ast.Return, ast.Raise, ast.Assert)):
            for child in child_nodes(node):
                self.effects.extend(_calls_in(child, conds))

    def class_body(self, node: ast.ClassDef, qualname: str, conds: tuple[Condition, ...]) -> None:
        """A class body runs at import: its methods' decorators are called then (sqlalchemy's
        `@util.preload_module("sqlalchemy.sql.default_comparator")`, in a nested class too)."""
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if qualname == node.name:
                    self.functions.append(self.function(item, f"{node.name}.{item.name}"))
                for d in item.decorator_list:
                    self.effects.extend(_calls_in(d, conds))
            elif isinstance(item, ast.ClassDef):
                for d in item.decorator_list + item.bases:
                    self.effects.extend(_calls_in(d, conds))
                self.class_body(item, f"{qualname}.{item.name}", conds)
            elif isinstance(item, (ast.Assign, ast.AnnAssign, ast.Expr)) and item.value is not None:
                self.effects.extend(_calls_in(item.value, conds))

    def effects_of(self, body: list[ast.stmt]) -> Iterator[Effect]:
        for node in body:
            for sub in walk(node):  # ast.walk's order, without its generator per node
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    yield from _import_effects(sub, ())

    def swap_target(self) -> tuple[str, bool]:
        value = self.swap_value
        name = value.id if isinstance(value, ast.Name) else ""
        cls = ""
        if isinstance(value, ast.Call):
            cls = dotted(value.func)
        elif name:
            for e in reversed(self.effects):
                if e.kind == "bind" and e.bound == name and e.value:
                    cls = e.value
                    break
        copies = bool(self.dict_copies & (self.swap_names | {name}))
        return cls, copies

    # -- function bodies ------------------------------------------------------------------
    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> FunctionBody:
        effects: list[Effect] = []
        append = effects.append
        computed_import = False  # a dynamic import of a computed name, for _over_literals
        call_type, attribute_type, subscript_type = ast.Call, ast.Attribute, ast.Subscript
        for sub in _own_nodes(node.body):
            kind = type(sub)
            if kind is call_type:
                effect = _call_effect(sub, ())  # type: ignore[arg-type]
                if effect is not None:
                    append(effect)
                    if effect.kind == "dynamic-import" and effect.expr:
                        computed_import = True
                func = sub.func  # type: ignore[attr-defined]
                if type(func) is attribute_type and func.attr == "update":
                    source = _globals_update(sub)
                    if source is not None:
                        # `globals()` in a function is its own module's namespace (cuda.core's
                        # `_import_versioned_module()`)
                        append(Effect("globals-update", sub.lineno, value=source))
            elif kind is ast.Import or kind is ast.ImportFrom:
                effects.extend(_import_effects(sub, ()))  # type: ignore[arg-type]
            else:  # an assignment
                for t in sub.targets:  # type: ignore[attr-defined]
                    if type(t) is subscript_type and dotted(t.value) == "sys.modules":
                        # cryptography's utils.deprecated(): the caller's module is replaced by a wrapper
                        append(Effect("swap", sub.lineno))
                        break
        if computed_import:
            # the loops are looked for only where _over_literals reads them: a walk of every
            # function body of an environment for them cost more than the effects' own walk
            effects = _over_literals(effects, [n for n in walk(node) if isinstance(n, (ast.For, ast.AsyncFor))], node)
        body = ends = node.body
        returned = ""
        last = body[-1] if body else None
        if type(last) is ast.Return and type(last.value) is ast.Name:  # type: ignore[union-attr]
            nested = {s.name: s for s in body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
            if last.value.id in nested:  # type: ignore[union-attr]
                returned = last.value.id  # type: ignore[union-attr]
                ends = nested[returned].body
        raises = _ends_in_raise_attribute_error(ends)
        params = tuple([a.arg for a in node.args.posonlyargs + node.args.args])
        classmethod = False
        for d in node.decorator_list:
            if dotted(d) == "classmethod":
                classmethod = True
                break
        # what a call returns is needed only for class methods a computed module name calls
        returns = _returns(node.body) if classmethod else ""
        return FunctionBody(name, node.lineno, tuple(effects), raises, returned, params, returns, classmethod)

    def getattr_model(self, node: ast.FunctionDef | ast.AsyncFunctionDef, *, method: bool) -> GetattrModel:
        args = node.args.posonlyargs + node.args.args
        if method:
            args = args[1:]
        if not args:
            return GetattrModel(node.lineno)
        param = args[0].arg
        tables: set[str] = set()
        literals: set[str] = set()
        for sub in ast.walk(node):
            # name in TABLE / TABLE.get(name) / TABLE[name]
            if isinstance(sub, ast.Compare) and isinstance(sub.left, ast.Name) and sub.left.id == param:
                for op, right in zip(sub.ops, sub.comparators):
                    if isinstance(op, (ast.In, ast.NotIn)):
                        t = dotted(right)
                        if t:
                            tables.add(t)
                        keys = _table_keys(right)
                        if keys:
                            literals.update(keys)
                    elif isinstance(op, (ast.Eq, ast.NotEq)) and isinstance(right, ast.Constant) and isinstance(right.value, str):
                        literals.add(right.value)
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "get" and sub.args:
                if isinstance(sub.args[0], ast.Name) and sub.args[0].id == param:
                    t = dotted(sub.func.value)
                    if t:
                        tables.add(t)
            elif isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Name) and sub.slice.id == param:
                t = dotted(sub.value)
                if t and t not in ("sys.modules", "globals", "self.__dict__"):
                    tables.add(t)
        fallback, callee = "unknown", ""
        body = node.body
        if _ends_in_raise_attribute_error(body):
            fallback = "raise"
        else:
            # `if entry is None: return _fallback(name)` (pydantic), or a final `return _fallback(name)`
            for stmt in body:
                if isinstance(stmt, ast.If) and len(stmt.body) == 1 and isinstance(stmt.body[0], ast.Return):
                    ret = stmt.body[0].value
                    if isinstance(ret, ast.Call) and dotted(ret.func) and ret.args and isinstance(ret.args[0], ast.Name) and ret.args[0].id == param:
                        fallback, callee = "call", dotted(ret.func)
                        break
                    if isinstance(stmt.body[0], ast.Raise):
                        fallback = "raise"
            last = body[-1] if body else None
            if isinstance(last, ast.Return) and isinstance(last.value, ast.Call) and fallback == "unknown":
                ret = last.value
                if dotted(ret.func) and ret.args and isinstance(ret.args[0], ast.Name) and ret.args[0].id == param and not tables:
                    fallback, callee = "call", dotted(ret.func)
        prefix, converts = _name_import(node, param)
        return GetattrModel(node.lineno, tuple(sorted(tables)), tuple(sorted(literals)), fallback, callee, prefix, converts,
                            _delegates(node.body, param))


def _delegates(body: list[ast.stmt], param: str) -> tuple[str, ...]:
    """``X`` of ``hasattr(X, name)`` tests and of ``getattr(X, name)`` calls not behind a test of the
    name against a table (cupy's ``if name in _deprecated_apis: return getattr(_numpy, name)``)."""
    found: list[str] = []

    def by_name(call: ast.AST, func: str) -> str:
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == func and len(call.args) >= 2
                and isinstance(call.args[1], ast.Name) and call.args[1].id == param):
            return dotted(call.args[0])
        return ""

    def tests_name(test: ast.AST) -> bool:
        return any(isinstance(n, ast.Compare) and any(isinstance(x, ast.Name) and x.id == param for x in [n.left, *n.comparators])
                   for n in ast.walk(test))

    def visit(stmts: list[ast.stmt]) -> None:
        for st in stmts:
            if isinstance(st, ast.If):
                found.extend(x for x in (by_name(n, "hasattr") for n in ast.walk(st.test)) if x)
                if not tests_name(st.test):
                    visit(st.body)
                visit(st.orelse)
                continue
            if isinstance(st, (ast.Try, ast.With, ast.For, ast.While)):
                visit(getattr(st, "body", []) + getattr(st, "orelse", []) + getattr(st, "finalbody", []))
                for h in getattr(st, "handlers", []):
                    visit(h.body)
                continue
            found.extend(x for x in (by_name(n, "getattr") for n in ast.walk(st)) if x)

    visit(body)
    # pydantic's `module = import_module(...); getattr(module, name)`: a local holding what the
    # tables chose is no delegate
    local = {n.id for st in body for n in ast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return tuple(dict.fromkeys(x for x in found if x.split(".")[0] not in local))


def _name_import(func: ast.FunctionDef | ast.AsyncFunctionDef, param: str) -> tuple[str, bool]:
    """(prefix, converts): ``__getattr__`` imports ``f"<prefix>{name}"`` (``"."``: relative to the
    module); ``converts``: inside a ``try`` whose ImportError handler raises AttributeError."""

    def prefix_of(call: ast.Call) -> str:
        if dotted(call.func).rpartition(".")[2] not in ("import_module", "__import__") or not call.args:
            return ""
        arg = call.args[0]
        head: ast.AST | None = None
        if isinstance(arg, ast.JoinedStr) and len(arg.values) == 2 and isinstance(arg.values[1], ast.FormattedValue):
            head, tail = arg.values[0], arg.values[1].value
        elif isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add):
            head, tail = arg.left, arg.right
        else:
            return ""
        if not (isinstance(tail, ast.Name) and tail.id == param and isinstance(head, ast.Constant) and isinstance(head.value, str)):
            return ""
        text = head.value
        if text.startswith(".") and text != ".":
            return ""  # a relative prefix deeper than the module itself: not modelled
        return text if text.endswith(".") else ""

    for sub in ast.walk(func):
        if isinstance(sub, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            found = ""
            for n in sub.body:
                for c in ast.walk(n):
                    if isinstance(c, ast.Call) and prefix_of(c):
                        found = prefix_of(c)
            if found:
                converts = any(
                    _catches_import_error(h.type) and _ends_in_raise_attribute_error(h.body) for h in sub.handlers
                )
                return found, converts
    for sub in ast.walk(func):
        if isinstance(sub, ast.Call) and prefix_of(sub):
            return prefix_of(sub), False
    return "", False
