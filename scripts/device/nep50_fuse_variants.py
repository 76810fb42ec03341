#!/usr/bin/env python3
"""Which shapes of Python scalars make a `cupy.fuse` kernel raise under NumPy 2 (run on a GPU).

Prints one line per variant: its name, then OK with the result dtype, or RAISED with the
exception.  Used to check what CU401 claims (docs/promotion.md, "On a GPU").
"""
import traceback

import cupy as cp
import numpy as np

print("numpy", np.__version__, "cupy", cp.__version__)
a32 = cp.full((4,), 1e-6, dtype=cp.float32)
s32 = cp.asarray(0.5, dtype=cp.float32)
u8 = cp.arange(4, dtype=cp.uint8)
i32 = cp.arange(4, dtype=cp.int32)

variants = {
    "int literal + float32 arrays": (lambda mu, dt, x: 1 + mu * dt * x, (s32, s32, a32)),
    "float literal * float32 array": (lambda x: 2.0 * x, (a32,)),
    "python float passed as argument": (lambda mu, x: mu * x, (0.1, a32)),
    "python int passed as argument": (lambda k, x: k + x, (3, i32)),
    "int literal + int32 array": (lambda x: x + 1, (i32,)),
    "int literal 300 + uint8 array": (lambda x: x + 300, (u8,)),
    "int literal + uint8 array": (lambda x: x + 1, (u8,)),
    "numpy float64 scalar argument": (lambda c, x: c * x, (np.float64(3), a32)),
}
for i, (name, (fn, args)) in enumerate(variants.items()):
    fn.__name__ = f"variant{i}"  # the kernel is named after the function: a lambda's name is no identifier
    try:
        out = cp.fuse()(fn)(*args)
        cp.cuda.Device().synchronize()
        print(f"{name}: OK {out.dtype}")
    except Exception as exc:  # noqa: BLE001 - the outcome is what we report
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        print(f"{name}: RAISED {type(exc).__name__}: {str(exc).splitlines()[0][:120]} (at {tb.filename.rsplit('/', 1)[-1]}:{tb.lineno})")
