"""``cuaudit explain``: error text -> failure kind -> a narrowed audit -> what to do.

Fixtures are tiny wheels installed into venvs built here (``pip --no-deps
--no-index``), tiny ELF files compiled with ``cc``, and tracebacks written
as users paste them; then the real corpus wheels.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import compile_so, corpus_file, make_venv, make_wheel
from cuaudit.explain.patterns import PATTERNS, recognise
from cuaudit.explain.traceback import parse


venv = make_venv


def explain_json(cli, *args) -> tuple[int, dict]:
    rc, out, err = cli("explain", "--format", "json", "--isolated", *args)
    assert rc in (0, 1), err
    return rc, json.loads(out)


# -- reading the text ------------------------------------------------------------------------------


def test_traceback_frames_modules_and_user_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("train.py").write_text("import rmm\n")
    tb = parse(textwrap.dedent("""\
        Traceback (most recent call last):
          File "train.py", line 1, in <module>
            import rmm
          File "/v/lib/python3.11/site-packages/rmm/__init__.py", line 17, in <module>
            from rmm import mr
          File "device_buffer.pyx", line 1, in init rmm.pylibrmm.device_buffer
        AttributeError: module 'cuda.ccudart' has no attribute '__pyx_capi__'
        """))
    assert [(f.file, f.line) for f in tb.frames] == [("train.py", 1), ("/v/lib/python3.11/site-packages/rmm/__init__.py", 17),
                                                     ("device_buffer.pyx", 1)]
    assert tb.modules == ("rmm", "rmm.pylibrmm.device_buffer")
    assert tb.user_files == ("train.py",)
    assert tb.exception_type == "AttributeError"
    assert tb.exception == "AttributeError: module 'cuda.ccudart' has no attribute '__pyx_capi__'"


@pytest.mark.parametrize("text, kind", [
    ("AttributeError: module 'cupy.cuda' has no attribute 'nccl'", "submodule-attribute"),
    ("AttributeError: module 'cuda.ccudart' has no attribute '__pyx_capi__'", "capi-module"),
    ("ImportError: cuda.ccudart does not export expected C function cudaMemcpyAsync", "capi-function"),
    ("TypeError: C function cuda.ccudart.cudaGraphAddNode has wrong signature (expected int (a), got int (b))",
     "capi-signature"),
    ("ValueError: numpy.dtype size changed, may indicate binary incompatibility. Expected 96 from C header, "
     "got 88 from PyObject", "type-size"),
    ("A module that was compiled using NumPy 1.x cannot be run in\nNumPy 2.0.2 as it may crash.", "numpy-1x-module"),
    ("ImportError: libcublas.so.11: cannot open shared object file: No such file or directory", "missing-library"),
    ("OSError: libnvrtc.so.12: cannot open shared object file: No such file or directory", "missing-library"),
    ("ImportError: /v/site-packages/tla/_C.cpython-311-x86_64-linux-gnu.so: undefined symbol: _ZN3c1017RegisterOperators",
     "undefined-symbol"),
    ("ImportError: /lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.30' not found (required by /v/x.so)",
     "symbol-version"),
    ("TypeError: can_cast() does not support Python ints, floats, and complex because the result used to depend "
     "on the value.", "can-cast-scalar"),
    ("OverflowError: Python integer 300 out of bounds for uint8", "int-out-of-bounds"),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "no-kernel-image"),
    ("cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorInsufficientDriver: CUDA driver version is "
     "insufficient for CUDA runtime version", "insufficient-driver"),
    ("Building wheel for torchao (setup.py) ... error\n  RuntimeError: No CUDA GPUs are available", "build-without-gpu"),
    ("RuntimeError: No CUDA GPUs are available", "no-gpu"),
])
def test_recognition_table(text, kind):
    hit = recognise(text)
    assert hit is not None and hit[0].kind == kind


def test_every_kind_of_the_table_has_an_answer():
    from cuaudit.explain.answers import ANSWERS

    assert {p.kind for p in PATTERNS} <= set(ANSWERS)


def test_unrecognised_says_what_to_run_next(cli):
    rc, out, _ = cli("explain", "--isolated", "KeyError: 'foo'")
    assert rc == 0
    assert "does not recognise" in out and "cuaudit env" in out


def test_no_error_text_is_a_usage_error(cli, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    rc, _, err = cli("explain")
    assert rc == 2 and "give the error text" in err


# -- CU1xx: a submodule trap in a venv built here ----------------------------------------------------


@pytest.fixture(scope="module")
def trap_env(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("trap")
    wheel = make_wheel(base, "trappkg", "1.0", {
        "trappkg/__init__.py": "VERSION = 1\n",
        "trappkg/comm/__init__.py": "",
        "trappkg/comm/nccl.py": "def init():\n    return 1\n",
    })
    return venv(base / "venv", [wheel])


def test_submodule_attribute_names_the_import_and_the_rule(cli, trap_env):
    rc, doc = explain_json(cli, "--python", trap_env, "AttributeError: module 'trappkg.comm' has no attribute 'nccl'")
    assert rc == 1 and doc["kind"] == "submodule-attribute" and doc["confirmed"]
    assert "CU101" in doc["codes"]
    assert any("`import trappkg.comm.nccl`" in u for u in doc["user"])
    assert doc["audited"][0] == "trappkg 1.0"
    assert doc["findings"][0]["location"]["symbol"] == "trappkg.comm.nccl"


def test_an_environment_narrowed_to_one_distribution_keeps_the_others_installed(cli, tmp_path):
    # explain audits only the distribution of the module named; the import of another installed
    # distribution must not count as failing (cupy.cuda.nccl was CU101 when numpy was left out)
    dep = make_wheel(tmp_path, "depdist", "1.0", {"depdist/__init__.py": "X = 1\n"})
    lead = make_wheel(tmp_path, "leadpkg", "1.0", {
        "leadpkg/__init__.py": "import depdist\nfrom leadpkg import comm\n",
        "leadpkg/comm/__init__.py": "def __getattr__(name):\n    raise AttributeError(name)\n",
        "leadpkg/comm/nccl.py": "def init():\n    return 1\n",
    })
    py = venv(tmp_path / "venv", [dep, lead])
    rc, doc = explain_json(cli, "--python", py, "AttributeError: module 'leadpkg.comm' has no attribute 'nccl'")
    assert rc == 1 and doc["codes"][0] == "CU102" and doc["audited"][0] == "leadpkg 1.0"


def test_submodule_attribute_text_output(cli, trap_env):
    rc, out, _ = cli("explain", "--isolated", "--python", trap_env,
                     "AttributeError: module 'trappkg.comm' has no attribute 'nccl'")
    assert rc == 1
    assert "Do now" in out and "import trappkg.comm.nccl" in out and "cuaudit rule CU101" in out


def test_attribute_that_is_no_submodule_is_not_called_a_trap(cli, trap_env):
    rc, doc = explain_json(cli, "--python", trap_env, "AttributeError: module 'trappkg' has no attribute 'gone'")
    assert rc == 0 and not doc["confirmed"]
    assert "does not exist in this version" in doc["summary"]


def test_user_script_in_the_traceback_is_audited_too(cli, trap_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("train.py").write_text("import trappkg\n\ntrappkg.comm.nccl.init()\n")
    tb = textwrap.dedent("""\
        Traceback (most recent call last):
          File "train.py", line 3, in <module>
            trappkg.comm.nccl.init()
        AttributeError: module 'trappkg' has no attribute 'comm'
        """)
    tb_file = tmp_path / "tb.txt"
    tb_file.write_text(tb)
    rc, doc = explain_json(cli, "--python", trap_env, "--file", tb_file)
    assert rc == 1
    codes = [f["code"] for f in doc["findings"]]
    assert "CU104" in codes and "CU101" in codes
    assert any("train.py:3" in w for w in doc["why"])


# -- CU2xx: a missing library, compiled here ------------------------------------------------------------


@pytest.fixture(scope="module")
def missing_lib_env(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("libs")
    # a stand-in libcublas.so.11 to link against; the wheel does not ship it
    stub = compile_so(base, "libcublas.so.11", "int cublasCreate_v2(void **h) { return 0; }\n",
                      flags=["-Wl,-soname,libcublas.so.11"])
    ext = compile_so(base, "_ext.cpython-311-x86_64-linux-gnu.so", "int answer(void) { return 42; }\n",
                     flags=["-Wl,--no-as-needed", str(stub)])
    wheel = make_wheel(base, "gpupkg-cu11", "2.0", {
        "gpupkg/__init__.py": "from gpupkg import _ext\n",
        "gpupkg/_ext.cpython-311-x86_64-linux-gnu.so": ext.read_bytes(),
    }, tag="cp311-cp311-linux_x86_64")
    return venv(base / "venv", [wheel])


def test_missing_library_names_the_wheel_and_the_unused_need(cli, missing_lib_env):
    tb = textwrap.dedent(f"""\
        Traceback (most recent call last):
          File "<stdin>", line 1, in <module>
          File "{missing_lib_env.parent.parent}/lib/python3.11/site-packages/gpupkg/__init__.py", line 1, in <module>
            from gpupkg import _ext
        ImportError: libcublas.so.11: cannot open shared object file: No such file or directory
        """)
    rc, doc = explain_json(cli, "--python", missing_lib_env, tb)
    assert rc == 1 and doc["kind"] == "missing-library"
    assert doc["user"][0].startswith("`pip install nvidia-cublas-cu11`")
    assert {"CU203", "CU201"} <= set(doc["codes"])
    assert any("--as-needed" in m for m in doc["maintainer"])
    assert any("use none of its symbols" in w for w in doc["why"])
    assert "gpupkg-cu11 2.0" in doc["audited"]


def test_driver_library_is_not_a_pip_install(cli, missing_lib_env):
    rc, doc = explain_json(cli, "--python", missing_lib_env,
                           "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory")
    assert "driver" in doc["summary"] and not any("pip install" in u for u in doc["user"])


# -- messages answered from versions alone ------------------------------------------------------------------


def test_insufficient_driver_compares_driver_and_runtime(cli, tmp_path):
    wheel = make_wheel(tmp_path, "nvidia-cuda-runtime-cu12", "12.6.77", {"nvidia/cuda_runtime/__init__.py": ""})
    py = venv(tmp_path / "venv", [wheel])
    text = ("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version\n"
            "| NVIDIA-SMI 470.57.02    Driver Version: 470.57.02    CUDA Version: 11.4 |")
    rc, doc = explain_json(cli, "--python", py, text)
    assert any("CUDA 12" in w and "525.60.13" in w for w in doc["why"])
    assert any("470.57.02" in w for w in doc["why"])
    assert any("CUDA 11" in u for u in doc["user"])


def test_overflow_error_is_nep50(cli):
    rc, doc = explain_json(cli, "OverflowError: Python integer 300 out of bounds for uint8")
    assert doc["kind"] == "int-out-of-bounds" and doc["codes"] == ["CU403"]
    assert "uint8" in doc["summary"] and "NEP 50" in doc["summary"]


def test_fused_kernel_can_cast_points_at_cupy_13_4_1(cli):
    tb = textwrap.dedent("""\
        Traceback (most recent call last):
          File "/v/lib/python3.11/site-packages/cupy/_core/_fusion_interface.py", line 81, in __call__
          File "cupy/_core/_fusion_trace.pyx", line 1, in cupy._core._fusion_trace._guess_routine
        TypeError: can_cast() does not support Python ints, floats, and complex because the result used to depend on the value.
        """)
    _rc, doc = explain_json(cli, tb)
    assert doc["codes"] == ["CU401"] and any("13.4.1" in u for u in doc["user"])


def test_can_cast_in_user_code_is_found_in_the_script(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("app.py").write_text("import numpy as np\n\nok = np.can_cast(300, np.uint8)\n")
    tb = textwrap.dedent("""\
        Traceback (most recent call last):
          File "app.py", line 3, in <module>
            ok = np.can_cast(300, np.uint8)
        TypeError: can_cast() does not support Python ints, floats, and complex because the result used to depend on the value.
        """)
    rc, doc = explain_json(cli, tb)
    assert rc == 1 and [f["code"] for f in doc["findings"]] == ["CU402"]
    assert doc["findings"][0]["location"]["line"] == 3


def test_no_kernel_image_without_an_architecture_asks_for_it(cli, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi
    rc, doc = explain_json(cli, "RuntimeError: CUDA error: no kernel image is available for execution on the device")
    assert rc == 0 and any("--target-arch" in n for n in doc["next"])


def test_build_without_gpu_audits_the_named_tree(cli, tmp_path):
    tree = tmp_path / "src"
    tree.mkdir()
    (tree / "setup.py").write_text(textwrap.dedent("""\
        import setuptools
        import torch
        from torch.utils.cpp_extension import CUDAExtension, CppExtension
        if torch.cuda.is_available():
            ext = [CUDAExtension("pkg._k", ["k.cu"])]
        else:
            ext = [CppExtension("pkg._k", ["k.cpp"])]
        setuptools.setup(name="pkg", ext_modules=ext)
        """))
    log = "Building wheel for pkg (setup.py) ... error\n  RuntimeError: No CUDA GPUs are available\n"
    rc, doc = explain_json(cli, "--artifact", tree, log)
    assert rc == 1 and doc["kind"] == "build-without-gpu"
    assert doc["findings"][0]["code"] == "CU501" and doc["findings"][0]["location"]["line"] == 4


def test_build_without_gpu_unnamed_suggests_checking_the_release(cli):
    log = ("Collecting torchao==0.1\n  Downloading torchao-0.1.tar.gz (1 MB)\nBuilding wheel for torchao (setup.py) ... "
           "error\n  RuntimeError: No CUDA GPUs are available\n")
    rc, doc = explain_json(cli, log)
    assert rc == 0 and any(n.startswith("cuaudit check torchao==0.1 --select CU5") for n in doc["next"])


# -- the real corpus -------------------------------------------------------------------------------------


@pytest.mark.corpus
@pytest.mark.slow
def test_corpus_cupy_nccl(corpus, tmp_path, cli):
    py = venv(tmp_path / "venv", [corpus_file(corpus, "cupy_cuda12x-13.3.0-*.whl"),
                                  corpus_file(corpus, "numpy-2.0.2-*.whl"), corpus_file(corpus, "fastrlock-*.whl")])
    rc, doc = explain_json(cli, "--python", py, "AttributeError: module 'cupy.cuda' has no attribute 'nccl'")
    assert rc == 1 and doc["codes"][0] == "CU102"
    assert any("`import cupy.cuda.nccl`" in u for u in doc["user"])
    assert any("__getattr__" in m for m in doc["maintainer"])
    assert doc["audited"][0] == "cupy-cuda12x 13.3.0"


@pytest.mark.corpus
@pytest.mark.slow
def test_corpus_rmm_cuda_python_12_6_1(corpus, tmp_path, cli):
    py = venv(tmp_path / "venv", [corpus_file(corpus, "rmm_cu12-24.12.0-*.whl"),
                                  corpus_file(corpus, "cuda_python-12.6.1-*.whl")])
    tb = textwrap.dedent("""\
        Traceback (most recent call last):
          File "<stdin>", line 1, in <module>
          File "device_buffer.pyx", line 1, in init rmm.pylibrmm.device_buffer
        AttributeError: module 'cuda.ccudart' has no attribute '__pyx_capi__'
        """)
    rc, doc = explain_json(cli, "--python", py, tb)
    assert rc == 1 and doc["codes"] == ["CU301"]
    assert "cuda-python 12.6.1" in doc["summary"]
    assert any("cuda-python" in u and "12.6.0" in u for u in doc["user"])


@pytest.mark.corpus
@pytest.mark.slow
def test_corpus_cupy_cuda11x_without_cublas(corpus, tmp_path, cli):
    py = venv(tmp_path / "venv", [corpus_file(corpus, "cupy_cuda11x-12.3.0-*.whl"),
                                  corpus_file(corpus, "numpy-1.26.4-*.whl"), corpus_file(corpus, "fastrlock-*.whl")])
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    tb = textwrap.dedent(f"""\
        Traceback (most recent call last):
          File "{site}/cupy/__init__.py", line 17, in <module>
            from cupy import _core  # NOQA
        ImportError: libcublas.so.11: cannot open shared object file: No such file or directory
        """)
    rc, doc = explain_json(cli, "--python", py, tb)
    assert rc == 1
    assert doc["user"][0].startswith("`pip install nvidia-cublas-cu11`")
    # the next libraries `import cupy` needs are named at once, with their wheels
    assert any("nvidia-cusparse-cu11" in u and "nvidia-cuda-runtime-cu11" in u for u in doc["user"][1:])
    assert any("CU201" in w for w in doc["why"])
