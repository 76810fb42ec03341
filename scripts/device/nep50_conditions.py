#!/usr/bin/env python3
"""When does a `cupy.fuse` kernel raise TypeError under NumPy 2 (cupy/cupy#8536)? Run on a GPU.

For each variant (the two public reproducers and the shapes between them), with a
fresh fused function each time, prints one JSON line: the variant, the kinds of its
arguments, the outcome (``ok`` with the result dtype, or ``raised`` with the exception
and the innermost frame), NumPy's own result dtype for the same expression on the
host (NEP 50), and whether CuPy fell back to its second fusion implementation
(``new_fusion``).  Then the kernel-cache experiments: one fused function called first
with one kind of arguments and then with another.

    PYTHONPATH=CUPY_DIR:NUMPY_DIR LD_LIBRARY_PATH=CUDA12_LIBS python nep50_conditions.py

Exit status 0 whatever happened (the outcome is the output).
"""

from __future__ import annotations

import json
import traceback

import cupy as cp
import numpy as np


def seed(mu, dt, delta_phi):
    return 1 + mu * dt * delta_phi


def cuml(x, h):
    return 1.0 - (x * x) / (h * h)


def square_only(x, h):
    return x / (h * h)


def literal_plus_scalar(x, s):
    return (1 + s) * x


def literal_plus_int_scalar(x, k):
    return (1 + k) + x


def literal_times_array(x):
    return 2.0 * x


def host(fn, args):
    """NumPy's result dtype for the same expression on the host (NEP 50 under NumPy 2)."""
    conv = [a.get() if isinstance(a, cp.ndarray) else a for a in args]
    try:
        return str(np.asarray(fn(*conv)).dtype)
    except Exception as exc:  # noqa: BLE001
        return f"raised {type(exc).__name__}"


def kind(a) -> str:
    if isinstance(a, cp.ndarray):
        return f"cupy {a.dtype} ndim={a.ndim}"
    if isinstance(a, np.generic):
        return f"numpy {a.dtype} scalar"
    return f"python {type(a).__name__}"


def old_fusion_error(fn, args):
    """What CuPy's first fusion implementation raises for these arguments, if anything.

    ``Fusion.__call__`` catches any exception of the first implementation and falls
    back to the second (``new_fusion``) without a word: the TypeError of
    cupy/cupy#8536 can be raised and swallowed.  This calls the first one directly.
    """
    from cupy._core import fusion as F

    tl = getattr(F, "_thread_local", None)
    if tl is None or not hasattr(F, "_FusionHistory"):
        return {"old_fusion": "not reachable"}
    history = F._FusionHistory()
    tl.history, tl.is_old_fusing = history, True
    try:
        history.get_fusion(fn, args, fn.__name__)
        return {"old_fusion": "ok"}
    except Exception as exc:  # noqa: BLE001
        frames = traceback.extract_tb(exc.__traceback__)
        return {"old_fusion": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}",
                "old_fusion_frames": [f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}:{f.name}" for f in frames[-4:]]}
    finally:
        tl.history, tl.is_old_fusing = None, False


def call(fused, args):
    try:
        out = fused(*args)
        cp.cuda.Device().synchronize()
        return {"outcome": "ok", "dtype": str(out.dtype)}
    except Exception as exc:  # noqa: BLE001 - the outcome is what we report
        frames = traceback.extract_tb(exc.__traceback__)
        inner = frames[-1] if frames else None
        return {"outcome": "raised", "exception": type(exc).__name__, "message": str(exc).splitlines()[0][:200],
                "at": f"{inner.filename.rsplit('/', 1)[-1]}:{inner.lineno}:{inner.name}" if inner else "?",
                "frames": [f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}:{f.name}" for f in frames[-6:]]}


def main() -> None:
    print(json.dumps({"numpy": np.__version__, "cupy": cp.__version__,
                      "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
                      "gpu": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}), flush=True)
    f32 = cp.full((10, 10), 9.999999e-7, dtype=cp.float32)
    x = cp.random.normal(size=(10, 20)).astype("float32")
    i32 = cp.arange(4, dtype=cp.int32)
    zero_d = cp.asarray(0.5, dtype=cp.float32)
    variants = [
        ("seed", seed, (zero_d, zero_d, f32)),
        ("seed", seed, (0.1, 0.5, f32)),
        ("seed", seed, (np.float32(0.1), np.float32(0.5), f32)),
        ("seed", seed, (0.1, zero_d, f32)),
        ("cuml", cuml, (x, 5.0)),
        ("cuml", cuml, (x, np.float32(5.0))),
        ("cuml", cuml, (x, cp.asarray(5.0, dtype=cp.float32))),
        ("cuml", cuml, (x, 5)),
        ("square_only", square_only, (x, 5.0)),
        ("literal_plus_scalar", literal_plus_scalar, (x, 0.5)),
        ("literal_plus_scalar", literal_plus_scalar, (x, np.float32(0.5))),
        ("literal_plus_int_scalar", literal_plus_int_scalar, (i32, 3)),
        ("literal_times_array", literal_times_array, (x,)),
    ]
    for name, fn, args in variants:
        fused = cp.fuse()(fn)
        row = {"variant": name, "args": [kind(a) for a in args], **call(fused, args), "numpy_host_dtype": host(fn, args),
               "new_fusion": getattr(fused, "new_fusion", None) is not None, **old_fusion_error(fn, args)}
        print(json.dumps(row), flush=True)
    # kernel-cache state: one fused function, two calls with different argument kinds
    for first, second in [((x, cp.asarray(5.0, dtype=cp.float32)), (x, 5.0)), ((x, 5.0), (x, cp.asarray(5.0, dtype=cp.float32)))]:
        fused = cp.fuse()(cuml)
        r1, r2 = call(fused, first), call(fused, second)
        print(json.dumps({"variant": "cuml cache-state", "first": [kind(a) for a in first], "first_outcome": r1,
                          "second": [kind(a) for a in second], "second_outcome": r2,
                          "new_fusion": getattr(fused, "new_fusion", None) is not None}), flush=True)


if __name__ == "__main__":
    main()
