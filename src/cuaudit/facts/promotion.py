"""Source facts for the NEP 50 family (CU4xx): read with ``ast``, never run.

Two extractors:

* ``promotion_source`` (Python modules): Python scalars used as operands in
  ``cupy.fuse`` kernels, ``numpy.can_cast``/``cupy.can_cast`` given a Python
  scalar, ``cupy.copyto``/``cupy.select`` given one, and arithmetic whose NumPy 1.x and NumPy 2 results differ where the
  operands' dtypes are written down locally (``dtype=``, ``astype``,
  ``np.float32(...)`` scalars, literals).
* ``promotion_requirements`` (``pyproject.toml``, ``requirements*.txt``,
  ``setup.cfg``): the CuPy and NumPy requirements a project declares, which
  decide the severity of CU401 when no environment is given.

Type knowledge is deliberately local and exact: a name counts only when it is
bound once in its scope, an expression only when its dtype is spelled out.
Unknown means no finding (pyflakes' promise: no false positives), and
comparisons are never reported (NumPy 2 special-cases Python integers there).
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

from cuaudit.facts import Extractor, InputError, MemberReader
from cuaudit.formats.python import LEAVES, PUSH_FIELDS, PythonModule, parse_python_text
from cuaudit.model import Member, MemberKind
from cuaudit.names import is_test_path

# -- dtypes, in pure Python (cuaudit does not depend on NumPy) -------------------------

_DTYPE_NAMES = {
    "bool": "bool", "bool_": "bool", "?": "bool", "b1": "bool",
    "int8": "int8", "byte": "int8", "i1": "int8", "b": "int8",
    "int16": "int16", "short": "int16", "i2": "int16", "h": "int16",
    "int32": "int32", "intc": "int32", "i4": "int32", "i": "int32",
    "int64": "int64", "int_": "int64", "intp": "int64", "long": "int64", "longlong": "int64", "i8": "int64",
    "l": "int64", "q": "int64", "int": "int64",
    "uint8": "uint8", "ubyte": "uint8", "u1": "uint8", "B": "uint8",
    "uint16": "uint16", "ushort": "uint16", "u2": "uint16", "H": "uint16",
    "uint32": "uint32", "uintc": "uint32", "u4": "uint32", "I": "uint32",
    "uint64": "uint64", "uint": "uint64", "uintp": "uint64", "ulonglong": "uint64", "u8": "uint64",
    "L": "uint64", "Q": "uint64",
    "float16": "float16", "half": "float16", "f2": "float16", "e": "float16",
    "float32": "float32", "single": "float32", "f4": "float32", "f": "float32",
    "float64": "float64", "double": "float64", "float_": "float64", "f8": "float64", "d": "float64", "float": "float64",
    "complex64": "complex64", "csingle": "complex64", "c8": "complex64", "F": "complex64",
    "complex128": "complex128", "cdouble": "complex128", "complex_": "complex128", "c16": "complex128",
    "D": "complex128", "complex": "complex128",
}
_INT_RANGE = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint8": (0, 2**8 - 1), "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1),
}
#: what value-based casting accepted for a float of this dtype (NumPy 1.x min_scalar_type)
_FLOAT_LIMIT = {"float16": 65000.0, "float32": 3.4e38}
_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
          ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
_BITWISE = {"&", "|", "^", "<<", ">>"}
_SCALAR_CONSTANTS = {"numpy.pi", "numpy.e", "numpy.inf", "numpy.nan", "numpy.euler_gamma", "math.pi", "math.e",
                     "math.tau", "math.inf", "math.nan", "cupy.pi", "cupy.e", "cupy.inf", "cupy.nan"}
#: callables that take their operands positionally inside a fused kernel (CuPy ufuncs)
_KERNEL_UFUNCS = frozenset(
    """add subtract multiply divide true_divide floor_divide remainder mod fmod power float_power
    maximum minimum fmax fmin bitwise_and bitwise_or bitwise_xor left_shift right_shift
    arctan2 hypot copysign nextafter logaddexp logaddexp2 heaviside ldexp
    logical_and logical_or logical_xor equal not_equal less less_equal greater greater_equal
    where clip""".split()
)
_ARRAY_MAKERS = {"array": 1, "asarray": 1, "zeros": 1, "ones": 1, "empty": 1, "full": 2, "arange": None,
                 "linspace": None, "zeros_like": 1, "ones_like": 1, "full_like": 2, "empty_like": 1, "frombuffer": 1}


def dtype_name(text: str) -> str | None:
    return _DTYPE_NAMES.get(text)


def _kind(dt: str) -> str:
    return "b" if dt == "bool" else "u" if dt.startswith("uint") else "i" if dt.startswith("int") else dt[0]


def _bits(dt: str) -> int:
    return 8 if dt == "bool" else int(re.sub(r"\D", "", dt))


def promote(a: str, b: str) -> str:
    """``numpy.promote_types`` for the numeric dtypes (unchanged between NumPy 1 and 2)."""
    if a == b:
        return a
    ka, kb = _kind(a), _kind(b)
    if ka == "b":
        return b
    if kb == "b":
        return a
    order = "uifc"
    if order.index(ka) > order.index(kb):
        a, b, ka, kb = b, a, kb, ka
    if ka == kb:
        return a if _bits(a) >= _bits(b) else b
    if ka == "u" and kb == "i":
        if _bits(b) > _bits(a):
            return b
        return "float64" if _bits(a) == 64 else f"int{_bits(a) * 2}"
    # integer with inexact: the smallest float holding every integer of a, at least b
    need = {8: 16, 16: 32, 32: 64, 64: 64}[_bits(a)] if ka in "ui" else _bits(a)
    if kb == "f":
        return f"float{max(need, _bits(b))}"
    return f"complex{max(2 * need if ka in 'uif' else need, _bits(b), 64)}"


def python_scalar_dtype(value: Any) -> str:
    return "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "float64" if isinstance(value, float) else "complex128"


# -- facts ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    line: int
    column: int  # 1-based characters
    end_line: int
    end_column: int


@dataclass(frozen=True)
class FusedScalar:
    """A Python scalar operand inside a ``cupy.fuse`` kernel (CU401)."""

    span: Span
    text: str  # the scalar's source ("1", "ALPHA", "np.pi")
    value: str  # repr of the value
    kernel: str
    kernel_line: int
    entry: str  # "cupy.fuse"
    operation: str  # "+", "<", "maximum()"
    partner: str | None  # a kernel parameter in the other operand (for the explicit cast)


@dataclass(frozen=True)
class FusedCallScalar:
    """A Python scalar passed as an argument to a ``cupy.fuse`` kernel (CU407)."""

    span: Span
    text: str
    value: str
    kernel: str
    position: int  # 0-based argument position


@dataclass(frozen=True)
class CanCastScalar:
    """``numpy.can_cast``/``cupy.can_cast`` with a Python scalar first argument (CU402)."""

    span: Span
    function: str
    text: str
    value: str
    arg_span: Span


@dataclass(frozen=True)
class CopytoScalar:
    """``cupy.copyto(dst, scalar)`` / ``cupy.select(..., default=scalar)`` with a Python scalar (CU406)."""

    span: Span
    function: str
    text: str  # the scalar's source, or "default=0 (implicit)"
    value: str


@dataclass(frozen=True)
class ChangedOperation:
    """An operation whose NumPy 1.x and NumPy 2 outcomes differ, with dtypes known locally.

    ``kind``: ``int-out-of-bounds`` (CU403), ``numpy-scalar-upcast`` (CU404) or
    ``python-scalar-narrowed`` (CU405).
    """

    kind: str
    span: Span
    text: str
    operation: str
    operands: str  # "uint8 array + Python int 300"
    legacy: str
    new: str
    replacement: str | None = None  # unsafe fix text for ``fix_span``
    fix_span: Span | None = None


@dataclass(frozen=True)
class PromotionFacts:
    fused: tuple[FusedScalar, ...] = ()
    can_cast: tuple[CanCastScalar, ...] = ()
    changed: tuple[ChangedOperation, ...] = ()
    copyto: tuple[CopytoScalar, ...] = ()
    fused_calls: tuple[FusedCallScalar, ...] = ()
    imports_cupy: bool = False
    imports_numpy: bool = False


@dataclass(frozen=True)
class DeclaredRequirements:
    """Requirement strings a project file declares (PEP 508), with their source."""

    requirements: tuple[str, ...]
    source: str


# -- the source analysis ------------------------------------------------------------------


@dataclass(frozen=True)
class _Typed:
    dtype: str
    category: str  # "array" | "npscalar" | "pyscalar"
    value: Any = None  # known value of a scalar (Python or NumPy)


class _Analysis:
    def __init__(self, module: PythonModule) -> None:
        self.source = module.text
        self.segment = module.segment
        self.column = module.column
        self.aliases: dict[str, str] = {}
        self.fused: list[FusedScalar] = []
        self.fused_calls: list[FusedCallScalar] = []
        self.can_cast: list[CanCastScalar] = []
        self.changed: list[ChangedOperation] = []
        self.copyto: list[CopytoScalar] = []
        self.module_scalars: dict[str, Any] = {}
        self.module_types: dict[str, _Typed] = {}
        self.seen: set[tuple] = set()

    # -- positions and names --------------------------------------------------------------
    def span(self, node: ast.AST) -> Span:
        line = node.lineno  # type: ignore[attr-defined]
        end_line = node.end_lineno or line  # type: ignore[attr-defined]
        return Span(line, self.column(line, node.col_offset), end_line,  # type: ignore[attr-defined]
                    self.column(end_line, node.end_col_offset or 0))  # type: ignore[attr-defined]

    def text(self, node: ast.AST) -> str:
        return " ".join((self.segment(node) or "").split())

    def qualname(self, node: ast.AST) -> str | None:
        """``np.random.rand`` -> ``numpy.random.rand`` through the module's imports."""
        t = type(node)
        if t is ast.Name:
            return self.aliases.get(node.id)  # type: ignore[attr-defined]  # most callees
        root = node
        while t is ast.Attribute:
            root = root.value  # type: ignore[attr-defined]
            t = type(root)
        if t is not ast.Name:
            return None
        base = self.aliases.get(root.id)  # type: ignore[attr-defined]
        if base is None:
            return None  # `self.x.y`: no string built
        parts: list[str] = []
        while node is not root:
            parts.append(node.attr)  # type: ignore[attr-defined]
            node = node.value  # type: ignore[attr-defined]
        parts.append(base)
        return ".".join(reversed(parts))

    def collect_imports(self, nodes: Iterable[ast.AST]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.aliases[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if a.name != "*":
                        self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    # -- scalars ----------------------------------------------------------------------------
    def literal(self, node: ast.AST, scalars: dict[str, Any], depth: int = 0) -> tuple[bool, Any]:
        """(is a Python scalar, its value) for literals, names bound to them, np.pi ...; an expression
        nested deeper than ``_FOLD_DEPTH`` is none (every operator of a sum is checked, and each
        check folds what is under it: 3 M folds for a 2,500-term sum, 5 s)."""
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, (bool, int, float, complex)):
                return True, v
            return False, None
        if depth >= _FOLD_DEPTH:
            return False, None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            ok, v = self.literal(node.operand, scalars, depth + 1)
            if ok and not isinstance(v, bool):
                return True, -v if isinstance(node.op, ast.USub) else v
            return False, None
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            ok1, v1 = self.literal(node.left, scalars, depth + 1)
            ok2, v2 = self.literal(node.right, scalars, depth + 1)
            if ok1 and ok2:
                try:
                    return True, _fold(node.op, v1, v2)
                except Exception:  # noqa: BLE001 - 1/0 and friends: not a constant we know
                    return False, None
            return False, None
        if isinstance(node, ast.Name) and node.id in scalars:
            return True, scalars[node.id]
        if isinstance(node, ast.Attribute):
            q = self.qualname(node)
            if q in _SCALAR_CONSTANTS:
                return True, {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf, "nan": math.nan,
                              "euler_gamma": 0.5772156649015329}[q.rsplit(".", 1)[1]]
        return False, None

    def dtype_of(self, node: ast.AST | None) -> str | None:
        """A dtype spelled out: ``np.uint8``, ``'float32'``, ``np.dtype('f4')``, ``float``."""
        if node is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return dtype_name(node.value)
        if isinstance(node, ast.Name) and node.id in ("float", "int", "complex", "bool") and node.id not in self.aliases:
            return dtype_name(node.id)
        q = self.qualname(node)
        if q and q.split(".")[0] in ("numpy", "cupy") and q.count(".") == 1:
            return dtype_name(q.split(".")[1])
        if isinstance(node, ast.Call) and self.qualname(node.func) in ("numpy.dtype", "cupy.dtype") and node.args:
            return self.dtype_of(node.args[0])
        return None

    def typed(self, node: ast.AST, env: dict[str, _Typed], scalars: dict[str, Any]) -> _Typed | None:
        ok, v = self.literal(node, scalars)
        if ok:
            return _Typed(python_scalar_dtype(v), "pyscalar", v)
        if isinstance(node, ast.Name):
            return env.get(node.id)
        if isinstance(node, ast.Call):
            q = self.qualname(node.func)
            if q and q.split(".")[0] in ("numpy", "cupy") and q.count(".") == 1:
                name = q.split(".")[1]
                scalar_dt = dtype_name(name) if name not in ("float", "int", "complex", "bool") else None
                if scalar_dt and len(node.args) == 1 and not node.keywords:
                    okv, val = self.literal(node.args[0], scalars)
                    return _Typed(scalar_dt, "npscalar", val if okv else None)
                if name in _ARRAY_MAKERS:
                    dt = None
                    for kw in node.keywords:
                        if kw.arg == "dtype":
                            dt = self.dtype_of(kw.value)
                    pos = _ARRAY_MAKERS[name]
                    if dt is None and pos is not None and len(node.args) > pos:
                        dt = self.dtype_of(node.args[pos])
                    if dt:
                        return _Typed(dt, "array")
            if isinstance(node.func, ast.Attribute) and node.func.attr == "astype":
                arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "dtype"), None)
                dt = self.dtype_of(arg)
                if dt:
                    return _Typed(dt, "array")
        return None

    # -- scopes ---------------------------------------------------------------------------
    def scope_bindings(self, nodes: Iterable[ast.AST], params: set[str], outer_scalars: dict[str, Any],
                       outer_env: dict[str, _Typed]) -> tuple[dict[str, Any], dict[str, _Typed]]:
        """Names bound exactly once in a scope (not parameters) to a scalar or a known-dtype value."""
        counts: dict[str, int] = {}
        single: dict[str, ast.AST] = {}
        augmented: set[str] = set()
        for node in nodes:
            if type(node) in _BIND_NOTHING:
                continue  # most of a scope's nodes: checked below, bind nothing
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign):
                # in place: an array keeps its dtype; anything else is rebound
                augmented.update(_names(node.target))
            elif isinstance(node, ast.AnnAssign):
                targets = [node.target]
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                targets = [node.target]
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                counts[node.name] = counts.get(node.name, 0) + 2
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    n = (a.asname or a.name).split(".")[0]
                    counts[n] = counts.get(n, 0) + 2
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                for n in node.names:
                    counts[n] = counts.get(n, 0) + 2
            elif isinstance(node, ast.NamedExpr):
                targets = [node.target]
            for t in targets:
                for n in _names(t):
                    counts[n] = counts.get(n, 0) + (1 if isinstance(node, ast.Assign) and isinstance(t, ast.Name) else 2)
                    if isinstance(node, ast.Assign) and isinstance(t, ast.Name) and len(node.targets) == 1:
                        single[n] = node.value
        scalars = {k: v for k, v in outer_scalars.items() if k not in counts and k not in params}
        env = {k: v for k, v in outer_env.items() if k not in counts and k not in params}
        for name, value in single.items():
            if counts.get(name) != 1 or name in params:
                continue
            ok, v = self.literal(value, scalars)
            if ok:
                if name not in augmented:
                    scalars[name] = v
                continue
            t = self.typed(value, env, scalars)
            if t is not None and t.category != "pyscalar" and (name not in augmented or t.category == "array"):
                env[name] = t
        for name in augmented:
            if counts.get(name, 0) == 0:
                scalars.pop(name, None)
                if name in env and env[name].category != "array":
                    env.pop(name)
        return scalars, env

    # -- the checks -------------------------------------------------------------------------------
    def run(self, tree: ast.Module) -> None:
        scopes = _build_scopes(tree)
        all_nodes = [n for sc in scopes for n in sc.nodes]
        self.collect_imports(all_nodes)
        roots = {v.split(".")[0] for v in self.aliases.values()}
        # a kernel needs cupy.fuse / cupyx.fuse, every checked call a numpy or cupy name: without
        # such an import those lookups cannot succeed (most modules that mention numpy in text)
        fuses = bool(roots & {"cupy", "cupyx"})
        calls = bool(roots & {"numpy", "cupy"})
        if not fuses and not calls and "astype" not in self.source and self.source.isascii():
            # without those imports only `.astype(...)` can give a value a dtype (an identifier
            # outside ASCII may be a spelling of it): no operation has two typed operands
            return
        fused_names = self.fused_by_call(all_nodes) if fuses else set()
        kernels = self.kernel_names(all_nodes) if fuses else set()
        derived: list[tuple[dict[str, Any], dict[str, _Typed]]] = []
        aliases, attribute, name = self.aliases, ast.Attribute, ast.Name
        for sc in scopes:
            parent = sc.parent
            while parent >= 0 and isinstance(scopes[parent].owner, ast.ClassDef):
                parent = scopes[parent].parent  # class attributes are not visible in methods
            outer = derived[parent] if parent >= 0 and sc.parent >= 0 else ({}, {})
            scalars, env = self.scope_bindings(sc.nodes, sc.params, outer[0], outer[1])
            derived.append((scalars, env))
            owner = sc.owner
            if fuses and isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                owner.name in fused_names or any(self.is_fuse(d) for d in owner.decorator_list)
            ):
                self.check_kernel(owner, sc.params, scalars)
            for node in sc.nodes:
                t = type(node)
                if t is ast.Call:
                    # a call is checked by its numpy/cupy name: one whose callee is not reached
                    # through an imported name (`self.f()`, `len()`: most calls) has none
                    if calls:
                        base = node.func  # type: ignore[attr-defined]
                        while type(base) is attribute:
                            base = base.value
                        if type(base) is name and base.id in aliases:
                            self.check_node(node, scalars, env)
                elif t is ast.BinOp or t is ast.AugAssign:
                    self.check_node(node, scalars, env)
                if kernels and t is ast.Call and isinstance(node.func, ast.Name) and node.func.id in kernels:
                    for i, arg in enumerate(node.args):
                        ok, value = self.literal(arg, scalars)
                        if ok and not isinstance(value, bool):
                            self.fused_calls.append(FusedCallScalar(self.span(arg), self.text(arg), repr(value), node.func.id, i))
        self.module_scalars, self.module_types = derived[0]

    def is_fuse(self, node: ast.AST) -> bool:
        target = node.func if isinstance(node, ast.Call) else node
        return self.qualname(target) in ("cupy.fuse", "cupyx.fuse")

    def kernel_names(self, nodes: Iterable[ast.AST]) -> set[str]:
        """Names that call a fused kernel: decorated functions and ``k = cp.fuse(f)`` targets."""
        out: set[str] = set()
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(self.is_fuse(d) for d in node.decorator_list):
                out.add(node.name)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and (
                self.is_fuse(node.value.func) or (isinstance(node.value.func, ast.Call) and self.is_fuse(node.value.func))
            ):
                out.update(t.id for t in node.targets if isinstance(t, ast.Name))
        return out

    def fused_by_call(self, nodes: Iterable[ast.AST]) -> set[str]:
        """Functions made kernels by a call: ``k = cp.fuse(f)``, ``cp.fuse(kernel_name='k')(f)``."""
        out: set[str] = set()
        for node in nodes:
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
                if (self.is_fuse(node.func) and not isinstance(node.func, ast.Call)) or (
                    isinstance(node.func, ast.Call) and self.is_fuse(node.func)
                ):
                    out.add(node.args[0].id)
        return out

    def check_kernel(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, params: set[str], scalars: dict[str, Any]) -> None:
        def flag(operand: ast.AST, others: list[ast.AST], operation: str) -> None:
            ok, value = self.literal(operand, scalars)
            if not ok:
                return
            partner = None
            for other in others:
                partner = _first_param(other, params, scalars, self.aliases)
                if partner:
                    break
            if all(self.literal(o, scalars)[0] for o in others):
                return  # scalar with scalar: plain Python arithmetic, no ufunc runs
            key = ("fused", operand.lineno, operand.col_offset)  # type: ignore[attr-defined]
            if key in self.seen:
                return
            self.seen.add(key)
            self.fused.append(FusedScalar(self.span(operand), self.text(operand), repr(value), fn.name, fn.lineno,
                                          "cupy.fuse", operation, partner))

        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
                if self.literal(node, scalars)[0]:
                    continue  # all-constant subexpression: the outer operation reports it
                flag(node.left, [node.right], _ARITH[type(node.op)])
                flag(node.right, [node.left], _ARITH[type(node.op)])
            elif isinstance(node, ast.AugAssign) and type(node.op) in _ARITH:
                flag(node.value, [node.target], _ARITH[type(node.op)] + "=")
            elif isinstance(node, ast.Compare):
                chain = [node.left, *node.comparators]
                for i, item in enumerate(chain):
                    flag(item, [c for j, c in enumerate(chain) if j != i], "comparison")
            elif isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else None
                q = self.qualname(node.func)
                if name is None and q:
                    name = q.rsplit(".", 1)[-1]
                if q and q.split(".")[0] in ("cupy", "numpy") and name in _KERNEL_UFUNCS:
                    for i, arg in enumerate(node.args):
                        flag(arg, [a for j, a in enumerate(node.args) if j != i], f"{name}()")

    def check_node(self, node: ast.AST, scalars: dict[str, Any], env: dict[str, _Typed]) -> None:
        if isinstance(node, ast.Call):
            q = self.qualname(node.func)
            if q in ("numpy.can_cast", "cupy.can_cast") and node.args:
                ok, value = self.literal(node.args[0], scalars)
                if ok:
                    self.can_cast.append(CanCastScalar(self.span(node), q, self.text(node.args[0]), repr(value),
                                                       self.span(node.args[0])))
            if q in ("cupy.copyto", "cupy.select"):
                self.check_copyto(node, q, scalars)
            self.check_conversion(node, q, scalars)
        elif isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            left = self.typed(node.left, env, scalars)
            right = self.typed(node.right, env, scalars)
            if left and right:
                self.check_binop(node, _ARITH[type(node.op)], left, right, node.left, node.right, inplace=False)
        elif isinstance(node, ast.AugAssign) and type(node.op) in _ARITH:
            left = self.typed(node.target, env, scalars) if isinstance(node.target, ast.Name) else None
            right = self.typed(node.value, env, scalars)
            if left and right and left.category == "array":
                self.check_binop(node, _ARITH[type(node.op)] + "=", left, right, node.target, node.value, inplace=True)

    def check_copyto(self, node: ast.Call, q: str, scalars: dict[str, Any]) -> None:
        """The scalar source of ``cupy.copyto``, and ``cupy.select``'s default (0 when omitted)."""
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return
        name = "src" if q == "cupy.copyto" else "default"
        pos = 1 if q == "cupy.copyto" else 2
        arg = node.args[pos] if len(node.args) > pos else next((k.value for k in node.keywords if k.arg == name), None)
        if arg is None:
            if q == "cupy.select":
                self.copyto.append(CopytoScalar(self.span(node), q, "default=0 (implicit)", "0"))
            return
        ok, value = self.literal(arg, scalars)
        if ok:
            self.copyto.append(CopytoScalar(self.span(arg), q, self.text(arg), repr(value)))

    def check_conversion(self, node: ast.Call, q: str | None, scalars: dict[str, Any]) -> None:
        """``np.uint8(300)`` and ``np.array([300], dtype=np.uint8)``: OverflowError on NumPy 2."""
        if not q or q.split(".")[0] not in ("numpy", "cupy") or q.count(".") != 1:
            return
        name = q.split(".")[1]
        dt = dtype_name(name) if name not in ("float", "int", "complex", "bool") else None
        values: list[tuple[ast.AST, Any]] = []
        if dt and dt in _INT_RANGE and len(node.args) == 1:
            ok, v = self.literal(node.args[0], scalars)
            if ok:
                values.append((node.args[0], v))
        elif name in ("array", "asarray"):
            dt = next((self.dtype_of(k.value) for k in node.keywords if k.arg == "dtype"), None)
            if dt is None and len(node.args) > 1:
                dt = self.dtype_of(node.args[1])
            if dt in _INT_RANGE and node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
                for elt in node.args[0].elts:
                    ok, v = self.literal(elt, scalars)
                    if ok:
                        values.append((elt, v))
        for elt, v in values:
            lo, hi = _INT_RANGE[dt]  # type: ignore[index]
            if isinstance(v, int) and not isinstance(v, bool) and not lo <= v <= hi:
                self.changed.append(ChangedOperation(
                    "int-out-of-bounds", self.span(elt), self.text(node), "conversion",
                    f"Python int {v} converted to {dt}",
                    f"{dt} {_wrap(v, dt)} (wrapped, DeprecationWarning since NumPy 1.24)",
                    f"OverflowError: Python integer {v} out of bounds for {dt}",
                ))

    def check_binop(self, node: ast.AST, op: str, left: _Typed, right: _Typed, lnode: ast.AST, rnode: ast.AST,
                    *, inplace: bool) -> None:
        if op == "/" and _kind(left.dtype) in "biu" and _kind(right.dtype) in "biu":
            return  # integer true division is float64 in both worlds
        if op.rstrip("=") in _BITWISE and (_kind(left.dtype) in "fc" or _kind(right.dtype) in "fc"):
            return  # no inexact bitwise loops: an error in both worlds
        if op.rstrip("=") in ("//", "%") and "c" in (_kind(left.dtype), _kind(right.dtype)):
            return  # no complex floor division / remainder loops either
        for a, b, bnode in ((left, right, rnode), (right, left, lnode)):
            if a.category in ("array", "npscalar") and b.category == "pyscalar":
                self.check_weak(node, op, a, b, bnode, inplace, left is a)
        if not inplace:
            for arr, sc, snode in ((left, right, rnode), (right, left, lnode)):
                if arr.category == "array" and sc.category == "npscalar":
                    self.check_strong_scalar(node, op, arr, sc, snode, left is arr)

    def _operands(self, op: str, a: _Typed, b: _Typed, a_first: bool) -> str:
        def d(t: _Typed) -> str:
            if t.category == "pyscalar":
                return f"Python {type(t.value).__name__} {t.value!r}"
            if t.category == "npscalar":
                return f"{t.dtype} scalar" + (f" {t.value!r}" if t.value is not None else "")
            return f"{t.dtype} array"
        return f"{d(a)} {op} {d(b)}" if a_first else f"{d(b)} {op} {d(a)}"

    def check_weak(self, node: ast.AST, op: str, a: _Typed, b: _Typed, bnode: ast.AST, inplace: bool, a_first: bool) -> None:
        """A NumPy operand of known dtype with a Python scalar of known value."""
        ka, kb = _kind(a.dtype), _kind(b.dtype)
        v = b.value
        if ka in "iu" and kb == "i" and not isinstance(v, bool):
            lo, hi = _INT_RANGE[a.dtype]
            if not lo <= v <= hi:
                legacy_dt = _legacy_int_array(a.dtype, v) if a.category == "array" else promote(
                    a.dtype, "int64" if -(2**63) <= v < 2**63 else "uint64")
                if op.rstrip("=") in _BITWISE and _kind(legacy_dt) not in "iu":
                    return  # NumPy 1.x had no loop for the promoted dtype either: an error in both
                if a.category == "array" and not inplace:
                    legacy = f"{_legacy_int_array(a.dtype, v)} result"
                elif a.category == "array":
                    legacy = f"{a.dtype} result (computed wider, wrapped on the cast back)"
                else:
                    legacy = f"{promote(a.dtype, python_scalar_dtype(v) if -(2**63) <= v < 2**63 else 'uint64')} result"
                self.changed.append(ChangedOperation(
                    "int-out-of-bounds", self.span(node), self.text(node), op, self._operands(op, a, b, a_first),
                    legacy, f"OverflowError: Python integer {v} out of bounds for {a.dtype}",
                ))
            elif a.category == "npscalar" and a.dtype != "int64" and not inplace:
                self.narrowed(node, op, a, b, a_first, promote(a.dtype, "int64"))
            return
        if ka == "f" and kb in "if" and not isinstance(v, bool):
            if a.category == "npscalar" and a.dtype in ("float16", "float32") and not inplace:
                self.narrowed(node, op, a, b, a_first, "float64")
            elif a.category == "array" and kb == "f" and a.dtype in _FLOAT_LIMIT and math.isfinite(v) and abs(v) >= _FLOAT_LIMIT[a.dtype]:
                legacy = "float32" if a.dtype == "float16" and abs(v) < 3.4e38 else "float64"
                if not inplace:
                    self.changed.append(ChangedOperation(
                        "python-scalar-narrowed", self.span(node), self.text(node), op, self._operands(op, a, b, a_first),
                        f"{legacy} result", f"{a.dtype} result: the Python float {v!r} overflows to inf "
                        f"(RuntimeWarning: overflow)",
                    ))

    def narrowed(self, node: ast.AST, op: str, a: _Typed, b: _Typed, a_first: bool, legacy: str) -> None:
        if legacy == a.dtype:
            return
        self.changed.append(ChangedOperation(
            "python-scalar-narrowed", self.span(node), self.text(node), op, self._operands(op, a, b, a_first),
            f"{legacy} result", f"{a.dtype} result (the NumPy scalar's dtype wins; less precision or range)",
        ))

    def check_strong_scalar(self, node: ast.AST, op: str, arr: _Typed, sc: _Typed, snode: ast.AST, arr_first: bool) -> None:
        """An array with a NumPy scalar: legacy looked at the scalar's value, NEP 50 at its dtype."""
        ka, ks = _kind(arr.dtype), _kind(sc.dtype)
        if ka == "b" or ks == "b":
            return
        new = promote(arr.dtype, sc.dtype)
        if new == arr.dtype:
            return
        # value-based casting applied when the scalar's kind (integer < inexact) was not above the array's
        rank = {"u": 1, "i": 1, "f": 2, "c": 2}
        if rank[ks] > rank[ka] or sc.value is None:
            return
        legacy = _legacy_array_scalar(arr.dtype, sc.dtype, sc.value)
        if legacy is None or legacy == new:
            return
        new_text = f"{new} result"
        if op.rstrip("=") in _BITWISE:
            if _kind(legacy) not in "iu":
                return  # no loop in NumPy 1.x either
            if _kind(new) not in "iu":
                new_text = f"UFuncTypeError ({arr.dtype} with {sc.dtype} promotes to {new}, which has no bitwise loop)"
        replacement = None
        if isinstance(snode, ast.Call) and len(snode.args) == 1:
            inner = self.text(snode.args[0])
            replacement = inner if (ks in "ui" and isinstance(sc.value, int)) or (ks == "f" and isinstance(sc.value, float)) else None
            if ks == "f" and isinstance(sc.value, int):
                replacement = f"{sc.value}.0"
        self.changed.append(ChangedOperation(
            "numpy-scalar-upcast", self.span(node), self.text(node), op, self._operands(op, arr, sc, arr_first),
            f"{legacy} result", new_text, replacement=replacement, fix_span=self.span(snode),
        ))


def _legacy_int_array(dt: str, v: int) -> str:
    """NumPy 1.x result dtype of ``int_array(dt) + python_int(v)`` (add/sub/mul)."""
    if v >= 2**64 or v < -(2**63):
        return "object"
    if v >= 0:
        m = next(t for t in ("uint8", "uint16", "uint32", "uint64") if v <= _INT_RANGE[t][1])
        small = v <= _INT_RANGE[m.replace("u", "", 1)][1]
        if small and _kind(dt) == "i":
            m = m.replace("u", "", 1)
    else:
        m = next(t for t in ("int8", "int16", "int32", "int64") if v >= _INT_RANGE[t][0])
    return promote(dt, m)


def _legacy_array_scalar(arr: str, sc: str, value: Any) -> str | None:
    """NumPy 1.x dtype of ``array(arr) op numpy_scalar(sc, value)``: value-based on the scalar."""
    ks = _kind(sc)
    if ks in "ui":
        return _legacy_int_array(arr, int(value)) if _kind(arr) in "ui" else promote(arr, _min_int(int(value)))
    if ks == "f":
        v = float(value)
        if not math.isfinite(v) or abs(v) < 65000:
            m = "float16"
        elif abs(v) < 3.4e38:
            m = "float32"
        else:
            m = sc
        return promote(arr, m)
    if ks == "c":
        c = complex(value)
        m = "complex64" if abs(c.real) < 3.4e38 and abs(c.imag) < 3.4e38 else sc
        return promote(arr, m)
    return None


def _min_int(v: int) -> str:
    if v >= 0:
        return next(t for t in ("uint8", "uint16", "uint32", "uint64") if v <= _INT_RANGE[t][1])
    return next(t for t in ("int8", "int16", "int32", "int64") if v >= _INT_RANGE[t][0])


def _wrap(v: int, dt: str) -> int:
    lo, hi = _INT_RANGE[dt]
    span = hi - lo + 1
    return (v - lo) % span + lo


def _fold(op: ast.operator, a: Any, b: Any) -> Any:
    import operator

    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
    fn = ops.get(type(op))
    if fn is None:
        raise ValueError("not folded")
    if fn is operator.mul and isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > _FOLDED_BITS:
        # `x1 = x0 * x0`, `x2 = x1 * x1`, ... forty times: a product of 2**40 digits (a hostile module
        # held cuaudit for ever); no dtype holds such a value anyway
        raise ValueError("not folded")
    return fn(a, b)


#: the deepest constant expression folded (real code folds a few levels: ``2 * np.pi / 3``)
_FOLD_DEPTH = 64
#: the largest product of two ints folded, in bits: CPython's own constant folding stops there too
#: (``MAX_INT_SIZE`` in its AST optimiser); no NumPy dtype holds more than 64
_FOLDED_BITS = 128


def _names(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _names(e)]
    if isinstance(target, ast.Starred):
        return _names(target.value)
    return []


@dataclass
class _Scope:
    owner: ast.AST | None
    parent: int
    params: set[str]
    nodes: list[ast.AST]


_SCOPE_OWNERS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _build_scopes(tree: ast.Module) -> list[_Scope]:
    """Every scope's own nodes, in one pass (parents before children).

    A function's decorators and defaults belong to the enclosing scope, its
    body to its own; the def node itself is listed in the enclosing scope.
    The stack holds nodes and, between them, the index of the scope the nodes
    after it belong to (a pair per node cost a third of this walk).  A node's
    fields are pushed first to last, so the last field is read first (an
    ``else`` before its ``if`` body): the order the facts were always built in
    (which import of a name counts last, the order of the findings).
    """
    scopes = [_Scope(None, -1, set(), [])]
    idx = 0
    current = scopes[0].nodes
    stack: list[Any] = tree.body[::-1]
    pop, push, extend = stack.pop, stack.append, stack.extend
    keep, owners, leaves, pushers = _KEPT, _OWNER_TYPES, LEAVES, PUSH_FIELDS
    while stack:
        node = pop()
        t = type(node)
        if t in leaves:  # half of the nodes: names and constants (``global`` and ``nonlocal`` are kept)
            if t in keep:
                current.append(node)
            continue
        if t is int:
            idx = node
            current = scopes[idx].nodes
            continue
        if t in keep:
            current.append(node)
        if t in owners:
            outer: list[ast.AST] = []
            params: set[str] = set()
            if t is ast.ClassDef:
                outer = [*node.decorator_list, *node.bases, *node.keywords]
                body: list[ast.AST] = list(node.body)
            else:
                args = node.args
                params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
                params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
                outer = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
                if t is not ast.Lambda:
                    outer += node.decorator_list
                body = list(node.body) if isinstance(node.body, list) else [node.body]
            scopes.append(_Scope(node, idx, params, []))
            push(idx)  # back to this scope after the body
            extend(body[::-1])
            push(len(scopes) - 1)  # the body is the new scope's
            extend(outer[::-1])  # decorators and defaults first, in this scope
            continue
        pushers[t](node, extend, push)
    return scopes


#: node types a scope's analysis looks at (bindings, imports, calls, operators)
_KEPT = frozenset({
    ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.comprehension, ast.With, ast.AsyncWith,
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.Import, ast.ImportFrom, ast.Global,
    ast.Nonlocal, ast.NamedExpr, ast.Call, ast.BinOp,
})
_OWNER_TYPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef})
_BIND_NOTHING = frozenset({ast.Call, ast.BinOp})


def _first_param(node: ast.AST, params: set[str], scalars: dict[str, Any], aliases: dict[str, str]) -> str | None:
    """A kernel variable in an operand (a parameter first, else a local array variable)."""
    names = [s.id for s in ast.walk(node) if isinstance(s, ast.Name) and isinstance(s.ctx, ast.Load)]
    for n in names:
        if n in params:
            return n
    for n in names:
        if n not in scalars and n not in aliases and n not in ("True", "False", "None"):
            return n
    return None


def analyse_source(source: str, filename: str = "<source>") -> PromotionFacts:
    """The CU4xx facts of one Python module's source text (tests)."""
    return promotion_facts(parse_python_text(source, filename))


#: between the words of an import statement: blanks, and line continuations (a newline only after a
#: backslash: an import without parentheses ends at its line's end)
_GAP = r"(?:[ \t\f]|\\(?:\r\n|\r|\n))"
#: every import statement that binds numpy, cupy or cupyx (``import a, numpy.linalg as la``,
#: ``from cupyx.scipy import x``) has a match, and so do a few that do not (``from . import numpy``,
#: ``yield from numpy_arrays()``): exact where it says no
_IMPORTS_A_LIBRARY = re.compile(rf"\bfrom{_GAP}*(?:numpy|cupy)|\bimport(?:[\w.,]|{_GAP})*?\b(?:numpy|cupy)")


def may_have_facts(text: str) -> bool:
    """Whether a module's text may give CU4xx facts; False only where ``promotion_facts`` is empty.

    Without "numpy" or "cupy" in the text nothing is bound to either.  Without an import of
    them (``_IMPORTS_A_LIBRARY``), ``_Analysis.run`` finds no kernel and no checked call, and
    returns at once when the text is ASCII without ``astype`` (the one way left to a dtype): its
    facts are empty, and so are ``imports_cupy`` and ``imports_numpy``.  (490 of the 6,933 modules
    naming either in the accuracy-venv and the numpy, cupy and torch wheels are answered so.)
    """
    if "numpy" not in text and "cupy" not in text:
        return False
    return not text.isascii() or "astype" in text or _IMPORTS_A_LIBRARY.search(text) is not None


def promotion_facts(module: PythonModule) -> PromotionFacts:
    """The CU4xx facts of one parsed module (none when it does not parse: the format check reports it)."""
    if module.error is not None or not may_have_facts(module.text):
        return PromotionFacts()
    return analysed_facts(module)


def analysed_facts(module: PythonModule) -> PromotionFacts:
    """``promotion_facts`` of a module that parsed, found by the analysis whatever its text (tests
    prove ``may_have_facts`` exact against it)."""
    analysis = _Analysis(module)
    analysis.run(module.tree)
    values = set(analysis.aliases.values())
    return PromotionFacts(
        fused=tuple(analysis.fused),
        can_cast=tuple(analysis.can_cast),
        changed=tuple(sorted(set(analysis.changed), key=lambda c: (c.span.line, c.span.column, c.kind))),
        copyto=tuple(analysis.copyto),
        fused_calls=tuple(analysis.fused_calls),
        imports_cupy=any(v.split(".")[0] in ("cupy", "cupyx") for v in values),
        imports_numpy=any(v.split(".")[0] == "numpy" for v in values),
    )


class PromotionSourceExtractor(Extractor):
    """CU4xx facts of Python modules (``ast`` only; nothing is imported).

    The facts are the same whatever artifact the member came from: which of
    them matter for an installed distribution is the rules' choice (the cache
    key holds only the bytes, the path and this version).
    """

    name = "promotion_source"
    version = 6  # 6: no folding past 64 levels or 128-bit products; 5: Python scalars passed to fused kernels (CU407)
    #: the rules skip an installed distribution's tests (over half the modules naming numpy in an
    #: environment): their facts are never extracted
    on_demand = True
    #: the rules read every other member's facts: they share the parse of any on-demand fact of theirs
    extracted_along = True
    parses = False  # most text is answered without a parse (see extract)

    @classmethod
    def comes_along(cls, member: Member) -> bool:
        return not is_test_path(member.path)  # the members the rules read (rules/promotion.py)

    def applies(self, member: Member) -> bool:
        return member.kind is MemberKind.PYTHON or (member.kind is MemberKind.BUILD and member.path.endswith(".py"))

    def extract(self, reader: MemberReader) -> PromotionFacts:
        # Most modules import neither library: their facts are empty (may_have_facts), known
        # from the decoded text without a parse.  Decoded as the parse decodes it, so a file
        # that is not text (CU006) or too large (CU004) fails alike.
        if not may_have_facts(reader.python_text()):
            return PromotionFacts()
        return promotion_facts(reader.python())


# -- declared requirements ---------------------------------------------------------------------

_REQ_FILE = re.compile(r"(^|/)(requirements[^/]*\.(txt|in)|constraints[^/]*\.txt)$")


def parse_requirements_txt(text: str) -> tuple[str, ...]:
    out = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        out.append(line)
    return tuple(out)


class PromotionRequirementsExtractor(Extractor):
    """The CuPy/NumPy requirements a project declares (pyproject, requirements files, setup.cfg)."""

    name = "promotion_requirements"
    version = 2  # 2: pyproject.toml from the shared parse (a TOML error is the format check's)

    def applies(self, member: Member) -> bool:
        base = member.path.rsplit("/", 1)[-1]
        depth = member.path.count("/")
        return depth <= 1 and (base in ("pyproject.toml", "setup.cfg") or bool(_REQ_FILE.search(member.path)))

    def extract(self, reader: MemberReader) -> DeclaredRequirements:
        base = reader.path.rsplit("/", 1)[-1]
        reqs: list[str] = []
        if base == "pyproject.toml":
            # the shared parse: a table that does not parse is empty here (the format check reports it)
            project = reader.toml().table.get("project", {})
            project = project if isinstance(project, dict) else {}
            deps = project.get("dependencies", [])
            reqs += [r for r in deps if isinstance(r, str)] if isinstance(deps, list) else []
            extras = project.get("optional-dependencies", {})
            for group in (extras.values() if isinstance(extras, dict) else ()):
                reqs += [r for r in group if isinstance(r, str)] if isinstance(group, list) else []
        elif base == "setup.cfg":
            import configparser

            text = reader.text(limit=4 * 1024 * 1024)
            cp = configparser.ConfigParser()
            try:
                cp.read_string(text)
            except configparser.Error as exc:
                raise InputError("CU007", f"{reader.path}: not valid setup.cfg: {exc}") from exc
            if cp.has_option("options", "install_requires"):
                reqs += [r.strip() for r in cp.get("options", "install_requires").splitlines() if r.strip()]
        else:
            reqs += parse_requirements_txt(reader.text(limit=4 * 1024 * 1024))
        wanted = [r for r in reqs if re.match(r"\s*(numpy|cupy)\b", r, re.IGNORECASE)]
        return DeclaredRequirements(tuple(wanted), reader.path)
