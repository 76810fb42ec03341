#!/usr/bin/env python3
"""Accuracy of the submodule-trap verdicts (CU101/CU102) against the runtime.

    python benchmarks/accuracy.py setup                  # the pinned venv (PyPI, exact pins)
    python benchmarks/accuracy.py run --set tune         # the set the model was tuned on
    python benchmarks/accuracy.py run --set heldout      # a second set (read once while tuning)
    python benchmarks/accuracy.py run --set fresh        # never looked at while tuning (its own venv)
    python benchmarks/accuracy.py run --write-results    # both, and a section of RESULTS.md
    python benchmarks/accuracy.py code                   # user scripts: cuaudit vs pyright, ty, mypy
    python benchmarks/accuracy.py --quick                # fixture packages built here (CI)
    python benchmarks/accuracy.py env --python PY        # every distribution of another environment
    python benchmarks/accuracy.py claims --python PY --report env.json   # CU201/CU203 vs real loads

Static side: the environment is audited as cuaudit audits it (its
distributions read from disk, never imported) and every public
``parent.sub`` pair of the chosen distributions gets the model's verdict:
``trap`` (CU101), ``getattr-trap`` (CU102), works, or ``unknown``
(an abstention).  Runtime side: :mod:`cuaudit.probe.imports` — a fresh
``python -I -S -B`` per parent that imports it and then asks for each
submodule in its own forked child, so every answer is that of a fresh
``import parent; parent.sub`` (one process per probe) with a timeout.
The runtime decides a pair when it answers ``ok`` or ``AttributeError``;
pairs whose parent does not import, or whose access raises something else,
are left out and counted.

Precision = traps claimed that the runtime confirms / traps claimed;
recall = runtime traps claimed / runtime traps (an abstention on a runtime
trap is a miss); abstentions are counted apart.  Probe results are cached in
``~/.cache/cuaudit/accuracy-probes-<pins hash>.json`` (they depend only on the
installed set).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO / "src"))

CACHE = Path(os.environ.get("CUAUDIT_ACCURACY_CACHE", Path.home() / ".cache" / "cuaudit"))
VENV = CACHE / "accuracy-venv"
PINS = BENCH / "accuracy_pins.txt"
RESULTS = BENCH / "RESULTS.md"

#: the distributions whose pairs are scored (PyPI names, normalised); the pins file installs them
TUNE = (
    "numpy scipy pandas matplotlib sympy pydantic sqlalchemy pygments anyio setuptools requests urllib3 click "
    "jinja2 attrs packaging pyyaml python-dateutil rich networkx pillow scikit-learn numba llvmlite pyarrow h5py "
    "lxml cryptography httpx fastapi starlette tqdm psutil toolz more-itertools fsspec docutils babel pytest "
    "tornado xarray statsmodels seaborn dask cloudpickle msgpack protobuf fonttools contourpy mpmath "
    "pydantic-core charset-normalizer idna certifi"
).split()
#: a second set installed with the first; its mistakes were read once, half-way through tuning
HELDOUT = "astropy scikit-image shapely botocore aiohttp sphinx openpyxl nltk numexpr yarl multidict".split()
#: never looked at while tuning: installed in its own venv and measured once, at the end
FRESH = "ipython traitlets prompt-toolkit zarr numcodecs imageio tifffile pywavelets regex tabulate jsonschema pendulum marshmallow".split()


def norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


# -- verdicts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    dist: str
    parent: str
    sub: str
    static: str  # trap | getattr-trap | works | unknown
    detail: str
    runtime: str = ""  # ok | trap | error | parent-failed | timeout
    runtime_text: str = ""


def static_verdicts(python: str | None, paths: Iterable[str] = (), dists: Iterable[str] | None = None) -> dict[tuple[str, str], Pair]:
    """The model's verdict for every public pair of the chosen distributions (or of ``paths``)."""
    from cuaudit.analysis.module_tree import build_universe, public_submodules
    from cuaudit.config import Config
    from cuaudit.engine import gather

    config = Config(cache=True)
    g = gather(list(paths), env=python or False, config=config, extractors={"python_source", "extension_strings", "import_time"})
    index = {id(a): i for i, a in enumerate(g.artifacts)}
    facts = g.extraction.facts

    def facts_for(art, member: str, extractor: str):
        return facts.get((index[id(art)], member, extractor))

    uni, per = build_universe(g.artifacts, facts_for, g.environment)
    wanted = {norm(d) for d in dists} if dists is not None else None
    out: dict[tuple[str, str], Pair] = {}
    for i, art in enumerate(g.artifacts):
        dist = norm(art.ref.name or Path(art.ref.path).name)
        if wanted is not None and dist not in wanted:
            continue
        for parent, sub in public_submodules(uni, per.get(i, {})):
            r = uni.reach(parent, sub, uni.closure([parent]))
            status = r.status if r.is_trap or r.status == "unknown" else "works"
            out[(parent, sub)] = Pair(dist, parent, sub, status, r.detail)
    g.extraction.store.close()
    return out


def runtime_verdicts(python: str, sys_path: list[str], pairs: Iterable[tuple[str, str]], *, timeout: float = 120.0,
                     cache: Path | None = None) -> dict[tuple[str, str], tuple[str, str]]:
    """(status, text) of a fresh ``import parent; parent.sub`` for every pair (cached by ``cache``)."""
    from cuaudit.probe.imports import probe_submodules

    known: dict[str, list[str]] = {}
    if cache is not None and cache.exists():
        known = json.loads(cache.read_text())
    out = {tuple(k.split("\t")): tuple(v) for k, v in known.items()}
    todo: dict[str, list[str]] = {}
    for parent, sub in pairs:
        if (parent, sub) not in out:
            todo.setdefault(parent, []).append(sub)
    if todo:
        results, _runs = probe_submodules(python, sys_path, todo, timeout=timeout)
        for (parent, sub), r in results.items():
            out[(parent, sub)] = (r.status, r.text)
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps({f"{p}\t{s}": list(v) for (p, s), v in sorted(out.items())}, indent=0))
    return out


def join(static: Mapping[tuple[str, str], Pair], runtime: Mapping[tuple[str, str], tuple[str, str]]) -> list[Pair]:
    return [Pair(p.dist, p.parent, p.sub, p.static, p.detail, *runtime.get(k, ("missing", ""))) for k, p in sorted(static.items())]


# -- scores ---------------------------------------------------------------------------------


@dataclass
class Score:
    pairs: int = 0
    decided: int = 0  # the runtime answered ok or AttributeError
    runtime_traps: int = 0
    claimed: int = 0  # static traps on decided pairs
    true_claims: int = 0
    abstained: int = 0  # static unknown on decided pairs
    abstained_traps: int = 0
    undecided: int = 0
    per_rule: dict[str, list[int]] = field(default_factory=dict)  # rule -> [claimed, confirmed]
    false_claims: list[Pair] = field(default_factory=list)
    misses: list[Pair] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.true_claims / self.claimed if self.claimed else 1.0

    @property
    def recall(self) -> float:
        return self.true_claims / self.runtime_traps if self.runtime_traps else 1.0


RULE = {"trap": "CU101", "getattr-trap": "CU102"}


def score(pairs: Iterable[Pair]) -> Score:
    s = Score()
    for p in pairs:
        s.pairs += 1
        if p.runtime not in ("ok", "trap"):
            s.undecided += 1
            continue
        s.decided += 1
        real = p.runtime == "trap"
        s.runtime_traps += real
        if p.static in RULE:
            s.claimed += 1
            s.true_claims += real
            row = s.per_rule.setdefault(RULE[p.static], [0, 0])
            row[0] += 1
            row[1] += real
            if not real:
                s.false_claims.append(p)
        elif p.static == "unknown":
            s.abstained += 1
            s.abstained_traps += real
            if real:
                s.misses.append(p)
        elif real:
            s.misses.append(p)
    return s


def render(name: str, s: Score, *, dists: int) -> list[str]:
    lines = [
        f"| {name} | {dists} | {s.pairs} | {s.decided} | {s.runtime_traps} | {s.claimed} | {s.true_claims} | "
        f"{s.precision:.4f} | {s.recall:.4f} | {s.abstained} ({s.abstained_traps} traps) | {s.undecided} |"
    ]
    return lines


HEADER = ("| set | distributions | public pairs | decided by the runtime | runtime traps | claimed | confirmed | "
          "precision | recall | abstentions | undecided |\n|---|---|---|---|---|---|---|---|---|---|---|")


def per_rule_lines(s: Score) -> list[str]:
    return [f"  - {rule}: {c} claimed, {ok} confirmed (precision {ok / c:.4f})" for rule, (c, ok) in sorted(s.per_rule.items()) if c]


def mistakes(s: Score, limit: int) -> list[str]:
    out = []
    for p in s.false_claims[:limit]:
        out.append(f"FALSE {p.parent}.{p.sub} [{p.dist}] static={p.static}: {p.detail}")
    for p in s.misses[:limit]:
        out.append(f"MISS  {p.parent}.{p.sub} [{p.dist}] static={p.static}: {p.detail} | runtime: {p.runtime_text}")
    return out


# -- the pinned environment -----------------------------------------------------------------


#: set -> (venv, pins file, distributions)
SETS = {
    "tune": (VENV, PINS, TUNE),
    "heldout": (VENV, PINS, HELDOUT),
    "fresh": (CACHE / "accuracy-venv-fresh", BENCH / "accuracy_pins_fresh.txt", FRESH),
}


def venv_python(name: str = "tune") -> str:
    return str(SETS[name][0] / "bin" / "python")


def pins(name: str = "tune") -> list[str]:
    return [ln.strip() for ln in SETS[name][1].read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def pins_hash(name: str = "tune") -> str:
    return hashlib.sha256("\n".join(sorted(pins(name))).encode()).hexdigest()[:12]


def setup(names: list[str]) -> int:
    rc = 0
    for name in names:
        venv = SETS[name][0]
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        rc |= subprocess.run([venv_python(name), "-m", "pip", "install", "-q", "--no-deps", *pins(name)]).returncode
    return rc


def env_sys_path(python: str) -> list[str]:
    from cuaudit.inputs.environment import load_environment

    # this checkout's src/ leaks in through PYTHONPATH when the benchmark itself runs from it
    return [p for p in load_environment(python).info.sys_path if not p.startswith(str(REPO))]


def run_sets(sets: list[str], *, limit: int, timeout: float) -> dict[str, tuple[Score, int]]:
    by_venv: dict[Path, list[str]] = {}
    for name in sets:
        by_venv.setdefault(SETS[name][0], []).append(name)
    joined: dict[str, list[Pair]] = {}
    static: dict[tuple[str, str], Pair] = {}
    for names in by_venv.values():
        python = venv_python(names[0])
        started = time.perf_counter()
        found = static_verdicts(python, dists=[d for name in names for d in SETS[name][2]])
        print(f"static verdicts ({', '.join(names)}): {len(found)} pairs in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        runtime = runtime_verdicts(python, env_sys_path(python), found, timeout=timeout,
                                   cache=CACHE / f"accuracy-probes-{pins_hash(names[0])}.json")
        for name in names:
            joined[name] = join(found, runtime)
        static.update(found)
    out = {}
    for name in sets:
        wanted = {norm(d) for d in SETS[name][2]}
        s = score(p for p in joined[name] if p.dist in wanted)
        out[name] = (s, len({p.dist for p in joined[name] if p.dist in wanted}))
        if name == sets[0]:
            print(HEADER)
        print("\n".join(render(name, s, dists=out[name][1])))
        print("\n".join(per_rule_lines(s)))
        for line in mistakes(s, limit):
            print("   ", line)
    return out


# -- the quick mode: fixture packages whose runtime answer is known -----------------------

#: one package per cause the issue lists; each is imported for real by the probe
QUICK_TREE = {
    # plain trap and plain binding
    "plain/__init__.py": "from . import bound\n",
    "plain/bound.py": "",
    "plain/loose.py": "",
    # Pygments' lexers: the module replaces itself in sys.modules with an object copying its __dict__
    "swap/__init__.py": textwrap.dedent("""
        import sys, types
        from . import kept
        class _Mod(types.ModuleType):
            def __getattr__(self, name):
                if name in _TABLE:
                    return 1
                raise AttributeError(name)
        _TABLE = {"Lexer": 1}
        old = sys.modules[__name__]
        new = sys.modules[__name__] = _Mod(__name__)
        new.__dict__.update(old.__dict__)
        """),
    "swap/kept.py": "",
    "swap/missing.py": "",
    # pydantic: __getattr__ looks the name up in a table, then falls back to a raising function
    "table/__init__.py": textwrap.dedent("""
        _dynamic_imports = {"Model": (__spec__.parent, ".main"), "served": (__spec__.parent, ".served")}
        def __getattr__(attr_name):
            dynamic_attr = _dynamic_imports.get(attr_name)
            if dynamic_attr is None:
                return _getattr_migration(attr_name)
            from importlib import import_module
            package, module_name = dynamic_attr
            if module_name == "__module__":
                return import_module(f".{attr_name}", package=package)
            return import_module(module_name, package=package)
        def _getattr_migration(name):
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        """),
    "table/main.py": "Model = 1\n",
    "table/served.py": "",
    "table/hidden.py": "",
    # sympy: the submodule's name is re-bound to a function of the same name
    "shadow/__init__.py": "from .series import series\n",
    "shadow/series/__init__.py": "from .impl import series\n",
    "shadow/series/impl.py": "def series(): pass\n",
    "shadow/series/gruntz.py": "",
    # anyio: a branch that cannot run, and a static constant
    "branch/__init__.py": textwrap.dedent("""
        from typing import TYPE_CHECKING
        ENABLED = False
        if TYPE_CHECKING:
            from . import typed
        if ENABLED:
            from . import flagged
        try:
            from . import real
        except ImportError:
            from . import fallback
        """),
    "branch/typed.py": "",
    "branch/flagged.py": "",
    "branch/real.py": "",
    "branch/fallback.py": "",
    # setuptools: a function called at module level imports the submodule
    "called/__init__.py": textwrap.dedent("""
        def _setup():
            from . import helper
        _setup()
        def _unused():
            from . import never
        """),
    "called/helper.py": "",
    "called/never.py": "",
    # sqlalchemy: a registry told at module level which modules to preload
    "registry/__init__.py": textwrap.dedent("""
        import importlib
        class _Preloaded:
            def __init__(self):
                self.names = set()
            def preload_module(self, *deps):
                self.names.update(deps)
                return lambda fn: fn
            def import_prefix(self, prefix):
                for name in sorted(self.names):
                    if name.startswith(prefix):
                        importlib.import_module(name)
        preloaded = _Preloaded()
        @preloaded.preload_module("registry.alpha")
        def uses_alpha():
            pass
        preloaded.import_prefix("registry")
        """),
    "registry/alpha.py": "",
    "registry/beta.py": "",
}


def quick(limit: int = 20) -> Score:
    """The quick mode: fixture packages written here, judged statically and probed with this interpreter."""
    with tempfile.TemporaryDirectory(prefix="cuaudit-accuracy-") as tmp:
        for rel, text in QUICK_TREE.items():
            path = Path(tmp, rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        static = static_verdicts(None, [tmp])
        runtime = runtime_verdicts(sys.executable, [tmp], static, timeout=60)
    s = score(join(static, runtime))
    print(HEADER)
    print("\n".join(render("quick (fixtures)", s, dists=len({k[0].split('.')[0] for k in static}))))
    print("\n".join(per_rule_lines(s)))
    for line in mistakes(s, limit):
        print("   ", line)
    return s


# -- loader claims (CU201, CU203) against real loads --------------------------------------

_LOAD = "import ctypes, sys\ntry:\n    ctypes.CDLL(sys.argv[1])\nexcept OSError as e:\n    print('LOADFAIL', e)\n"


def _load(python: str, path: str, env: dict, timeout: float) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run([python, "-I", "-c", _LOAD, path], capture_output=True, text=True, env=env,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None


def check_loader_claims(python: str, report: dict, *, timeout: float = 60.0, limit: int = 50) -> list[str]:
    """CU201 claims against ``LD_BIND_NOW=1 LD_DEBUG=bindings`` of a real load; CU203 against a real load.

    CU201 "F needs L but binds none of its symbols" is confirmed when the loader binds no symbol
    of F to L; CU203 "L is not found for F" is confirmed when ``ctypes.CDLL(F)`` fails naming L.
    A file whose load fails for another reason leaves its claims undecided.
    """
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LD_", "PYTHON"))}
    counts: dict[str, list[int]] = {"CU201": [0, 0, 0], "CU203": [0, 0, 0]}  # confirmed, refuted, undecided
    wrong: list[str] = []
    by_file: dict[str, list[dict]] = {}
    for f in report.get("findings", ()):
        if f["code"] in counts and f["location"].get("member"):
            path = os.path.join(f["location"]["artifact"]["path"], f["location"]["member"])
            by_file.setdefault(path, []).append(f)
    for path, claims in sorted(by_file.items()):
        bind = _load(python, path, {**base, "LD_BIND_NOW": "1", "LD_DEBUG": "bindings"}, timeout)
        failed = bind is None or "LOADFAIL" in bind.stdout
        bound_to: set[str] = set()
        if bind is not None:
            real = os.path.realpath(path)
            for line in bind.stderr.splitlines():
                if "binding file " not in line or " to " not in line:
                    continue
                src, _, rest = line.split("binding file ", 1)[1].partition(" to ")
                if os.path.realpath(src.split(" [")[0]) == real:
                    bound_to.add(os.path.basename(os.path.realpath(rest.split(" [")[0])))
        for f in claims:
            lib = f["evidence"].get("library") or f["location"].get("symbol") or ""
            code = f["code"]
            if code == "CU201":
                if failed:
                    counts[code][2] += 1
                    continue
                lib_real = _loaded_as(bind.stderr, lib)
                used = lib_real in bound_to or lib in bound_to
                counts[code][0 if not used else 1] += 1
                if used:
                    wrong.append(f"CU201 REFUTED {path}: the loader binds symbols of {lib}")
            else:
                if bind is None:
                    counts[code][2] += 1
                elif "LOADFAIL" in bind.stdout and lib in bind.stdout:
                    counts[code][0] += 1
                elif "LOADFAIL" in bind.stdout:
                    counts[code][2] += 1
                else:
                    counts[code][1] += 1
                    wrong.append(f"CU203 REFUTED {path}: loads on its own, {lib} found")
    lines = [f"{code}: {c} confirmed, {r} refuted, {u} undecided (load failed)" for code, (c, r, u) in counts.items()]
    return lines + wrong[:limit]


def _loaded_as(ld_debug: str, soname: str) -> str:
    """The file name the loader used for ``soname`` (bindings name files by path)."""
    for line in ld_debug.splitlines():
        if f" to " in line and soname in line:
            target = line.split(" to ", 1)[1].split(" [")[0]
            if os.path.basename(target).startswith(soname.split(".so")[0]):
                return os.path.basename(os.path.realpath(target))
    return soname


def run_env(python: str, *, limit: int, timeout: float, dists: list[str] | None = None,
            cache: Path | None = None) -> Score:
    """CU101/CU102 on the distributions of another environment (the GPU machine's): all of
    them, or only ``dists``; the runtime answers are kept in ``cache`` as they come."""
    static = static_verdicts(python, dists=dists)
    parents = len({p for p, _ in static})
    print(f"static verdicts: {len(static)} pairs under {parents} parents; probing", file=sys.stderr, flush=True)
    runtime = runtime_verdicts(python, env_sys_path(python), static, timeout=timeout, cache=cache)
    s = score(join(static, runtime))
    print(HEADER)
    print("\n".join(render(f"environment {python}", s, dists=len({p.dist for p in static.values()}))))
    print("\n".join(per_rule_lines(s)))
    for line in mistakes(s, limit):
        print("   ", line)
    return s


# -- RESULTS.md -----------------------------------------------------------------------------


def write_results(scores: dict[str, tuple[Score, int]], note: str) -> None:
    begin, end = "<!-- BEGIN GENERATED: accuracy -->", "<!-- END GENERATED: accuracy -->"
    lines = [
        begin,
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}; python {platform.python_version()}; pins "
        f"{pins_hash()} (`benchmarks/accuracy_pins.txt`), {pins_hash('fresh')} (`benchmarks/accuracy_pins_fresh.txt`)",
        f"- note: {note}" if note else "",
        "",
        HEADER,
    ]
    for name, (s, n) in scores.items():
        lines += render(name, s, dists=n)
    lines.append("")
    for name, (s, _n) in scores.items():
        lines.append(f"- {name}: " + "; ".join(f"{r} {c} claimed / {ok} confirmed" for r, (c, ok) in sorted(s.per_rule.items())))
    lines.append(end)
    block = "\n".join(ln for ln in lines if ln is not None)
    text = RESULTS.read_text()
    if begin in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text += "\n## Accuracy: submodule traps against the runtime (issue 12)\n\n" + "Reproduce: `python benchmarks/accuracy.py setup && python benchmarks/accuracy.py run --write-results`.\n\n" + block + "\n"
    RESULTS.write_text(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", nargs="?", default="run", choices=("setup", "run", "code", "env", "claims"))
    p.add_argument("--python", help="env/claims: the interpreter of the environment")
    p.add_argument("--report", help="claims: a `cuaudit env --format json` report of that environment")
    p.add_argument("--quick", action="store_true", help="fixture packages only (CI)")
    p.add_argument("--set", action="append", choices=tuple(SETS), help="default: all three")
    p.add_argument("--limit", type=int, default=40, help="mistakes listed per set")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per probed parent")
    p.add_argument("--write-results", action="store_true")
    p.add_argument("--note", default="")
    p.add_argument("--dist", action="append", help="env: only this distribution (repeatable)")
    p.add_argument("--probe-cache", type=Path, help="env: keep the runtime answers in this JSON file")
    args = p.parse_args(argv)
    if args.quick:
        s = quick(args.limit)
        return 0 if not s.false_claims and not s.misses else 1
    if args.command == "setup":
        return setup(args.set or list(SETS))
    if args.command == "env":
        run_env(args.python or sys.executable, limit=args.limit, timeout=args.timeout, dists=args.dist,
                cache=args.probe_cache)
        return 0
    if args.command == "claims":
        report = json.loads(Path(args.report).read_text())
        print("\n".join(check_loader_claims(args.python or sys.executable, report, limit=args.limit)))
        return 0
    if args.command == "code":
        from accuracy_code import main as code_main

        return code_main(venv_python())
    scores = run_sets(args.set or list(SETS), limit=args.limit, timeout=args.timeout)
    if args.write_results:
        write_results(scores, args.note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
