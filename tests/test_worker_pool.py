"""One worker pool per audit: forked at the first parallel extraction, reused by every batch of
facts the rules read on demand, ended with the audit; a worker that dies has its work redone here."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from conftest import compile_so, make_installed

from cuaudit import audit, extraction, rule_run, workers
from cuaudit.config import Config

#: a package whose import closure has levels of ten modules each (a -> b -> c), read level by level
MODULES = {
    "pkg/__init__.py": "".join(f"from . import a{k}\n" for k in range(10)),
    **{f"pkg/a{k}.py": f"from . import b{k}\n\ndef f{k}():\n    return {k}\n" for k in range(10)},
    **{f"pkg/b{k}.py": f"from . import c{k}\n\nB = {k}\n" for k in range(10)},
    **{f"pkg/c{k}.py": f"import os\n\nC = os.sep * {k}\n" for k in range(10)},
    # modules nothing imports
    **{f"pkg/_u{k}.py": f"U = {k}\n" for k in range(70)},
}


@pytest.fixture(scope="module")
def LEVELS(tmp_path_factory) -> dict[str, str | bytes]:
    """Three levels of imports, and libraries whose facts (ELF, not deferred as an installed
    source's format check is) are enough for the up-front extraction to go to the workers."""
    lib = compile_so(tmp_path_factory.mktemp("lib"), "libu.so", "int u(void) { return 1; }\n").read_bytes()
    return {**MODULES, **{f"pkg/libs/libu{k}.so": lib for k in range(40)}}


def _children() -> set[int]:
    """This process's child processes, as the kernel lists them."""
    me = str(os.getpid())
    out = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[1] == me:
                out.add(int(entry))
    return out


def _spy(monkeypatch, tmp_path: Path, *, kill: str | None = None):
    """Records the pools each extraction used, and which process extracted each member
    (a worker that meets ``kill`` dies by SIGKILL mid-batch)."""
    pools: list[object] = []
    extractions: list[extraction.Extraction] = []
    log = tmp_path / "extracted.log"
    parent = os.getpid()
    start_workers, real_group = extraction.Extraction._workers, workers.extract_group

    def spied_workers(self, *args):
        pool = start_workers(self, *args)
        pools.append(pool)
        if self not in extractions:
            extractions.append(self)
        return pool

    def spied_group(artifact, tasks, *args, **kwargs):
        with open(log, "a") as fh:  # appended by the workers too: they inherit this function at their fork
            fh.writelines(f"{os.getpid()} {m.path}\n" for m, _ in tasks)
        if kill is not None and os.getpid() != parent and any(m.path == kill for m, _ in tasks):
            os.kill(os.getpid(), signal.SIGKILL)
        return real_group(artifact, tasks, *args, **kwargs)

    monkeypatch.setattr(extraction.Extraction, "_workers", spied_workers)
    monkeypatch.setattr(workers, "extract_group", spied_group)
    return pools, extractions, log


def _extracted_by(log: Path) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for line in log.read_text().splitlines():
        pid, path = line.split(" ", 1)
        out.setdefault(path, set()).add(int(pid))
    return out


def test_one_pool_serves_every_batch_of_an_audit_and_no_worker_outlives_it(tmp_path, monkeypatch, LEVELS):
    dist = make_installed(tmp_path / "site", "pkg", LEVELS)
    serial = audit([dist], config=Config(cache=False, jobs=1), command="explain")
    before = _children()
    pools, extractions, log = _spy(monkeypatch, tmp_path)
    report = audit([make_installed(tmp_path / "site2", "pkg", LEVELS)], config=Config(cache=False, jobs=2),
                   command="explain")
    # the up-front extraction and at least two levels of the import closure went to the workers ...
    assert len(pools) >= 3
    # ... of one pool, started once
    assert len({id(p) for p in pools}) == 1 and [e.pools_started for e in extractions] == [1]
    by = _extracted_by(log)
    worker_pids = {pid for pids in by.values() for pid in pids} - {os.getpid()}
    assert worker_pids and len(worker_pids) <= 2  # two workers did every batch: none forked later
    assert {"pkg/a3.py", "pkg/b3.py", "pkg/c3.py"} <= by.keys()
    # every worker ended with the audit
    assert _children() == before
    for pid in worker_pids:
        assert not Path(f"/proc/{pid}").exists()
    assert [f.code for f in report.findings] == [f.code for f in serial.findings]
    assert [f.message.replace("site2", "site") for f in report.findings] == [f.message for f in serial.findings]


@pytest.mark.parametrize("every", [0.0, 1e9])
def test_a_worker_hands_its_free_heap_back_now_and_then(tmp_path, monkeypatch, LEVELS, every):
    """What a chunk's parse trees held goes back to the system after a chunk, however small the
    worker (glibc keeps freed pages otherwise: 16 workers held 880-910 MB on the GPU machine when
    the import family forked beside them), at most once per ``TRIM_EVERY`` seconds (each page
    given back is faulted in again: after every chunk, a second of a 2-core run's 20)."""
    from cuaudit import heap

    trims = tmp_path / "trims.log"

    def spied_trim(pad: int) -> int:
        with open(trims, "a") as fh:  # the workers inherit this at their fork
            fh.write(f"{os.getpid()}\n")
        return 0

    monkeypatch.setattr(heap, "_trim", spied_trim)
    monkeypatch.setattr(heap, "_resident_kb", lambda: 1)  # a small process: a trim only when asked always
    monkeypatch.setattr(workers, "TRIM_EVERY", every)
    chunks = tmp_path / "chunks.log"
    real = workers.extract_group

    def spied_group(artifact, tasks, *args, **kwargs):
        with open(chunks, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        return real(artifact, tasks, *args, **kwargs)

    monkeypatch.setattr(workers, "extract_group", spied_group)
    audit([make_installed(tmp_path / "site", "pkg", LEVELS)], config=Config(cache=False, jobs=2), command="explain")
    by_worker = [int(p) for p in chunks.read_text().split() if int(p) != os.getpid()]
    trimmed = [int(p) for p in trims.read_text().split()] if trims.exists() else []
    assert len(by_worker) > len(set(by_worker)), "no worker extracted two chunks"
    if every == 0:
        # one trim per chunk a worker extracted, in that worker (the parent's own chunks trim nothing)
        assert sorted(trimmed) == sorted(by_worker)
    else:
        # once in each worker: after its first chunk
        assert sorted(trimmed) == sorted(set(by_worker))


def test_a_worker_killed_mid_batch_has_its_work_redone_here(tmp_path, monkeypatch, LEVELS):
    dist = make_installed(tmp_path / "site", "pkg", LEVELS)
    serial = audit([dist], config=Config(cache=False, jobs=1), command="explain")
    before = _children()
    pools, extractions, log = _spy(monkeypatch, tmp_path, kill="pkg/b3.py")
    report = audit([make_installed(tmp_path / "site2", "pkg", LEVELS)], config=Config(cache=False, jobs=2),
                   command="explain")
    by = _extracted_by(log)
    # a worker took b3 and died; the parent extracted it, and the audit went on to the next level
    assert os.getpid() in by["pkg/b3.py"] and len(by["pkg/b3.py"]) >= 2
    assert "pkg/c3.py" in by
    [ex] = extractions
    assert any(key[1] == "pkg/b3.py" for key in dict.keys(ex.facts))
    assert _children() == before
    assert [f.message.replace("site2", "site") for f in report.findings] == [f.message for f in serial.findings]


def test_a_worker_that_died_between_batches_loses_no_fact_and_leaves_no_process(tmp_path, monkeypatch, LEVELS):
    dist = make_installed(tmp_path / "site", "pkg", LEVELS)
    serial = audit([dist], config=Config(cache=False, jobs=2), command="explain")
    before = _children()
    pools, extractions, log = _spy(monkeypatch, tmp_path)
    spied = extraction.Extraction._workers
    killed: list[int] = []

    def killing(self, *args):
        pool = spied(self, *args)
        if len(pools) == 2:  # the first batch read on demand: a worker of the up-front extraction dies first
            # (the up-front extraction goes on meanwhile: its last stage, the format checks, is fed behind)
            pid = next(p for ps in _extracted_by(log).values() for p in ps if p != os.getpid())
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        return pool

    monkeypatch.setattr(extraction.Extraction, "_workers", killing)
    report = audit([make_installed(tmp_path / "site2", "pkg", LEVELS)], config=Config(cache=False, jobs=2),
                   command="explain")
    assert killed
    [ex] = extractions
    # Whether a later batch starts a second pool depends on when the executor notices the death (on
    # 3.10-3.12 before the next submit, on 3.13 it may not before the audit ends): what must hold is
    # that nothing is lost and nothing is left behind.
    assert ex.pools_started >= 1
    assert all(f"pkg/{lvl}{k}.py" in _extracted_by(log) for lvl in "abc" for k in range(10))
    assert _children() == before
    assert [f.message.replace("site2", "site") for f in report.findings] == [f.message for f in serial.findings]


def test_the_next_level_of_an_import_closure_goes_to_the_workers_while_one_of_this_level_is_still_out(tmp_path, monkeypatch, LEVELS):
    """The closure is one stream, not a batch per level: the imports of the first modules of a
    level back are sent while a worker still holds another module of that level."""
    from concurrent.futures import ProcessPoolExecutor

    sent_next = tmp_path / "next-level-sent"
    waited = tmp_path / "a9.log"
    real_submit, real_group = ProcessPoolExecutor.submit, workers.extract_group

    def spied_submit(self, fn, *args, **kwargs):
        chunk = next((a for a in args if isinstance(a, list)), [])  # extract_forked(i, chunk, cache folder)
        if any(getattr(m, "path", "").startswith("pkg/b") and "import_time" in names for m, names in chunk):
            sent_next.touch()  # in the parent: the program of a module of the second level is sent
        return real_submit(self, fn, *args, **kwargs)

    def slow_a9(artifact, tasks, *args, **kwargs):
        if any(m.path == "pkg/a9.py" and "import_time" in names for m, names in tasks) and os.getpid() != parent:
            # a worker holds a9 until the next level is sent, or gives up: level by level, it never is
            for _ in range(200):
                if sent_next.exists():
                    break
                time.sleep(0.05)
            waited.write_text("sent before a9 was done" if sent_next.exists() else "not sent")
        return real_group(artifact, tasks, *args, **kwargs)

    parent = os.getpid()
    monkeypatch.setattr(ProcessPoolExecutor, "submit", spied_submit)
    monkeypatch.setattr(workers, "extract_group", slow_a9)
    report = audit([make_installed(tmp_path / "site", "pkg", LEVELS)], config=Config(cache=False, jobs=2), command="explain")
    assert waited.read_text() == "sent before a9 was done"
    assert "CU011" not in {f.code for f in report.findings}


def test_facts_a_rule_names_ahead_go_to_the_workers_before_it_reads_them(tmp_path, monkeypatch, LEVELS):
    """The CU4xx sources are sent when the import closures' walk ends, while the parent computes
    the verdicts; the rules then read them as any other facts."""
    from concurrent.futures import ProcessPoolExecutor

    from cuaudit.context import RuleContext

    # with an extension module, whose strings the import rules read first: those run before the
    # later stages (its ELF facts) are in, and the hooks of every rule are asked before them
    ext = compile_so(tmp_path, "_ext.so", "int PyInit__ext(void) { return 0; }\n").read_bytes()
    files = {**LEVELS, "pkg/_ext.cpython-311-x86_64-linux-gnu.so": ext}
    dist = make_installed(tmp_path / "site", "pkg", files)
    serial = audit([dist], config=Config(cache=False, jobs=1), command="explain")
    events: list[str] = []
    sent_at: list[float] = []
    real_submit, real_prefetch = ProcessPoolExecutor.submit, RuleContext.prefetch

    def spied_submit(self, fn, *args, **kwargs):
        # the sources named ahead (those of modules no import closure reached: nothing parsed them yet)
        chunk = next((a for a in args if isinstance(a, list)), [])  # extract_forked(i, chunk, cache folder)
        if any("promotion_source" in names and "import_time" not in names for _m, names in chunk):
            events.append("sent")
            sent_at.append(time.monotonic())
        return real_submit(self, fn, *args, **kwargs)

    def spied_prefetch(self, extractors, members, **kwargs):
        if extractors == "promotion_source" and not kwargs.get("ahead"):
            events.append("read")
        return real_prefetch(self, extractors, members, **kwargs)

    from cuaudit.rules.imports import SubmoduleAttributeAccess

    real_check = SubmoduleAttributeAccess.check

    done = tmp_path / "verdicts-done"

    def spied_check(self, ctx):
        yield from real_check(self, ctx)
        # the verdicts end in the child the import family is forked into (rule_run.RuleRun): a file says when
        done.write_text(repr(time.monotonic()))

    monkeypatch.setattr(ProcessPoolExecutor, "submit", spied_submit)
    monkeypatch.setattr(RuleContext, "prefetch", spied_prefetch)
    monkeypatch.setattr(SubmoduleAttributeAccess, "check", spied_check)
    report = audit([make_installed(tmp_path / "site2", "pkg", files)], config=Config(cache=False, jobs=2), command="explain")
    assert "sent" in events and "read" in events and events.index("sent") < events.index("read")
    # sent while the import rules' verdicts are computed, not when the CU4xx rules come to run
    assert sent_at and sent_at[0] < float(done.read_text())
    assert [f.message.replace("site2", "site") for f in report.findings] == [f.message for f in serial.findings]


def test_the_switch_interval_is_short_while_the_pool_runs_and_the_callers_after(tmp_path, monkeypatch, LEVELS):
    # the pool's threads hand every chunk over through the interpreter's lock: at CPython's 5 ms
    # switch interval each hand-over waited for the busy parent (extraction.POOL_SWITCH_INTERVAL)
    import sys

    callers = sys.getswitchinterval()
    sys.setswitchinterval(0.01)
    try:
        pools, _extractions, _log = _spy(monkeypatch, tmp_path)
        intervals: list[float] = []
        workers = extraction.Extraction._workers

        def noted(self, *args):
            pool = workers(self, *args)
            intervals.append(sys.getswitchinterval())
            return pool

        monkeypatch.setattr(extraction.Extraction, "_workers", noted)
        audit([make_installed(tmp_path / "site", "pkg", LEVELS)], config=Config(cache=False, jobs=2), command="explain")
        assert pools and intervals and all(i == extraction.POOL_SWITCH_INTERVAL for i in intervals)
        assert sys.getswitchinterval() == 0.01  # the caller's, back once the pool stopped
    finally:
        sys.setswitchinterval(callers)


def test_the_progress_bar_ends_at_its_total(tmp_path):
    # an installed ELF is read once per stage of its facts (its strings for the import rules, its
    # linking for the linkage rules): the bar's total counts what its chunks advance it by
    class Recorder:
        def __init__(self) -> None:
            self.totals: list[int | None] = []
            self.done = 0

        def start(self, total, description):
            self.totals.append(total)

        def advance(self, n=1, member=""):
            self.done += n

        def stop(self):
            pass

    ext = compile_so(tmp_path, "_ext.so", "int PyInit__ext(void) { return 0; }\n").read_bytes()
    files = {"pkg/__init__.py": "from . import core\n", "pkg/core.py": "X = 1\n",
             **{f"pkg/_ext{i}.cpython-311-x86_64-linux-gnu.so": ext for i in range(4)}}
    dist = make_installed(tmp_path / "site", "pkg", files)
    rec = Recorder()
    audit([dist], config=Config(cache=False, jobs=2), command="explain", progress=rec)
    assert rec.totals and rec.done == sum(rec.totals) > 4 * len(ext)  # each .so counted in two stages at least


def test_held_stages_fill_only_the_workers_a_walk_leaves_idle():
    # the walk's facts are what the family forked at its end waits for: while it keeps workers busy,
    # the later stages held back are not sent to them (extraction._Feeder.reserved)
    from concurrent.futures import Future

    sent: list[int] = []

    def submit(i, chunk):
        sent.append(chunk)
        return Future()  # never done: each one sent stays in flight

    groups = [(0, 0, k) for k in range(6)]
    feeder = extraction._Feeder(None, submit, groups, 3, held=list(range(6)))  # type: ignore[arg-type]
    feeder.reserved = 3  # a walk keeps the three workers busy
    feeder.feed()
    assert sent == []
    feeder.reserved = 1  # it runs thin: two workers idle
    feeder.feed()
    assert sent == [0, 1]
    feeder.reserved = 0  # it ended
    feeder.feed()
    assert sent == [0, 1, 2]  # one per worker in flight, as before any walk


def test_a_walk_reserves_its_workers_and_gives_them_back_when_it_ends(tmp_path, monkeypatch, LEVELS, walking):
    dist = make_installed(tmp_path / "site", "pkg", LEVELS)
    serial = audit([dist], config=Config(cache=False, jobs=1), command="explain")
    seen: list[tuple[bool, int]] = []  # (inside a walk, workers reserved) at each top-up
    real_feed = extraction._Feeder.feed

    def feed(self):
        seen.append((walking[0], self.reserved))
        return real_feed(self)

    monkeypatch.setattr(extraction._Feeder, "feed", feed)
    report = audit([make_installed(tmp_path / "site2", "pkg", LEVELS)], config=Config(cache=False, jobs=2),
                   command="explain")
    assert any(inside and reserved > 0 for inside, reserved in seen)  # the walk kept its workers
    assert [reserved for inside, reserved in seen if not inside] and all(
        reserved == 0 for inside, reserved in seen if not inside)  # and gave them back
    assert [f.message.replace("site2", "site") for f in report.findings] == [f.message for f in serial.findings]
