"""The pipeline's layering, checked on the source (``ast``, nothing imported).

Stages, lowest first: model < config < inputs < formats < facts < analysis <
context < rules < finish < engine < report < commands < cli.  A module may
import its own stage or a lower one, never a higher one, and no module may
reach itself through imports (an import circle).  Function-local imports
count like top-level ones: they are still arrows of the design.  Imports
under ``if TYPE_CHECKING:`` are exempt (annotations only, never executed).

Modules outside the named stages have a place too: ``compat``, ``discovery``,
``escape``, ``heap``, ``progress``, ``codecache`` and ``store`` are utilities with no cuaudit dependency (bottom); ``baseline`` is
part of the finishing step; ``time_budget`` sits with ``inputs`` (whose budgets it reads); ``probe`` sits beside the engine (the engine owns
it), and so do the engine's own parts, ``extraction``, ``workers``, ``rule_run`` and ``evidence_inputs``; ``trace``, ``repair``, ``explain`` and ``survey`` beside ``report`` (commands
use them).  The
package root ``cuaudit/__init__.py`` is the library facade: everyone may read
``cuaudit.__version__`` from it, and its own lazy import of the engine is the
public ``cuaudit.audit``; it is left out of both checks.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "cuaudit"

STAGES = ["model", "config", "inputs", "formats", "facts", "analysis", "context", "rules", "finish", "engine",
          "report", "commands", "cli"]
PLACE = {name: float(i) for i, name in enumerate(STAGES)}
PLACE.update({"heap": -1, "forked": -1, "codecache": -1, "compat": -1, "discovery": -1, "store": -1, "data": -1, "progress": -1, "escape": -1, "requirement": -1, "names": -1, "baseline": PLACE["finish"], "probe": PLACE["engine"], "snapshot": PLACE["engine"],
              "time_budget": PLACE["inputs"], "extraction": PLACE["engine"], "workers": PLACE["engine"], "rule_run": PLACE["engine"],
              "evidence_inputs": PLACE["engine"],
              "trace": PLACE["report"], "repair": PLACE["report"], "explain": PLACE["report"], "survey": PLACE["report"],
              "__main__": PLACE["cli"]})


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = ("cuaudit",) + path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skip


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """cuaudit modules imported anywhere in the file (function bodies included, TYPE_CHECKING not)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skip = _type_checking_nodes(tree)
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "cuaudit"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != "cuaudit":
                continue
            for alias in node.names:  # `from cuaudit import facts` imports the module cuaudit.facts
                out.add(f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module)
    out.discard(name)
    return out


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: _imports(name, path, known) for name, path in known.items() if name != "cuaudit"}


def _place(module: str) -> float:
    return PLACE[module.split(".")[1]]


def test_every_module_has_a_stage():
    assert [m for m in _graph() if m.split(".")[1] not in PLACE] == []


def test_no_module_imports_a_higher_stage():
    upward = sorted(
        f"{m} ({m.split('.')[1]}) imports {d} ({d.split('.')[1]})"
        for m, deps in _graph().items() for d in deps
        if d != "cuaudit" and _place(d) > _place(m)
    )
    assert upward == []


#: Circles tolerated for now (none: the inputs' Artifact base moved to ``inputs/artifact.py``
#: and the Cython readers sit on one binary image; keep it empty).
KNOWN_CIRCLES: list[list[str]] = []


def test_no_import_circles():
    graph = {m: {d for d in deps if d != "cuaudit"} for m, deps in _graph().items()}
    # Tarjan's strongly connected components: any component of two or more modules is a circle
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    known = [set(c) for c in KNOWN_CIRCLES]
    assert [c for c in circles if not any(set(c) <= k for k in known)] == []


def test_the_layering_checker_sees_function_local_and_relative_imports(tmp_path):
    """The checks above would pass vacuously if the parser missed imports: pin what it finds."""
    graph = _graph()
    assert "cuaudit.engine" in graph["cuaudit.commands.check"] or "cuaudit.engine" in graph["cuaudit.commands._common"]
    # a function-local import (facts/__init__.py reads formats lazily)
    assert "cuaudit.formats.python" in graph["cuaudit.facts"]
    # a TYPE_CHECKING import is exempt (context.py annotates with inputs.Artifact)
    assert "cuaudit.inputs" not in graph["cuaudit.context"]


RULES_MAY_NOT = re.compile(r"open\(|FactStore|subprocess|sqlite")


def test_rules_open_no_file_store_or_process():
    """Rules see only facts: the check anyone can run is
    ``grep -rnE --include='*.py' "open\\(|FactStore|subprocess|sqlite" src/cuaudit/rules/`` and it finds nothing."""
    hits = [f"{p.relative_to(SRC)}:{i}: {line.strip()}"
            for p in sorted((SRC / "rules").rglob("*.py"))
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if RULES_MAY_NOT.search(line)]
    assert hits == []
    grep = subprocess.run(["grep", "-rnE", "--include=*.py", RULES_MAY_NOT.pattern, str(SRC / "rules")],
                          capture_output=True, text=True)
    assert grep.returncode == 1 and grep.stdout == ""


#: Where a process may be started: the one bounded runner (process group, deadline, output cap),
#: and the extraction's worker pool (forks of cuaudit itself, running cuaudit's code on members).
PROCESS_STARTERS = {"inputs/process.py": "the bounded runner", "extraction.py": "multiprocessing worker pool",
                    "forked.py": "a fork of the audit itself, which runs no program (rule_run.RuleRun)"}
_PROCESS_MODULES = {"subprocess", "multiprocessing", "pty", "concurrent.futures.process"}
_OS_CALLS = re.compile(r"^(system|popen|fork|forkpty|exec\w*|spawn\w*|posix_spawnp?)$")


def _process_starts(path: Path, root: Path = SRC) -> list[str]:
    """Imports of process-starting modules, ``os.system``/``exec*``/``spawn*``/``fork`` and
    ``asyncio.create_subprocess_*`` in one file (names in strings, as ``facts/build.py`` matches, do not count)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    hits = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            if node.module == "os":
                names += [f"os.{a.name}" for a in node.names if _OS_CALLS.match(a.name)]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id == "os" and _OS_CALLS.match(node.attr)) or node.attr.startswith("create_subprocess"):
                names = [f"{node.value.id}.{node.attr}"]
        for n in names:
            if n in _PROCESS_MODULES or n.startswith("os.") or "create_subprocess" in n or n == "concurrent.futures.ProcessPoolExecutor":
                hits.append(f"{path.relative_to(root)}:{node.lineno}: {n}")
    return hits


def test_only_the_bounded_runner_starts_processes():
    """Every program cuaudit starts goes through ``inputs/process.run_bounded`` (issue 13): a raw
    ``subprocess`` call elsewhere would have no process group, deadline or output cap."""
    hits = [h for p in sorted(SRC.rglob("*.py")) if str(p.relative_to(SRC)) not in PROCESS_STARTERS
            for h in _process_starts(p)]
    assert hits == []
    # the checker sees what it must: the runner's own subprocess, the engine's pool
    assert any(h.endswith(": subprocess") for h in _process_starts(SRC / "inputs" / "process.py"))
    assert any("multiprocessing" in h for h in _process_starts(SRC / "extraction.py"))


def test_the_process_checker_finds_each_way_to_start_one(tmp_path):
    probe = tmp_path / "starts.py"
    code = ("import subprocess\nimport multiprocessing as mp\nfrom os import execv\nimport os\nimport asyncio\n"
            "os.system('x')\nos.posix_spawn('x', [], {})\nasyncio.create_subprocess_exec('x')\n"
            "from concurrent.futures import ProcessPoolExecutor\nbuild = 'subprocess.run'\n")
    probe.write_text(code)
    found = {h.split(": ", 1)[1] for h in _process_starts(probe, tmp_path)}
    assert found == {"subprocess", "multiprocessing", "os.execv", "os.system", "os.posix_spawn",
                     "asyncio.create_subprocess_exec", "concurrent.futures.ProcessPoolExecutor"}
