"""What ``cuaudit explain`` recognises: error text -> failure kind -> what to audit.

The table is data: each :class:`Pattern` names the failure kind (the key of
its answer in :mod:`cuaudit.explain.answers`), the regular expression that
recognises it (searched over the whole pasted text; named groups are the
evidence: a module, a library, a symbol), an optional context that must be in
the text too (a pip build log), and what the audit needs: the rule families,
the modules whose distributions to read (group names), whether the
``nvidia-*`` library wheels are needed to resolve libraries, and whether the
user's own files named by the traceback are audited.  The first pattern in
table order that matches wins, so specific ones come first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Pattern:
    kind: str
    regex: re.Pattern[str]
    #: rule codes or prefixes the audit selects (empty: no audit, the answer needs only versions)
    families: tuple[str, ...] = ()
    #: named groups of ``regex`` whose value is a module: its distribution is audited
    module_groups: tuple[str, ...] = ()
    #: another regex that must match the text too (a build log around the error)
    context: re.Pattern[str] | None = None
    #: the audit also reads every distribution that ships shared libraries (nvidia-*, *.libs)
    with_libraries: bool = False
    #: the user's own files named by the traceback are audited as well
    user_code: bool = False


def _re(text: str) -> re.Pattern[str]:
    return re.compile(text, re.MULTILINE)


_NAME = r"[A-Za-z_][\w.]*"

#: pip's build output (or a setup.py run) around an error: the failure happened while building
BUILD_CONTEXT = _re(
    r"Building wheel for|Getting requirements to build|Preparing metadata|subprocess-exited-with-error"
    r"|Failed to build|setup\.py|bdist_wheel|build_ext|pyproject\.toml|CUDAExtension|error: command .*nvcc"
)

PATTERNS: tuple[Pattern, ...] = (
    # -- CU3xx: Cython C-API between packages ------------------------------------------------
    Pattern("capi-module", _re(rf"module '(?P<module>{_NAME})' has no attribute '__pyx_capi__'"),
            ("CU301",), ("module",)),
    Pattern("capi-function", _re(rf"(?P<module>{_NAME}) does not export expected C (?:function|variable) (?P<function>\w+)"),
            ("CU301",), ("module",)),
    Pattern("capi-signature", _re(rf"C (?:function|variable) (?P<module>{_NAME})\.(?P<function>\w+) has wrong signature"
                                  r"(?: \(expected (?P<expected>.*?), got (?P<found>.*)\))?"),
            ("CU302",), ("module",)),
    Pattern("numpy-1x-module", _re(r"compiled using NumPy 1\.x cannot be run in\s+NumPy (?P<numpy>[\w.]+)"
                                   r"|_ARRAY_API not found|numpy\.core\.multiarray failed to import"),
            (), ()),
    Pattern("type-size", _re(rf"(?P<type>{_NAME}) size changed, may indicate binary incompatibility\.?"
                             r"(?: Expected (?P<expected>\d+) from C header, got (?P<found>\d+) from PyObject)?"),
            ("CU303",), ("type",)),
    # -- CU1xx: submodule attribute traps ---------------------------------------------------------
    Pattern("submodule-attribute", _re(rf"module '(?P<parent>{_NAME})' has no attribute '(?P<attr>\w+)'"),
            ("CU101", "CU102", "CU103", "CU104", "CU105", "CU203"), ("parent",), with_libraries=True, user_code=True),
    # -- CU2xx: linking and loading -------------------------------------------------------------------
    Pattern("missing-library", _re(r"(?P<library>[\w.+-]+\.so(?:\.[\w.]+)?): cannot open shared object file"),
            ("CU201", "CU202", "CU203", "CU205", "CU206"), (), with_libraries=True),
    Pattern("undefined-symbol", _re(r"(?P<path>(?:/|[A-Za-z]:)?[^\s:'\"]+\.so[\w.]*): undefined symbol: (?P<symbol>[^\s'\"]+)"),
            ("CU203", "CU206"), (), with_libraries=True),
    Pattern("symbol-version", _re(r"version [`'](?P<version>[\w.]+)' not found \(required by (?P<path>[^)]+)\)"),
            ("CU203",), (), with_libraries=True),
    # -- CU6xx: device code and the GPU ---------------------------------------------------------------
    Pattern("no-kernel-image", _re(r"no kernel image is available for execution on the device"
                                   r"|cudaErrorNoKernelImageForDevice|CUDA_ERROR_NO_BINARY_FOR_GPU"),
            ("CU601", "CU602", "CU603"), ()),
    Pattern("insufficient-driver", _re(r"CUDA driver version is insufficient for CUDA runtime version"
                                       r"|cudaErrorInsufficientDriver|CUDA_ERROR_UNSUPPORTED_PTX_VERSION"
                                       r"|driver on your system is too old"),
            ("CU206",), (), with_libraries=True),
    # -- CU5xx: a build that needed a GPU (only inside a build log) -------------------------------------
    Pattern("build-without-gpu", _re(r"No CUDA GPUs are available|Found no NVIDIA driver|CUDA_HOME environment variable is not set"
                                     r"|nvidia-smi(?::| has failed| not found|: command not found)|torch\.cuda\.is_available\(\)"
                                     r"|no CUDA-capable device is detected|CUDA (?:was )?not (?:found|available)"),
            ("CU5",), (), context=BUILD_CONTEXT),
    # -- CU4xx: NEP 50 promotion (NumPy 2) --------------------------------------------------------------
    Pattern("can-cast-scalar", _re(r"can_cast\(\) does not support Python ints, floats, and complex"),
            ("CU401", "CU402", "CU406"), (), user_code=True),
    Pattern("int-out-of-bounds", _re(r"Python integer (?P<value>-?\d+) out of bounds for (?P<dtype>\w+)"),
            ("CU403", "CU405"), (), user_code=True),
    # a GPU-less machine at run time (not a build): the driver or the device is missing
    Pattern("no-gpu", _re(r"No CUDA GPUs are available|Found no NVIDIA driver|no CUDA-capable device is detected"
                          r"|cudaErrorNoDevice|CUDA_ERROR_NO_DEVICE|libcuda\.so\.1: cannot open"),
            (), ()),
)


#: Frames that tell which library raised a NEP 50 ``TypeError``: CuPy's fused kernels
#: and copyto validate Python scalars with ``numpy.can_cast`` (cupy/cupy#8536).
PROMOTION_SITES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"cupy[/\\]_core[/\\]_fusion|cupy\._core\._fusion|in fuse|_fusion_"), "CU401"),
    (re.compile(r"cupy[/\\]_manipulation[/\\]basic|cupy\._manipulation\.basic|in copyto|in select"), "CU406"),
)


#: Undefined symbols by prefix: whose C API the module was built against (what to align).
SYMBOL_ORIGINS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"^_ZN(?:3c10|2at|5torch|6caffe2)"), "torch", "PyTorch's C++ API"),
    (re.compile(r"^_?Py|^_Py"), "python", "the Python C API"),
    (re.compile(r"^(?:cublas|cublasLt)"), "nvidia-cublas", "cuBLAS"),
    (re.compile(r"^cusparse"), "nvidia-cusparse", "cuSPARSE"),
    (re.compile(r"^cusolver"), "nvidia-cusolver", "cuSOLVER"),
    (re.compile(r"^cufft"), "nvidia-cufft", "cuFFT"),
    (re.compile(r"^curand"), "nvidia-curand", "cuRAND"),
    (re.compile(r"^cudnn"), "nvidia-cudnn", "cuDNN"),
    (re.compile(r"^nccl"), "nvidia-nccl", "NCCL"),
    (re.compile(r"^nvrtc"), "nvidia-cuda-nvrtc", "NVRTC"),
    (re.compile(r"^cuda[A-Z]"), "nvidia-cuda-runtime", "the CUDA runtime"),
    (re.compile(r"^cu[A-Z]"), "driver", "the CUDA driver API"),
)

#: Oldest Linux driver for each CUDA major (minor-version compatibility, NVIDIA's release notes).
MIN_DRIVER: dict[int, str] = {10: "410.48", 11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}


def recognise(text: str) -> tuple[Pattern, re.Match[str]] | None:
    """The first pattern of the table that matches the text (and its context), with its match."""
    for pattern in PATTERNS:
        m = pattern.regex.search(text)
        if m and (pattern.context is None or pattern.context.search(text)):
            return pattern, m
    return None
