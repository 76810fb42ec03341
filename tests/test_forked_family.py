"""A rule family finished in a forked child once its walk ends (``rule_run.RuleRun``, ``forked.py``):
the parent runs the later families meanwhile, and the audit's report, counts and cache are those of
the same audit run in one process."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from conftest import make_installed

import cuaudit.extraction as extraction
import cuaudit.forked as forked
import cuaudit.rule_run as rule_run
from cuaudit import audit
from cuaudit.config import Config
from cuaudit.inputs.environment import InstalledDistribution
from cuaudit.report import json_report

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the family is forked only where processes fork")

#: a package whose closure is walked (CU1xx), with a public submodule nobody binds (a CU101 finding),
#: one that does not parse (a problem met reading on demand) and a NumPy call for the later families
FILES = {
    "pkg/__init__.py": "from . import core\n",
    "pkg/core.py": "import pkg.util\nimport numpy as np\n\ndef f(x):\n    return np.float32(3) + x\n",
    "pkg/util.py": "X = 1\n",
    "pkg/plot.py": "Y = 2\n",
    "pkg/broken.py": "def (:\n",
    **{f"pkg/sub{i}.py": f"import pkg.util\nZ = {i}\n" for i in range(6)},
}


def _dist(tmp_path: Path) -> InstalledDistribution:
    return make_installed(tmp_path / "site", "pkg", FILES)


def _fresh(dist: InstalledDistribution) -> InstalledDistribution:
    return InstalledDistribution(None, dist.ref.name, dist.ref.version, dist.meta_dir)


def _report(report) -> tuple:
    doc = json_report.document(report)
    return doc["findings"], {k: v for k, v in report.stats.items() if k != "seconds"}


@pytest.fixture
def forks(monkeypatch) -> list[int]:
    """The pids of the children the audits of this process forked for a family."""
    pids: list[int] = []
    real = forked.fork

    def spy():
        child, send = real()
        if child is not None:
            pids.append(child.pid)
        return child, send

    monkeypatch.setattr(forked, "fork", spy)
    return pids


def test_the_import_family_is_forked_and_the_report_is_the_one_process_one(tmp_path, forks):
    dist = _dist(tmp_path)
    serial = audit([dist], config=Config(cache_dir=str(tmp_path / "serial"), jobs=1), command="explain")
    assert forks == []  # one process: nothing runs beside it, nothing is forked
    split = audit([_fresh(dist)], config=Config(cache_dir=str(tmp_path / "split"), jobs=2), command="explain")
    assert len(forks) == 1
    assert _report(split) == _report(serial)
    assert any(f.code == "CU101" and "pkg.plot" in f.message for f in split.findings)
    assert any(f.code == "CU006" for f in split.findings)  # the problem the child met, taken in
    # the facts the child read are in the cache: a second audit extracts nothing, and says the same
    again = audit([_fresh(dist)], config=Config(cache_dir=str(tmp_path / "split"), jobs=2), command="explain")
    assert again.stats["facts_extracted"] == 0
    assert again.stats["facts_cached"] == split.stats["facts_extracted"] + split.stats["facts_cached"]
    assert _report(again)[0] == _report(serial)[0]


def test_a_child_extracts_what_changed_and_the_parent_keeps_it(tmp_path, forks):
    dist = _dist(tmp_path)
    conf = Config(cache_dir=str(tmp_path / "cache"), jobs=2)
    audit([dist], config=conf, command="explain")
    time.sleep(0.01)
    (tmp_path / "site" / "pkg" / "util.py").write_text("X = 1\nimport pkg.plot\n")  # binds plot now
    changed = audit([_fresh(dist)], config=conf, command="explain")
    assert len(forks) == 2 and changed.stats["facts_extracted"] > 0
    assert not any(f.code == "CU101" and "pkg.plot" in f.message for f in changed.findings)
    serial = audit([_fresh(dist)], config=Config(cache_dir=str(tmp_path / "serial"), jobs=1), command="explain")
    assert _report(changed)[0] == _report(serial)[0]
    again = audit([_fresh(dist)], config=conf, command="explain")
    assert again.stats["facts_extracted"] == 0  # what the child extracted reached the cache


def _in_the_child(monkeypatch, act) -> None:
    """``act()`` in a forked family's child, as it is about to send its result."""
    parent = os.getpid()
    real = rule_run.RuleRun._result

    def result(self):
        if os.getpid() != parent:
            act()
        return real(self)

    monkeypatch.setattr(rule_run.RuleRun, "_result", result)


def test_a_child_that_fails_leaves_the_family_to_the_parent(tmp_path, forks, monkeypatch):
    dist = _dist(tmp_path)

    def breaks():
        raise RuntimeError("the child breaks")

    _in_the_child(monkeypatch, breaks)
    split = audit([dist], config=Config(cache=False, jobs=2), command="explain")
    assert len(forks) == 1
    serial = audit([_fresh(dist)], config=Config(cache=False, jobs=1), command="explain")
    assert _report(split) == _report(serial)


def test_no_child_outlives_a_failed_audit(tmp_path, forks, monkeypatch):
    # a later family fails outside any rule's check (the audit itself breaks): the child is ended
    dist = _dist(tmp_path)
    real = rule_run.RuleRun._unread

    def interrupted(self):
        if self._forked is not None:  # the audit's end, with the child still to be taken in
            raise KeyboardInterrupt
        return real(self)

    monkeypatch.setattr(rule_run.RuleRun, "_unread", interrupted)
    with pytest.raises(KeyboardInterrupt):
        audit([dist], config=Config(cache=False, jobs=2), command="explain")
    assert len(forks) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(forks[0], os.WNOHANG)  # reaped: not running, not a zombie


def test_probes_and_one_job_never_fork(tmp_path, forks):
    dist = _dist(tmp_path)
    audit([dist], config=Config(cache=False, jobs=1), command="explain")
    assert not rule_run._may_fork(Config(jobs=2, probe=True))
    assert rule_run._may_fork(Config(jobs=2)) and forks == []


def test_a_forked_result_cut_short_is_none():
    child, send = forked.fork()
    if send is not None:
        os._exit(0)  # ends without sending anything
    assert child is not None and child.result() is None
    child, send = forked.fork()
    if send is not None:
        send({"a": [1, 2]})
    assert child is not None and child.result() == {"a": [1, 2]}


def test_a_family_is_forked_beside_busy_workers_only_with_cores_to_spare(tmp_path, forks, monkeypatch):
    # with workers still busy at the walk's end (stages coming, facts in flight), the child would take
    # their cores: forked from FORK_BESIDE_WORKERS cores on, never below
    monkeypatch.setattr(extraction.Extraction, "workers_busy", lambda self: True)
    dist = _dist(tmp_path)
    audit([dist], config=Config(cache=False, jobs=2), command="explain")
    assert forks == []
    audit([_fresh(dist)], config=Config(cache=False, jobs=rule_run.FORK_BESIDE_WORKERS), command="explain")
    assert len(forks) == 1


def test_workers_are_busy_while_facts_are_in_flight_or_coming(tmp_path):
    ex = extraction.Extraction(Config(cache=False), None)
    assert not ex.workers_busy()
    ex.facts.inflight.add((0, "pkg/a.py", "promotion_source"))
    assert ex.workers_busy()
    ex.facts.inflight.clear()
    ex.facts.coming.add((0, "pkg/a.so", "elf"))
    assert ex.workers_busy()


def test_forking_beside_the_pools_thread_warns_nothing(tmp_path, monkeypatch):
    # 3.12+ warns on a fork of a multi-threaded process; this one is known and safe (forked.fork)
    import threading
    import warnings

    threads: list[int] = []
    real = forked.fork

    def spy():
        threads.append(threading.active_count())
        return real()

    monkeypatch.setattr(forked, "fork", spy)
    monkeypatch.setattr(extraction, "PARALLEL_MIN_TASKS", 1)  # a pool, whose manager thread runs at the fork
    dist = _dist(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        audit([dist], config=Config(cache=False, jobs=rule_run.FORK_BESIDE_WORKERS), command="explain")
    assert len(threads) == 1 and threads[0] > 1
    assert not [w for w in caught if "multi-threaded" in str(w.message) and "forked.py" in w.filename]


def test_the_parent_writes_what_it_read_before_it_waits_for_the_child(tmp_path, forks, monkeypatch):
    events: list[str] = []
    flush, result = extraction.Extraction.flush, forked.Forked.result

    def spied_flush(self):
        events.append("flush")
        return flush(self)

    def spied_result(self, *args):
        events.append("wait")
        return result(self, *args)

    monkeypatch.setattr(extraction.Extraction, "flush", spied_flush)
    monkeypatch.setattr(forked.Forked, "result", spied_result)
    dist = _dist(tmp_path)
    conf = Config(cache_dir=str(tmp_path / "cache"), jobs=2)
    audit([dist], config=conf, command="explain")
    assert len(forks) == 1 and events == ["flush", "wait", "flush"]  # the child's facts in the last
    assert audit([_fresh(dist)], config=conf, command="explain").stats["facts_extracted"] == 0


def test_the_workers_are_gone_before_the_parent_waits_for_the_child(tmp_path, forks, monkeypatch):
    # once every rule has run nothing more is extracted: the idle workers' memory must not add to
    # the parent's and the child's, at their largest while the parent waits
    import multiprocessing

    monkeypatch.setattr(rule_run, "FORK_BESIDE_WORKERS", 1)
    monkeypatch.setattr(extraction, "PARALLEL_MIN_TASKS", 1)
    pools: list[object] = []  # the pool of each batch sent to workers
    alive_at_wait: list[int] = []  # the worker processes alive when the parent waits for the child
    started, result = extraction.Extraction._workers, forked.Forked.result

    def spied_workers(self, *args):
        pools.append(started(self, *args))
        return pools[-1]

    def spied_result(self, *args):
        alive_at_wait.append(len(multiprocessing.active_children()))
        return result(self, *args)

    monkeypatch.setattr(extraction.Extraction, "_workers", spied_workers)
    monkeypatch.setattr(forked.Forked, "result", spied_result)
    dist = _dist(tmp_path)
    serial = audit([dist], config=Config(cache=False, jobs=1), command="explain")
    report = audit([_fresh(dist)], config=Config(cache=False, jobs=2), command="explain")
    assert len(forks) == 1 and pools and alive_at_wait == [0], (pools, alive_at_wait)
    assert _report(report)[0] == _report(serial)[0]


def test_a_child_that_hangs_is_ended_and_the_family_runs_in_the_parent(tmp_path, forks, monkeypatch):
    dist = _dist(tmp_path)
    _in_the_child(monkeypatch, lambda: time.sleep(60))
    monkeypatch.setattr(rule_run, "FORKED_FAMILY_TIMEOUT", 0.5)
    started = time.monotonic()
    split = audit([dist], config=Config(cache=False, jobs=2), command="explain")
    assert len(forks) == 1 and time.monotonic() - started < 30
    with pytest.raises(ChildProcessError):
        os.waitpid(forks[0], os.WNOHANG)  # ended and reaped
    serial = audit([_fresh(dist)], config=Config(cache=False, jobs=1), command="explain")
    assert _report(split) == _report(serial)


def test_a_fact_both_took_is_counted_once(tmp_path):
    # the parent and the child count what each took since the fork; absorb keeps one count per key,
    # and an evidence fact both extracted counts as one process's extraction and its later cached read
    ex = extraction.Extraction(Config(cache=False), None)
    ex.took = {(0, "pkg/a.py", "python_source"): extraction._EXTRACTED, ("evidence", "k1", ""): extraction._EXTRACTED}
    ex.extracted, ex.evidence_extracted = 1, 1
    delta = {"counts": [1, 1, 1, 2, 0], "problems": [], "bundles": [], "loose": [],
             "took": {(0, "pkg/a.py", "python_source"): extraction._EXTRACTED, (0, "pkg/b.py", "python_source"): extraction._BY_CONTENT,
                      ("evidence", "k1", ""): extraction._EXTRACTED, ("evidence", "k2", ""): extraction._EXTRACTED}}
    ex.absorb(delta)
    assert (ex.extracted, ex.cached, ex.by_content) == (1, 1, 1)  # a.py once; b.py found by content in the child
    assert (ex.evidence_extracted, ex.evidence_cached) == (2, 1)  # k1 extracted once then read; k2 the child's
    assert ex.took is None


def test_a_host_that_ignores_sigchld_still_gets_the_family(tmp_path, forks):
    # an application embedding cuaudit may reap its children itself (SIGCHLD ignored): the child's
    # result is still taken, and one cut short is still refused (the family then runs in the parent)
    import signal

    dist = _dist(tmp_path)
    old = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        split = audit([dist], config=Config(cache=False, jobs=2), command="explain")
    finally:
        signal.signal(signal.SIGCHLD, old)
    assert len(forks) == 1
    serial = audit([_fresh(dist)], config=Config(cache=False, jobs=1), command="explain")
    assert _report(split) == _report(serial)


def test_what_the_family_reads_and_the_workers_still_extract_is_collected_before_the_fork(tmp_path, monkeypatch):
    # CU103 names every package's facts ahead and they are sent as the walk ends: in flight at the
    # fork, the child would extract them again itself, one member at a time
    files = {**FILES, **{f"pkg/p{i}/__init__.py": f"V = {i}\n" for i in range(4)},
             **{f"pkg/p{i}/__init__.pyi": "V: int\n" for i in range(4)}}
    dist = make_installed(tmp_path / "site", "pkg", files)
    serial = audit([dist], config=Config(cache=False, jobs=1), command="explain")
    monkeypatch.setattr(rule_run, "FORK_BESIDE_WORKERS", 1)
    monkeypatch.setattr(extraction, "PARALLEL_MIN_TASKS", 1)
    extractions: list = []
    at_fork: list[set[str]] = []
    real_init, real_fork = extraction.Extraction.__init__, forked.fork

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        extractions.append(self)

    def fork():
        at_fork.append({k[2] for ex in extractions for k in ex.facts.inflight} if extractions else set())
        return real_fork()

    from cuaudit import rules

    reads = {n for code in ("CU101", "CU102", "CU103", "CU104", "CU105") for n in rules.get(code).needs}
    monkeypatch.setattr(extraction.Extraction, "__init__", init)
    monkeypatch.setattr(forked, "fork", fork)
    report = audit([make_installed(tmp_path / "site2", "pkg", files)], config=Config(cache=False, jobs=2), command="explain")
    assert "python_source" in reads and len(at_fork) == 1 and not at_fork[0] & reads, at_fork
    assert [f.message.replace("site2", "site") for f in report.findings] == [f.message for f in serial.findings]


def _sent_ahead(tmp_path, monkeypatch, *, early: bool = True) -> list[tuple[str, bool, set[str]]]:
    """(when, whether the walking family reads it, extractors) of each chunk sent ahead in a 2-job
    audit with CU103's packages and tests no rule reads; ``early=False``: as if the walk had sent
    nothing as it started (a walk whose facts were all cached).  The report is checked against one job's."""
    files = {**FILES, **{f"pkg/p{i}/__init__.py": f"V = {i}\n" for i in range(4)},
             **{f"pkg/tests/test_{i}.py": f"def test_{i}():\n    assert {i}\n" for i in range(4)}}
    dist = make_installed(tmp_path / "site", "pkg", files)
    serial = audit([dist], config=Config(cache=False, jobs=1), command="explain")
    monkeypatch.setattr(extraction, "PARALLEL_MIN_TASKS", 1)
    sent: list[tuple[str, set[str]]] = []
    when: list[str] = []
    real_send_later, real_submitter = extraction.Extraction._send_later, extraction.Extraction._submitter

    def send_later(self, *args, rest=True):
        if not rest and not early:
            return None
        when.append("at the walk's end" if rest else "as the walk starts")
        try:
            return real_send_later(self, *args, rest=rest)
        finally:
            when.pop()

    def submitter(self, *args):
        submit = real_submitter(self, *args)
        if not when:
            return submit

        def recorded(i, chunk):
            sent.append((when[-1], {n for _member, names in chunk for n in names}))
            return submit(i, chunk)
        return recorded

    monkeypatch.setattr(extraction.Extraction, "_send_later", send_later)
    monkeypatch.setattr(extraction.Extraction, "_submitter", submitter)
    report = audit([_fresh(dist)], config=Config(cache=False, jobs=2), command="explain")
    assert _report(report)[0] == _report(serial)[0]
    from cuaudit import rules

    reads = {n for code in ("CU101", "CU102", "CU103", "CU104", "CU105") for n in rules.get(code).needs}
    return [(w, bool(names & reads), names) for w, names in sent]


def test_what_the_walking_family_reads_next_is_sent_as_the_walk_starts_in_chunks_of_its_own(tmp_path, monkeypatch):
    # CU103's packages, named ahead, went with the format checks of the sources no rule reads, in the
    # same chunks, once the walk had ended: the fork then waited for the whole batch (1.5 s of the
    # GPU machine's cold run, every worker busy with it).  Now they are sent behind the walk's first
    # chunks, alone, and the rest as the walk ends.
    sent = _sent_ahead(tmp_path, monkeypatch)
    assert any(w == "as the walk starts" and urgent for w, urgent, _n in sent), sent  # before the walk's end
    assert all(w == "as the walk starts" for w, urgent, _n in sent if urgent), sent
    assert all(not urgent for w, urgent, _n in sent if w == "at the walk's end"), sent  # the rest apart
    assert any("format" in names for w, _u, names in sent if w == "at the walk's end"), sent  # the tests' checks


def test_what_the_walking_family_reads_is_still_sent_first_and_apart_as_the_walk_ends(tmp_path, monkeypatch):
    # a walk that sent nothing as it started (its facts all cached) leaves the family's facts to the
    # send at its end: there too in chunks of their own, ahead of the rest
    sent = _sent_ahead(tmp_path, monkeypatch, early=False)
    urgent = [u for _w, u, _n in sent]
    assert urgent and urgent[0] and not all(urgent), sent
    assert urgent == sorted(urgent, reverse=True), sent  # none of the family's after another's


def test_the_parent_stops_idle_workers_while_the_child_computes(tmp_path, forks, monkeypatch):
    # once the family is forked, the parent runs the later families: the first rule it ends with
    # the workers idle, and no later rule reading a fact still to extract, stops the pool before
    # the rules have all run (not only at finish)
    monkeypatch.setattr(rule_run, "FORK_BESIDE_WORKERS", 1)
    monkeypatch.setattr(extraction, "PARALLEL_MIN_TASKS", 1)
    events: list[str] = []
    stop, finish = extraction.Extraction.stop_workers, rule_run.RuleRun.finish

    def spied_stop(self):
        if self._pool is not None:
            events.append(f"stop after {len(forks)} fork")
        return stop(self)

    def spied_finish(self):
        events.append("finish")
        return finish(self)

    monkeypatch.setattr(extraction.Extraction, "stop_workers", spied_stop)
    monkeypatch.setattr(rule_run.RuleRun, "finish", spied_finish)
    dist = _dist(tmp_path)
    serial = audit([dist], config=Config(cache=False, jobs=1), command="explain")
    events.clear()
    report = audit([_fresh(dist)], config=Config(cache=False, jobs=2), command="explain")
    assert len(forks) == 1 and events[:2] == ["stop after 1 fork", "finish"], events
    assert _report(report)[0] == _report(serial)[0]


class _IdleExtraction:
    """What RuleRun._let_idle_workers_go reads of an extraction: idle workers, the pending keys."""

    def __init__(self, pending: list[tuple[int, str, str]], named: tuple = ()) -> None:
        self.facts = type("F", (), {"pending": dict.fromkeys(pending), "named_ahead": set(named)})()
        self.stopped = 0

    def workers_running(self) -> bool:
        return not self.stopped

    def workers_idle(self) -> bool:
        return True

    def stop_workers(self) -> None:
        self.stopped += 1


def _reader(needs: tuple[str, ...], ahead_reads: tuple[str, ...] = ()) -> object:
    return type("R", (), {"needs": needs, "ahead_reads": ahead_reads})()


def _idle_run(ex: _IdleExtraction, *later: object) -> rule_run.RuleRun:
    run = object.__new__(rule_run.RuleRun)
    run._extraction = ex
    run.runnable = [_reader(("elf",)), *later]
    return run


def test_idle_workers_stay_while_a_later_rule_reads_facts_still_to_extract():
    # CU202's import walks read module_imports on demand after the import family is forked: a pool
    # stopped before them would be started again (16 forks of the parent on the GPU machine)
    ex = _IdleExtraction([(0, "pkg/a.py", "module_imports")])
    run = _idle_run(ex, _reader(("module_imports", "elf")), _reader(("elf",)))
    run._let_idle_workers_go(0)
    assert ex.stopped == 0  # a later rule reads module_imports, one still pending
    run._let_idle_workers_go(1)
    assert ex.stopped == 1  # no later rule reads a pending fact
    run._let_idle_workers_go(2)
    assert ex.stopped == 1  # a pool stopped is not stopped again
    ex = _IdleExtraction([])
    _idle_run(ex, _reader(("module_imports",)))._let_idle_workers_go(0)
    assert ex.stopped == 1  # nothing pending


def test_idle_workers_go_when_later_rules_read_only_what_they_named_ahead():
    # CU4xx reads the promotion_source facts its ahead hook named; those of installed tests stay
    # pending for ever: on the GPU machine they kept 16 idle workers (920 MB) beside the forked
    # child to the last CU4xx rule, the tree's peak
    tests = (0, "pkg/tests/test_a.py", "promotion_source")
    named = (0, "pkg/a.py", "promotion_source")
    cu4 = _reader(("promotion_source", "metadata"), ahead_reads=("promotion_source",))
    ex = _IdleExtraction([tests])
    _idle_run(ex, cu4)._let_idle_workers_go(0)
    assert ex.stopped == 1  # never named: no later rule reads it
    ex = _IdleExtraction([tests, named], named=[named])
    _idle_run(ex, cu4)._let_idle_workers_go(0)
    assert ex.stopped == 0  # named ahead and not in yet: CU4xx reads it
    # another later reader of the same extractor that names nothing ahead reads any of them
    ex = _IdleExtraction([tests])
    _idle_run(ex, cu4, _reader(("promotion_source",)))._let_idle_workers_go(0)
    assert ex.stopped == 0


def test_facts_named_ahead_are_the_pending_ones():
    facts = extraction.Facts()
    facts.pending = {(0, "a.py", "promotion_source"): None}
    facts.ahead([(0, "a.py", "promotion_source"), (0, "b.py", "promotion_source")])
    assert facts.named_ahead == {(0, "a.py", "promotion_source")}


def test_workers_are_idle_only_when_nothing_is_held_unsent_or_still_out():
    # stopping the pool cancels what it has queued: it must be stopped only with every chunk back
    from collections import deque
    from concurrent.futures import Future
    from types import SimpleNamespace

    ex = extraction.Extraction(Config(cache=False), None)
    out, back = Future(), Future()
    back.set_result([])
    ex._feeder = SimpleNamespace(held=deque(), groups=[0, 1], futures={0: back, 1: out})
    assert not ex.workers_idle()  # a chunk still out
    out.set_result([])
    assert ex.workers_idle()
    ex._feeder.held.append(2)
    assert not ex.workers_idle()  # a stage held back
    ex._feeder = SimpleNamespace(held=deque(), groups=[0, 1, 2], futures={0: back, 1: out})
    assert not ex.workers_idle()  # a group not sent yet
    ex._feeder = None
    ahead = Future()
    ex._sent = [(ahead, 0, [], set())]
    assert not ex.workers_idle()  # facts named ahead still out
    ahead.set_result([])
    assert ex.workers_idle()
