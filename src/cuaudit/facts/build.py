"""Build facts: where a build script lets the build machine's GPU decide.

The seed incident: PyTorch AO's ``setup.py`` built its CUDA extensions only
when ``torch.cuda.is_available()`` -- false on GPU-less build machines even
with a CUDA toolkit and a CUDA build of PyTorch -- so the wheels built there
shipped without kernels.  torch-linear-assignment 0.0.5 has the same bug
(``setup.py`` line 9); 0.0.6 adds ``FORCE_CUDA=1`` as an override.

Static only: a build script is parsed, never run.  What is extracted:

* ``setup.py``, ``build.py``, ``hatch_build.py`` and the tree's helper
  modules (top-level ``*.py``, ``tools/``, ``build_tools/``, ...): every
  hardware probe (``torch.cuda.is_available()``, device counts, ``nvidia-smi``
  subprocesses, ``cupy``/``numba``/``jax``/``pynvml`` device queries),
  followed through variables, helper functions and ``if`` statements to the
  condition that decides whether CUDA code is built (a ``CUDAExtension``,
  an ``Extension`` with ``.cu`` sources, an ``nvcc`` command); the
  environment variables that can force the CUDA path (overrides) or only turn
  it off; and architecture lists taken from the build host
  (``get_device_capability()``, ``-arch=native``).  Calls to functions
  imported from the tree's own modules are recorded for the rules to resolve.
* ``pyproject.toml`` (scikit-build-core, meson-python, hatch), ``CMakeLists.txt``
  / ``*.cmake`` and ``meson.build``: ``native``/``Auto`` GPU architectures and
  ``nvidia-smi`` probes.

The automatic fix (replace the probe by the build-capability test
``torch.version.cuda is not None``, keeping any override) is computed here
with libcst, so that formatting and comments are preserved, and handed to the
rules as plain edits.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping

from cuaudit.compat import deep
from cuaudit.facts import Extractor, MemberReader
from cuaudit.formats.python import PythonModule, parse_python_text
from cuaudit.model import Member, MemberKind

# -- what counts as a hardware probe --------------------------------------------------

#: Calls whose result depends on the GPUs of the machine running the build.
GPU_PROBES = {
    "torch.cuda.is_available": "torch.cuda.is_available()",
    "torch.cuda.device_count": "torch.cuda.device_count()",
    "torch.cuda.current_device": "torch.cuda.current_device()",
    "torch.cuda.get_device_name": "torch.cuda.get_device_name()",
    "torch.cuda.get_device_properties": "torch.cuda.get_device_properties()",
    "torch.cuda.is_initialized": "torch.cuda.is_initialized()",
    "cupy.cuda.is_available": "cupy.cuda.is_available()",
    "cupy.cuda.runtime.getDeviceCount": "cupy.cuda.runtime.getDeviceCount()",
    "numba.cuda.is_available": "numba.cuda.is_available()",
    "numba.cuda.detect": "numba.cuda.detect()",
    "numba.cuda.list_devices": "numba.cuda.list_devices()",
    "jax.devices": "jax.devices()",
    "jax.device_count": "jax.device_count()",
    "jax.local_device_count": "jax.local_device_count()",
    "tensorflow.test.is_gpu_available": "tensorflow.test.is_gpu_available()",
    "tensorflow.config.list_physical_devices": "tensorflow.config.list_physical_devices()",
    "pynvml.nvmlInit": "pynvml.nvmlInit()",
    "pynvml.nvmlDeviceGetCount": "pynvml.nvmlDeviceGetCount()",
    "GPUtil.getGPUs": "GPUtil.getGPUs()",
}
#: Calls that return the build host's GPU architecture.
HOST_ARCH_CALLS = {
    "torch.cuda.get_device_capability": "torch.cuda.get_device_capability()",
    "cupy.cuda.Device": "cupy.cuda.Device().compute_capability",
    "numba.cuda.get_current_device": "numba.cuda.get_current_device().compute_capability",
    "pynvml.nvmlDeviceGetCudaComputeCapability": "pynvml.nvmlDeviceGetCudaComputeCapability()",
}
#: Queries that raise on a machine without a GPU (or without nvidia-smi): run unprotected in a build
#: script, they make the build itself fail there.  is_available()/device_count() answer instead.
RAISING_QUERIES = frozenset({
    "torch.cuda.current_device()", "torch.cuda.get_device_name()", "torch.cuda.get_device_properties()",
    "torch.cuda.get_device_capability()", "cupy.cuda.runtime.getDeviceCount()", "cupy.cuda.Device().compute_capability",
    "numba.cuda.get_current_device().compute_capability", "pynvml.nvmlInit()", "pynvml.nvmlDeviceGetCount()",
    "pynvml.nvmlDeviceGetCudaComputeCapability()", "nvidia-smi", "nvidia-smi --query-gpu=compute_cap",
})
#: subprocess calls that raise when the program is missing (os.system and friends return a status)
_RAISES_IF_MISSING = {"subprocess.run", "subprocess.check_output", "subprocess.check_call", "subprocess.call", "subprocess.Popen"}
_SUBPROCESS = {
    "subprocess.run", "subprocess.check_output", "subprocess.check_call", "subprocess.call",
    "subprocess.Popen", "subprocess.getoutput", "subprocess.getstatusoutput", "os.system", "os.popen",
}
_ENV_READS = {"os.environ.get", "os.getenv", "os.environ.__getitem__", "os.environ", "environ.get", "getenv"}
_NATIVE_ARCH = re.compile(r"(-arch[= ](native|all-major-native)\b|--gpu-architecture[= ]native\b|-arch=sm_native)")
#: Names of helper folders whose modules setup.py imports (PyTorch's tools/, scikit-learn's build_tools/).
_BUILDS_SOMETHING = re.compile(r"setuptools|distutils|cpp_extension|\bExtension\(|cmake|nvcc|scikit_build|build_ext|mesonpy|hatchling")
_HELPER_DIRS = re.compile(r"^(tools|build_tools|buildtools|build_utils|buildutils|scripts|setup_helpers|setup_utils|_build|ci|cmake|build_helpers)/")


# -- facts ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    line: int
    column: int
    end_line: int
    end_column: int


@dataclass(frozen=True)
class TextEdit:
    """Replace ``span`` of the member with ``content`` (1-based, columns in characters)."""

    span: Span
    content: str


@dataclass(frozen=True)
class Probe:
    """One hardware query in a build script."""

    label: str  # "torch.cuda.is_available()"
    text: str  # the source text
    span: Span
    function: str = ""  # enclosing function, "" at module level
    #: edits replacing it by the build-capability test (empty: no automatic fix)
    fix: tuple[TextEdit, ...] = ()
    fix_text: str = ""
    #: the fix may change behaviour beyond the intent (the script also targets ROCm...)
    fix_unsafe: bool = False
    #: it raises on a machine without a GPU (a device query, an nvidia-smi subprocess)
    raises: bool = False
    #: what keeps it from running there unprotected: "override" (an environment variable or
    #: flag is read first), "gpu-check" (is_available() first), "try", or "" (nothing)
    guard: str = ""


@dataclass(frozen=True)
class Decision:
    """A condition that decides whether CUDA code is built and depends on the build machine's GPU."""

    span: Span  # the condition
    condition: str
    probes: tuple[Probe, ...]
    controls: str  # what it switches: "CUDAExtension('pkg._backend')"
    via: tuple[str, ...] = ()  # variables and helper functions it goes through
    overrides: tuple[str, ...] = ()  # environment variables (or flags) that force the CUDA path
    disablers: tuple[str, ...] = ()  # environment variables that can only turn it off


@dataclass(frozen=True)
class ExternalDecision:
    """Like :class:`Decision`, through a function imported from a module of the tree."""

    span: Span
    condition: str
    module: str  # dotted module name as imported ("tools.build_utils")
    name: str  # function or variable name in that module
    controls: str
    overrides: tuple[str, ...] = ()
    disablers: tuple[str, ...] = ()


@dataclass(frozen=True)
class HostArch:
    """GPU architectures taken from the build host."""

    label: str  # "-arch=native", "CMAKE_CUDA_ARCHITECTURES native", "torch.cuda.get_device_capability()"
    text: str
    span: Span
    overrides: tuple[str, ...] = ()
    #: as :attr:`Probe.raises` / :attr:`Probe.guard` (Python build scripts)
    raises: bool = False
    guard: str = ""


@dataclass(frozen=True)
class FunctionSummary:
    """What a function of a helper module returns, for callers in setup.py."""

    name: str
    probes: tuple[Probe, ...]
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class BuildScript:
    """Build facts of one member."""

    language: str  # "python" | "pyproject" | "cmake" | "meson"
    decisions: tuple[Decision, ...] = ()
    external: tuple[ExternalDecision, ...] = ()
    host_archs: tuple[HostArch, ...] = ()
    functions: tuple[FunctionSummary, ...] = ()  # module-level functions that return a probe's result
    variables: tuple[FunctionSummary, ...] = ()  # module-level names holding a probe's result
    hooks: tuple[str, ...] = ()  # build hook files named by pyproject.toml (hatch custom hooks)
    builds_cuda: bool = False  # the script builds CUDA code somewhere


# -- Python: helpers ---------------------------------------------------------------------------


def _span(node: ast.AST, module: PythonModule) -> Span:
    return Span(
        node.lineno,
        module.column(node.lineno, node.col_offset),
        node.end_lineno or node.lineno,
        module.column(node.end_lineno or node.lineno, node.end_col_offset or node.col_offset),
    )


class _Imports(ast.NodeVisitor):
    """Local name -> dotted name, over the whole file (imports inside functions included)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.from_tree: dict[str, tuple[str, str]] = {}  # local -> (module, name) for relative/unknown modules

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.asname:
                self.names[a.asname] = a.name
            else:
                top = a.name.split(".")[0]
                self.names[top] = top

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = ("." * node.level) + (node.module or "")
        for a in node.names:
            if a.name == "*":
                continue
            local = a.asname or a.name
            self.names[local] = f"{module}.{a.name}" if module and not module.endswith(".") else f"{module}{a.name}"
            self.from_tree[local] = (module, a.name)


def _dotted(node: ast.AST, names: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Call):  # cupy.cuda.Device().compute_capability
        inner = _dotted(node.func, names)
        if inner is None:
            return None
        return ".".join([inner + "()"] + parts[::-1])
    if not isinstance(node, ast.Name):
        return None
    base = names.get(node.id, node.id)
    return ".".join([base] + parts[::-1])


def _alias(dotted: str) -> str:
    """Common aliases to canonical module names (tf -> tensorflow)."""
    for short, full in (("tf.", "tensorflow."), ("np.", "numpy.")):
        if dotted.startswith(short):
            return full + dotted[len(short):]
    return dotted


def _strings(node: ast.AST) -> Iterator[str]:
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            yield n.value


def _env_names(node: ast.AST, names: dict[str, str], env_vars: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """Environment variables (or command-line flags) an expression reads."""
    found: list[str] = []
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            d = _dotted(n.func, names) or ""
            if d in _ENV_READS or d.endswith(("environ.get", ".getenv")) or d == "getenv":
                if n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
                    found.append(n.args[0].value)
                else:
                    found.append("<environment>")
        elif isinstance(n, ast.Subscript):
            d = _dotted(n.value, names) or ""
            if d.endswith("environ") and isinstance(n.slice, ast.Constant):
                found.append(str(n.slice.value))
            elif d == "sys.argv":
                found.append("sys.argv")
        elif isinstance(n, ast.Compare):
            for c in n.comparators:
                d = _dotted(c, names) or ""
                if d.endswith("environ") and isinstance(n.left, ast.Constant):
                    found.append(str(n.left.value))
                elif d == "sys.argv" and isinstance(n.left, ast.Constant):
                    found.append(f"{n.left.value} (command line)")
        elif isinstance(n, ast.Name) and n.id in env_vars:
            found += env_vars[n.id]
    return tuple(dict.fromkeys(found))


# -- Python: the analysis ----------------------------------------------------------------------------


@dataclass
class _Taint:
    """Which probes a value depends on, and what can override them."""

    probes: dict[int, Probe] = field(default_factory=dict)  # id(ast node) -> probe
    overrides: tuple[str, ...] = ()
    disablers: tuple[str, ...] = ()
    via: tuple[str, ...] = ()
    external: tuple[tuple[str, str], ...] = ()  # (module, name) of tree helpers it calls

    def __bool__(self) -> bool:
        return bool(self.probes or self.external)

    def merge(self, other: "_Taint") -> "_Taint":
        return _Taint(
            {**self.probes, **other.probes},
            tuple(dict.fromkeys(self.overrides + other.overrides)),
            tuple(dict.fromkeys(self.disablers + other.disablers)),
            tuple(dict.fromkeys(self.via + other.via)),
            tuple(dict.fromkeys(self.external + other.external)),
        )

    def through(self, name: str) -> "_Taint":
        return _Taint(self.probes, self.overrides, self.disablers, tuple(dict.fromkeys(self.via + (name,))), self.external)


class _PythonBuild:
    def __init__(self, module: PythonModule, fixes: bool = True) -> None:
        self.module = module
        self.fixes = fixes  # whether a probe gets its automatic fix (libcst)
        #: each probe's fix, by its label and span (a probe is reported by its decision and by the
        #: summaries of the functions and variables it taints), and the one libcst view they read
        self._fixes: dict[tuple[str, Span], tuple[tuple[TextEdit, ...], str]] = {}
        self._calls_by_name: dict[str, list[ast.Call]] | None = None
        self._view: list[_CstView | None] = []
        self.source = module.text
        self.path = module.path
        self.tree = module.tree
        imp = _Imports()
        imp.visit(self.tree)
        self.names = imp.names
        self.from_tree = {k: v for k, v in imp.from_tree.items() if not _third_party(v[0])}
        self.functions: dict[str, ast.FunctionDef] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, node)
        self.func_taint: dict[str, _Taint] = {}
        self.func_builds: dict[str, bool] = {}
        self.var_taint: dict[str, _Taint] = {}  # module-level and function-level, flow-insensitive
        self.env_vars: dict[str, tuple[str, ...]] = {}  # variables holding an environment read
        self.decisions: list[Decision] = []
        self.external: list[ExternalDecision] = []
        self.host_archs: list[HostArch] = []
        self.mentions_rocm = bool(re.search(r"\b(hip|rocm|ROCM|HIP)\b", self.source))
        self._probe_cache: dict[int, Probe | None] = {}
        self._parents: dict[int, ast.AST] | None = None
        self._probe_nodes: dict[Span, ast.Call] = {}

    # probes ----------------------------------------------------------------
    def _probe(self, call: ast.Call, function: str) -> Probe | None:
        if id(call) in self._probe_cache:
            return self._probe_cache[id(call)]
        d = _alias(_dotted(call.func, self.names) or "")
        label = GPU_PROBES.get(d)
        if label is None and (d in _SUBPROCESS or d.endswith(("subprocess.run", "check_output"))):
            if any("nvidia-smi" in s for s in _strings(call)):
                label = "nvidia-smi"
        if label is None and d.endswith("which") and any(s == "nvidia-smi" for s in _strings(call)):
            label = "shutil.which('nvidia-smi')"
        probe = None
        if label is not None:
            probe = Probe(label, ast.get_source_segment(self.source, call) or label, _span(call, self.module), function,
                          raises=_raises(label, d))
            self._probe_nodes[probe.span] = call
        self._probe_cache[id(call)] = probe
        return probe

    # what protects a query ---------------------------------------------------
    def _parent_map(self) -> dict[int, ast.AST]:
        if self._parents is None:
            self._parents = {id(c): n for n in ast.walk(self.tree) for c in ast.iter_child_nodes(n)}
        return self._parents

    def _call_sites(self, name: str) -> list[ast.Call]:
        """The calls of ``name(...)`` and ``<anything>.name(...)`` in the module, in ``ast.walk``
        order: indexed in one walk (a walk per guarded function was most of a 251 KB module's pass)."""
        if self._calls_by_name is None:
            self._calls_by_name = {}
            for n in ast.walk(self.tree):
                if isinstance(n, ast.Call):
                    f = n.func
                    key = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                    if key is not None:
                        self._calls_by_name.setdefault(key, []).append(n)
        return self._calls_by_name.get(name, [])

    def guard(self, node: ast.AST, depth: int = 0) -> tuple[str, tuple[str, ...]]:
        """(kind, overrides) of what keeps ``node`` from running unprotected on a GPU-less builder.

        Walks out from the node: the test of an enclosing ``if``/conditional expression, the
        operands before it in ``and``/``or``, a ``try`` body, the default of an environment
        read; at a function, the weakest guard of its call sites in this file (a method or a
        function called nowhere here runs unprotected: setuptools calls ``build_extensions``).
        """
        parents = self._parent_map()
        best, names = "", ()
        child, cur = node, parents.get(id(node))
        while cur is not None:
            found: tuple[str, tuple[str, ...]] = ("", ())
            if isinstance(cur, (ast.If, ast.IfExp, ast.While)) and child is not cur.test:
                found = self._guard_test(cur.test)
            elif isinstance(cur, ast.BoolOp):
                before = cur.values[: next(i for i, v in enumerate(cur.values) if v is child)]
                for v in before:
                    got = self._guard_test(v)
                    found = got if _GUARD_RANK[got[0]] > _GUARD_RANK[found[0]] else found
            elif isinstance(cur, ast.Try) and cur.handlers and any(child is b for b in cur.body):
                found = ("try", ())
            elif isinstance(cur, ast.Call) and child is not cur.func and (cur.args[:1] != [child]):
                d = _dotted(cur.func, self.names) or ""
                if d in _ENV_READS or d.endswith(("environ.get", ".getenv")):
                    found = ("override", _env_names(cur, self.names, self.env_vars))
            if _GUARD_RANK[found[0]] > _GUARD_RANK[best]:
                best, names = found
            if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                if isinstance(cur, ast.Lambda) or depth >= 3:
                    break
                sites = self._call_sites(cur.name)
                if sites:
                    outer = [self.guard(n, depth + 1) for n in sites]
                    weakest = min(outer, key=lambda g: _GUARD_RANK[g[0]])
                    if _GUARD_RANK[weakest[0]] > _GUARD_RANK[best]:
                        best, names = weakest
                break
            child, cur = cur, parents.get(id(cur))
        return best, tuple(dict.fromkeys(names))

    def _guard_test(self, test: ast.AST) -> tuple[str, tuple[str, ...]]:
        env = tuple(n for n in _env_names(test, self.names, self.env_vars) if n != "<environment>")
        if env:
            return "override", env
        t = self.taint(test, "")
        if any(not p.raises for p in t.probes.values()):
            return "gpu-check", ()
        return "", ()

    def taint(self, node: ast.AST | None, function: str) -> _Taint:
        """What the value of ``node`` depends on."""
        if node is None:
            return _Taint()
        if isinstance(node, ast.BoolOp):
            parts = [self.taint(v, function) for v in node.values]
            out = _Taint()
            for p in parts:
                out = out.merge(p)
            if out:
                env = [(_env_names(v, self.names, self.env_vars), bool(t)) for v, t in zip(node.values, parts)]
                plain = tuple(n for names, tainted in env if not tainted for n in names)
                # ``not probe or NO_CUDA`` decides the CPU path: its environment reads disable,
                # and ``not probe and not FORCE_CUDA`` reads them as overrides.
                negated = any(t and _negated(v) for v, t in zip(node.values, parts))
                if isinstance(node.op, ast.Or) != negated:
                    out = _Taint(out.probes, tuple(dict.fromkeys(out.overrides + plain)), out.disablers, out.via, out.external)
                else:
                    out = _Taint(out.probes, out.overrides, tuple(dict.fromkeys(out.disablers + plain)), out.via, out.external)
            return out
        if isinstance(node, ast.Call):
            probe = self._probe(node, function)
            out = _Taint()
            if probe is not None:
                out = _Taint({id(node): probe})
            name = node.func.id if isinstance(node.func, ast.Name) else None
            if name and name in self.func_taint:
                out = out.merge(self.func_taint[name].through(f"{name}()"))
            elif name and name in self.from_tree and name not in self.functions:
                module, attr = self.from_tree[name]
                out = out.merge(_Taint(external=((module, attr),)))
            elif isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
                mod = self.names.get(node.func.value.id)
                if mod and not _third_party(mod) and node.func.value.id not in self.functions:
                    out = out.merge(_Taint(external=((mod, node.func.attr),)))
            for a in list(node.args) + [k.value for k in node.keywords]:
                out = out.merge(self.taint(a, function))
            if isinstance(node.func, ast.Attribute):
                out = out.merge(self.taint(node.func.value, function))
            return out
        if isinstance(node, ast.Name):
            t = self.var_taint.get(node.id)
            if t:
                return t.through(node.id)
            if node.id in self.from_tree and node.id not in self.functions:
                return _Taint(external=(self.from_tree[node.id],))
            return _Taint()
        if isinstance(node, (ast.Lambda, ast.FunctionDef)):
            return _Taint()
        out = _Taint()
        for child in ast.iter_child_nodes(node):
            out = out.merge(self.taint(child, function))
        return out

    # what builds CUDA --------------------------------------------------------
    def builds_cuda(self, node: ast.AST, seen: frozenset[str] = frozenset()) -> str:
        """A short description of the CUDA build step under ``node``, or ""."""
        nodes = list(ast.walk(node))
        for n in nodes:  # extension constructors first: they name what is lost
            if isinstance(n, ast.Call):
                d = _dotted(n.func, self.names) or ""
                last = d.rsplit(".", 1)[-1]
                if re.search(r"cuda\w*extension", last, re.I):
                    return f"{last}({_first_str(n) or '...'})"
                if last.endswith("Extension") and any(s.endswith((".cu", ".cuh")) for s in _strings(n)):
                    return f"{last}({_first_str(n) or '...'}) with .cu sources"
        for n in nodes:
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in self.functions and n.func.id not in seen:
                inner = self.builds_cuda(self.functions[n.func.id], seen | {n.func.id})
                if inner:
                    return inner
        for n in nodes:
            if isinstance(n, ast.Constant) and isinstance(n.value, str):
                if n.value.endswith(".cu") or n.value == "nvcc" or n.value.endswith("/nvcc"):
                    return f"CUDA sources ({n.value!r})"
        return ""

    # the walk -------------------------------------------------------------------
    def run(self) -> None:
        # Summaries first, to a fixpoint: helper functions and variables that carry a probe.
        for _ in range(3):
            self._assignments(self.tree, "", _Taint())
            for name, fn in self.functions.items():
                self.func_taint[name] = self._returns(fn)
        self._decisions(self.tree, "")
        self._host_archs()

    def _assignments(self, node: ast.AST, function: str, control: _Taint) -> None:
        for stmt in getattr(node, "body", []) + getattr(node, "orelse", []) + getattr(node, "finalbody", []):
            self._assign_stmt(stmt, function, control)
        for h in getattr(node, "handlers", []):
            for stmt in h.body:
                self._assign_stmt(stmt, function, control)

    def _assign_stmt(self, stmt: ast.stmt, function: str, control: _Taint) -> None:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            t = self.taint(stmt.value, function).merge(control)
            env = _env_names(stmt.value, self.names, self.env_vars) if stmt.value is not None else ()
            for target in targets:
                for n in ast.walk(target):
                    if isinstance(n, ast.Name):
                        if t:
                            self.var_taint[n.id] = self.var_taint.get(n.id, _Taint()).merge(t)
                        if env and not self.taint(stmt.value, function):
                            self.env_vars[n.id] = tuple(dict.fromkeys(self.env_vars.get(n.id, ()) + env))
        elif isinstance(stmt, ast.If):
            t = self.taint(stmt.test, function)
            inner = control.merge(t) if t else control
            for s in stmt.body + stmt.orelse:
                self._assign_stmt(s, function, inner)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._assignments(stmt, stmt.name, _Taint())
        elif isinstance(stmt, (ast.For, ast.While, ast.With, ast.Try, ast.AsyncFor, ast.AsyncWith)):
            self._assignments(stmt, function, control)

    def _returns(self, fn: ast.AST) -> _Taint:
        """Taint of a function's results: returned values and the conditions guarding returns."""
        out = _Taint()
        overrides: list[str] = []

        def walk(stmts: list[ast.stmt], control: _Taint) -> None:
            nonlocal out
            for s in stmts:
                if isinstance(s, ast.Return):
                    out = out.merge(self.taint(s.value, fn.name).merge(control))
                elif isinstance(s, ast.If):
                    t = self.taint(s.test, fn.name)
                    if not t and any(isinstance(x, ast.Return) for x in s.body):
                        # ``if os.environ.get("FORCE_CUDA"): return True`` before the probe
                        overrides.extend(_env_names(s.test, self.names, self.env_vars))
                    walk(s.body, control.merge(t) if t else control)
                    walk(s.orelse, control.merge(t) if t else control)
                elif isinstance(s, ast.Try):
                    # try: nvidia-smi ...; return True / except: return False -- the result depends
                    # on whether the probe raised.
                    probed = _Taint()
                    for x in s.body:
                        if not isinstance(x, ast.Return):
                            probed = probed.merge(self.taint(x, fn.name))
                    inner = control.merge(probed) if probed else control
                    walk(s.body + s.orelse, inner)
                    for h in s.handlers:
                        walk(h.body, inner)
                    walk(s.finalbody, control)
                elif isinstance(s, (ast.For, ast.While, ast.With)):
                    walk(s.body + getattr(s, "orelse", []), control)

        walk(fn.body, _Taint())
        if out and overrides:
            out = _Taint(out.probes, tuple(dict.fromkeys(out.overrides + tuple(overrides))), out.disablers, out.via, out.external)
        return out

    def _decisions(self, node: ast.AST, function: str, outer_env: tuple[str, ...] = ()) -> None:
        for stmt in ast.iter_child_nodes(node):
            fn = stmt.name if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(stmt, ast.If):
                self._decide(stmt.test, [stmt.body, stmt.orelse], fn, outer_env)
                env = _env_names(stmt.test, self.names, self.env_vars) if not self.taint(stmt.test, fn) else ()
                # elif chains: ``if FORCE_CUDA: ... elif torch.cuda.is_available(): ...``
                if stmt.orelse and len(stmt.orelse) == 1 and isinstance(stmt.orelse[0], ast.If) and env and self.builds_cuda(ast.Module(stmt.body, [])):
                    for s in stmt.body:
                        self._decisions(s, fn)
                    self._decisions(ast.Module(stmt.orelse, []), fn, env)
                    continue
            elif isinstance(stmt, ast.IfExp):
                self._decide(stmt.test, [[stmt.body], [stmt.orelse]], fn, outer_env)
            self._decisions(stmt, fn)

    def _decide(self, test: ast.expr, branches: list[list[ast.AST]], function: str, outer_env: tuple[str, ...]) -> None:
        t = self.taint(test, function)
        if not t:
            return
        controls = self.builds_cuda(ast.Module([s for b in branches for s in b if isinstance(s, ast.stmt)]
                                               + [ast.Expr(s) for b in branches for s in b if isinstance(s, ast.expr)], []))
        if not controls:
            return
        span = _span(test, self.module)
        cond = ast.get_source_segment(self.source, test) or ""
        overrides = tuple(dict.fromkeys(t.overrides + outer_env))
        if t.probes:
            probes = tuple(sorted(t.probes.values(), key=lambda p: (p.span.line, p.span.column)))
            probes = tuple(self._with_fix(p) for p in probes)
            self.decisions.append(Decision(span, cond, probes, controls, t.via, overrides, t.disablers))
        for module, name in t.external:
            self.external.append(ExternalDecision(span, cond, module, name, controls, overrides, t.disablers))

    def _with_fix(self, probe: Probe) -> Probe:
        """The probe as reported: its automatic fix, and its guard (known once the summaries are)."""
        node = self._probe_nodes.get(probe.span)
        guard = self.guard(node)[0] if node is not None else ""
        edits, text = self._fix(probe) if self.fixes else ((), "")
        if not edits:
            return dataclasses.replace(probe, guard=guard)
        return Probe(probe.label, probe.text, probe.span, probe.function, edits, text, self.mentions_rocm, probe.raises, guard)

    def _fix(self, probe: Probe) -> tuple[tuple[TextEdit, ...], str]:
        key = (probe.label, probe.span)
        if key not in self._fixes:
            if probe.label not in _FIXABLE:
                self._fixes[key] = ((), "")
            else:
                if not self._view:
                    self._view.append(_CstView.of(self.module))
                view = self._view[0]
                self._fixes[key] = _fix_probe(self.module, probe, view) if view is not None else ((), "")
        return self._fixes[key]

    def _host_archs(self) -> None:
        # a script that builds nothing (a GPU test script under scripts/) takes no architectures
        if not _BUILDS_SOMETHING.search(self.source):
            return
        # a docstring that mentions `-arch=native` passes it to no compiler
        docs = {id(b[0].value) for b in [self.tree.body] + [n.body for n in ast.walk(self.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
                if b and isinstance(b[0], ast.Expr) and isinstance(b[0].value, ast.Constant)}
        for n in ast.walk(self.tree):
            if id(n) in docs:
                continue
            if isinstance(n, ast.Call):
                d = _alias(_dotted(n.func, self.names) or "")
                label = HOST_ARCH_CALLS.get(d)
                if label is None and (d in _SUBPROCESS or d.endswith("check_output")):
                    if any("nvidia-smi" in s for s in _strings(n)) and any("compute_cap" in s for s in _strings(n)):
                        label = "nvidia-smi --query-gpu=compute_cap"
                if label:
                    guard, overrides = self.guard(n)
                    self.host_archs.append(HostArch(label, ast.get_source_segment(self.source, n) or label, _span(n, self.module),
                                                    overrides if guard == "override" else (), _raises(label, d), guard))
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and _NATIVE_ARCH.search(n.value):
                guard, overrides = self.guard(n)
                self.host_archs.append(HostArch(_NATIVE_ARCH.search(n.value).group(1), repr(n.value), _span(n, self.module),
                                                overrides if guard == "override" else (), False, guard))

    def module_summaries(self) -> tuple[tuple[FunctionSummary, ...], tuple[FunctionSummary, ...]]:
        funcs = []
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                t = self.func_taint.get(node.name)
                if t and t.probes:
                    probes = tuple(self._with_fix(p) for p in sorted(t.probes.values(), key=lambda p: p.span.line))
                    funcs.append(FunctionSummary(node.name, probes, t.overrides))
        variables = []
        for name, t in sorted(self.var_taint.items()):
            if t.probes and any(isinstance(s, ast.Assign) and any(isinstance(x, ast.Name) and x.id == name for x in s.targets) for s in self.tree.body):
                probes = tuple(self._with_fix(p) for p in sorted(t.probes.values(), key=lambda p: p.span.line))
                variables.append(FunctionSummary(name, probes, t.overrides))
        return tuple(funcs), tuple(variables)


_GUARD_RANK = {"": 0, "try": 1, "gpu-check": 1, "override": 2}


def _raises(label: str, called: str) -> bool:
    """Whether a query labelled ``label`` (made by calling ``called``) raises without a GPU."""
    if label.startswith("nvidia-smi"):
        return called in _RAISES_IF_MISSING or called.endswith(("subprocess.run", "check_output"))
    return label in RAISING_QUERIES


def _negated(node: ast.AST) -> bool:
    """``not X``, ``X == 0``, ``X < 1``: the probe's result read the other way round."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return True
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.comparators[0], ast.Constant):
        value = node.comparators[0].value
        return (isinstance(node.ops[0], ast.Eq) and value == 0) or (isinstance(node.ops[0], ast.Lt) and value == 1)
    return False


def _first_str(call: ast.Call) -> str:
    for a in call.args[:1] + [k.value for k in call.keywords if k.arg == "name"]:
        if isinstance(a, ast.Constant) and isinstance(a.value, str):
            return repr(a.value)
    return ""


_THIRD_PARTY = {
    "os", "sys", "re", "subprocess", "shutil", "glob", "pathlib", "platform", "setuptools", "distutils", "torch",
    "numpy", "cupy", "numba", "jax", "tensorflow", "pynvml", "GPUtil", "pybind11", "Cython", "skbuild", "packaging",
    "warnings", "logging", "json", "io", "itertools", "functools", "typing", "sysconfig", "importlib", "ctypes",
    "hatchling", "mesonpy", "scikit_build_core", "wheel", "pkg_resources", "multiprocessing", "tempfile",
}


def _third_party(module: str) -> bool:
    if module.startswith("."):
        return False
    return module.split(".")[0] in _THIRD_PARTY


# -- the automatic fix, with libcst ----------------------------------------------------------------------------


#: the probes :func:`_fix_probe` may rewrite
_FIXABLE = ("torch.cuda.is_available()", "torch.cuda.device_count()")


class _CstView:
    """libcst's view of a module for the automatic fixes of its probes, shared by all of them.

    The module is parsed once, whole: a fix is offered only where libcst parses it.  The nodes'
    positions and parents are resolved over the text of the one top-level statement a probe is in
    (:meth:`statement`): the replacement stays inside it, and a top-level statement parses alone
    as it does in its module (the grammar takes them one after another).  Resolved over the whole
    module for every probe, a large module with many probes took minutes (torch's own package
    folder checked as a tree: 44 top-level modules read as build helpers, 75 s of a 76 s check;
    over the whole module once, still 5 s for its 251 KB ``_meta_registrations.py``)."""

    def __init__(self, module: PythonModule) -> None:
        self.module = module
        self._statements: dict[tuple[int, int], _Statement | None] = {}
        #: each top-level statement's first line (its first decorator's) and last line
        self._bounds = [(min([n.lineno, *(d.lineno for d in getattr(n, "decorator_list", ()))]), n.end_lineno or n.lineno)
                        for n in module.tree.body]

    @classmethod
    def of(cls, module: PythonModule) -> "_CstView | None":
        """The view of ``module``, or None where libcst does not parse it."""
        import libcst as cst

        try:
            cst.parse_module(module.text)
        except cst.ParserSyntaxError:
            return None
        return cls(module)

    def statement(self, line: int) -> "_Statement | None":
        """The top-level statement holding ``line`` (with those sharing its lines: ``a; b``)."""
        bounds = self._bounds
        at = next((k for k, (first, last) in enumerate(bounds) if first <= line <= last), None)
        if at is None:
            return None
        lo = hi = at
        while lo > 0 and bounds[lo - 1][1] >= bounds[lo][0]:
            lo -= 1
        while hi + 1 < len(bounds) and bounds[hi + 1][0] <= bounds[hi][1]:
            hi += 1
        key = (bounds[lo][0], max(last for _first, last in bounds[lo:hi + 1]))
        if key not in self._statements:
            self._statements[key] = _Statement.of(self.module, *key)
        return self._statements[key]


@dataclass
class _Statement:
    """libcst's positions and parents over the text of lines ``first``..``last`` of a module."""

    first: int
    text: str
    positions: Any
    parents: Any
    #: Call nodes by their span in the module's lines (1-based columns), the first of a span
    calls: dict[tuple[int, int, int, int], Any]

    @classmethod
    def of(cls, module: PythonModule, first: int, last: int) -> "_Statement | None":
        import libcst as cst
        from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

        from cuaudit.formats.python import line_starts

        starts = line_starts(module.text)
        start = starts[first - 1]
        text = module.text[start:starts[last] if last < len(starts) else len(module.text)]
        try:
            wrapper = MetadataWrapper(cst.parse_module(text))
        except cst.ParserSyntaxError:
            return None
        positions = wrapper.resolve(PositionProvider)
        shift = first - 1
        calls: dict[tuple[int, int, int, int], Any] = {}
        for node, pos in positions.items():
            if isinstance(node, cst.Call):
                calls.setdefault((pos.start.line + shift, pos.start.column + 1, pos.end.line + shift, pos.end.column + 1), node)
        return cls(first, text, positions, wrapper.resolve(ParentNodeProvider), calls)

    def offset(self, line: int, column: int) -> int:
        """The index in this statement's text of a libcst position in it."""
        from cuaudit.formats.python import line_starts

        return line_starts(self.text)[line - 1] + column


def _fix_probe(module: PythonModule, probe: Probe, view: "_CstView | None" = None) -> tuple[tuple[TextEdit, ...], str]:
    """Edits replacing a ``torch.cuda.is_available()`` probe by ``torch.version.cuda is not None``.

    Only the unambiguous patterns: the probe is a call on the ``torch`` module
    by a name bound in the file (``torch.cuda.is_available()``, or
    ``torch.cuda.device_count() > 0`` / ``>= 1``).  The replacement keeps the
    module alias the script uses, and is parenthesised where the context
    needs it.  ``view``: the module's libcst view (:class:`_CstView`), parsed here when not given.
    """
    if probe.label not in _FIXABLE:
        return (), ""
    import libcst as cst

    view = view or _CstView.of(module)
    stmt = view.statement(probe.span.line) if view is not None else None
    if stmt is None:
        return (), ""
    positions, parents = stmt.positions, stmt.parents
    span = probe.span
    target = stmt.calls.get((span.line, span.column, span.end_line, span.end_column))
    if target is None or not isinstance(target.func, cst.Attribute) or not isinstance(target.func.value, cst.Attribute):
        return (), ""
    module_expr = target.func.value.value  # torch in torch.cuda.is_available
    replace: cst.CSTNode = target
    negated = False
    if probe.label == "torch.cuda.device_count()":
        parent = parents.get(target)
        # device_count() > 0 / >= 1 / != 0 (and == 0 / < 1) are the only forms with a plain meaning
        if not (isinstance(parent, cst.Comparison) and len(parent.comparisons) == 1 and parent.left is target):
            return (), ""
        op, right = parent.comparisons[0].operator, parent.comparisons[0].comparator
        if not isinstance(right, cst.Integer):
            return (), ""
        if (isinstance(op, (cst.GreaterThan, cst.NotEqual)) and right.value == "0") or (
            isinstance(op, cst.GreaterThanEqual) and right.value == "1"
        ):
            pass
        elif (isinstance(op, cst.Equal) and right.value == "0") or (isinstance(op, cst.LessThan) and right.value == "1"):
            negated = True
        else:
            return (), ""
        replace = parent
    parent = parents.get(replace)
    if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not) and not negated:
        # ``not torch.cuda.is_available()`` -> ``torch.version.cuda is None``
        replace, negated = parent, True
    module_code = cst.Module([]).code_for_node(module_expr)
    new_text = f"{module_code}.version.cuda is {'' if negated else 'not '}None"
    if _needs_parens(parents.get(replace), replace):
        new_text = f"({new_text})"
    pos = positions[replace]
    # libcst confirms the result still parses before the edit is offered (the statement's text: the
    # rest of the module is as it was, and parsed)
    start, end = stmt.offset(pos.start.line, pos.start.column), stmt.offset(pos.end.line, pos.end.column)
    try:
        cst.parse_module(stmt.text[:start] + new_text + stmt.text[end:])
    except cst.ParserSyntaxError:
        return (), ""
    shift = stmt.first - 1
    span = Span(pos.start.line + shift, pos.start.column + 1, pos.end.line + shift, pos.end.column + 1)
    return (TextEdit(span, new_text),), new_text


def _needs_parens(parent: object, node: object) -> bool:
    """Whether ``X is not None`` needs parentheses in place of ``node`` under ``parent``."""
    import libcst as cst

    if isinstance(parent, (cst.BooleanOperation, cst.If, cst.While, cst.Assign, cst.Return, cst.Arg, cst.AnnAssign,
                           cst.Expr, cst.Element, cst.DictElement)):
        return False
    if isinstance(parent, cst.IfExp) and parent.test is node:
        return False
    if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
        return False
    return True


# -- pyproject.toml, CMake, meson ----------------------------------------------------------------------------------

_CMAKE_NATIVE = re.compile(
    r"(CMAKE_CUDA_ARCHITECTURES|CUDA_ARCHITECTURES)\s*[\"']?\s*[= ]?\s*[\"']?(native|all-major-native)\b", re.I
)
_CMAKE_AUTO = re.compile(r"cuda_select_nvcc_arch_flags\s*\(\s*\w+\s*(Auto)?\s*\)", re.I)
_CMAKE_SMI = re.compile(r"execute_process\s*\([^)]*nvidia-smi", re.I | re.S)


def _line_of(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    col = index - (text.rfind("\n", 0, index) + 1) + 1
    return line, col


def _regex_archs(text: str, overridable: bool) -> list[HostArch]:
    out = []
    for rx in (_CMAKE_NATIVE, _NATIVE_ARCH):
        for m in rx.finditer(text):
            line, col = _line_of(text, m.start())
            end_line, end_col = _line_of(text, m.end())
            label = f"{m.group(1)} {m.group(2)}" if rx is _CMAKE_NATIVE else m.group(1)
            out.append(HostArch(label, m.group(0), Span(line, col, end_line, end_col), ("CMAKE_CUDA_ARCHITECTURES",) if overridable else ()))
    return out


def _cmake(text: str) -> BuildScript:
    archs = []
    for h in _regex_archs(text, False):
        # if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES) set(... native) endif(): -D overrides it
        before = text[: sum(len(x) + 1 for x in text.split("\n")[: h.span.line - 1])]
        guarded = re.search(r"if\s*\(\s*NOT\s+(DEFINED\s+)?CMAKE_CUDA_ARCHITECTURES[^)]*\)[^(]*$", before[-400:], re.I | re.S)
        archs.append(HostArch(h.label, h.text, h.span, ("CMAKE_CUDA_ARCHITECTURES",) if guarded else ()))
    for m in _CMAKE_AUTO.finditer(text):
        if m.group(1) or True:
            line, col = _line_of(text, m.start())
            archs.append(HostArch("cuda_select_nvcc_arch_flags(Auto)", m.group(0), Span(line, col, *_line_of(text, m.end()))))
    decisions = []
    for m in _CMAKE_SMI.finditer(text):
        line, col = _line_of(text, m.start())
        probe = Probe("nvidia-smi", m.group(0), Span(line, col, *_line_of(text, m.end())))
        decisions.append(Decision(probe.span, m.group(0), (probe,), "the CMake configuration (output of nvidia-smi)"))
    builds = bool(re.search(r"\b(CUDA|cuda_add_library|\.cu\b|enable_language\s*\(\s*CUDA)", text))
    return BuildScript("cmake", decisions=tuple(decisions), host_archs=tuple(archs), builds_cuda=builds)


def _pyproject(text: str, data: Mapping[str, Any]) -> BuildScript:
    """``data`` is the shared parse of ``text`` (empty when it does not parse: the format check's CU007)."""
    tool = data.get("tool", {}) if isinstance(data.get("tool"), dict) else {}
    archs: list[HostArch] = []

    def strings(value, key=""):
        if isinstance(value, dict):
            for k, v in value.items():
                yield from strings(v, str(k))
        elif isinstance(value, list):
            for v in value:
                yield from strings(v, key)
        elif isinstance(value, str):
            yield key, value

    for section in ("scikit-build", "meson-python", "hatch", "cibuildwheel", "setuptools"):
        for key, value in strings(tool.get(section, {})):
            hit = (re.search(r"ARCH", key, re.I) and value.strip().lower() in ("native", "all-major-native", "auto")) \
                or _CMAKE_NATIVE.search(value) or _NATIVE_ARCH.search(value) or re.search(r"arch\w*=native", value, re.I)
            if hit:
                needle = value if value in text else key
                idx = text.find(needle)
                line, col = _line_of(text, max(idx, 0))
                label = f"{key or 'value'} = {value}" if not _NATIVE_ARCH.search(value) else _NATIVE_ARCH.search(value).group(1)
                archs.append(HostArch(label, value, Span(line, col, line, col + len(needle)), ("CMAKE_CUDA_ARCHITECTURES",)))
    hooks = []
    hatch = tool.get("hatch", {}) if isinstance(tool.get("hatch"), dict) else {}
    for where in (hatch.get("build", {}), hatch.get("build", {}).get("targets", {}).get("wheel", {}) if isinstance(hatch.get("build"), dict) else {}):
        if isinstance(where, dict) and isinstance(where.get("hooks"), dict):
            custom = where["hooks"].get("custom")
            if isinstance(custom, dict):
                hooks.append(str(custom.get("path", "hatch_build.py")))
    return BuildScript("pyproject", host_archs=tuple(archs), hooks=tuple(hooks))


def _meson(text: str) -> BuildScript:
    archs = []
    for m in re.finditer(r"nvcc_arch_flags\s*\([^)]*['\"](Auto|native)['\"]", text, re.I | re.S):
        line, col = _line_of(text, m.start())
        archs.append(HostArch(f"nvcc_arch_flags('{m.group(1)}')", m.group(0), Span(line, col, *_line_of(text, m.end()))))
    archs += _regex_archs(text, False)
    return BuildScript("meson", host_archs=tuple(archs), builds_cuda="cuda" in text.lower())


def analyse_python(source: str, path: str = "setup.py") -> BuildScript | None:
    """Build facts of a Python build script or helper module's source text (tests)."""
    return python_build_facts(parse_python_text(source, path))


def python_build_facts(module: PythonModule) -> BuildScript | None:
    """Build facts of a parsed Python build script or helper module (never run).

    None when it does not parse: the format check reports that (CU007 for a
    build script such as ``setup.py``, CU006 for a helper module).
    """
    if module.error is not None:
        return None
    # the walks below recurse per level of the tree; a tree that deep gets no automatic fix: libcst
    # takes time quadratic in the depth (1.5 s at 2,900 levels, minutes at 19,000; a crash from
    # about 6,000 on 3.13)
    return deep(lambda: _python_build_facts(module, fixes=True), lambda: _python_build_facts(module, fixes=False))


def _python_build_facts(module: PythonModule, fixes: bool) -> BuildScript:
    b = _PythonBuild(module, fixes)
    b.run()
    functions, variables = b.module_summaries()
    return BuildScript(
        "python",
        decisions=tuple(b.decisions),
        external=tuple(b.external),
        host_archs=tuple(b.host_archs),
        functions=functions,
        variables=variables,
        builds_cuda=bool(b.builds_cuda(b.tree)),
    )


def is_build_python(member: Member) -> bool:
    """Python files of a tree that take part in the build: setup.py and its helpers."""
    if member.kind is MemberKind.BUILD:
        # `build.py` is a common module name (cuaudit's own facts/build.py): only at the top
        # or in a helper folder is it a build script; setup.py / hatch_build.py are one anywhere
        if member.path.rsplit("/", 1)[-1] == "build.py":
            return "/" not in member.path or bool(_HELPER_DIRS.match(member.path))
        return member.path.endswith(".py")
    if member.kind is not MemberKind.PYTHON or member.size > 2 * 1024 * 1024:
        return False
    return "/" not in member.path or bool(_HELPER_DIRS.match(member.path))


class BuildExtractor(Extractor):
    """Build-script facts: GPU probes deciding CUDA builds, host GPU architectures."""

    name = "build"
    version = 3  # 3: whether a query raises without a GPU, and what guards it

    def applies(self, member: Member) -> bool:
        if member.kind is MemberKind.BUILD and not member.path.endswith(".py"):
            return True
        return is_build_python(member)

    def extract(self, reader: MemberReader) -> BuildScript | None:
        path = reader.path
        base = path.rsplit("/", 1)[-1]
        if base == "setup.cfg" or base in ("meson.options", "meson_options.txt"):
            return None
        if base.endswith(".py"):
            return python_build_facts(reader.python())
        if base == "pyproject.toml":
            doc = reader.toml()
            return _pyproject(doc.text, doc.table)
        text = reader.text(limit=4 * 1024 * 1024)
        if base == "CMakeLists.txt" or base.endswith(".cmake"):
            return _cmake(text)
        if base == "meson.build":
            return _meson(text)
        return None


def iter_probes(script: BuildScript) -> Iterable[Probe]:
    for d in script.decisions:
        yield from d.probes
