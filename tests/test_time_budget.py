"""The CPU-time budgets of each extractor's pass over one member and of each rule (``cuaudit.time_budget``).

A pass that runs away (a bug of ours, or an input that makes one of them take time that grows
faster than its bytes) is stopped at ``ANALYSIS_SECONDS`` of CPU: its member gets CU004 naming the
budget, every other member and pass keeps its facts, and the finding is never cached.  A rule's
check past ``RULE_SECONDS`` is CU011, and the rest of its family does not run.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time

import pytest
from conftest import make_tree

import cuaudit.workers as workers
from cuaudit.facts.python_source import PythonSourceExtractor
from cuaudit.time_budget import CPUBudgetExceeded, cpu_budget

if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip(reason="setitimer budgets are tested on Linux")


@pytest.fixture
def hang_guard():
    """A test that would hang fails instead (SIGALRM after 120 s)."""

    def fail(*_):
        raise TimeoutError("hung")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _spin() -> None:
    while True:
        pass


SOURCES = {
    "pkg/__init__.py": "from . import good\n",
    "pkg/good.py": "import numpy as np\nx = np.uint8(1) + 300\n",
    "pkg/slow.py": "import numpy as np\ny = np.uint8(1) + 400\n",
}


def _findings(cli, tree, *args: str) -> list[dict]:
    rc, out, err = cli("check", tree, "--isolated", "--format", "json", *args)
    assert rc in (0, 1), err
    return json.loads(out)["findings"]


def _runaway(monkeypatch, on: str, first_recursion: bool = False) -> None:
    """python_source's pass spins for ever on the member ``on`` (after a RecursionError first, with
    ``first_recursion``: the spin is then in ``compat.deep``'s thread)."""
    real = PythonSourceExtractor.extract
    calls: dict[str, int] = {}

    def extract(self, reader):
        if reader.member.path.endswith(on):
            calls[on] = calls.get(on, 0) + 1
            if first_recursion and calls[on] == 1:
                raise RecursionError("planted")
            _spin()
        return real(self, reader)

    monkeypatch.setattr(PythonSourceExtractor, "extract", extract)
    monkeypatch.setattr(workers, "ANALYSIS_SECONDS", 0.5)


def _key(f: dict) -> tuple:
    return f["code"], f["location"].get("member"), f["message"]


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("first_recursion", [False, True], ids=["in-place", "in-deep-thread"])
def test_a_pass_that_runs_away_is_cu004_for_its_member_and_the_rest_stands(tmp_path, cli, monkeypatch, hang_guard,
                                                                          jobs, first_recursion):
    tree = make_tree(tmp_path / "proj", SOURCES)
    clean = _findings(cli, tree, "--no-cache", "-j", jobs)
    threads = threading.active_count()
    _runaway(monkeypatch, "pkg/slow.py", first_recursion)
    start = time.monotonic()
    found = _findings(cli, tree, "--no-cache", "-j", jobs)
    took = time.monotonic() - start
    assert took < 60, took
    budget = [f for f in found if f["code"] == "CU004"]
    assert len(budget) == 1, found
    assert budget[0]["location"]["member"] == "pkg/slow.py"
    assert "the python_source pass took more than 0.5 CPU seconds (budget ANALYSIS_SECONDS)" in budget[0]["message"]
    assert budget[0]["evidence"]["extractor"] == "python_source"
    assert not [f for f in found if f["code"] == "CU011"], found
    # the other members' findings, and slow.py's from its other passes (CU4xx: promotion_source), stand
    assert {_key(f) for f in clean} <= {_key(f) for f in found}, (clean, found)
    assert any(f["code"].startswith("CU4") and f["location"].get("member") == "pkg/slow.py" for f in found), found
    if jobs == "1":  # the deep thread was stopped with its caller (it would spin for ever)
        for _ in range(100):
            if threading.active_count() <= threads:
                break
            time.sleep(0.05)
        assert threading.active_count() <= threads, threading.enumerate()


def test_a_pass_stopped_by_its_budget_is_not_cached(tmp_path, cli, monkeypatch, hang_guard):
    """The budget's CU004 depends on the machine's speed, not on the member's bytes: the next run,
    from the same fact cache, reads the member again."""
    tree = make_tree(tmp_path / "proj", SOURCES)
    cache = tmp_path / "cache"
    clean = _findings(cli, tree, "--no-cache", "-j", "1")
    with monkeypatch.context() as m:
        _runaway(m, "pkg/slow.py")
        first = _findings(cli, tree, "--cache-dir", cache, "-j", "1")
    assert [f["location"]["member"] for f in first if f["code"] == "CU004"] == ["pkg/slow.py"]
    again = _findings(cli, tree, "--cache-dir", cache, "-j", "1")
    assert sorted(map(_key, again)) == sorted(map(_key, clean))


def test_the_budget_comes_from_the_environment_and_stops_a_real_slow_member(tmp_path):
    """No planted code: cuaudit run as users run it, with ``CUAUDIT_BUDGET_ANALYSIS_SECONDS=1``, on a
    tree whose one long source (a 4.7 MB list of calls) takes Python's parser about two CPU seconds: the
    pass that parses it gets CU004 there, the passes after it reuse the parse, and the other file's
    finding stands."""
    import os
    import subprocess

    huge = "x = [" + ", ".join(f"a{i}.b.c(d)" for i in range(300_000)) + "]\n"
    tree = make_tree(tmp_path / "proj", {**SOURCES, "pkg/huge.py": huge})
    env = {**os.environ, "CUAUDIT_BUDGET_ANALYSIS_SECONDS": "1"}
    import ast
    import gc

    gc.disable()  # as cuaudit parses
    try:
        start = time.process_time()
        ast.parse(huge)
        took = time.process_time() - start
    finally:
        gc.enable()
    if took < 1.2:
        pytest.skip(f"this machine parses the long source in {took:.2f} s, less than the budget")
    proc = subprocess.run([sys.executable, "-m", "cuaudit", "check", str(tree), "--isolated", "--no-cache", "-j", "1",
                           "-f", "json"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    found = json.loads(proc.stdout)["findings"]
    budget = [f for f in found if f["code"] == "CU004"]
    assert [f["location"]["member"] for f in budget] == ["pkg/huge.py"], found
    assert "took more than 1 CPU seconds (budget ANALYSIS_SECONDS)" in budget[0]["message"]
    assert not [f for f in found if f["code"] == "CU011"], found
    assert any(f["code"] == "CU403" and f["location"]["member"] == "pkg/good.py" for f in found), found


def test_budgets_nest_and_the_one_that_ends_stops_what_is_inside_it():
    def busy(seconds: float) -> None:
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass

    with pytest.raises(CPUBudgetExceeded) as exc:
        with cpu_budget(0.2, "the outer pass"):
            try:
                with cpu_budget(30, "the inner pass"):
                    _spin()
            except Exception:  # noqa: BLE001 - the inner pass's own handlers must not take the outer's end
                pytest.fail("the outer budget's end was taken by the inner pass")
    assert exc.value.code == "CU004" and exc.value.message.startswith("the outer pass took more than 0.2 CPU seconds")
    # the inner one ends first: the outer goes on, and keeps its own budget afterwards
    with cpu_budget(5, "outer"):
        with pytest.raises(CPUBudgetExceeded, match="inner took more than 0.2"):
            with cpu_budget(0.2, "inner"):
                _spin()
        busy(0.3)
    # a budget that is left in time leaves no timer behind
    with cpu_budget(0.2, "quick"):
        pass
    busy(0.4)
    assert signal.getitimer(signal.ITIMER_VIRTUAL) == (0.0, 0.0)


def test_a_budget_outside_the_main_thread_is_not_kept():
    """Signals reach the main thread only: elsewhere the block runs unbounded (and no timer is set)."""
    seen: list[object] = []

    def run() -> None:
        with cpu_budget(0.01, "x"):
            end = time.process_time() + 0.2
            while time.process_time() < end:
                pass
            seen.append(signal.getitimer(signal.ITIMER_VIRTUAL))

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert seen == [(0.0, 0.0)]


def test_a_rule_that_runs_away_stops_its_family_and_the_others_stand(tmp_path, cli, monkeypatch, hang_guard):
    """``RULE_SECONDS``: a rule's check past its CPU budget is CU011 naming the budget; the later rules
    of its family do not run on models it may have left half built; the other families' findings
    stand, and the run is not kept for the next one."""
    import cuaudit.rule_run as rule_run
    from cuaudit.rules.promotion import CanCastPythonScalar

    tree = make_tree(tmp_path / "proj", {**SOURCES, "pkg/cast.py": "import numpy as np\nok = np.can_cast(300, np.uint8)\n"})
    clean = _findings(cli, tree, "--no-cache", "-j", "1")
    codes = {f["code"] for f in clean}
    assert {"CU101", "CU402", "CU403"} <= codes, codes  # CU402 runs before CU403, in the same family

    def spin(self, ctx):
        _spin()
        yield from ()

    monkeypatch.setattr(CanCastPythonScalar, "check", spin)
    monkeypatch.setattr(rule_run, "RULE_SECONDS", 0.5)
    cache = tmp_path / "cache"
    found = _findings(cli, tree, "--cache-dir", cache, "-j", "1")
    failed = [f for f in found if f["code"] == "CU011"]
    assert len(failed) == 1, found
    assert failed[0]["message"] == (
        "rule CU402 failed: rule CU402 took more than 0.5 CPU seconds (budget RULE_SECONDS); the rules of its "
        "family (promotion) were stopped (CUAUDIT_BUDGET_RULE_SECONDS raises the budget)")
    got = {f["code"] for f in found}
    assert not got & {"CU402", "CU403"}, got  # the rest of the family did not run
    assert {_key(f) for f in clean if not f["code"].startswith("CU4")} <= {_key(f) for f in found}
    monkeypatch.undo()
    again = _findings(cli, tree, "--cache-dir", cache, "-j", "1")  # nothing of the stopped run was reused
    assert sorted(map(_key, again)) == sorted(map(_key, clean))
