"""The measuring machinery of ``benchmarks/run.py``: cases as data, inputs that
fetch or build themselves once, subprocess timing with the child's peak memory,
and the tables.

A case is one :class:`Case` entry in ``cases.py``: its inputs, the cuaudit
command, the peer commands (the tools users run today) and the physical floor.
Every command is a separate process, run the same way: the harness starts it,
waits for it with ``os.wait4`` (which gives the child's ``ru_maxrss``, covering
the largest process of its tree) and, from a sampler thread, sums the
proportional set size of the whole process tree (cuaudit extracts facts in
worker processes, so the largest single process alone would flatter it).
Commands of one case alternate, in an order rotated every repetition, so that
machine noise and cache warmth hit all of them alike.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
FETCH_SCRIPT = REPO / "scripts" / "fetch_corpus.py"
PY = sys.executable


def corpus_python() -> str:
    """A CPython 3.11 to build environments from the corpus wheels (they are cp311 builds),
    whatever Python runs the harness (the test suite runs on 3.10 to 3.13)."""
    if sys.version_info[:2] == (3, 11):
        return PY
    import glob

    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    for cand in [shutil.which("python3.11"), *sorted(glob.glob(os.path.join(root, "versions", "3.11.*", "bin", "python3.11")))]:
        if cand and subprocess.run([cand, "-c", "import sys; assert sys.version_info[:2] == (3, 11)"],
                                   capture_output=True).returncode == 0:
            return cand
    raise NotAvailable("the corpus wheels are cp311 builds and no CPython 3.11 was found to install them")


def corpus_dir() -> Path:
    return Path(os.environ.get("CUAUDIT_CORPUS") or Path.home() / ".cache" / "cuaudit" / "corpus")


def cache_dir() -> Path:
    """Where extracted members and built environments are kept between runs."""
    return Path(os.environ.get("CUAUDIT_BENCH_CACHE") or Path.home() / ".cache" / "cuaudit" / "bench")


class NotAvailable(Exception):
    """An input or a tool this run does not have: the row says n/a and why."""


# -- inputs ----------------------------------------------------------------------


class Run:
    """State shared by the inputs of one harness run (fetch once, log once)."""

    def __init__(self, large: bool, log: Callable[[str], None]) -> None:
        self.large = large
        self.log = log
        self.fetched = False
        self.resolved: dict[Any, Any] = {}

    def corpus_file(self, pattern: str) -> Path:
        d = corpus_dir()
        found = sorted(d.glob(pattern))
        if not found and not self.fetched:
            self.fetch()
            found = sorted(d.glob(pattern))
        if not found:
            raise NotAvailable(f"{pattern} is not in the corpus at {d}")
        return found[0]

    def fetch(self) -> None:
        """Run the corpus script (idempotent; only when something is missing)."""
        self.fetched = True
        if not FETCH_SCRIPT.exists():
            self.log(f"corpus script not found at {FETCH_SCRIPT}")
            return
        d = corpus_dir()
        self.log(f"fetching the corpus into {d}{' (--large)' if self.large else ''} ...")
        cmd = [PY, str(FETCH_SCRIPT), str(d)] + (["--large"] if self.large else [])
        proc = subprocess.run(cmd, capture_output=True, text=True)
        self.log((proc.stdout + proc.stderr).strip()[-400:])


class Input:
    """Something a case needs on disk; resolved (fetched, extracted, built) once."""

    def resolve(self, run: Run) -> Any:
        key = (type(self).__name__, repr(self))
        if key not in run.resolved:
            try:
                run.resolved[key] = self._resolve(run)
            except NotAvailable as exc:
                run.resolved[key] = exc
        value = run.resolved[key]
        if isinstance(value, NotAvailable):
            raise value
        return value

    def _resolve(self, run: Run) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def files(self, value: Any) -> list[Path]:
        """The files to warm in the page cache before timing."""
        return [Path(str(value))] if Path(str(value)).is_file() else []


class VenvInput(Input):
    """An input that resolves to a :class:`Venv`: its site-packages are what is warmed."""

    def files(self, value: Any) -> list[Path]:
        return [Path(d) / n for d, _s, names in os.walk(value.site) for n in names]


@dataclass(frozen=True)
class Corpus(Input):
    """A file of the corpus, by glob (``cupy_cuda12x-14.2.0-*.whl``)."""

    pattern: str

    def _resolve(self, run: Run) -> Path:
        return run.corpus_file(self.pattern)


def _extract_root(wheel: Path) -> Path:
    return cache_dir() / "extract" / wheel.name


@dataclass(frozen=True)
class CorpusFiles(Input):
    """Several corpus files; ``"{name}"`` as a whole argument expands to all of them."""

    patterns: tuple[str, ...]

    def _resolve(self, run: Run) -> list[Path]:
        return [run.corpus_file(p) for p in self.patterns]

    def files(self, value: Any) -> list[Path]:
        return list(value)


@dataclass(frozen=True)
class Script(Input):
    """A small program written from source into the cache (tracer workloads)."""

    name: str
    source: str

    def _resolve(self, run: Run) -> Path:
        digest = hashlib.sha256(self.source.encode()).hexdigest()[:12]
        path = cache_dir() / "scripts" / digest / f"{self.name}.py"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.part")
            tmp.write_text(self.source)
            tmp.rename(path)
        return path


@dataclass(frozen=True)
class Member(Input):
    """One member of a corpus wheel, extracted once into the cache."""

    wheel: str
    member: str
    executable: bool = False

    def _resolve(self, run: Run) -> Path:
        whl = run.corpus_file(self.wheel)
        out = _extract_root(whl) / self.member
        if not out.exists():
            run.log(f"extracting {self.member} from {whl.name} ...")
            with zipfile.ZipFile(whl) as zf:
                try:
                    info = zf.getinfo(self.member)
                except KeyError:
                    raise NotAvailable(f"{whl.name} has no member {self.member}") from None
                out.parent.mkdir(parents=True, exist_ok=True)
                tmp = out.with_name(f"{out.name}.{os.getpid()}.part")  # concurrent harness runs
                with zf.open(info) as src, open(tmp, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                tmp.rename(out)
        if self.executable:
            out.chmod(0o755)
        return out


def _unzip_once(run: Run, root: Path, wheels: list[Path], keep: Callable[[str], bool], what: str, *,
                by_wheel: bool) -> None:
    """Extract the members of ``wheels`` whose names ``keep`` takes into ``root`` (a folder per wheel
    with ``by_wheel``), once: into a folder of this process's, renamed into place when whole, so that
    concurrent harness runs never see half of it."""
    if root.exists():
        return
    tmp = root.with_name(f"{root.name}.{os.getpid()}.part")
    for whl in wheels:
        run.log(f"extracting {what} of {whl.name} ...")
        with zipfile.ZipFile(whl) as zf:
            for info in zf.infolist():
                if keep(info.filename) and not info.is_dir():
                    zf.extract(info, tmp / whl.name if by_wheel else tmp)
    try:
        tmp.rename(root)
    except OSError:  # another run finished first
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass(frozen=True)
class Unpacked(Input):
    """One package folder of a corpus wheel, unpacked once into the cache as pip installs it:
    ``cuaudit check`` of an installed package's folder (read as a source tree)."""

    wheel: str
    folder: str

    def _resolve(self, run: Run) -> Path:
        whl = run.corpus_file(self.wheel)
        root = _extract_root(whl) / "unpacked"
        _unzip_once(run, root, [whl], lambda name: name.startswith(f"{self.folder}/"), f"{self.folder}/", by_wheel=False)
        if not (root / self.folder).is_dir():
            raise NotAvailable(f"{whl.name} has no folder {self.folder}/")
        return root / self.folder

    def files(self, value: Any) -> list[Path]:
        return [Path(d) / n for d, _dirs, names in os.walk(value) for n in names]


ELF_NAME = re.compile(r"\.so(\.\d+)*$")


@dataclass(frozen=True)
class ElfMembers(Input):
    """Every ELF member (``*.so``, ``*.so.N``) of corpus wheels, extracted once.

    Resolves to the folder that holds them (the wheel layouts side by side);
    ``value.libdirs`` is the colon-joined list of folders that hold one, for
    ``LD_LIBRARY_PATH``.
    """

    wheels: tuple[str, ...]

    def _resolve(self, run: Run) -> "Tree":
        digest = hashlib.sha256("\n".join(self.wheels).encode()).hexdigest()[:12]
        root = cache_dir() / "elf-members" / digest
        wheels = [run.corpus_file(pattern) for pattern in self.wheels]
        _unzip_once(run, root, wheels, lambda name: bool(ELF_NAME.search(name)), "the ELF members", by_wheel=True)
        paths: list[Path] = []
        for dirpath, _dirs, names in os.walk(root):
            paths += [Path(dirpath) / n for n in names if ELF_NAME.search(n)]
        # the first wheel is the one analysed; the others provide libraries
        return Tree(root / wheels[0].name, sorted(paths))

    def files(self, value: Any) -> list[Path]:
        return list(value.paths)


@dataclass(frozen=True)
class Tree:
    root: Path
    paths: list[Path]

    @property
    def libdirs(self) -> str:
        return ":".join(sorted({str(p.parent) for p in self.paths}))

    def __str__(self) -> str:
        return str(self.root)


@dataclass(frozen=True)
class Venv:
    python: Path
    site: Path

    def __str__(self) -> str:
        return str(self.python)


@dataclass(frozen=True)
class Environment(VenvInput):
    """A virtual environment in the cache with corpus wheels installed
    (``pip install --no-deps --no-index``): what ``cuaudit env`` audits."""

    wheels: tuple[str, ...]

    def _resolve(self, run: Run) -> Venv:
        wheels = [run.corpus_file(p) for p in self.wheels]
        python = corpus_python()
        digest = hashlib.sha256("\n".join([python, *(w.name for w in wheels)]).encode()).hexdigest()[:12]
        root = cache_dir() / "venv" / digest
        if not root.exists():
            # built beside and renamed when complete, under a lock so that
            # concurrent harness runs build it once (console scripts keep the
            # build path in their shebang; nothing here runs them)
            root.parent.mkdir(parents=True, exist_ok=True)
            import fcntl

            with open(root.parent / f"{digest}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not root.exists():
                    self._build(run, wheels, root.with_name(digest + ".building"), root, python)
        site = next(iter(sorted((root / "lib").glob("python*/site-packages"))), None)
        if site is None:
            raise NotAvailable(f"{root} has no site-packages")
        return Venv(root / "bin" / "python", site)

    def _build(self, run: Run, wheels: list[Path], tmp: Path, root: Path, python: str) -> None:
        shutil.rmtree(tmp, ignore_errors=True)
        run.log(f"building an environment of {len(wheels)} wheels in {root} (once) ...")
        subprocess.run([python, "-m", "venv", "--without-pip", str(tmp)], check=True)
        proc = subprocess.run(
            [PY, "-m", "pip", "--python", str(tmp / "bin" / "python"), "install", "-q", "--no-deps", "--no-index",
             "--no-compile", "--disable-pip-version-check", *map(str, wheels)],
            capture_output=True, text=True,
        )
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise NotAvailable(f"pip could not build the environment: {proc.stderr.strip()[-300:]}")
        (tmp / "wheels.txt").write_text("\n".join(w.name for w in wheels) + "\n")
        tmp.rename(root)


def _site_of(python: Path) -> Path:
    proc = subprocess.run([str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise NotAvailable(f"{python} does not run: {proc.stderr.strip()[-200:]}")
    return Path(proc.stdout.strip())


@dataclass(frozen=True)
class FreshVenv(VenvInput):
    """A new ``python -m venv`` with its bundled pip (what a user has before installing
    anything), built once in the cache by the corpus interpreter; pip byte-compiles it."""

    def _resolve(self, run: Run) -> Venv:
        python = corpus_python()
        digest = hashlib.sha256(python.encode()).hexdigest()[:12]
        root = cache_dir() / "fresh-venv" / digest
        if not (root / "bin" / "python").exists():
            run.log(f"building a fresh venv in {root} (once) ...")
            shutil.rmtree(root, ignore_errors=True)
            proc = subprocess.run([python, "-m", "venv", str(root)], capture_output=True, text=True)
            if proc.returncode != 0:
                shutil.rmtree(root, ignore_errors=True)
                raise NotAvailable(f"python -m venv failed: {proc.stderr.strip()[-300:]}")
        return Venv(root / "bin" / "python", _site_of(root / "bin" / "python"))


@dataclass(frozen=True)
class PopularVenv(VenvInput):
    """The 88 popular distributions of ``benchmarks/accuracy.py`` (exact pins from PyPI),
    built by ``python benchmarks/accuracy.py setup``, never here (it needs the network)."""

    def _resolve(self, run: Run) -> Venv:
        python = Path(os.environ.get("CUAUDIT_ACCURACY_CACHE", Path.home() / ".cache" / "cuaudit")) / "accuracy-venv" / "bin" / "python"
        if not python.exists():
            raise NotAvailable("run `python benchmarks/accuracy.py setup` first (88 pinned distributions from PyPI)")
        return Venv(python, _site_of(python))


@dataclass(frozen=True)
class CopiedVenv(VenvInput):
    """A copy of another environment input's virtual environment (``cp -a``: the same files, new
    inodes and ctimes), made once in the cache: a new environment of the same packages, whose
    members share no key of identity with the original's.  ``bytecode=False``: without its
    ``__pycache__`` folders, as uv installs by default (no ``--compile-bytecode``)."""

    of: Input
    bytecode: bool = True

    def _resolve(self, run: Run) -> Venv:
        original = self.of.resolve(run)
        root = Path(original.python).parent.parent
        kind = "copied-venv" if self.bytecode else "copied-venv-without-bytecode"
        copy = cache_dir() / kind / hashlib.sha256(str(root).encode()).hexdigest()[:12]
        if not (copy / "bin" / "python").exists():
            run.log(f"copying {root} to {copy} (once{'' if self.bytecode else ', without __pycache__'}) ...")
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(root, copy, symlinks=True,
                            ignore=None if self.bytecode else shutil.ignore_patterns("__pycache__"))
        python = copy / "bin" / "python"
        return Venv(python, _site_of(python))


@dataclass(frozen=True)
class Interpreter(VenvInput):
    """An existing environment, named by its ``python`` in an environment
    variable (e.g. the full CUDA stack of a GPU machine); n/a when unset."""

    variable: str

    def _resolve(self, run: Run) -> Venv:
        python = os.environ.get(self.variable)
        if not python:
            raise NotAvailable(f"set {self.variable}=/path/to/python to measure an existing environment")
        return Venv(Path(python), _site_of(Path(python)))


# -- commands and cases -------------------------------------------------------------


@dataclass(frozen=True)
class Cmd:
    """One command line of a case.  ``argv`` items are ``str.format`` templates
    over the case's resolved inputs plus ``py`` (this interpreter), ``bench``
    (the benchmarks folder) and ``fresh`` (a new empty folder for each run)."""

    label: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    #: return codes that mean "it worked" (cuaudit exits 1 when it has findings)
    ok: tuple[int, ...] = (0,)
    #: stdout's last line is a JSON summary ({"items": N, "bytes": N} or {"na": why})
    summary: bool = False
    #: or: the item count is the number of stdout lines matching this pattern
    count: str | None = None
    #: why this command cannot run here (a missing tool or feature), or None
    requires: Callable[[], str | None] | None = None
    #: run once, unmeasured, before the repetitions (to fill a cache)
    prepare: tuple[str, ...] = ()


@dataclass(frozen=True)
class Target:
    """A goal from issue 8, checked on the medians of one run."""

    kind: str  # seconds | over_floor | speedup | rate | peak_mb | overhead | work_overhead
    value: float
    peer: str = ""  # for speedup: label prefix of the peer

    def describe(self) -> str:
        return {
            "seconds": f"cuaudit ≤ {self.value:g} s",
            "over_floor": f"cuaudit ≤ {self.value:g}× floor",
            "speedup": f"≥ {self.value:g}× faster than {self.peer}",
            "rate": f"≥ {self.value:,.0f} items/s",
            "peak_mb": f"peak < {self.value:g} MB",
            "overhead": f"≤ {self.value:g}× the time of {self.peer} (whole process)",
            "work_overhead": f"≤ {self.value:g}× {self.peer}'s own work time (in-process)",
        }[self.kind]

    def evaluate(self, result: "CaseResult") -> tuple[str, str]:
        """(met | missed | n/a, the measured figure)."""
        cu = result.cuaudit
        if cu is None or cu.median is None:
            return "n/a", "cuaudit did not run"
        if self.kind == "seconds":
            got, ok = cu.median, cu.median <= self.value
            return _verdict(ok), f"{got:.2f} s"
        if self.kind == "peak_mb":
            # judged on the peak (what ru_maxrss-based tools report too); the
            # anonymous part says how much of it is mapped file pages
            return _verdict(cu.peak_mb <= self.value), f"{cu.peak_mb:.0f} MB ({cu.anon_mb:.0f} MB anonymous)"
        if self.kind == "rate":
            if not cu.items:
                return "n/a", "no item count"
            # the reader's throughput: timed inside the process when the snippet
            # reports it (interpreter start-up is the `startup` case's business)
            work = cu.work_seconds or cu.median
            rate = cu.items / work
            return _verdict(rate >= self.value), f"{rate:,.0f}/s" + (" in-process" if cu.work_seconds else "")
        if self.kind == "over_floor":
            fl = result.floor
            if fl is None or not fl.median:
                return "n/a", "no floor"
            r = cu.median / fl.median
            return _by_rounds(r, _round_ratios(cu, fl), lambda x: x <= self.value, "× floor")
        if self.kind in ("overhead", "work_overhead"):
            base = next((p for p in result.peers if p.label.startswith(self.peer) and p.median), None)
            if base is None:
                return "n/a", f"{self.peer} did not run"
            if self.kind == "overhead":
                r = cu.median / base.median
                return _by_rounds(r, _round_ratios(cu, base), lambda x: x <= self.value, "×")
            if cu.work_seconds and base.work_seconds:
                r = cu.work_seconds / base.work_seconds
            else:
                return "n/a", "no in-process time"
            return _verdict(r <= self.value), f"{r:.2f}×"
        if self.kind == "speedup":
            peer = next((p for p in result.peers if p.label.startswith(self.peer) and p.median), None)
            if peer is None:
                return "n/a", f"{self.peer} did not run"
            r = peer.median / cu.median
            return _by_rounds(r, _round_ratios(peer, cu), lambda x: x >= self.value, "×")
        raise ValueError(self.kind)


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def _round_ratios(num: "CmdResult", den: "CmdResult") -> list[float]:
    """``num``'s time over ``den``'s in each round of the alternation (sample i of each command is
    its run in round i, side by side with the other's); none when the two were not timed in the same
    rounds (a command shared with another case keeps that case's runs) or ran once."""
    a, b = num.samples, den.samples
    if num.rounds_of != den.rounds_of or len(a) != len(b) or len(a) < 2:
        return []
    return [x.wall / y.wall for x, y in zip(a, b) if y.wall > 0]


def _by_rounds(ratio: float, rounds: list[float], ok: Callable[[float], bool], unit: str) -> tuple[str, str]:
    """The verdict on the medians' ratio, and how many rounds agree with it.

    The machine's speed moves by the hour and from one run to the next: a target within a few
    per cent of its line is met in some rounds and missed in others, and the medians alone then
    read as a firm verdict either way.  The figure gives the rounds' range; the status says when
    they split (``MISSED (1 of 3 rounds met)``)."""
    measured = f"{ratio:.2f}{unit}"
    status = _verdict(ok(ratio))
    if rounds:
        lo, hi = min(rounds), max(rounds)
        measured += f" (rounds {lo:.2f}-{hi:.2f}×)"
        met = sum(1 for r in rounds if ok(r))
        if 0 < met < len(rounds):
            status += f" ({met} of {len(rounds)} rounds met)"
    return status, measured


@dataclass(frozen=True)
class Case:
    """One benchmark: the same inputs for cuaudit, each peer and the floor."""

    name: str
    title: str
    inputs: dict[str, Input]
    cuaudit: Cmd
    peers: tuple[Cmd, ...] = ()
    floor: Cmd | None = None
    #: part of --quick (small inputs) / of the full run
    quick: bool = False
    full: bool = True
    #: what the item count of a summary counts (symbols, device-code entries)
    unit: str = ""
    targets: tuple[Target, ...] = ()
    note: str = ""

    def commands(self) -> list[tuple[str, Cmd]]:
        out = [("cuaudit", self.cuaudit)] + [("peer", p) for p in self.peers]
        if self.floor is not None:
            out.append(("floor", self.floor))
        return out


# -- measuring ----------------------------------------------------------------------


@dataclass
class Sample:
    wall: float
    maxrss_mb: float  # ru_maxrss of the child (largest process of its tree)
    tree_mb: float  # sampled peak of the tree's summed PSS
    rc: int
    summary: dict | None = None
    cpu: float = 0.0  # user + system seconds of the command and its waited-for children
    anon_mb: float = 0.0  # sampled peak of the tree's summed anonymous PSS (not mapped files)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out += [int(x) for x in fh.read().split()]
        except OSError:
            pass
    return out


def _pss_kb(pid: int) -> tuple[int, int]:
    """(PSS, anonymous PSS) of one process in KiB.  The anonymous part is the
    process's own memory; the rest is mostly mapped files (page cache), which
    an mmap-based reader touches without allocating it."""
    pss = anon = -1
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith("Pss_Anon:"):
                    anon = int(line.split()[1])
    except (OSError, ValueError):
        pass
    if pss >= 0:
        return pss, anon if anon >= 0 else pss
    try:  # no smaps_rollup: resident pages
        with open(f"/proc/{pid}/statm") as fh:
            kb = int(fh.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
            return kb, kb
    except (OSError, ValueError, IndexError):
        return 0, 0


def _tree_pss_kb(root: int) -> tuple[int, int]:
    total = anon = 0
    todo, seen = [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        p, a = _pss_kb(pid)
        total += p
        anon += a
        todo += _children(pid)
    return total, anon


_HELPER: list[str | None] = []


def rusage_helper() -> str | None:
    """``rusage_exec`` compiled once with ``cc`` (None without a compiler:
    then peak memory includes the harness's own RSS, and says so)."""
    if _HELPER:
        return _HELPER[0]
    src = BENCH / "rusage_exec.c"
    digest = hashlib.sha256(src.read_bytes()).hexdigest()[:12]
    exe = cache_dir() / "bin" / f"rusage_exec-{digest}"
    if not exe.exists():
        cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if cc is not None:
            exe.parent.mkdir(parents=True, exist_ok=True)
            tmp = exe.with_name(exe.name + f".{os.getpid()}")
            proc = subprocess.run([cc, "-O2", "-o", str(tmp), str(src)], capture_output=True, text=True)
            if proc.returncode == 0:
                tmp.rename(exe)
    _HELPER.append(str(exe) if exe.exists() else None)
    return _HELPER[0]


def measure(argv: Sequence[str], env: dict[str, str], timeout: float, capture: bool,
            count: str | None = None, cwd: str | None = None) -> Sample:
    """Run one command; its wall time, its peak memory, its return code."""
    helper = rusage_helper()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(prefix="rusage-") as rus:
        full = [helper, rus.name, *argv] if helper else list(argv)
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            full, stdin=subprocess.DEVNULL, stdout=out if capture or count else subprocess.DEVNULL, stderr=err,
            env=env, start_new_session=True, cwd=cwd,
        )
        peak = [0, 0]
        stop = threading.Event()

        def sample() -> None:
            interval = 0.005
            while not stop.wait(interval):
                t = time.perf_counter()
                total, anon = _tree_pss_kb(proc.pid)
                peak[0], peak[1] = max(peak[0], total), max(peak[1], anon)
                # smaps_rollup walks the page tables under the process's mmap
                # lock: keep the sampler's share of the time near 2 %
                interval = min(1.0, max(min(0.05, interval * 1.5), 50 * (time.perf_counter() - t)))
                if time.perf_counter() - t0 > timeout:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except OSError:
                        pass
                    return

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        stop.set()
        sampler.join()
        proc.returncode = rc = os.waitstatus_to_exitcode(status)
        maxrss_kb = usage.ru_maxrss
        if helper:
            reported = rus.read().split()
            if len(reported) == 2:
                maxrss_kb, rc = int(reported[0]), os.waitstatus_to_exitcode(int(reported[1]))
        try:  # workers left behind by a killed or careless child
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        summary = None
        if capture:
            out.seek(0)
            lines = out.read().decode(errors="replace").strip().splitlines()
            if lines:
                try:
                    summary = json.loads(lines[-1])
                except ValueError:
                    summary = None
        elif count:
            out.seek(0)
            pattern = re.compile(count.encode())
            matched = [line.strip() for line in out if pattern.search(line)]
            summary = {"items": len(matched), "digest": hashlib.sha1(b"\n".join(matched)).hexdigest()}
        err.seek(0)
        tail = err.read()[-600:].decode(errors="replace")
    sample_ = Sample(wall, maxrss_kb / 1024, peak[0] / 1024, rc, summary, usage.ru_utime + usage.ru_stime,
                     peak[1] / 1024)
    sample_.stderr = tail  # type: ignore[attr-defined]
    return sample_


@dataclass
class CmdResult:
    role: str  # cuaudit | peer | floor
    label: str
    argv: list[str]
    samples: list[Sample] = field(default_factory=list)
    na: str | None = None  # why it did not run
    failed: str | None = None  # why a run did not count
    #: the case in whose alternation the samples were taken (a command two cases share runs once)
    rounds_of: str = ""

    @property
    def median(self) -> float | None:
        if self.na or self.failed or not self.samples:
            return None
        return statistics.median(s.wall for s in self.samples)

    @property
    def anon_mb(self) -> float:
        """Median over runs of the sampled peak anonymous memory of the tree."""
        return statistics.median(s.anon_mb for s in self.samples) if self.samples else 0.0

    @property
    def cpu(self) -> float | None:
        if self.median is None:
            return None
        return statistics.median(s.cpu for s in self.samples)

    @property
    def work_seconds(self) -> float | None:
        """Median of the time a snippet measured around its own work (no start-up)."""
        got = [s.summary["seconds"] for s in self.samples if s.summary and isinstance(s.summary.get("seconds"), float)]
        return statistics.median(got) if got and not self.na and not self.failed else None

    @property
    def digest(self) -> str | None:
        for s in self.samples:
            if s.summary and isinstance(s.summary.get("digest"), str):
                return s.summary["digest"]
        return None

    @property
    def peak_mb(self) -> float:
        """Median over runs of max(largest process, summed PSS of the tree)."""
        return statistics.median(max(s.maxrss_mb, s.tree_mb) for s in self.samples) if self.samples else 0.0

    @property
    def items(self) -> int | None:
        for s in self.samples:
            if s.summary and isinstance(s.summary.get("items"), int):
                return s.summary["items"]
        return None

    @property
    def bytes(self) -> int | None:
        return self.summary_value("bytes")

    def summary_value(self, key: str) -> int | None:
        for s in self.samples:
            if s.summary and isinstance(s.summary.get(key), int):
                return s.summary[key]
        return None

    def to_json(self) -> dict:
        return {
            "role": self.role,
            "label": self.label,
            "argv": self.argv,
            "na": self.na,
            "failed": self.failed,
            "median_s": self.median,
            "cpu_s": None if self.cpu is None else round(self.cpu, 4),
            "work_s": None if self.work_seconds is None else round(self.work_seconds, 4),
            "digest": self.digest,
            "peak_mb": round(self.peak_mb, 1) if self.samples else None,
            "anon_mb": round(self.anon_mb, 1) if self.samples else None,
            "items": self.items,
            "bytes": self.bytes,
            "summary": next((x.summary for x in self.samples if x.summary), None),
            "samples": [
                {"wall_s": round(s.wall, 4), "cpu_s": round(s.cpu, 4), "maxrss_mb": round(s.maxrss_mb, 1),
                 "tree_pss_mb": round(s.tree_mb, 1), "tree_anon_mb": round(s.anon_mb, 1), "rc": s.rc}
                for s in self.samples
            ],
        }


@dataclass
class CaseResult:
    case: Case
    na: str | None = None
    commands: list[CmdResult] = field(default_factory=list)
    input_bytes: int | None = None

    @property
    def cuaudit(self) -> CmdResult | None:
        return next((c for c in self.commands if c.role == "cuaudit"), None)

    @property
    def peers(self) -> list[CmdResult]:
        return [c for c in self.commands if c.role == "peer"]

    @property
    def floor(self) -> CmdResult | None:
        return next((c for c in self.commands if c.role == "floor"), None)

    def ratio(self, cmd: CmdResult) -> float | None:
        cu = self.cuaudit
        if cu is None or cu.median is None or cmd.median is None or cu.median == 0:
            return None
        return cmd.median / cu.median

    def targets(self) -> list[dict]:
        out = []
        for t in self.case.targets:
            status, got = t.evaluate(self)
            out.append({"target": t.describe(), "status": status, "measured": got})
        return out

    def to_json(self) -> dict:
        return {
            "name": self.case.name,
            "title": self.case.title,
            "na": self.na,
            "unit": self.case.unit,
            "input_bytes": self.input_bytes,
            "commands": [
                {**c.to_json(), "ratio_to_cuaudit": None if self.ratio(c) is None else round(self.ratio(c), 3)}
                for c in self.commands
            ],
            "targets": self.targets(),
            "note": self.case.note,
        }


class Runner:
    """Runs cases: resolve inputs, warm the page cache, alternate the commands."""

    def __init__(self, run: Run, repeat: int, timeout: float, work: Path) -> None:
        self.run = run
        self.repeat = repeat
        self.timeout = timeout
        self.work = work
        # the same command line measured once per harness run, whichever case asks
        self.memo: dict[tuple, CmdResult] = {}

    def run_case(self, case: Case) -> CaseResult:
        result = CaseResult(case)
        values: dict[str, Any] = {}
        try:
            for key, inp in case.inputs.items():
                values[key] = inp.resolve(self.run)
        except NotAvailable as exc:
            result.na = str(exc)
            return result
        except (OSError, subprocess.SubprocessError, zipfile.BadZipFile) as exc:
            result.na = f"input not prepared: {exc}"
            return result
        files = [f for key, inp in case.inputs.items() for f in inp.files(values[key])]
        result.input_bytes = sum(f.stat().st_size for f in files if f.exists())
        _warm(files)
        casework = self.work / case.name
        casework.mkdir(parents=True, exist_ok=True)
        fmt = {"py": PY, "bench": str(BENCH), "casework": str(casework), **values}
        todo: list[tuple[CmdResult, Cmd, dict]] = []
        for role, cmd in case.commands():
            argv = _expand(cmd.argv, fmt)
            env = dict(os.environ)
            env.update({k: _fill(v, fmt, "") for k, v in cmd.env})
            key = (tuple(argv), cmd.env)
            if key in self.memo:
                memo = self.memo[key]
                result.commands.append(dataclasses.replace(memo, role=role, label=cmd.label))
                continue
            cr = CmdResult(role, cmd.label, argv, rounds_of=case.name)
            reason = cmd.requires() if cmd.requires else None
            if reason:
                cr.na = reason
            elif cmd.prepare:
                prep = measure(_expand(cmd.prepare, fmt), env, self.timeout, capture=False, cwd=str(casework))
                if prep.rc not in cmd.ok:
                    cr.failed = f"preparation exited {prep.rc}: {_last_line(prep)}"
            result.commands.append(cr)
            self.memo[key] = cr
            if not cr.na and not cr.failed:
                todo.append((cr, cmd, env))
        for r in range(self.repeat):
            k = r % len(todo) if todo else 0
            for cr, cmd, env in todo[k:] + todo[:k]:
                if cr.failed:
                    continue
                fresh = Path(tempfile.mkdtemp(prefix="fresh-", dir=self.work))
                argv = [a.replace("{fresh}", str(fresh)) for a in cr.argv]
                # in a neutral folder: no project configuration, no local modules
                s = measure(argv, env, self.timeout, capture=cmd.summary, count=cmd.count, cwd=str(fresh))
                shutil.rmtree(fresh, ignore_errors=True)
                if s.summary and "na" in s.summary:
                    cr.na = str(s.summary["na"])
                elif s.rc not in cmd.ok:
                    timed_out = s.wall >= self.timeout
                    cr.failed = (f"timed out after {self.timeout:.0f} s" if timed_out
                                 else f"exit {s.rc}: {_last_line(s)}")
                else:
                    cr.samples.append(s)
        return result


_PLACEHOLDER = re.compile(r"\{(\w+)(?:\.(\w+))?\}")


_LIST_ITEM = re.compile(r"(.*?)\{(\w+)\}")


def _expand(argv: Sequence[str], values: dict) -> list[str]:
    """Fill every argument; ``"{files}"`` or ``"--with={files}"`` with a list
    value becomes one argument per item."""
    out: list[str] = []
    for a in argv:
        m = _LIST_ITEM.fullmatch(a)
        if m and isinstance(values.get(m.group(2)), (list, tuple)):
            out += [m.group(1) + str(v) for v in values[m.group(2)]]
        else:
            out.append(_fill(a, values, "{fresh}"))
    return out


def _fill(template: str, values: dict, fresh: str) -> str:
    """Replace ``{name}`` and ``{name.attr}`` of known names; anything else
    (the braces of a ``python -c`` snippet) stays as written."""

    def sub(m: re.Match) -> str:
        name, attr = m.group(1), m.group(2)
        if name == "fresh":
            return fresh or m.group(0)
        if name not in values:
            return m.group(0)
        value = values[name]
        return str(getattr(value, attr) if attr else value)

    return _PLACEHOLDER.sub(sub, template)


def _last_line(s: Sample) -> str:
    text = getattr(s, "stderr", "").strip()
    return text.splitlines()[-1][:200] if text else "(no stderr)"


def _warm(files: list[Path]) -> None:
    """Read the inputs once so every command meets the same warm page cache."""
    buf = bytearray(1 << 20)
    for f in files:
        try:
            with open(f, "rb", buffering=0) as fh:
                while fh.readinto(buf):
                    pass
        except OSError:
            pass


# -- scaling ----------------------------------------------------------------------


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float]:
    """Least squares y = a + b·x: (a, b, R²)."""
    n = len(xs)
    if n < 2:
        return (ys[0] if ys else 0.0), 0.0, 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return my, 0.0, 0.0
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys))
    return a, b, (1 - ss_res / ss_tot) if ss_tot else 1.0


def linear_fit2(xs: Sequence[float], zs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float, float]:
    """Least squares y = a + b·x + c·z: (a, b, c, R²); zeros when singular."""
    n = len(ys)
    if n < 3:
        return 0.0, 0.0, 0.0, 0.0
    mx, mz, my = sum(xs) / n, sum(zs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    szz = sum((z - mz) ** 2 for z in zs)
    sxz = sum((x - mx) * (z - mz) for x, z in zip(xs, zs))
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    szy = sum((z - mz) * (y - my) for z, y in zip(zs, ys))
    det = sxx * szz - sxz * sxz
    if abs(det) < 1e-12:
        return 0.0, 0.0, 0.0, 0.0
    b = (sxy * szz - szy * sxz) / det
    c = (szy * sxx - sxy * sxz) / det
    a = my - b * mx - c * mz
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - a - b * x - c * z) ** 2 for x, z, y in zip(xs, zs, ys))
    return a, b, c, (1 - ss_res / ss_tot) if ss_tot else 1.0


def _fit2_json(fit: tuple[float, float, float, float]) -> dict:
    return {"constant_s": round(fit[0], 4), "ms_per_mb": round(fit[1] * 1000, 4),
            "ms_per_file": round(fit[2] * 1000, 4), "r2": round(fit[3], 4)}


def _fit_json(fit: tuple[float, float, float]) -> dict:
    return {"constant_s": round(fit[0], 4), "ms_per_mb": round(fit[1] * 1000, 4), "r2": round(fit[2], 4)}


def scaling_summary(results: list[CaseResult]) -> dict:
    """Time and memory against the bytes that must be read (the floor's count)."""
    points = []
    for r in results:
        cu, fl = r.cuaudit, r.floor
        if cu is None or cu.median is None:
            points.append({"name": r.case.name, "na": r.na or cu and (cu.na or cu.failed) or "did not run"})
            continue
        read = fl.bytes if fl is not None else None
        files = fl.summary_value("files") if fl is not None else None
        points.append({
            "name": r.case.name,
            "title": r.case.title,
            "zip_mb": round((r.input_bytes or 0) / 2**20, 2),
            "read_mb": None if read is None else round(read / 2**20, 2),
            "files": files,
            "cuaudit_s": round(cu.median, 4),
            "cuaudit_cpu_s": round(cu.cpu or 0.0, 4),
            "floor_s": None if fl is None or fl.median is None else round(fl.median, 4),
            "peak_mb": round(cu.peak_mb, 1),
        })
    ok = [p for p in points if p.get("read_mb") is not None]
    xs = [p["read_mb"] for p in ok]
    fit_t = linear_fit(xs, [p["cuaudit_s"] for p in ok])
    fit_m = linear_fit(xs, [p["peak_mb"] for p in ok])
    fit_f = linear_fit(xs, [p["floor_s"] for p in ok if p["floor_s"] is not None]) if all(
        p["floor_s"] is not None for p in ok) else (0.0, 0.0, 0.0)
    # per file as well as per MB: analysing a Python source costs per file,
    # whatever its size
    two = [p for p in ok if p.get("files")]
    fit_2 = linear_fit2([p["read_mb"] for p in two], [p["files"] for p in two], [p["cuaudit_s"] for p in two])
    # CPU time (the command and its workers) is the steadier figure on a shared machine
    fit_c = linear_fit2([p["read_mb"] for p in two], [p["files"] for p in two], [p["cuaudit_cpu_s"] for p in two])
    return {
        "points": points,
        "time_fit2": _fit2_json(fit_2),
        "cpu_fit2": _fit2_json(fit_c),
        "time_fit": _fit_json(fit_t),
        "floor_fit": _fit_json(fit_f),
        "memory_fit": {"constant_mb": round(fit_m[0], 1), "mb_per_mb": round(fit_m[1], 4), "r2": round(fit_m[2], 4)},
    }


# -- the machine -------------------------------------------------------------------


def _first_line(argv: list[str]) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "not found"
    text = (proc.stdout or proc.stderr).strip()
    return text.splitlines()[0] if text else "not found"


def _module_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_info(extra_tools: dict[str, list[str]]) -> dict:
    cpu = ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        cpu = next((l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name")), "")
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as fh:
            kb = int(next(l for l in fh if l.startswith("MemTotal")).split()[1])
            mem = f"{kb / 2**20:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    gpu = _first_line(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    commit = _first_line(["git", "-C", str(REPO), "describe", "--always", "--dirty"])
    versions = {
        "python": platform.python_version(),
        "cuaudit": f"{_module_version('cuaudit')} ({commit})",
        "auditwheel": _module_version("auditwheel"),
        "pyelftools": _module_version("pyelftools"),
    }
    for name, argv in extra_tools.items():
        versions[name] = _first_line(argv)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu": cpu,
        "nproc": os.cpu_count(),
        "memory": mem,
        "kernel": platform.release(),
        "gpu": gpu if gpu != "not found" and "failed" not in gpu.lower() else "none",
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "versions": versions,
    }


# -- tables -------------------------------------------------------------------------


def _fmt_s(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.3f}" if v < 10 else f"{v:.1f}"


def case_rows(results: list[CaseResult]) -> list[list[str]]:
    rows = []
    for r in results:
        if r.na:
            rows.append([r.case.name, "—", "n/a", "", "", "", "", "", r.na])
            continue
        first = True
        for c in r.commands:
            name = r.case.name if first else ""
            first = False
            label = f"{'floor: ' if c.role == 'floor' else ''}{c.label}"
            if c.na or c.failed:
                rows.append([name, label, "n/a" if c.na else "failed", "", "", "", "", "", c.na or c.failed or ""])
                continue
            ratio = r.ratio(c)
            extra = ""
            if c.items:
                extra = f"{c.items:,} {r.case.unit or 'items'}, {c.items / c.median:,.0f}/s"
                if c.work_seconds:
                    extra += f" ({c.items / c.work_seconds:,.0f}/s in-process, {c.work_seconds:.3f} s)"
            elif c.bytes:
                extra = f"{c.bytes / 2**20:,.1f} MB read, {c.bytes / 2**20 / c.median:,.0f} MB/s"
            elif c.summary_value("files"):
                extra = f"{c.summary_value('files'):,} files"
            elif c.work_seconds:
                extra = f"work {c.work_seconds:.3f} s in-process"
            cu = r.cuaudit
            if c.role == "peer" and c.digest and cu is not None and cu.digest:
                extra += "; same listing as cuaudit" if c.digest == cu.digest else "; listing DIFFERS from cuaudit's"
            rows.append([
                name, label, _fmt_s(c.median), _fmt_s(c.cpu), f"{c.peak_mb:,.0f}", f"{c.anon_mb:,.0f}",
                "—" if ratio is None else f"{ratio:.2f}",
                f"{len(c.samples)}", extra,
            ])
    return rows


CASE_HEADER = ["case", "command", "median s", "cpu s", "peak MB", "anon MB", "× cuaudit", "runs", "notes"]


def render_text(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return "\n".join(lines)


def render_markdown(headers: list[str], rows: list[list[str]]) -> str:
    esc = [[c.replace("|", "\\|") for c in r] for r in rows]
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in esc]
    return "\n".join(out)


def target_rows(results: list[CaseResult]) -> list[list[str]]:
    rows = []
    for r in results:
        for t in r.targets():
            rows.append([r.case.name, t["target"], t["measured"], t["status"]])
    return rows


TARGET_HEADER = ["case", "target", "measured", "status"]


def scaling_rows(summary: dict) -> list[list[str]]:
    rows = []
    for p in summary["points"]:
        if "na" in p:
            rows.append([p["name"], "", "", "", "n/a", "", "", p["na"]])
            continue
        per_mb = "" if not p["read_mb"] else f"{p['cuaudit_s'] * 1000 / p['read_mb']:.2f}"
        rows.append([
            p["name"], f"{p['zip_mb']:.1f}", "—" if p["read_mb"] is None else f"{p['read_mb']:.1f}",
            "—" if p.get("files") is None else f"{p['files']:,}",
            _fmt_s(p["cuaudit_s"]), _fmt_s(p["floor_s"]), f"{p['peak_mb']:.0f}", per_mb,
        ])
    return rows


SCALING_HEADER = ["wheel", "zip MB", "read MB", "files read", "cuaudit s", "floor s", "peak MB", "ms/MB read"]


def scaling_text(summary: dict) -> str:
    t, f, m = summary["time_fit"], summary["floor_fit"], summary["memory_fit"]
    t2, c2 = summary["time_fit2"], summary["cpu_fit2"]
    return (
        f"fit over MB read: cuaudit time = {t['constant_s']:.3f} s + {t['ms_per_mb']:.3f} ms/MB (R² {t['r2']:.3f}); "
        f"floor = {f['constant_s']:.3f} s + {f['ms_per_mb']:.3f} ms/MB (R² {f['r2']:.3f}); "
        f"peak memory = {m['constant_mb']:.0f} MB + {m['mb_per_mb']:.3f} MB/MB (R² {m['r2']:.3f}); "
        f"over MB and files: cuaudit time = {t2['constant_s']:.3f} s + {t2['ms_per_mb']:.3f} ms/MB + "
        f"{t2['ms_per_file']:.3f} ms/file (R² {t2['r2']:.3f}), CPU time = {c2['constant_s']:.3f} s + "
        f"{c2['ms_per_mb']:.3f} ms/MB + {c2['ms_per_file']:.3f} ms/file (R² {c2['r2']:.3f})"
    )
