"""Every static CU403-CU405 finding is a real change: checked against NumPy 2 and the legacy model.

For thousands of generated one-line operations with locally known dtypes,
a finding must mean that NumPy 2 (run here) and NumPy 1.x (cuaudit's legacy
model, itself validated against real NumPy 1.26 results) really differ.
"""

from __future__ import annotations

import itertools
import operator
import warnings

import pytest

np = pytest.importorskip("numpy")
if int(np.__version__.split(".")[0]) < 2:  # pragma: no cover
    pytest.skip("needs NumPy 2 to observe NEP 50 behaviour", allow_module_level=True)

from cuaudit.facts.promotion import analyse_source  # noqa: E402
from cuaudit.trace import legacy as L  # noqa: E402

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64",
          "complex64", "complex128"]
VALUES = [1, 100, 200, 300, 70000, 2**40, -1, -129, 0.5, 3.0, 70000.0, 1e39]
OPS = {"+": (operator.add, np.add), "-": (operator.sub, np.subtract), "*": (operator.mul, np.multiply),
       "//": (operator.floordiv, np.floor_divide), "%": (operator.mod, np.remainder), "&": (operator.and_, np.bitwise_and)}


def _truth(fn, ufunc, args, ops):
    old = L.ufunc_outcome(ufunc, ops)
    if old.error == "unmodelled":
        return None
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            new = np.asarray(fn(*args)).dtype
            err = None
        except Exception as exc:  # noqa: BLE001
            new, err = None, type(exc).__name__
    if old.error and err:
        return False
    if err or old.error:
        return True
    return new != old.dtype


def _cases():
    for dt, v, op in itertools.product(DTYPES, VALUES, OPS):
        arr = np.ones(3, dtype=dt)
        yield (f"a = np.ones(3, dtype=np.{dt})\nr = a {op} {v!r}\n", OPS[op], (arr, v),
               [L.Operand(arr.dtype, False), L.operand(v)])
        sc = np.dtype(dt).type(3)
        yield (f"s = np.{dt}(3)\nr = s {op} {v!r}\n", OPS[op], (sc, v), [L.operand(sc), L.operand(v)])
    for dt, dt2, op in itertools.product(DTYPES, DTYPES, ("+", "*", "&", "//")):
        arr = np.ones(3, dtype=dt)
        sc = np.dtype(dt2).type(3)
        yield (f"a = np.ones(3, dtype=np.{dt})\nr = a {op} np.{dt2}(3)\n", OPS[op], (arr, sc),
               [L.Operand(arr.dtype, False), L.operand(sc)])


def test_no_false_positives_and_reasonable_recall():
    flagged = changed = caught = total = 0
    wrong = []
    for source, (fn, ufunc), args, ops in _cases():
        truth = _truth(fn, ufunc, args, ops)
        if truth is None:
            continue
        total += 1
        hits = analyse_source("import numpy as np\n" + source).changed
        changed += truth
        if hits:
            flagged += 1
            if not truth:
                wrong.append(source)
            else:
                caught += 1
    assert total > 2000
    assert wrong == [], f"{len(wrong)} false positives, e.g. {wrong[:40]}"
    # the static rules are conservative; they still find most of the real changes in this grid
    assert caught / changed > 0.5, (caught, changed)
