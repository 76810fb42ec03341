"""CU501-CU503: build scripts that let the build machine's GPU decide (static; nothing is run)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
from conftest import codes, corpus_file

from cuaudit import audit
from cuaudit.config import Config
from cuaudit.repair.source import apply_fixes

CFG = Config(cache=False, select=("CU5",), jobs=1)


def check(path) -> list:
    return audit([str(path)], config=CFG).findings


def tree(tree_factory, setup: str, files: dict[str, str] | None = None) -> Path:
    return tree_factory({"setup.py": textwrap.dedent(setup), **(files or {})})


SEED = """\
    import os
    import setuptools
    from torch.utils.cpp_extension import CUDAExtension, CppExtension
    import torch

    def ext_modules():
        # build the kernels when we can
        if torch.cuda.is_available():  # the bug
            return [CUDAExtension("pkg._backend", ["src/kernel.cu"])]
        return [CppExtension("pkg._backend", ["src/cpu.cpp"])]

    setuptools.setup(name="pkg", ext_modules=ext_modules())
"""


def test_probe_gating_cuda_extension_is_error_at_the_probe(tree_factory):
    (f,) = check(tree(tree_factory, SEED))
    assert f.code == "CU501" and str(f.severity) == "error"
    assert (f.location.member, f.location.line, f.location.column) == ("setup.py", 8, 8)
    assert "CUDAExtension('pkg._backend')" in f.message and "torch.cuda.is_available()" in f.message
    assert f.fix.edits and f.fix.edits[0].content == "torch.version.cuda is not None"


def test_fix_keeps_comments_and_formatting(tree_factory):
    root = tree(tree_factory, SEED)
    report = audit([str(root)], config=CFG)
    result = apply_fixes(report, write=True)
    text = (root / "setup.py").read_text()
    assert "if torch.version.cuda is not None:  # the bug" in text
    assert "# build the kernels when we can" in text
    assert result.fixed and check(root) == []


def test_override_in_or_lowers_severity(tree_factory):
    src = SEED.replace("if torch.cuda.is_available():", 'if os.environ.get("FORCE_CUDA", "0") == "1" or torch.cuda.is_available():')
    (f,) = check(tree(tree_factory, src))
    assert f.code == "CU502" and str(f.severity) == "warning"
    assert f.evidence["overrides"] == ["FORCE_CUDA"]
    # the fix keeps the override
    assert f.fix.edits[0].content == "torch.version.cuda is not None"


def test_env_var_that_only_disables_is_no_override(tree_factory):
    src = SEED.replace("if torch.cuda.is_available():", 'if os.getenv("NO_CUDA") != "1" and torch.cuda.is_available():')
    (f,) = check(tree(tree_factory, src))
    assert f.code == "CU501" and f.evidence["disablers"] == ["NO_CUDA"]


def test_followed_through_variable_and_helper_function(tree_factory):
    root = tree(tree_factory, """\
        import subprocess
        from setuptools import setup, Extension

        def have_gpu():
            try:
                subprocess.check_output(["nvidia-smi", "-L"])
                return True
            except Exception:
                return False

        WITH_CUDA = have_gpu()
        ext = []
        if WITH_CUDA:
            ext.append(Extension("pkg._k", sources=["pkg/k.cu"]))
        setup(name="pkg", ext_modules=ext)
    """)
    (f,) = check(root)
    assert f.code == "CU501"
    assert f.evidence["probes"] == ["nvidia-smi"] and "WITH_CUDA" in f.evidence["via"]
    assert f.fix.edits == ()  # no automatic fix for an nvidia-smi probe


def test_helper_module_imported_from_the_tree(tree_factory):
    root = tree(tree_factory, """\
        from setuptools import setup
        from torch.utils.cpp_extension import CUDAExtension
        from tools.gpu import cuda_ok

        ext = [CUDAExtension("pkg._k", ["k.cu"])] if cuda_ok() else []
        setup(name="pkg", ext_modules=ext)
    """, {"tools/gpu.py": "import torch\n\n\ndef cuda_ok():\n    return torch.cuda.device_count() > 0\n"})
    (f,) = check(root)
    assert f.code == "CU501" and f.location.member == "setup.py" and f.location.line == 5
    assert f.evidence["helper"] == "tools/gpu.py"
    assert f.fix.edits[0].member == "tools/gpu.py" and f.fix.edits[0].content == "torch.version.cuda is not None"
    apply_fixes(audit([str(root)], config=CFG), write=True)
    assert "return torch.version.cuda is not None" in (root / "tools" / "gpu.py").read_text()


def test_elif_after_env_check_is_an_override(tree_factory):
    (f,) = check(tree(tree_factory, """\
        import os, torch
        from torch.utils.cpp_extension import CUDAExtension
        ext = []
        if os.environ.get("FORCE_CUDA"):
            ext = [CUDAExtension("a", ["a.cu"])]
        elif torch.cuda.is_available():
            ext = [CUDAExtension("a", ["a.cu"])]
    """))
    assert f.code == "CU502" and f.evidence["overrides"] == ["FORCE_CUDA"]


def test_build_capability_check_and_unrelated_probe_are_clean(tree_factory):
    root = tree(tree_factory, """\
        import torch
        from torch.utils.cpp_extension import CUDAExtension, CUDA_HOME
        if torch.cuda.is_available():
            print("a GPU is here")   # decides nothing about the build
        ext = [CUDAExtension("a", ["a.cu"])] if torch.version.cuda is not None and CUDA_HOME else []
    """)
    assert check(root) == []


def test_rocm_mention_makes_the_fix_unsafe(tree_factory):
    src = SEED.replace("# the bug", "# the bug (ROCm builds use HIP)")
    (f,) = check(tree(tree_factory, src))
    assert str(f.fix.applicability) == "unsafe"


def test_host_architectures(tree_factory):
    root = tree(tree_factory, """\
        import os, torch
        from torch.utils.cpp_extension import CUDAExtension
        major, minor = torch.cuda.get_device_capability()
        flags = ["-arch=native"]
    """, {
        "CMakeLists.txt": "project(k LANGUAGES CXX CUDA)\nset(CMAKE_CUDA_ARCHITECTURES native)\n",
        "pyproject.toml": '[tool.scikit-build.cmake.define]\nCMAKE_CUDA_ARCHITECTURES = "native"\n',
    })
    found = sorted((f.location.member, f.location.line, f.code) for f in check(root))
    assert found == [
        ("CMakeLists.txt", 2, "CU503"), ("pyproject.toml", 2, "CU503"), ("setup.py", 3, "CU503"), ("setup.py", 4, "CU503"),
    ]


def test_unparsable_setup_py_is_cu007_not_a_crash(tree_factory):
    report = audit([str(tree(tree_factory, "def broken(:\n"))], config=Config(cache=False, select=("CU0", "CU5"), jobs=1))
    assert codes(report) == ["CU007"]


# -- the real corpus -------------------------------------------------------------------------

STUB_TORCH = {
    # A CUDA build of PyTorch on a machine without a GPU: what a CI build node has.
    "torch/__init__.py": "from . import cuda, version, backends, utils\n",
    "torch/version.py": "cuda = '13.0'\n",
    "torch/cuda.py": "def is_available():\n    return False\n\ndef device_count():\n    return 0\n",
    "torch/backends/__init__.py": "from . import cuda\n",
    "torch/backends/cuda.py": "def is_built():\n    return True\n",
    "torch/utils/__init__.py": "from . import cpp_extension\n",
    "torch/utils/cpp_extension.py": (
        "import shutil, os\n"
        "CUDA_HOME = os.path.dirname(os.path.dirname(shutil.which('nvcc') or '/x/y')) if shutil.which('nvcc') else None\n"
        "def CUDAExtension(name, sources, **kw):\n    return ('CUDAExtension', name, tuple(sources))\n"
        "def CppExtension(name, sources, **kw):\n    return ('CppExtension', name, tuple(sources))\n"
        "BuildExtension = object\n"
    ),
}


def _decide(project: Path, stub: Path) -> str:
    """Which extension the project's setup.py builds here, with the stub torch (nothing else is run)."""
    code = "import runpy; g = runpy.run_path('setup.py', run_name='not_main'); print(g['get_build_ext_modules']()[0][0])"
    env = {**os.environ, "PYTHONPATH": str(stub)}
    env.pop("FORCE_CUDA", None)
    proc = subprocess.run([sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.corpus
def test_torch_linear_assignment_005_and_006(corpus):
    old = corpus_file(corpus, "torch_linear_assignment-0.0.5.tar.gz")
    new = corpus_file(corpus, "torch_linear_assignment-0.0.6.tar.gz")
    report = audit([str(old), str(new)], config=CFG)
    got = {(f.location.artifact.version, f.code, str(f.severity), f.location.member, f.location.line) for f in report.findings}
    assert got == {("0.0.5", "CU501", "error", "setup.py", 9), ("0.0.6", "CU502", "warning", "setup.py", 9)}
    # --diff shows the sdist's edit without touching the archive
    diff = apply_fixes(report, write=True).diff
    assert "+    if torch.backends.cuda.is_built() and int(os.environ.get(\"TLA_BUILD_CUDA\", \"1\")) and torch.version.cuda is not None:" in diff
    assert 'or torch.version.cuda is not None):' in diff  # 0.0.6 keeps FORCE_CUDA


@pytest.mark.corpus
def test_fixed_tla_setup_decides_to_build_cuda_without_a_gpu(corpus, tmp_path, cli):
    with tarfile.open(corpus_file(corpus, "torch_linear_assignment-0.0.5.tar.gz")) as tf:
        tf.extractall(tmp_path, filter="data")
    project = tmp_path / "torch_linear_assignment-0.0.5"
    stub = tmp_path / "stub"
    for rel, text in STUB_TORCH.items():
        (stub / rel).parent.mkdir(parents=True, exist_ok=True)
        (stub / rel).write_text(text)
    assert _decide(project, stub) == "CppExtension"  # the bug: no GPU, no kernels
    rc, out, _ = cli("check", "--no-cache", "--select", "CU5", "--fix", str(project / "setup.py"))
    assert rc == 0, out
    assert "torch.version.cuda is not None" in (project / "setup.py").read_text()
    assert _decide(project, stub) == "CUDAExtension"


@pytest.mark.parametrize("condition, fixed", [
    ("not torch.cuda.is_available()", "torch.version.cuda is None"),
    ("torch.cuda.device_count() == 0", "torch.version.cuda is None"),
    ("th.cuda.device_count() < 1 or os.environ.get('NO_CUDA')", "th.version.cuda is None or os.environ.get('NO_CUDA')"),
])
def test_negated_probes_are_fixed_without_double_negation(tree_factory, condition, fixed):
    root = tree(tree_factory, f"""\
        import os
        import torch as th
        import torch
        from torch.utils.cpp_extension import CUDAExtension, CppExtension
        if {condition}:
            ext = [CppExtension("a", ["a.cpp"])]
        else:
            ext = [CUDAExtension("a", ["a.cu"])]
    """)
    apply_fixes(audit([str(root)], config=CFG), write=True)
    assert f"if {fixed}:" in (root / "setup.py").read_text()


def test_negated_probe_polarity(tree_factory):
    base = """\
        import os, torch
        from torch.utils.cpp_extension import CUDAExtension, CppExtension
        if COND:
            ext = [CppExtension("a", ["a.cpp"])]
        else:
            ext = [CUDAExtension("a", ["a.cu"])]
    """
    (f,) = check(tree(tree_factory, base.replace("COND", 'not torch.cuda.is_available() or os.getenv("NO_CUDA")')))
    assert f.code == "CU501" and f.evidence["disablers"] == ["NO_CUDA"]
    root = tree_factory({"setup.py": textwrap.dedent(base.replace("COND", 'not torch.cuda.is_available() and not os.getenv("FORCE_CUDA")'))}, sub="t2")
    (f,) = check(root)
    assert f.code == "CU502" and f.evidence["overrides"] == ["FORCE_CUDA"]


def test_guarded_cmake_native_is_info(tree_factory):
    root = tree_factory({"CMakeLists.txt": "if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)\n  set(CMAKE_CUDA_ARCHITECTURES native)\nendif()\n"})
    (f,) = check(root)
    assert (f.code, str(f.severity), f.location.line) == ("CU503", "info", 2)


HEAD = "import os, subprocess, torch\nfrom setuptools.command.build_ext import build_ext\nfrom torch.utils.cpp_extension import CUDAExtension\n"


@pytest.mark.parametrize("body, severity, guard, overrides", [
    # queried and written back: TORCH_CUDA_ARCH_LIST is set by the script, not read, so nothing overrides
    ("major, minor = torch.cuda.get_device_capability()\nos.environ['TORCH_CUDA_ARCH_LIST'] = f'{major}.{minor}'\n",
     "error", "", []),
    ("if torch.cuda.is_available():\n    cap = torch.cuda.get_device_capability()\n", "warning", "gpu-check", []),
    # the override followed through a variable assigned from the environment
    ("arch = os.environ.get('TORCH_CUDA_ARCH_LIST')\nif not arch:\n    cap = torch.cuda.get_device_capability()\n",
     "info", "override", ["TORCH_CUDA_ARCH_LIST"]),
    ("archs = os.getenv('CUDAARCHS') or subprocess.check_output(['nvidia-smi', '--query-gpu=compute_cap', '--format=csv'])\n",
     "info", "override", ["CUDAARCHS"]),
    ("try:\n    cap = torch.cuda.get_device_capability()\nexcept RuntimeError:\n    cap = (8, 0)\n", "warning", "try", []),
    # setuptools runs the method at build time: unguarded
    ("class B(build_ext):\n    def build_extensions(self):\n"
     "        out = subprocess.check_output(['nvidia-smi', '--query-gpu=compute_cap', '--format=csv'])\n", "error", "", []),
    # a helper called only behind a GPU check takes that guard
    ("def archs():\n    return torch.cuda.get_device_capability()\nif torch.cuda.device_count() > 0:\n    a = archs()\n",
     "warning", "gpu-check", []),
    # os.popen gives empty output without nvidia-smi: the architectures are wrong, the build does not fail
    ("caps = os.popen('nvidia-smi --query-gpu=compute_cap --format=csv').read()\n", "warning", "", []),
])
def test_host_architecture_severity_follows_the_consequence(tree_factory, body, severity, guard, overrides):
    (f,) = [f for f in check(tree(tree_factory, HEAD + body)) if f.code == "CU503"]
    assert (str(f.severity), f.evidence["guard"], f.evidence["overrides"]) == (severity, guard, overrides)
    assert ("raises and the build fails" in f.message) == (severity == "error")


def test_a_raising_probe_before_its_override_is_an_error(tree_factory):
    """`get_device_properties() or FORCE_CUDA`: the query runs first and raises without a GPU, whatever
    the variable says; with the variable tested first, a packager can avoid it (a warning)."""
    def one(cond: str, sub: str):
        (f,) = check(tree_factory({"setup.py": HEAD + f"if {cond}:\n    ext = [CUDAExtension('a', ['a.cu'])]\n"}, sub=sub))
        return f

    f = one("torch.cuda.get_device_properties(0).major >= 7 or os.environ.get('FORCE_CUDA') == '1'", "t1")
    assert (f.code, str(f.severity), f.evidence["raises_without_gpu"]) == ("CU502", "error", ["torch.cuda.get_device_properties()"])
    assert "raises and the build fails" in f.message
    g = one("os.environ.get('FORCE_CUDA') == '1' or torch.cuda.get_device_properties(0).major >= 7", "t2")
    assert (g.code, str(g.severity)) == ("CU502", "warning")
    assert "raises unless FORCE_CUDA is set" in g.message
    h = one("os.environ.get('FORCE_CUDA') == '1' or torch.cuda.is_available()", "t3")
    assert (h.code, str(h.severity), h.evidence["raises_without_gpu"]) == ("CU502", "warning", [])


def test_a_module_is_parsed_by_libcst_once_for_all_its_probes(monkeypatch):
    """The automatic fixes of a build script's probes share one libcst parse of it: parsed again for
    each probe (and again for each summary naming it), torch's package folder checked as a tree took
    75 s, 60 of them on one module (a CU004 budget error instead of its facts)."""
    from cuaudit.facts import build
    from cuaudit.formats.python import parse_python_text

    lines = ["import torch", "import setuptools", ""]
    for i in range(12):
        lines += [f"def probe_{i}():", f"    if torch.cuda.is_available():  # probe {i}",
                  f"        return 'cuda{i}'", f"    return not torch.cuda.device_count() > {i % 2}", ""]
    lines += ["USE = torch.cuda.is_available()",
              "setuptools.setup(name='pkg', ext_modules=[probe_%d() for _ in ()] if USE else [])" % 0]
    module = parse_python_text("\n".join(lines) + "\n", "setup.py")
    parses = []
    of = build._CstView.of
    monkeypatch.setattr(build._CstView, "of", classmethod(lambda cls, module: parses.append(1) or of(module)))
    facts = build.python_build_facts(module)
    probes = [p for f in (*facts.functions, *facts.variables) for p in f.probes]
    probes += [p for d in facts.decisions for p in d.probes]
    assert len({p.span for p in probes}) >= 13 and len(parses) == 1
    # each fix is the one a parse of its own would give
    fixed = [p for p in probes if p.fix]
    assert len(fixed) >= 13
    for p in fixed:
        assert build._fix_probe(module, p) == (p.fix, p.fix_text)


#: probes in the places a fix must find them: decorated functions, statements sharing a line,
#: comments and blank lines before them, non-ASCII text before a probe on its line, CRLF and CR line ends,
#: tabs, nested blocks, negations, comparisons, arguments that need parentheses
PLACES = """\
# -*- coding: utf-8 -*-
import functools
import torch as T
import setuptools

\"\"\"A docstring naming torch.cuda.is_available() in prose.\"\"\"
A = 1; USE = T.cuda.is_available()
B = (1,
     2); C = T.cuda.device_count() > 0
D = (1,
     2); E = [
    T.cuda.is_available()]
H = [T.cuda.is_available(),
     0]; I = (1,
     2)


@functools.lru_cache()
def cached():
    return not T.cuda.is_available()


class Builder:
\tdef run(self):
\t\tif T.cuda.device_count() > 0:  # é, then the probe
\t\t\treturn "cuda"
\t\treturn setuptools.setup(name=f"é{T.cuda.device_count() >= 1}")

def pick():
    x = ["é", T.cuda.is_available(), T.cuda.device_count() == 0]
    return print(T.cuda.is_available()) or x

if not T.cuda.is_available() and USE:
    setuptools.setup(name="pkg", ext_modules=[] if cached() else [pick()])
"""


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_a_fix_read_from_its_statement_is_the_fix_read_from_the_whole_module(newline):
    """The fixes resolve libcst's positions over the probe's top-level statement alone: the same
    edits, at the same places of the module, as over the whole module."""
    from cuaudit.facts import build
    from cuaudit.formats.python import line_starts, parse_python_text

    class WholeModule(build._CstView):
        def statement(self, line):
            return build._Statement.of(self.module, 1, len(line_starts(self.module.text)))

    module = parse_python_text(PLACES.replace("\n", newline), "setup.py")
    facts = build.python_build_facts(module)
    reported = {p.span: p for d in facts.decisions for p in d.probes}
    reported.update({p.span: p for f in (*facts.functions, *facts.variables) for p in f.probes})
    assert len(reported) >= 4
    # every call of the module's two probes, reported or not
    probes = [build.Probe(f"torch.cuda.{n.func.attr}()", "", build._span(n, module)) for n in ast.walk(module.tree)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("is_available", "device_count")]
    assert len(probes) == 11 and {p.span for p in probes} >= set(reported)
    fixed = 0
    for p in probes:
        whole = build._fix_probe(module, p, WholeModule(module))
        assert whole == build._fix_probe(module, p)
        if p.span in reported:
            assert (reported[p.span].fix, reported[p.span].fix_text) == whole
        fixed += bool(whole[0])
        for edit in whole[0]:  # the edit lands on the probe's own text
            start = module.offset(edit.span.line, edit.span.column - 1)
            end = module.offset(edit.span.end_line, edit.span.end_column - 1)
            assert "cuda." in module.text[start:end]
    assert fixed >= 9
