"""What importing a module really runs: the import-time model behind the package model.

:class:`ImportTimeModel` runs each module's :class:`~cuaudit.facts.import_time.ImportTimeFacts`
the way the interpreter would, statically:

- a condition is evaluated where it is static for the audited interpreter
  (``TYPE_CHECKING`` is false; module constants; ``sys.platform``,
  ``os.name``, ``sys.version_info``; an environment variable is taken as
  unset, and the verdict says so); an ``except ImportError`` fallback does
  not run when every import of its ``try`` names a module the audit can see;
  anything else runs "either way" and what it imports is only *maybe*
  imported;
- functions and methods called at module level are followed to
  :data:`CALL_DEPTH` calls deep, through imports, instances
  (``_reg = _Registry()``) and aliases (``import_prefix = _reg.import_prefix``);
  a followed body that imports a computed name makes the package's verdicts
  unknown (sqlalchemy's ``preloaded.import_prefix``);
- the last binding of a name wins (sympy re-binds ``series`` to a function).

The results are *sure* and *maybe* imports per module, and the final
binding of a name; :mod:`cuaudit.analysis.module_tree` turns them into
verdicts.
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass, field
from typing import Callable

from cuaudit import names
from cuaudit.facts.import_time import Condition, Effect, ImportTimeFacts, dotted

#: how many calls deep module-level calls are followed
CALL_DEPTH = 3


@dataclass(frozen=True)
class Truth:
    """A condition's value: True, False or None (either way), and why."""

    value: bool | None
    reason: str = ""  # for None: the condition that decides; for an assumption: what was assumed
    assumed: str = ""  # e.g. "FORCE_X is unset"


@dataclass
class ModuleRun:
    """What running one module's top level does (its own code and the calls it follows)."""

    sure: set[str] = field(default_factory=set)
    maybe: dict[str, str] = field(default_factory=dict)  # module -> the condition it depends on
    opaque: str = ""  # a followed call imports a computed name: why the model cannot list its imports
    swapped: str = ""  # a followed call replaces the module in sys.modules: what the model cannot see
    failed: dict[str, str] = field(default_factory=dict)  # module it tries to import -> why that fails
    #: module -> where its globals are updated from another module's ``__dict__`` (its ``__name__``
    #: and ``__path__`` become that module's: cuda.core); a followed call may do it to its own module
    renamed: dict[str, str] = field(default_factory=dict)
    #: module a computed name evaluated to -> where and how (for the verdicts' evidence)
    computed: dict[str, str] = field(default_factory=dict)
    assumptions: set[str] = field(default_factory=set)


_UNKNOWN = object()
#: the deepest test the model evaluates (real ones are a few levels: ``not TYPE_CHECKING and x``)
_EVAL_DEPTH = 64
_RUNS = Truth(True, "", "")
#: effects :meth:`ImportTimeModel.run` applies nothing for (:meth:`ImportTimeModel.final_binding`
#: reads bindings and deletions from the program itself); their conditions are still evaluated
_INERT = frozenset({"bind", "del"})
#: the functions followed so far from an effect that is not a call: none, and none are added
_NO_CALLS: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class _Class:
    """A class of the package (a value of a computed module name's evaluation)."""

    module: str
    name: str


@dataclass(frozen=True)
class _Module:
    name: str


class ImportTimeModel:
    """Runs module programs for a :class:`~cuaudit.analysis.module_tree.ModuleUniverse`."""

    def __init__(self, universe, program_for: Callable[[str], ImportTimeFacts | None]) -> None:
        self.universe = universe
        self.program_for = program_for
        self._runs: dict = {}  # module -> ModuleRun; ("named", top) -> modules named in calls
        #: answers that depend only on the universe, asked again for every call and import that
        #: names them (85 k `_imported_object` scans of a module's effects on the accuracy-venv)
        self._callables: dict[tuple[str, str], tuple[str, str] | None] = {}
        self._objects: dict[tuple[str, str], tuple[str, str] | None] = {}
        self._truths: dict[tuple[str, Condition], Truth] = {}  # conditions outside a try's handlers
        self._bindings: dict[tuple[str, str], tuple[str, Effect | None, Truth]] = {}
        self._failures: dict[str, str] = {}
        #: module -> (its program, effect indexes by the name they bind, its star imports' indexes)
        self._binder_index: dict[str, tuple[ImportTimeFacts, dict[str, list[int]], list[int]]] = {}
        #: module -> (values of its `bind` effects by name, its last `import` effect by bound name)
        self._names: dict[str, tuple[dict[str, list[str]], dict[str, Effect]]] = {}

    # -- conditions ------------------------------------------------------------------------
    def truth(self, module: str, cond: Condition) -> Truth:
        if cond.try_line:
            return self._truth(module, cond)  # depends on try_failure, which a cycle may leave undecided
        key = (module, cond)
        got = self._truths.get(key)
        if got is None:
            got = self._truths[key] = self._truth(module, cond)
        return got

    def _truth(self, module: str, cond: Condition) -> Truth:
        text = cond.expr
        if cond.try_line:
            line, why = self.try_failure(module, cond.try_line)
            if line:
                return Truth(text != "<try-else>", "", f"{why} (line {line})")
            if text == "<try-else>":
                return Truth(True)
        if text == "<except ImportError>":
            u = self.universe
            entry = u.get(module)
            is_pkg = bool(entry and entry.is_package)
            for mod, name, level in cond.try_imports:
                target = absolute_module(mod, level, module, is_pkg)
                if target is None or not (u.exists(target) or (name and u.exists(f"{target}.{name}"))):
                    return Truth(None, f"`except ImportError` at line {cond.line} (its try imports {mod or '.'})")
            return Truth(False)
        if text.startswith("<loop"):
            return Truth(True)
        if text.startswith("<"):
            return Truth(None, f"{text.strip('<>')} at line {cond.line}")
        try:
            node = ast.parse(text, mode="eval").body
        except (SyntaxError, RecursionError, MemoryError):
            return Truth(None, f"`{text}` at line {cond.line}")
        assumed: list[str] = []
        value = self._eval(node, module, assumed)
        if value is _UNKNOWN:
            return Truth(None, f"`if {text}` at line {cond.line}")
        ok = bool(value) == cond.truth
        return Truth(ok, "", "; ".join(assumed))

    def runs(self, module: str, conditions: tuple[Condition, ...], line: int = 0, try_lines: tuple[int, ...] = ()) -> Truth:
        """Whether an effect at ``line`` under ``conditions`` runs; ``try_lines``: the ``try``
        blocks around it, whose body stops at an import that fails."""
        if not conditions and not try_lines:
            return _RUNS  # most effects: one shared verdict instead of a new one each time
        assumed = []
        for tl in try_lines:
            failed, why = self.try_failure(module, tl)
            if failed and line > failed:
                return Truth(False, "", f"{why} (line {failed})")
        for c in conditions:
            t = self.truth(module, c)
            if t.value is False:
                return t
            if t.value is None:
                return t
            if t.assumed:
                assumed.append(t.assumed)
        return Truth(True, "", "; ".join(assumed))

    # -- imports that fail ------------------------------------------------------------------
    def failure(self, module: str, _depth: int = 0) -> str:
        """Why importing ``module`` raises ImportError in the audited environment, or "".

        Decided only where the environment is known in full (``universe.complete``): a
        top-level module nobody provides, or a module whose top level imports one outside any
        ``try`` that catches the error (numcodecs' ``msgpacks`` imports ``msgpack``).  Anything
        else (a name missing from a module, an extension's own imports) counts as importing.
        """
        got = self._failures.get(module)  # asked for every module an import names: first
        if got is not None:
            return got
        u = self.universe
        if not getattr(u, "complete", False):
            return ""
        self._failures[module] = ""  # a cycle: a module being imported is taken as importing
        why = ""
        top = module.split(".")[0]
        if not u.exists(top):
            # also a standard-library name this platform lacks (`winreg` on Linux)
            why = f"{top} is not installed"
        elif _depth < 64:
            failures = self._failures
            parts = module.split(".")
            for i in range(1, len(parts)):
                parent = ".".join(parts[:i])
                inner = failures.get(parent)
                if inner is None:
                    inner = self.failure(parent, _depth + 1)
                if inner:
                    why = inner
                    break
            prog = self.program_for(module) if not why and u.exists(module) and not u.is_stdlib(module) else None
            entry = u.get(module)
            is_pkg = bool(entry and entry.is_package)
            for e in prog.effects if prog is not None else ():
                if why:
                    break
                if e.try_lines or (e.kind != "import" and not self._raising_import(e, module)):
                    continue
                if e.conditions and self.runs(module, e.conditions, e.line).value is not True:
                    continue
                for target in self._import_targets(e, module, is_pkg):
                    inner = failures.get(target)
                    if inner is None:
                        inner = self.failure(target, _depth + 1)
                    if inner:
                        why = inner  # the root cause (`msgpack is not installed`)
                        break
        self._failures[module] = why
        return why

    def try_failure(self, module: str, try_line: int) -> tuple[int, str]:
        """(line, why) of the first import in the ``try`` at ``try_line`` that fails; (0, "") if none."""
        key = ("try", module, try_line)
        if key in self._runs:
            return self._runs[key]
        self._runs[key] = (0, "")
        found: tuple[int, str] = (0, "")
        prog = self.program_for(module)
        if prog is not None and getattr(self.universe, "complete", False):
            entry = self.universe.get(module)
            is_pkg = bool(entry and entry.is_package)
            for e in prog.effects:
                if not self._raising_import(e, module) or not e.try_lines or e.try_lines[-1] != try_line:
                    continue
                if self.runs(module, e.conditions, e.line, e.try_lines[:-1]).value is not True:
                    continue
                for target in self._import_targets(e, module, is_pkg):
                    why = self.failure(target)
                    if why:
                        found = (e.line, f"importing {target} fails: {why}")
                        break
                if found[0]:
                    break
        self._runs[key] = found
        return found

    def _raising_import(self, e: Effect, module: str) -> bool:
        """An import statement, or a call of the interpreter's own ``__import__``/``importlib.import_module``
        with a literal name: what raises ImportError when the module is missing (a function of the
        package called import_module may catch it: sympy.external.import_module returns None)."""
        if e.kind == "import":
            return True
        if e.kind != "dynamic-import" or not e.module:
            return False
        if e.callee in ("__import__", "importlib.import_module"):
            return True
        return e.callee == "import_module" and self._imported_object(module, "import_module") == ("importlib", "import_module")

    def _import_targets(self, e: Effect, module: str, is_pkg: bool) -> tuple[str, ...]:
        """The modules an import effect imports, outermost first."""
        if e.kind == "dynamic-import":
            base = e.module
            if base.startswith("."):
                level = len(base) - len(base.lstrip("."))
                base = absolute_module(base.lstrip("."), level, module, is_pkg) or ""
        else:
            base = absolute_module(e.module, e.level, module, is_pkg) or ""
        if not base:
            return ()
        mods = names.dotted_prefixes(base)
        if e.kind == "import" and e.name and e.name not in ("*", "as") and self.universe.exists(f"{base}.{e.name}"):
            mods += (f"{base}.{e.name}",)
        return mods

    def _eval(self, node: ast.AST, module: str, assumed: list[str], depth: int = 0) -> object:
        if depth > _EVAL_DEPTH:
            return _UNKNOWN  # a test nested that deep (`not not … x`) is one the model does not know
        u = self.universe
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Tuple):
            vals = [self._eval(e, module, assumed, depth + 1) for e in node.elts]
            return _UNKNOWN if any(v is _UNKNOWN for v in vals) else tuple(vals)
        if isinstance(node, ast.BoolOp):
            vals = [self._eval(v, module, assumed, depth + 1) for v in node.values]
            if isinstance(node.op, ast.And):
                if any(v is not _UNKNOWN and not v for v in vals):
                    return False
                return _UNKNOWN if any(v is _UNKNOWN for v in vals) else vals[-1]
            if any(v is not _UNKNOWN and v for v in vals):
                return True
            return _UNKNOWN if any(v is _UNKNOWN for v in vals) else vals[-1]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            v = self._eval(node.operand, module, assumed, depth + 1)
            return _UNKNOWN if v is _UNKNOWN else not v
        name = dotted(node)
        if name in ("TYPE_CHECKING", "typing.TYPE_CHECKING", "t.TYPE_CHECKING", "_typing.TYPE_CHECKING"):
            return False
        if name == "sys.platform":
            return u.sys_platform
        if name == "os.name":
            return u.os_name
        if name == "sys.version_info":
            return u.python_version
        if name == "sys.byteorder":
            return "little"
        if name == "sys.implementation.name" or name == "platform.python_implementation":
            return "cpython"
        if name == "__name__":
            return module  # imported, never "__main__"
        if isinstance(node, ast.Name):
            prog = self.program_for(module)
            if prog is not None:
                for k, v in prog.constants:
                    if k == node.id:
                        return v
            return _UNKNOWN
        if isinstance(node, ast.Subscript):
            base = self._eval(node.value, module, assumed, depth + 1)
            if base is _UNKNOWN:
                return _UNKNOWN
            if isinstance(node.slice, ast.Slice):
                lo = self._eval(node.slice.lower, module, assumed, depth + 1) if node.slice.lower else None
                hi = self._eval(node.slice.upper, module, assumed, depth + 1) if node.slice.upper else None
                if lo is _UNKNOWN or hi is _UNKNOWN:
                    return _UNKNOWN
                try:
                    return base[lo:hi]
                except TypeError:
                    return _UNKNOWN
            key = self._eval(node.slice, module, assumed, depth + 1)
            try:
                return _UNKNOWN if key is _UNKNOWN else base[key]
            except (TypeError, IndexError, KeyError):
                return _UNKNOWN
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, module, assumed, depth + 1)
            for op, right_node in zip(node.ops, node.comparators):
                if isinstance(op, (ast.In, ast.NotIn)) and dotted(right_node) == "os.environ":
                    if isinstance(node.left, ast.Constant):
                        assumed.append(f"{node.left.value} is unset")
                        res = isinstance(op, ast.NotIn)
                        return res
                    return _UNKNOWN
                right = self._eval(right_node, module, assumed, depth + 1)
                if left is _UNKNOWN or right is _UNKNOWN:
                    return _UNKNOWN
                try:
                    ok = _compare(op, left, right)
                except TypeError:
                    return _UNKNOWN
                if ok is _UNKNOWN or not ok:
                    return ok
                left = right
            return True
        if isinstance(node, ast.Call):
            fname = dotted(node.func)
            if fname in ("os.environ.get", "os.getenv", "environ.get", "getenv") and node.args and isinstance(node.args[0], ast.Constant):
                assumed.append(f"{node.args[0].value} is unset")
                if len(node.args) > 1:
                    return self._eval(node.args[1], module, assumed, depth + 1)
                for kw in node.keywords:
                    if kw.arg == "default":
                        return self._eval(kw.value, module, assumed, depth + 1)
                return None
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("startswith", "endswith") and node.args:
                base = self._eval(node.func.value, module, assumed, depth + 1)
                arg = self._eval(node.args[0], module, assumed, depth + 1)
                if isinstance(base, str) and isinstance(arg, (str, tuple)):
                    return getattr(base, node.func.attr)(arg)
            return _UNKNOWN
        return _UNKNOWN

    # -- running a module ---------------------------------------------------------------------
    def run(self, module: str) -> ModuleRun | None:
        """Sure and maybe imports of running ``module``'s top level, or None without a program."""
        got = self._runs.get(module)  # asked for every module of every closure: first
        if got is not None:
            return got
        prog = self.program_for(module)
        if prog is None:
            return None
        out = ModuleRun()
        self._runs[module] = out  # cycles: a module being run imports nothing new
        entry = self.universe.get(module)
        is_pkg = bool(entry and entry.is_package)
        runs, effect = self.runs, self._effect
        # a call with the same literal arguments, run the same way, adds nothing new: what a followed
        # body applies is idempotent (torch 2.8.0: 17.4 k module-level calls, 7.3 k distinct)
        followed: set[tuple[str, tuple[str, ...], Truth]] = set()
        for e in prog.effects:
            if e.conditions or e.try_lines:
                t = runs(module, e.conditions, e.line, e.try_lines)
                if t.value is False:
                    continue
                if t.assumed:
                    out.assumptions.add(t.assumed)
            else:
                t = _RUNS
            kind = e.kind
            if kind == "call":
                call = (e.callee, e.args, t)
                if call in followed:
                    continue
                followed.add(call)
                effect(module, is_pkg, prog, e, out, t, 0, set())
            elif kind not in _INERT:
                effect(module, is_pkg, prog, e, out, t, 0, _NO_CALLS)
        return out

    def _add(self, out: ModuleRun, mods: list[str] | tuple[str, ...], t: Truth, module: str = "", line: int = 0) -> None:
        """Record imported ``mods`` (outermost first); with ``module``, the import at its ``line``
        stops at the first that fails."""
        failures = self._failures
        sure, maybe = out.sure, out.maybe
        # only an environment known in full has imports that fail (see failure): a wheel's check asks none
        module = module if getattr(self.universe, "complete", False) else ""
        for m in mods:
            if module:
                why = failures.get(m)  # the memo first: 180 k imports name known modules
                if why is None:
                    why = self.failure(m)
                if why:
                    # a failed import leaves neither it nor what it would have imported next
                    out.failed.setdefault(m, f"{module}:{line} tries to import it, which fails: {why}")
                    break
            if t.value is True:
                sure.add(m)
                maybe.pop(m, None)
            elif m not in sure:
                maybe.setdefault(m, t.reason)

    def _effect(self, module: str, is_pkg: bool, prog: ImportTimeFacts, e: Effect, out: ModuleRun, t: Truth, depth: int,
                seen: set[tuple[str, str]] | frozenset[tuple[str, str]], args: dict[str, str] | None = None) -> None:
        """Apply one effect; ``args``: the literal arguments the followed call passed, by parameter."""
        if e.kind == "import":
            base = absolute_module(e.module, e.level, module, is_pkg)
            if not base:
                return
            mods = names.dotted_prefixes(base)
            if e.name and e.name != "*" and self.universe.exists(f"{base}.{e.name}"):
                mods += (f"{base}.{e.name}",)
            self._add(out, mods, t, module, e.line)
            return
        args = args or {}
        u = self.universe
        if e.kind == "dynamic-import":
            if not e.module and e.bound and args.get(e.bound):
                e = dataclasses.replace(e, module=args[e.bound])
            if not e.module and e.loop_var and not args:
                # each value the loop gives may be imported (one may stop the loop, a condition
                # inside may skip it), and nothing else is
                looped = [self.computed_name(module, e.expr, {e.loop_var: v}) for v in e.loop_values]
                if all(looped):
                    why = f"{module}:{e.line} imports {e.expr} for {e.loop_var} in {', '.join(e.loop_values)}"
                    for value in looped:
                        self._effect(module, is_pkg, prog, dataclasses.replace(e, module=value, expr="", loop_var=""), out,
                                     Truth(None, why), depth, seen)
                    return
            computed = self.computed_name(module, e.expr) if not e.module and e.expr and not args else ""
            if computed:
                e = dataclasses.replace(e, module=computed)
            if not e.module:
                out.opaque = out.opaque or f"{module}:{e.line} imports a computed module name"
                return
            target = e.module
            if target.startswith("."):
                level = len(target) - len(target.lstrip("."))
                if e.package:
                    target = names.absolute_module(target.lstrip("."), level, e.package) or ""
                else:
                    target = absolute_module(target.lstrip("."), level, module, is_pkg) or ""
            if computed and target:
                out.computed.setdefault(target, f"{module}:{e.line} imports {target} (`{e.expr}` with the "
                                                "class attributes it reads at their defaults)")
            self._add(out, list(names.dotted_prefixes(".".join(p for p in target.split(".") if p))), t)
        elif e.kind == "globals-update":
            out.renamed.setdefault(module, f"{module}:{e.line} updates its globals from {e.value}.__dict__")
        elif e.kind == "swap":
            out.swapped = out.swapped or f"{module}:{e.line} replaces a module in sys.modules"
        elif e.kind == "call" and depth < CALL_DEPTH:
            target = self._callables.get((module, e.callee), _UNKNOWN)  # most calls: asked before
            if target is _UNKNOWN:
                target = self.callable(module, e.callee)
            if target is None:
                return
            where, fname = target
            if (where, fname) in seen:
                return
            seen.add((where, fname))
            body_prog = self.program_for(where)
            body = body_prog.function(fname) if body_prog is not None else None
            if body is None:
                return
            entry = u.get(where)
            w_pkg = bool(entry and entry.is_package)
            params = body.params[1:] if "." in fname else body.params  # a method's self
            bound = {p: a for p, a in zip(params, e.args) if a}
            for inner in body.effects:
                self._effect(where, w_pkg, body_prog, inner, out, t, depth + 1, seen, bound)

    # -- computed module names -----------------------------------------------------------------
    def computed_name(self, module: str, expr: str, local: dict[str, str] | None = None) -> str:
        """The value of a computed module name built from literals, module-level names and class
        attributes read directly or through class methods, taken at their defaults (astropy's
        ``".constants." + phys_version`` with ``phys_version = astropy.physical_constants.get()``);
        "" when any part is not known."""
        key = ("computed", module, expr, tuple(sorted((local or {}).items())))
        if key not in self._runs:
            try:
                node = ast.parse(expr, mode="eval").body
            except (SyntaxError, RecursionError, MemoryError):
                node = None
            value = self._value(node, module, dict(local or {}), 0) if node is not None else _UNKNOWN
            self._runs[key] = value if isinstance(value, str) else ""
        return self._runs[key]

    def _value(self, node: ast.AST, module: str, local: dict, depth: int) -> object:
        if depth > 16:
            return _UNKNOWN
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else _UNKNOWN
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                part = v.value if isinstance(v, ast.Constant) else (
                    self._value(v.value, module, local, depth + 1)
                    if isinstance(v, ast.FormattedValue) and v.conversion == -1 and v.format_spec is None else _UNKNOWN)
                if not isinstance(part, str):
                    return _UNKNOWN
                parts.append(part)
            return "".join(parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self._value(node.left, module, local, depth + 1), self._value(node.right, module, local, depth + 1)
            return left + right if isinstance(left, str) and isinstance(right, str) else _UNKNOWN
        if isinstance(node, ast.Name):
            if node.id in local:
                return local[node.id]
            if node.id in ("__name__", "__package__"):
                entry = self.universe.get(module)
                package = module if entry is not None and entry.is_package else module.rpartition(".")[0]
                return module if node.id == "__name__" else package
            return self._global(module, node.id, depth)
        if isinstance(node, ast.Attribute) and dotted(node) in ("__spec__.name", "__spec__.parent"):
            # sklearn's vendored array_api_compat: `__import__(__spec__.parent + ".linalg")`
            return self._value(ast.Name("__name__" if node.attr == "name" else "__package__"), module, local, depth + 1)
        if isinstance(node, ast.Attribute):
            base = self._value(node.value, module, local, depth + 1)
            if isinstance(base, _Module):
                prog = self.program_for(base.name)
                if prog is not None and prog.class_model(node.attr) is not None:
                    return _Class(base.name, node.attr)
                if self.universe.exists(f"{base.name}.{node.attr}"):
                    return _Module(f"{base.name}.{node.attr}")
                return self._global(base.name, node.attr, depth) if prog is not None else _UNKNOWN
            if isinstance(base, _Class):
                for c in self._mro(base, depth):
                    model = self.program_for(c.module).class_model(c.name)
                    for name, value in model.strings + model.tables:
                        if name == node.attr:
                            return value if isinstance(value, str) else dict(value)
            return _UNKNOWN
        if isinstance(node, ast.Subscript):
            base, key = self._value(node.value, module, local, depth + 1), self._value(node.slice, module, local, depth + 1)
            return base.get(key, _UNKNOWN) if isinstance(base, dict) and isinstance(key, str) else _UNKNOWN
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.keywords:
            receiver = self._value(node.func.value, module, local, depth + 1)
            if not isinstance(receiver, _Class):
                return _UNKNOWN
            for c in self._mro(receiver, depth):
                body = self.program_for(c.module).function(f"{c.name}.{node.func.attr}")
                if body is None:
                    continue
                if not (body.is_classmethod and body.returns) or len(body.params) != len(node.args) + 1:
                    return _UNKNOWN
                inner = {body.params[0]: receiver}
                for p, a in zip(body.params[1:], node.args):
                    inner[p] = self._value(a, module, local, depth + 1)
                    if inner[p] is _UNKNOWN:
                        return _UNKNOWN
                return self._value(ast.parse(body.returns, mode="eval").body, c.module, inner, depth + 1)
        return _UNKNOWN

    def _global(self, module: str, name: str, depth: int) -> object:
        """A module-level name's value: a literal, a value expression, a class or a module."""
        prog = self.program_for(module)
        if prog is None:
            return _UNKNOWN
        for k, v in prog.values:
            if k == name:
                return self._value(ast.parse(v, mode="eval").body, module, {}, depth + 1)
        for k, v in prog.constants:
            if k == name:
                return v if isinstance(v, str) else _UNKNOWN
        if prog.class_model(name) is not None and self._bound_value(module, name) == "":
            return _Class(module, name)
        imported = self._imported_object(module, name)
        if imported is None:
            return _UNKNOWN
        mod, attr = imported
        if not attr:
            return _Module(mod)
        other = self.program_for(mod)
        return _Class(mod, attr) if other is not None and other.class_model(attr) is not None else _UNKNOWN

    def _mro(self, cls: _Class, depth: int) -> list[_Class]:
        """The class and its bases, depth first (C3 agrees for single inheritance); bases that are
        not classes of the package end the walk there."""
        out: list[_Class] = []
        stack = [cls]
        while stack and len(out) < 16:
            c = stack.pop()
            prog = self.program_for(c.module)
            model = prog.class_model(c.name) if prog is not None else None
            if model is None or c in out:
                continue
            out.append(c)
            bases = [self._value(ast.parse(b, mode="eval").body, c.module, {}, depth + 1) for b in model.bases]
            stack.extend(reversed([b for b in bases if isinstance(b, _Class)]))
        return out

    def callable(self, module: str, dotted_name: str, _seen: set | None = None) -> tuple[str, str] | None:
        """(module, function or ``Class.method``) a dotted_name name called in ``module`` resolves to."""
        if _seen is None:
            key = (module, dotted_name)
            if key not in self._callables:
                self._callables[key] = self.callable(module, dotted_name, set())
            return self._callables[key]
        seen = _seen
        if (module, dotted_name) in seen or len(seen) > 16:
            return None  # aliases and re-exports that go round in circles
        seen.add((module, dotted_name))
        u = self.universe
        prog = self.program_for(module)
        if prog is None:
            return None
        head, _, rest = dotted_name.partition(".")
        if not rest:
            if prog.function(head) is not None:
                return module, head
            value = self._bound_value(module, head)
            if value and value != dotted_name:
                return self.callable(module, value, seen) if "." in value else None
            imported = self._imported_object(module, head)
            if imported and imported[1]:
                return self.callable(imported[0], imported[1], seen)
            return None
        # an instance of a class of this module: `_reg.import_prefix`
        value = self._bound_value(module, head)
        if value and "." not in rest:
            cls = value
            if prog.function(f"{cls}.{rest}") is not None:
                return module, f"{cls}.{rest}"
        imported = self._imported_object(module, head)
        if imported is None:
            return None
        mod, attr = imported
        if attr:
            return None
        # walk submodules: `util.preloaded.import_prefix`
        parts = rest.split(".")
        while len(parts) > 1 and u.exists(f"{mod}.{parts[0]}"):
            mod = f"{mod}.{parts[0]}"
            parts = parts[1:]
        if len(parts) == 1:
            return self.callable(mod, parts[0], seen) if u.exists(mod) and not mod.startswith(module + ".__") else None
        if len(parts) == 2:
            return self.callable(mod, ".".join(parts), seen)
        return None

    def _names_of(self, module: str) -> tuple[dict[str, list[str]], dict[str, Effect]]:
        """``module``'s bindings by name, indexed once: :meth:`callable` asks for them at every call
        it follows (torch 2.8.0: 36 k scans of whole programs, a quarter of a cold check's rules)."""
        found = self._names.get(module)
        if found is None:
            prog = self.program_for(module)
            if prog is None:
                return {}, {}  # not kept: a module added later has a program then
            binds: dict[str, list[str]] = {}
            imports: dict[str, Effect] = {}
            for e in prog.effects:
                if e.kind == "bind":
                    binds.setdefault(e.bound, []).append(e.value)
                elif e.kind == "import":
                    imports[e.bound] = e  # the last one
            found = self._names[module] = (binds, imports)
        return found

    def _bound_value(self, module: str, name: str) -> str:
        """The callable whose result (or the alias whose value) ``name`` is bound to, if one binding only."""
        values = self._names_of(module)[0].get(name, ())
        return values[0] if len(values) == 1 else ""

    def _imported_object(self, module: str, name: str) -> tuple[str, str] | None:
        """(module, attribute) a name imported in ``module`` stands for; attribute "" for a module."""
        key = (module, name)
        if key not in self._objects:
            self._objects[key] = self._find_imported_object(module, name)
        return self._objects[key]

    def _find_imported_object(self, module: str, name: str) -> tuple[str, str] | None:
        e = self._names_of(module)[1].get(name)
        if e is None:
            return None
        entry = self.universe.get(module)
        base = absolute_module(e.module, e.level, module, bool(entry and entry.is_package))
        if not base:
            return None
        if e.level == 0 and not e.name:
            return (base.split(".")[0], "")
        if e.name == "as" and e.level == 0 and "." in base:
            return (base, "")
        if self.universe.exists(f"{base}.{e.name}"):
            return (f"{base}.{e.name}", "")
        return (base, e.name)

    def named_modules(self, module: str) -> frozenset[str]:
        """Modules of ``module``'s package named as literal arguments of the calls its top level
        makes (decorators included): what a registry filled at import time may import."""
        key = ("named", module)
        if key not in self._runs:
            prog = self.program_for(module)
            top = module.split(".")[0] + "."
            # only the calls its top level makes: names in function bodies are mostly not
            # registrations (matplotlib names matplotlib.pyplot in functions that never run)
            calls = [e for e in prog.effects if e.kind == "call"] if prog is not None else []
            self._runs[key] = frozenset(a for e in calls for a in e.args if a.startswith(top) and self.universe.exists(a))
        return self._runs[key]

    # -- bindings ------------------------------------------------------------------------------
    def final_binding(self, module: str, name: str, _depth: int = 0) -> tuple[str, Effect | None, Truth]:
        """How ``name`` ends up bound by running ``module``: (what, effect, truth).

        what: ``module:<dotted>`` (bound to that submodule), ``object`` (something else),
        ``none`` (never bound by the module's own code).  With several bindings, the last
        one that runs wins; one that may or may not run makes the answer "either way".
        """
        if _depth:
            return self._final_binding(module, name, _depth)
        key = (module, name)
        got = self._bindings.get(key)
        if got is None:
            got = self._bindings[key] = self._final_binding(module, name, 0)
        return got

    def _final_binding(self, module: str, name: str, _depth: int) -> tuple[str, Effect | None, Truth]:
        prog = self.program_for(module)
        if prog is None:
            return "none", None, Truth(True)
        entry = self.universe.get(module)
        is_pkg = bool(entry and entry.is_package)
        result: tuple[str, Effect | None, Truth] = ("none", None, Truth(True))
        for e in self._binders(module, prog, name):
            t = self.runs(module, e.conditions, e.line, e.try_lines)
            if t.value is False:
                continue
            if e.kind == "import" and any(self.failure(m) for m in self._import_targets(e, module, is_pkg)):
                continue  # an import that fails binds nothing
            if e.kind == "del":
                what = "none"
            elif e.kind == "bind":
                what = "object"
            else:
                base = absolute_module(e.module, e.level, module, is_pkg) or ""
                if e.level == 0 and not e.name:
                    what = f"module:{base.split('.')[0]}"
                elif e.name == "as" and e.level == 0:
                    what = f"module:{base}"
                elif base == module and e.name and result[0] != "none" and result[2].value is True:
                    # nltk's `from nltk import metrics` after a star import bound `metrics` to
                    # nltk.translate.metrics: `from pkg import name` takes the attribute the package
                    # already has and imports the submodule only when there is none
                    continue
                elif base and self.universe.exists(f"{base}.{e.name}"):
                    # `from .series import series`: the attribute `series` of the module
                    # sympy.series, which re-binds it to a function after importing the
                    # submodule of that name
                    inner = self.final_binding(base, e.name, _depth + 1) if _depth < 6 and base != module else ("none", None, Truth(True))
                    what = "object" if inner[0] == "object" and inner[2].value is True else f"module:{base}.{e.name}"
                elif e.name == "*":
                    what = self._star_binding(base, name, _depth)
                    if what == "none":
                        continue
                else:
                    what = "object"
            if t.value is None:
                result = (what, e, t) if result[0] == "none" or result[0] != what else (what, e, Truth(True))
                if result[0] != what or result[2].value is not True:
                    result = (what, e, t)
            else:
                result = (what, e, t)
        return result

    def _binders(self, module: str, prog: ImportTimeFacts, name: str) -> list[Effect]:
        """The effects of ``prog`` that may bind ``name`` (imports, bindings, deletions of it, and
        star imports), in program order: every public submodule of a package asks for its own
        name (sympy's ``__init__`` holds 920 effects)."""
        index = self._binder_index.get(module)
        if index is None or index[0] is not prog:
            by_name: dict[str, list[int]] = {}
            stars: list[int] = []
            for i, e in enumerate(prog.effects):
                if e.kind == "import" and e.name == "*":
                    stars.append(i)
                elif e.kind in ("import", "bind", "del"):
                    by_name.setdefault(e.bound, []).append(i)
            index = self._binder_index[module] = (prog, by_name, stars)
        _, by_name, stars = index
        found = by_name.get(name, [])
        return [prog.effects[i] for i in (sorted(found + stars) if stars else found)]

    def _star_binding(self, src: str, name: str, depth: int) -> str:
        """What ``from src import *`` binds ``name`` to: ``module:<dotted>``, ``object`` or ``none``.

        Without ``__all__`` the star takes every public name of the module's namespace, the
        submodules its imports set as attributes included (nltk.translate's ``metrics``)."""
        u = self.universe
        entry = u.get(src) if src else None
        facts = entry.facts if entry is not None and entry.kind == "package" else None
        if facts is None or name.startswith("_") or depth >= 6:
            return "none"
        src_prog = self.program_for(src)
        # numba.core.types computes its __all__: the star takes that list, which is not known
        if src_prog is None or (facts.all_names is None and any(e.bound == "__all__" for e in src_prog.effects)):
            return "none"
        key = ("exported", src)
        if key not in self._runs:
            self._runs[key] = u.exported(src)
        names = self._runs[key]
        if names is None:
            return "none"
        if name in names:
            inner = self.final_binding(src, name, depth + 1)[0]
            return inner if inner != "none" else "none"
        if facts.all_names is None and f"{src}.{name}" in u.closure([src]):
            return f"module:{src}.{name}"
        return "none"


def _compare(op: ast.cmpop, a: object, b: object) -> object:
    if isinstance(op, ast.Eq):
        return a == b
    if isinstance(op, ast.NotEq):
        return a != b
    if isinstance(op, ast.Lt):
        return a < b
    if isinstance(op, ast.LtE):
        return a <= b
    if isinstance(op, ast.Gt):
        return a > b
    if isinstance(op, ast.GtE):
        return a >= b
    if isinstance(op, ast.In):
        return a in b
    if isinstance(op, ast.NotIn):
        return a not in b
    if isinstance(op, ast.Is):
        return a is b
    if isinstance(op, ast.IsNot):
        return a is not b
    return _UNKNOWN


def absolute_module(module: str, level: int, importer: str, is_package: bool) -> str | None:
    """The module ``from <level dots><module>`` names in ``importer`` (see :func:`cuaudit.names.absolute_module`)."""
    if not level:
        return module or None
    return names.absolute_module(module, level, importer if is_package else importer.rpartition(".")[0])