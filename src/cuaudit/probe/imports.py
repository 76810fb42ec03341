"""Opt-in probe (``--probe``): does ``import parent; parent.sub`` really raise?

Each parent package is imported in its own fresh interpreter started with
``-I -S -B`` (``-B``: no ``.pyc`` is written into the audited environment): no ``site``, so no ``.pth`` file runs and nothing is imported
before the package.  That matters: a normal start-up imports about a hundred
modules (``importlib.util`` and ``collections.abc`` among them), which hides
exactly the traps we look for.  ``sys.path`` is then set by hand: the
folders the audited code lives in, and the environment's site directories
with the path lines of their ``.pth`` files (read, never executed).

In that interpreter the probe imports ``parent`` and reaches it as user code
does, attribute by attribute from the top-level package (``sympy.series`` is
a function once ``sympy`` has run ``from .series import series``); it answers from
``parent.__dict__`` when it can (no side effect), and otherwise calls
``getattr(parent, sub)`` in a forked child, so that a lazy ``__getattr__``
that imports one submodule cannot make the next answer wrong.  The script
itself imports only built-in modules (``sys``, ``posix``) so that it adds
nothing to ``sys.modules``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from cuaudit.model import ArtifactKind, ProbeRecord
from cuaudit.inputs.process import BoundExceeded, run_bounded

# Only built-in modules here: anything else would pre-import what we test.
_SCRIPT = r"""
import sys
paths = sys.argv[1].split(sys.argv[2]) if sys.argv[1] else []
sys.path[:0] = [p for p in paths if p]
parent = sys.argv[3]
subs = sys.argv[4:]
def say(*parts):
    sys.stdout.write("\t".join(str(p).replace("\t", " ").replace("\n", " ")[:400] for p in parts) + "\n")
    sys.stdout.flush()
try:
    __import__(parent)
    mod = sys.modules[parent.partition(".")[0]]
    # what user code reaches: `import a.b; a.b.c` walks from `a`, and `a.b` may be re-bound
    # to a same-named object (sympy: `from .series import series`)
    for part in parent.split(".")[1:]:
        mod = getattr(mod, part)
except BaseException as e:
    say("PARENT", type(e).__name__, e)
    raise SystemExit(0)
# a module subclass (cryptography's _ModuleWithDeprecations, Pygments' _automodule) answers
# through its class's __getattr__, which its __dict__ does not show: ask it like any object
d = mod.__dict__ if mod is sys.modules.get(parent) and type(mod) is type(sys) else {"__getattr__": None}
try:
    import posix
    fork = posix.fork
except (ImportError, AttributeError):
    posix = None
for sub in subs:
    if sub in d:
        say("OK", sub, "bound")
        continue
    if "__getattr__" not in d:
        say("TRAP", sub, "AttributeError", "module %r has no attribute %r" % (parent, sub))
        continue
    if posix is None:
        try:
            getattr(mod, sub)
            say("OK", sub, "getattr")
        except AttributeError as e:
            say("TRAP", sub, "AttributeError", e)
        except BaseException as e:
            say("ERROR", sub, type(e).__name__, e)
        continue
    r, w = posix.pipe()
    pid = posix.fork()
    if pid == 0:
        posix.close(r)
        try:
            getattr(mod, sub)
            msg = "OK\t%s\tgetattr" % sub
        except AttributeError as e:
            msg = "TRAP\t%s\tAttributeError\t%s" % (sub, str(e).replace("\t", " ").replace("\n", " ")[:400])
        except BaseException as e:
            msg = "ERROR\t%s\t%s\t%s" % (sub, type(e).__name__, str(e).replace("\t", " ").replace("\n", " ")[:400])
        posix.write(w, (msg + "\n").encode("utf-8", "replace"))
        posix._exit(0)
    posix.close(w)
    chunks = []
    while True:
        b = posix.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    posix.close(r)
    posix.waitpid(pid, 0)
    out = b"".join(chunks).decode("utf-8", "replace").strip()
    sys.stdout.write((out or "ERROR\t%s\tCrash\tthe child process died" % sub) + "\n")
    sys.stdout.flush()
"""


@dataclass(frozen=True)
class ProbeResult:
    """What a clean interpreter said about ``parent.sub``.

    status: ``ok`` (the attribute works), ``trap`` (AttributeError),
    ``error`` (another exception, e.g. an honest ImportError for a missing
    library), ``parent-failed`` (``import parent`` itself failed), ``timeout``.
    """

    parent: str
    sub: str
    status: str
    exception: str = ""
    message: str = ""
    how: str = ""  # bound | getattr

    @property
    def text(self) -> str:
        return f"{self.exception}: {self.message}" if self.exception else self.status


@dataclass(frozen=True)
class ProbeRun:
    parent: str
    command: str
    seconds: float
    outcome: str


def probe_submodules(
    python: str, sys_path: Sequence[str], pairs: Mapping[str, Sequence[str]], *, timeout: float = 60.0
) -> tuple[dict[tuple[str, str], ProbeResult], list[ProbeRun]]:
    """Probe every ``parent.sub`` of ``pairs`` (parent -> subs), one fresh interpreter per parent."""
    results: dict[tuple[str, str], ProbeResult] = {}
    runs: list[ProbeRun] = []
    path_arg = os.pathsep.join(sys_path)  # argv cannot hold NUL; PYTHONPATH's separator
    for parent in sorted(pairs):
        subs = sorted(set(pairs[parent]))
        if not subs:
            continue
        cmd = [python, "-I", "-S", "-B", "-c", _SCRIPT, path_arg, os.pathsep, parent, *subs]
        shown = f"{shlex.quote(python)} -I -S -B -c <probe> {parent} {' '.join(subs)}"
        started = time.perf_counter()
        try:
            proc = run_bounded(cmd, timeout=timeout, env=_clean_env())
            out = proc.out
            outcome = f"exit {proc.returncode}"
        except BoundExceeded as exc:  # a hang or a flood: killed with its children
            for s in subs:
                results[(parent, s)] = ProbeResult(parent, s, "timeout", "BoundExceeded", str(exc))
            why = f"timed out after {timeout:g} s" if exc.timed_out else f"stopped: {exc}"
            runs.append(ProbeRun(parent, shown, time.perf_counter() - started, why))
            continue
        except OSError as exc:
            for s in subs:
                results[(parent, s)] = ProbeResult(parent, s, "parent-failed", type(exc).__name__, str(exc))
            runs.append(ProbeRun(parent, shown, time.perf_counter() - started, f"could not start: {exc}"))
            continue
        traps = 0
        for line in out.splitlines():
            parts = line.split("\t")
            tag = parts[0]
            if tag == "PARENT":
                for s in subs:
                    results[(parent, s)] = ProbeResult(parent, s, "parent-failed", parts[1] if len(parts) > 1 else "", parts[2] if len(parts) > 2 else "")
                outcome = f"import {parent} failed: {parts[1] if len(parts) > 1 else '?'}"
                break
            if len(parts) < 3:
                continue
            sub = parts[1]
            if sub not in subs:  # the audited package prints too: only answers to what was asked count
                continue
            if tag == "OK":
                results[(parent, sub)] = ProbeResult(parent, sub, "ok", how=parts[2])
            elif tag == "TRAP":
                traps += 1
                results[(parent, sub)] = ProbeResult(parent, sub, "trap", "AttributeError", parts[3] if len(parts) > 3 else "")
            elif tag == "ERROR":
                results[(parent, sub)] = ProbeResult(parent, sub, "error", parts[2], parts[3] if len(parts) > 3 else "")
        for s in subs:
            if (parent, s) not in results:
                err = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] if proc.stderr else []
                results[(parent, s)] = ProbeResult(parent, s, "parent-failed", "NoAnswer", err[0] if err else outcome)
        if not outcome.startswith("import"):
            outcome = f"{len(subs)} submodules checked, {traps} raise AttributeError"
        runs.append(ProbeRun(parent, shown, time.perf_counter() - started, outcome))
    return results, runs


def _clean_env() -> dict[str, str]:
    """The environment minus Python's own variables (-I ignores them too) and with no GPU surprises."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}


class ProbeTree:
    """The folders a probe puts on ``sys.path`` for a set of artifacts.

    Wheels are unpacked into one temporary folder (only for the probe, and
    removed afterwards), so wheels given together can import each other (a
    cupy wheel and the numpy wheel it needs); trees contribute their import
    roots, installed distributions and an environment their site folders and
    ``.pth`` path lines.
    """

    def __init__(self, artifacts: Iterable, modules_of: Mapping[int, Mapping[str, object]], environment=None) -> None:
        self.artifacts = list(artifacts)
        self.modules_of = modules_of
        self.environment = environment
        self._tmp: str | None = None

    def __enter__(self) -> list[str]:
        from cuaudit.inputs.environment import read_pth_paths
        from cuaudit.inputs import unsafe_member_name

        paths: list[str] = []
        for i, art in enumerate(self.artifacts):
            kind = art.ref.kind
            if kind is ArtifactKind.WHEEL:
                if self._tmp is None:
                    self._tmp = tempfile.mkdtemp(prefix="cuaudit-probe-")
                    paths.insert(0, self._tmp)
                for m in art.members:
                    rel = m.path
                    for prefix in (".data/purelib/", ".data/platlib/"):
                        if prefix in rel and rel.split("/", 1)[0].endswith(".data"):
                            rel = rel.split("/", 2)[2]
                    if unsafe_member_name(rel) or rel.split("/", 1)[0].endswith(".data"):
                        continue
                    dest = os.path.join(self._tmp, *rel.split("/"))
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                    with art.open_member(m.path) as src, open(dest, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
            elif kind in (ArtifactKind.TREE, ArtifactKind.SDIST):
                for root in _tree_roots(art, self.modules_of.get(i, {})):
                    if root not in paths:
                        paths.append(root)
            elif kind is ArtifactKind.INSTALLED:
                if art.ref.path not in paths:
                    paths.append(art.ref.path)
                    paths += [p for p in read_pth_paths(art.ref.path) if p not in paths]
        if self.environment is not None:
            for d in self.environment.sys_path:
                if d not in paths:
                    paths.append(d)
        return paths

    def __exit__(self, *exc) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)


def _tree_roots(art, modules: Mapping[str, object]) -> list[str]:
    roots: list[str] = []
    for name, entry in modules.items():
        member = getattr(entry, "member", None)
        if not member or getattr(entry, "kind", "") not in ("package", "module"):
            continue
        suffix = name.replace(".", "/") + ("/__init__.py" if entry.kind == "package" else ".py")
        if member.endswith(suffix):
            base = member[: len(member) - len(suffix)].rstrip("/")
            root = os.path.join(art.ref.path, *base.split("/")) if base else art.ref.path
            if root not in roots:
                roots.append(root)
    return roots


def default_python(environment=None) -> str:
    return environment.python if environment is not None else sys.executable


def probe_request(
    *, timeout: float, artifacts: Sequence, modules_of: Mapping[int, Mapping[str, object]], environment,
    pairs: Mapping[str, Sequence[str]], stdlib_only: bool = False,
) -> tuple[dict[tuple[str, str], ProbeResult], list[ProbeRecord]]:
    """The ``imports`` probe (through :class:`cuaudit.probe.Prober`): every ``parent.sub`` of ``pairs``.

    ``stdlib_only``: every parent is a standard-library module, so no audited
    artifact is put on the path (no wheel is unpacked).
    """
    python = default_python(environment)
    with ProbeTree([] if stdlib_only else artifacts, modules_of, None if stdlib_only else environment) as sys_path:
        results, runs = probe_submodules(python, sys_path, pairs, timeout=timeout)
    records = [ProbeRecord(what=f"import {r.parent}; {r.parent}.<submodule>", command=r.command,
                           seconds=round(r.seconds, 3), outcome=r.outcome) for r in runs]
    return results, records
