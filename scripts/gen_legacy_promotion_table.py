#!/usr/bin/env python3
"""Generate tests/data/legacy_promotion_numpy126.json: real NumPy 1.26 results.

cuaudit's tracer compares what NumPy 2 does (NEP 50, observed at run time)
with what NumPy 1.x did (legacy value-based promotion).  The legacy side is
cuaudit's own model (``cuaudit.trace.legacy``); this script records the
ground truth it is tested against, by running NumPy 1.26.4 in a virtual
environment of its own (the wheel from the corpus, installed offline)::

    python scripts/gen_legacy_promotion_table.py [--wheel numpy-1.26.4-...whl] [--out tests/data/...]

Each case is one operation on operand descriptors (an array of a dtype, a
0-d array, a NumPy scalar, a Python scalar) and the outcome NumPy 1.26 gave:
the result dtype, or the exception type, plus the warning categories raised.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "legacy_promotion_numpy126.json")

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]
# Python scalar values around every boundary value-based casting looks at.
PY_VALUES = [
    True, 0, 1, 100, 127, 128, 200, 255, 256, 300, 32767, 32768, 40000, 65535, 65536, 70000,
    2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64, -1, -100, -128, -129, -200, -32769, -(2**31) - 1, -(2**63),
    0.5, 3.0, -2.5, 1e4, 64000.0, 70000.0, 1e10, 3.5e38, 1e39, 1e300, float("inf"), float("nan"),
    1j, 2.5 + 1j, 1e39 + 0j, 1e300j,
]
BINARY_UFUNCS = ["add", "subtract", "multiply", "true_divide", "floor_divide", "remainder", "power",
                 "maximum", "bitwise_and", "left_shift", "arctan2", "logical_and", "equal", "less"]
# NumPy-scalar values for array x numpy-scalar cases (one small, one large per kind).
NP_SCALARS = [("int8", 3), ("int64", 3), ("int64", 100000), ("uint8", 200), ("uint64", 3),
              ("float16", 2.0), ("float32", 3.0), ("float64", 3.0), ("float64", 1e40), ("complex128", 1j),
              ("bool", True)]


def encode(value):
    """JSON-safe Python scalar (ints exactly, floats with inf/nan, complex)."""
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": str(value)}
    if isinstance(value, float):
        return {"float": repr(value)}
    if isinstance(value, complex):
        return {"complex": [repr(value.real), repr(value.imag)]}
    raise TypeError(value)


def cases():
    """Operations as (op, operands) with operands as descriptors."""
    out = []
    for dt in DTYPES:
        for v in PY_VALUES:
            for uf in BINARY_UFUNCS:
                out.append({"op": uf, "operands": [{"array": dt}, {"python": encode(v)}]})
            # the reflected order and the 0-d / numpy-scalar forms for a few ops
            out.append({"op": "subtract", "operands": [{"python": encode(v)}, {"array": dt}]})
            out.append({"op": "can_cast", "operands": [{"python": encode(v)}, {"dtype": dt}]})
            out.append({"op": "result_type", "operands": [{"dtype": dt}, {"python": encode(v)}]})
            out.append({"op": "operator.mul", "operands": [{"scalar": dt, "value": encode(1)}, {"python": encode(v)}]})
        for sdt, sv in NP_SCALARS:
            for uf in ("add", "multiply", "true_divide"):
                out.append({"op": uf, "operands": [{"array": dt}, {"scalar": sdt, "value": encode(sv)}]})
                out.append({"op": uf, "operands": [{"array": dt}, {"zerod": sdt, "value": encode(sv)}]})
            out.append({"op": "can_cast", "operands": [{"scalar": sdt, "value": encode(sv)}, {"dtype": dt}]})
    return out


# -- the part that runs inside the NumPy 1.26 environment ------------------------------


def decode(d):
    if "bool" in d:
        return d["bool"]
    if "int" in d:
        return int(d["int"])
    if "float" in d:
        return float(d["float"])
    if "complex" in d:
        return complex(float(d["complex"][0]), float(d["complex"][1]))
    raise ValueError(d)


def materialise(np, desc):
    if "array" in desc:
        return np.ones(3, dtype=desc["array"])
    if "dtype" in desc:
        return np.dtype(desc["dtype"])
    if "python" in desc:
        return decode(desc["python"])
    value = decode(desc["value"])
    if "scalar" in desc:
        return np.dtype(desc["scalar"]).type(value)
    return np.array(value, dtype=desc["zerod"])


def run_case(np, case):
    import operator
    import warnings

    args = [materialise(np, d) for d in case["operands"]]
    op = case["op"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if op == "can_cast":
                res = np.can_cast(*args)
                outcome = {"value": bool(res)}
            elif op == "result_type":
                outcome = {"dtype": str(np.result_type(*args))}
            elif op.startswith("operator."):
                res = getattr(operator, op.split(".")[1])(*args)
                outcome = {"dtype": str(np.asarray(res).dtype), "type": type(res).__name__}
            else:
                with np.errstate(all="ignore"):
                    res = getattr(np, op)(*args)
                outcome = {"dtype": str(np.asarray(res).dtype)}
        except Exception as exc:  # noqa: BLE001 - the exception type is the outcome
            outcome = {"error": type(exc).__name__, "message": str(exc)[:160]}
    outcome["warnings"] = sorted({w.category.__name__ for w in caught})
    return outcome


def inner(out_path: str) -> None:
    import numpy as np

    table = []
    for case in cases():
        case = dict(case)
        case["numpy126"] = run_case(np, case)
        table.append(case)
    doc = {
        "generator": "scripts/gen_legacy_promotion_table.py",
        "numpy": np.__version__,
        "python": sys.version.split()[0],
        "ufunc_types": {u: getattr(np, u).types for u in BINARY_UFUNCS},
        "cases": table,
    }
    # one case per line: diffable, and a third of the size of an indented dump
    cases_json = ",\n".join(json.dumps(c, sort_keys=True, separators=(",", ":")) for c in doc.pop("cases"))
    head = json.dumps(doc, sort_keys=True, indent=1)[:-2]
    with open(out_path, "w", encoding="utf-8") as fh:
        fh.write(head + ',\n "cases": [\n' + cases_json + "\n]}\n")
    print(f"{len(table)} cases from NumPy {np.__version__} -> {out_path}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", help="the numpy 1.26.4 wheel (default: from ~/.cache/cuaudit/corpus)")
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        inner(args.out)
        return 0
    wheel = args.wheel
    if not wheel:
        corpus = os.environ.get("CUAUDIT_CORPUS") or os.path.expanduser("~/.cache/cuaudit/corpus")
        found = sorted(glob.glob(os.path.join(corpus, "numpy-1.26.4-*.whl")))
        if not found:
            print("numpy-1.26.4 wheel not found; pass --wheel", file=sys.stderr)
            return 2
        wheel = found[0]
    with tempfile.TemporaryDirectory(prefix="np126-") as tmp:
        subprocess.run([sys.executable, "-m", "venv", tmp], check=True)
        py = os.path.join(tmp, "bin", "python")
        subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel], check=True)
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        subprocess.run([py, os.path.abspath(__file__), "--inner", "--out", os.path.abspath(args.out)], check=True,
                       cwd=tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
