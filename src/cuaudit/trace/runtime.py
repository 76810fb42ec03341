"""The tracer's hooks: run each operation, compare with legacy promotion, record.

Rewritten code (``cuaudit.trace.rewrite``) calls :func:`binop`, :func:`iop`,
:func:`iattr`, :func:`iitem` and :func:`call`.  The fast path (no NumPy
operand, or only arrays of ndim > 0) is one type check and the operation:
no Python scalar means nothing NEP 50 changed.  Otherwise the operation runs
as written (its real NumPy 2 result or exception is what the program gets)
and the legacy outcome is asked of :mod:`cuaudit.trace.legacy`; where they
differ the site is recorded once, with a count.

This module imports only the standard library and NumPy: it runs inside the
user's interpreter, which need not have cuaudit's dependencies.
"""

from __future__ import annotations

import json
import operator
import sys
import threading
from typing import Any, Callable

from cuaudit.trace.rewrite import Site

SITES: list[Site] = []
#: (site, kind, legacy, new, operands) -> count
RECORDS: dict[tuple[int, str, str, str, str], int] = {}
CALLS = {"slow": 0}
_lock = threading.Lock()

_OPS: list[Callable[[Any, Any], Any]] = [
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod, operator.pow,
    operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift,
]
_IOPS: list[Callable[[Any, Any], Any]] = [
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv, operator.imod, operator.ipow,
    operator.iand, operator.ior, operator.ixor, operator.ilshift, operator.irshift,
]
_UFUNC_NAMES = ["add", "subtract", "multiply", "true_divide", "floor_divide", "remainder", "power",
                "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"]
_SYMBOLS = ["+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>"]
_PY_SCALARS = (bool, int, float, complex)



class _Never:
    """Stands for NumPy's types until NumPy is imported (nothing is an instance)."""


_np: Any = None
_nd: type = _Never
_generic: type = _Never
_ufunc_type: type = _Never
_UFUNCS: list[Any] = []
_legacy: Any = None


def _numpy_ready() -> bool:
    """Bind NumPy lazily: a traced program that never imports NumPy pays nothing."""
    global _np, _nd, _generic, _ufunc_type, _UFUNCS, _legacy
    if _np is not None:
        return True
    np = sys.modules.get("numpy")
    if np is None:
        return False
    from cuaudit.trace import legacy

    _legacy = legacy
    _nd, _generic, _ufunc_type = np.ndarray, np.generic, np.ufunc
    _UFUNCS = [getattr(np, n) for n in _UFUNC_NAMES]
    _np = np
    return True


def _is_cupy(x: Any) -> bool:
    # CuPy arrays, but not cupy.fuse's tracing proxies (_FusionVarScalar & co.): inside a fused
    # kernel the operation builds kernel code, its "result" is no array to compare.
    module = type(x).__module__
    return module.startswith("cupy") and "fusion" not in module


def _interesting(a: Any, b: Any) -> bool:
    """True when legacy and NEP 50 promotion may differ: a NumPy (or CuPy) operand and a 0-d one."""
    ta, tb = type(a), type(b)
    if _np is None and not _numpy_ready():
        return False
    a_np = ta is _nd or isinstance(a, _generic) or _is_cupy(a)
    b_np = tb is _nd or isinstance(b, _generic) or _is_cupy(b)
    if not (a_np or b_np):
        return False
    a_0d = ta in _PY_SCALARS or isinstance(a, _generic) or (a_np and getattr(a, "ndim", 1) == 0)
    b_0d = tb in _PY_SCALARS or isinstance(b, _generic) or (b_np and getattr(b, "ndim", 1) == 0)
    return (a_0d or b_0d) and (a_np or ta in _PY_SCALARS) and (b_np or tb in _PY_SCALARS)


#: operand types that never involve NumPy promotion (the fast path)
_PLAIN = frozenset({bool, int, float, complex, str, bytes, list, tuple, type(None)})


def binop(op: int, a: Any, b: Any, site: int) -> Any:
    ta = type(a)
    tb = type(b)
    if ta in _PLAIN and tb in _PLAIN:
        return _OPS[op](a, b)
    if ta is _nd and tb is _nd and a.ndim and b.ndim:
        return _OPS[op](a, b)
    if not _interesting(a, b):
        return _OPS[op](a, b)
    return _checked(_OPS[op], _UFUNCS[op], (a, b), site, _SYMBOLS[op], inplace=False)


# One hook per operator, with the operator inline: the fast paths cost one call
# and two type lookups (this is what keeps traced array code under 2x).
_TEMPLATE = """
def op_{i}(a, b, site):
    ta = type(a)
    tb = type(b)
    if ta in _PLAIN and tb in _PLAIN:
        return a {sym} b
    if ta is _nd and tb is _nd and a.ndim and b.ndim:
        return a {sym} b
    return binop({i}, a, b, site)
"""
_OP_HOOKS: list[Callable[[Any, Any, int], Any]] = []
for _i, _sym in enumerate(["+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>"]):
    _ns: dict[str, Any] = {}
    exec(compile(_TEMPLATE.format(i=_i, sym=_sym), __file__, "exec"), globals(), _ns)
    _OP_HOOKS.append(_ns[f"op_{_i}"])


def iop(op: int, a: Any, b: Any, site: int) -> Any:
    ta = type(a)
    if ta in _PY_SCALARS or not _interesting(a, b) or (ta is _nd and type(b) is _nd and a.ndim and b.ndim):
        return _IOPS[op](a, b)
    return _checked(_IOPS[op], _UFUNCS[op], (a, b), site, _SYMBOLS[op] + "=", inplace=True)


def iattr(op: int, obj: Any, name: str, value: Any, site: int) -> None:
    setattr(obj, name, iop(op, getattr(obj, name), value, site))


def iitem(op: int, obj: Any, key: Any, value: Any, site: int) -> None:
    obj[key] = iop(op, obj[key], value, site)


_CMP = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]
_CMP_UFUNCS = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
_CMP_SYMBOLS = ["==", "!=", "<", "<=", ">", ">="]


def cmp(op: int, a: Any, b: Any, site: int) -> Any:
    """A comparison: NEP 50 casts a Python scalar to the array's dtype, 1.x compared by value."""
    ta, tb = type(a), type(b)
    if (ta in _PLAIN and tb in _PLAIN) or not (ta in _PY_SCALARS or tb in _PY_SCALARS) or not _interesting(a, b):
        return _CMP[op](a, b)
    result = _CMP[op](a, b)
    if _is_cupy(a) or _is_cupy(b):
        return result
    CALLS["slow"] += 1
    try:
        old = _legacy.result_type_outcome([_legacy.operand(a), _legacy.operand(b)])
        dtype = old.dtype
        if old.error is not None or dtype is None or dtype.kind not in "biufc":
            return result
        import warnings

        with warnings.catch_warnings(), _np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            legacy = getattr(_np, _CMP_UFUNCS[op])(_np.asarray(a, dtype=dtype), _np.asarray(b, dtype=dtype))
        new = _np.asarray(result)
        if legacy.shape == new.shape and not _np.array_equal(legacy, new):
            differ = int(_np.count_nonzero(legacy != new))
            shown = (f"{bool(legacy)}" if legacy.ndim == 0 else f"{differ} of {legacy.size} elements differ") + f" (compared in {dtype})"
            _record(site, "value", shown, f"{bool(new)}" if new.ndim == 0 else "the other answer", _operands_text((a, b), _CMP_SYMBOLS[op]))
    except Exception:  # noqa: BLE001 - never let the model break the user's program
        pass
    return result


def _numpy_callable(f: Any) -> bool:
    owner = getattr(f, "__self__", None)
    module = getattr(f, "__module__", None) or ""
    return module.startswith("numpy") or isinstance(owner, (_nd, _generic)) or type(owner).__module__.startswith("numpy")


def _int_out_of_range(site: int, f: Any, args: tuple, kwargs: dict) -> Any:
    """A NumPy function given a Python int its dtype cannot hold: 1.x wrapped it, 2.x raises."""
    try:
        return f(*args, **kwargs)
    except OverflowError as exc:
        ints = [x for x in (*args, *kwargs.values()) if type(x) is int]
        if ints and ("out of bound" in str(exc) or "Python integer" in str(exc)):
            name = getattr(f, "__qualname__", None) or getattr(f, "__name__", "call")
            _record(site, "error", "a wrapped-around value (a DeprecationWarning since 1.24)",
                    f"OverflowError: {exc}", f"{name}({', '.join(_describe(x) for x in args)})")
        raise


def call(site: int, f: Any, *args: Any, **kwargs: Any) -> Any:
    if _np is None and not _numpy_ready():
        return f(*args, **kwargs)
    tf = type(f)
    if tf is _ufunc_type or (tf.__name__ == "ufunc" and tf.__module__.startswith("cupy")):
        if (
            getattr(f, "nin", 0) == 2
            and len(args) == 2
            and not {"out", "dtype", "signature", "casting"} & kwargs.keys()
            and f.__name__ not in _legacy.COMPARISONS
            and _interesting(args[0], args[1])
        ):
            ufunc = f if tf is _ufunc_type else getattr(_np, f.__name__, None)
            if ufunc is not None:
                return _checked(lambda x, y: f(x, y, **kwargs), ufunc, args, site, f"{f.__name__}()", inplace=False)
        return f(*args, **kwargs)
    name = getattr(f, "__name__", "")
    module = getattr(f, "__module__", "") or ""
    if name == "can_cast" and (module.startswith(("numpy", "cupy"))) and args:
        return _can_cast(site, f, args, kwargs)
    if name == "result_type" and module.startswith(("numpy", "cupy")) and args:
        return _result_type(site, f, args, kwargs)
    if _numpy_callable(f) and any(type(x) is int for x in (*args, *kwargs.values())):
        return _int_out_of_range(site, f, args, kwargs)
    return f(*args, **kwargs)


# -- the slow path ---------------------------------------------------------------


def _describe(x: Any) -> str:
    if type(x) in _PY_SCALARS:
        text = repr(x)
        return f"Python {type(x).__name__} {text if len(text) <= 24 else text[:21] + '...'}"
    if isinstance(x, _generic):
        text = f"np.{type(x).__name__}({x.item()!r})"
        return text if len(text) <= 40 else f"np.{type(x).__name__} scalar"
    dtype = getattr(x, "dtype", None)
    ndim = getattr(x, "ndim", None)
    kind = "CuPy array" if _is_cupy(x) else "array"
    if ndim == 0:
        return f"0-d {dtype} {kind}"
    return f"{dtype} {kind}"


def _record(site: int, kind: str, legacy: str, new: str, operands: str) -> None:
    key = (site, kind, legacy, new, operands)
    with _lock:
        RECORDS[key] = RECORDS.get(key, 0) + 1


_CACHE: dict[tuple, Any] = {}


def _value_class(v: Any) -> tuple:
    """What legacy promotion looks at in a scalar's value (min_scalar_type's thresholds)."""
    t = type(v)
    if t is bool:
        return (v,)
    if t is int:
        # the power-of-two thresholds, and the sign (small-unsigned flag, negative powers)
        return (v >= 0, (v if v >= 0 else -v - 1).bit_length())
    if t is float:
        a = abs(v)
        return (0 if a < 65000 or a != a or a == float("inf") else 1 if a < 3.4e38 else 2,)
    if t is complex:
        return (abs(v.real) < 3.4e38 and abs(v.imag) < 3.4e38,)
    return (v,)


def _signature(x: Any) -> tuple:
    """A cheap cache key equivalent to ``legacy.operand(x)`` for the legacy outcome."""
    t = type(x)
    if t in _PY_SCALARS:
        return (t, _value_class(x))
    dtype = getattr(x, "dtype", None)
    if isinstance(x, _generic) or (t is _nd and x.ndim == 0):
        return (t, dtype, _value_class(x.item()))
    return (t, dtype, getattr(x, "ndim", 1) == 0)


def _legacy_outcome(ufunc: Any, ops: list, inplace: bool) -> Any:
    old = _legacy.ufunc_outcome(ufunc, ops)
    if inplace and old.dtype is not None and old.error is None:
        # NumPy 1.x computed in the promoted dtype, then cast back with same_kind casting
        target = ops[0].dtype
        if not _np.can_cast(old.dtype, target, "same_kind"):
            return _legacy.Outcome(error="UFuncTypeError")
        return _legacy.Outcome(dtype=target)
    return old


def _operands_text(args: tuple, symbol: str) -> str:
    if symbol.endswith(")"):
        return f"{symbol[:-2]}({', '.join(_describe(x) for x in args)})"
    return f" {symbol} ".join(_describe(x) for x in args)


def _checked(fn: Callable[..., Any], ufunc: Any, args: tuple, site: int, symbol: str, *, inplace: bool) -> Any:
    CALLS["slow"] += 1
    try:
        key = (ufunc, inplace, _signature(args[0]), _signature(args[1]))
        old = _CACHE.get(key)
        if old is None:
            old = _legacy_outcome(ufunc, [_legacy.operand(x) for x in args], inplace)
            if len(_CACHE) > 8192:
                _CACHE.clear()
            _CACHE[key] = old
    except Exception:  # noqa: BLE001 - never let the model break the user's program
        return fn(*args)
    if old.error == "unmodelled":
        return fn(*args)
    try:
        result = fn(*args)
    except (OverflowError, TypeError, ValueError) as exc:
        if old.error is None:
            _record(site, "error", f"{old.dtype} result", f"{type(exc).__name__}: {exc}", _operands_text(args, symbol))
        raise
    new_dtype = getattr(result, "dtype", None)
    if old.error is not None:
        _record(site, "fixed", old.error, f"{new_dtype} result", _operands_text(args, symbol))
        return result
    if new_dtype is not None and old.dtype is not None and _np.dtype(new_dtype) != old.dtype:
        kind = "warning" if _new_overflow(fn, args, old.dtype) else "dtype"
        _record(site, kind, str(old.dtype), str(new_dtype), _operands_text(args, symbol))
    return result


def _new_overflow(fn: Callable[[Any, Any], Any], args: tuple, legacy_dtype: Any) -> bool:
    """Does the NumPy 2 computation overflow where the legacy (wider) one did not?"""
    if legacy_dtype.kind not in "fc":
        return False
    try:
        if any(_is_cupy(x) for x in args):
            return False
        with _np.errstate(over="raise", invalid="ignore", divide="ignore", under="ignore"):
            try:
                fn(*[x.copy() if isinstance(x, _nd) else x for x in args])
            except FloatingPointError:
                pass
            else:
                return False
            try:
                fn(*[_np.asarray(x, dtype=legacy_dtype) for x in args])
            except FloatingPointError:
                return False
            return True
    except Exception:  # noqa: BLE001
        return False


def _can_cast(site: int, f: Any, args: tuple, kwargs: dict) -> Any:
    from_ = args[0]
    to = args[1] if len(args) > 1 else kwargs.get("to")
    casting = args[2] if len(args) > 2 else kwargs.get("casting", "safe")
    if not (type(from_) in _PY_SCALARS or isinstance(from_, _generic) or (isinstance(from_, _nd) and from_.ndim == 0)):
        return f(*args, **kwargs)
    try:
        old = _legacy.can_cast_outcome(_legacy.operand(from_), _np.dtype(to), casting)
    except Exception:  # noqa: BLE001
        return f(*args, **kwargs)
    operands = f"can_cast({_describe(from_)}, {_np.dtype(to)})"
    try:
        result = f(*args, **kwargs)
    except TypeError as exc:
        if old.error is None:
            _record(site, "error", repr(old.value), f"TypeError: {exc}", operands)
        raise
    if old.error is None and bool(result) != old.value:
        _record(site, "value", repr(old.value), repr(bool(result)), operands)
    return result


def _result_type(site: int, f: Any, args: tuple, kwargs: dict) -> Any:
    if not any(type(x) in _PY_SCALARS or isinstance(x, _generic) or (isinstance(x, _nd) and x.ndim == 0) for x in args):
        return f(*args, **kwargs)
    try:
        old = _legacy.result_type_outcome([_legacy.operand(x) for x in args])
    except Exception:  # noqa: BLE001
        return f(*args, **kwargs)
    operands = f"result_type({', '.join(_describe(x) for x in args)})"
    try:
        result = f(*args, **kwargs)
    except (TypeError, OverflowError) as exc:
        if old.error is None:
            _record(site, "error", str(old.dtype), f"{type(exc).__name__}: {exc}", operands)
        raise
    if old.dtype is not None and _np.dtype(result) != old.dtype:
        _record(site, "dtype", str(old.dtype), str(_np.dtype(result)), operands)
    return result


# -- output ------------------------------------------------------------------------


def hooks() -> dict[str, Any]:
    """The names rewritten code refers to (put into each traced module's globals)."""
    names = {"__cu_binop__": binop, "__cu_iop__": iop, "__cu_iattr__": iattr, "__cu_iitem__": iitem, "__cu_call__": call,
             "__cu_cmp__": cmp}
    names.update({f"__cu_op{i}__": fn for i, fn in enumerate(_OP_HOOKS)})
    return names


def install_builtins() -> None:
    """Make the hooks visible to every rewritten module (pytest's exec included) via builtins."""
    import builtins

    for name, fn in hooks().items():
        setattr(builtins, name, fn)


def snapshot() -> dict[str, Any]:
    """Everything recorded so far, JSON-able."""
    np = sys.modules.get("numpy")
    cupy = sys.modules.get("cupy")
    with _lock:
        items = list(RECORDS.items())
    records = []
    for (site, kind, legacy, new, operands), count in sorted(items):
        s = SITES[site]
        records.append({
            "file": s.filename, "line": s.line, "column": s.column, "end_line": s.end_line,
            "end_column": s.end_column, "operation": s.operation, "source": s.source,
            "kind": kind, "legacy": legacy, "new": new, "operands": operands, "count": count,
        })
    return {
        "python": sys.version.split()[0],
        "numpy": getattr(np, "__version__", None),
        "cupy": getattr(cupy, "__version__", None),
        "sites_rewritten": len(SITES),
        "checked_operations": CALLS["slow"],
        "records": records,
    }


def write(path: str, extra: dict[str, Any] | None = None) -> None:
    data = snapshot()
    data.update(extra or {})
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1)
