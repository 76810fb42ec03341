"""The benchmark harness keeps working: its quick mode runs end to end on the
small corpus inputs and produces every row with numbers.  No timing
thresholds here (timings belong to benchmarks/RESULTS.md): these tests
assert the shape of the table and that what is measured is measured right.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

BENCH = REPO / "benchmarks"
sys.path.insert(0, str(BENCH))

import harness  # noqa: E402


@pytest.fixture(scope="module")
def bench_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bench-cache")


# -- the measuring itself -----------------------------------------------------------


def test_peak_memory_is_the_commands_own(monkeypatch: pytest.MonkeyPatch, bench_cache: Path) -> None:
    """A command that touches 200 MB reports at least that; a tiny one reports
    far less than the harness's own interpreter (ru_maxrss survives exec, so a
    naive wait4 would report the harness's RSS for `true`)."""
    monkeypatch.setenv("CUAUDIT_BENCH_CACHE", str(bench_cache))
    big = harness.measure([sys.executable, "-c", "b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096])"],
                          dict(os.environ), 60, capture=False)
    assert big.rc == 0
    assert big.maxrss_mb >= 200
    small = harness.measure(["true"], dict(os.environ), 60, capture=False)
    assert small.rc == 0
    if harness.rusage_helper() is not None:
        assert small.maxrss_mb < 8, small.maxrss_mb


def test_tree_memory_counts_worker_processes(monkeypatch: pytest.MonkeyPatch, bench_cache: Path) -> None:
    """Two children holding 150 MB each at the same time: the tree's summed
    PSS sees both, the largest single process only one.  (They hold it 3 s: on a loaded
    machine the second may start late, and the sampler must see both filled at once.)"""
    monkeypatch.setenv("CUAUDIT_BENCH_CACHE", str(bench_cache))
    code = (
        "import subprocess, sys\n"
        "child = 'import time; b = bytearray(150 * 2**20); b[::4096] = b\"x\" * len(b[::4096]); time.sleep(3.0)'\n"
        "ps = [subprocess.Popen([sys.executable, '-c', child]) for _ in range(2)]\n"
        "[p.wait() for p in ps]\n"
    )
    s = harness.measure([sys.executable, "-c", code], dict(os.environ), 60, capture=False)
    assert s.rc == 0
    assert 150 <= s.maxrss_mb < 290
    assert s.tree_mb >= 290
    assert s.anon_mb >= 290  # allocated memory, not mapped files


def test_mapped_file_pages_are_not_anonymous_memory(tmp_path: Path) -> None:
    """An mmap reader that touches a 120 MB file shows it in PSS (the page
    cache it maps), not in its anonymous memory: the two columns tell apart
    what a reader allocates from what it maps."""
    data = tmp_path / "data.bin"
    with open(data, "wb") as fh:
        fh.write(b"\1" * (120 * 2**20))
    code = (
        "import mmap, sys, time\n"
        "f = open(sys.argv[1], 'rb'); m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n"
        "s = sum(m[i] for i in range(0, len(m), 4096)); time.sleep(0.5)\n"
    )
    s = harness.measure([sys.executable, "-c", code, str(data)], dict(os.environ), 60, capture=False)
    assert s.rc == 0
    assert s.tree_mb >= 100
    assert s.anon_mb < 60


def test_return_code_and_summary_are_read() -> None:
    s = harness.measure([sys.executable, "-c", "import json; print('noise'); print(json.dumps({'items': 7}))"],
                        dict(os.environ), 60, capture=True)
    assert (s.rc, s.summary) == (0, {"items": 7})
    s = harness.measure([sys.executable, "-c", "raise SystemExit(3)"], dict(os.environ), 60, capture=False)
    assert s.rc == 3


def test_linear_fit_recovers_slope_and_constant() -> None:
    a, b, r2 = harness.linear_fit([1, 2, 4, 8], [0.3 + 0.002 * x for x in (1, 2, 4, 8)])
    assert a == pytest.approx(0.3)
    assert b == pytest.approx(0.002)
    assert r2 == pytest.approx(1.0)


def test_placeholders_leave_snippet_braces_alone() -> None:
    values = {"lib": "/x/libfoo.so", "elf": harness.Tree(Path("/t"), [Path("/t/a/lib1.so"), Path("/t/b/lib2.so")])}
    assert harness._fill('print(json.dumps({"na": f"{exc}"})) {lib}', values, "") == \
        'print(json.dumps({"na": f"{exc}"})) /x/libfoo.so'
    assert harness._fill("{elf.libdirs}", values, "") == "/t/a:/t/b"
    assert harness._fill("--cache-dir={fresh}", values, "/tmp/f1") == "--cache-dir=/tmp/f1"
    # a list input: one argument per item, with the option's prefix repeated
    assert harness._expand(["{libs}", "--with={libs}", "{lib}"], {**values, "libs": ["a.whl", "b.whl"]}) == \
        ["a.whl", "b.whl", "--with=a.whl", "--with=b.whl", "/x/libfoo.so"]


def test_write_results_replaces_only_its_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import run

    results = tmp_path / "RESULTS.md"
    results.write_text("# R\n\nhand-written analysis\n\n<!-- BEGIN GENERATED: cpu -->\nold\n<!-- END GENERATED: cpu -->\n"
                       "\n## GPU\n\nkept\n")
    monkeypatch.setattr(run, "RESULTS", results)
    run.write_results("cpu", "new table")
    run.write_results("gpu", "gpu table")
    text = results.read_text()
    assert "old" not in text and "new table" in text
    assert "hand-written analysis" in text and "kept" in text
    assert text.index("new table") < text.index("## GPU") < text.index("gpu table")


# -- the quick mode, end to end --------------------------------------------------------


@pytest.mark.corpus
def test_quick_mode_produces_every_row(corpus: Path, bench_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "quick.json"
    env = dict(os.environ, CUAUDIT_CORPUS=str(corpus), CUAUDIT_BENCH_CACHE=str(bench_cache))
    proc = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--quick", "--repeat", "1", "--json", str(out)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    import cases

    expected = [c.name for c in cases.CASES if c.quick]
    assert [c["name"] for c in doc["cases"]] == expected
    # every family of issue 8 has a quick row
    for prefix in ("startup", "check-", "dynsym-", "overlink-", "devicecode-", "capi-", "env-small-cold",
                   "env-small-cached"):
        assert any(n.startswith(prefix) for n in expected), prefix
    for case in doc["cases"]:
        assert case["na"] is None, (case["name"], case["na"])
        roles = [c["role"] for c in case["commands"]]
        assert roles[0] == "cuaudit" and roles.count("cuaudit") == 1
        for cmd in case["commands"]:
            where = f"{case['name']}: {cmd['label']}"
            assert cmd["failed"] is None, where + f" failed: {cmd['failed']}"
            if cmd["na"] is not None:
                # only features still being written may be missing, and tools this machine lacks
                assert "not present" in cmd["na"] or "not installed" in cmd["na"], where + f": {cmd['na']}"
                continue
            assert cmd["median_s"] > 0, where
            assert cmd["peak_mb"] > 0, where
            assert len(cmd["samples"]) == 1, where
            if cmd["role"] != "cuaudit" and case["commands"][0]["median_s"]:
                # the JSON keeps three decimals: 0.0445 is written 0.044
                assert cmd["ratio_to_cuaudit"] == pytest.approx(cmd["median_s"] / case["commands"][0]["median_s"],
                                                                rel=1e-2, abs=5e-4)
    by_name = {c["name"]: c for c in doc["cases"]}
    # the plain-Python floors report what they read
    inflate = next(c for c in by_name["check-rmm"]["commands"] if c["role"] == "floor")
    assert inflate["bytes"] > 5 * 2**20  # rmm's ELF members inflate to ~5.6 MB
    # the peers users run today really ran (the bench extra is part of the test extra)
    assert any(c["label"] == "auditwheel show" and c["median_s"] for c in by_name["check-rmm"]["commands"])
    pyelf = next(c for c in by_name["dynsym-libcudart"]["commands"] if c["label"] == "pyelftools")
    assert pyelf["items"] > 100  # libcudart.so.11.0's named dynamic symbols
    # the full check always exists: cuaudit numbers, not n/a
    assert by_name["check-rmm"]["commands"][0]["median_s"] > 0
    assert by_name["env-small-cached"]["commands"][0]["median_s"] > 0
    # scaling: one point per small wheel, with the bytes read, and a fit
    points = doc["scaling"]["points"]
    assert [p["name"] for p in points] == ["check-fastrlock", "check-cudart-cu11", "check-rmm"]
    assert all(p["read_mb"] > 0 and p["cuaudit_s"] > 0 for p in points)
    assert set(doc["scaling"]["time_fit"]) == {"constant_s", "ms_per_mb", "r2"}
    # the printed table has a row per case and the machine/versions header
    for name in expected:
        assert name in proc.stdout
    assert "median s" in proc.stdout and "peak MB" in proc.stdout and "auditwheel" in proc.stdout
    assert doc["machine"]["nproc"] and doc["machine"]["versions"]["cuaudit"].startswith("0.")


def test_runner_alternates_and_reports_failures_and_missing_tools(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A case built inline: cuaudit works, one peer fails, one is missing, the
    floor works; the failing peer is never timed, the missing one is n/a."""
    monkeypatch.setenv("CUAUDIT_BENCH_CACHE", str(tmp_path / "cache"))
    log = tmp_path / "order.log"
    snippet = "import json, sys; open(sys.argv[1], 'a').write(sys.argv[2] + '\\n'); print(json.dumps({'items': 10}))"
    case = harness.Case(
        "inline", "inline case", {},
        cuaudit=harness.Cmd("cu", ("{py}", "-c", snippet, str(log), "cu"), summary=True),
        peers=(
            harness.Cmd("peer", ("{py}", "-c", snippet, str(log), "peer"), summary=True),
            harness.Cmd("broken", ("{py}", "-c", "import sys; sys.exit('boom')")),
            harness.Cmd("absent", ("nonexistent-tool",), requires=lambda: "nonexistent-tool not installed"),
        ),
        floor=harness.Cmd("floor", ("{py}", "-c", snippet, str(log), "floor"), summary=True),
        targets=(harness.Target("seconds", 1e6), harness.Target("speedup", 1e6, "peer")),
    )
    run = harness.Run(large=False, log=lambda _m: None)
    work = tmp_path / "work"
    work.mkdir()
    result = harness.Runner(run, repeat=3, timeout=60, work=work).run_case(case)
    by_label = {c.label: c for c in result.commands}
    assert [c.role for c in result.commands] == ["cuaudit", "peer", "peer", "peer", "floor"]
    assert len(by_label["cu"].samples) == 3 and by_label["cu"].items == 10
    assert by_label["broken"].failed and "boom" in by_label["broken"].failed and not by_label["broken"].samples
    assert by_label["absent"].na == "nonexistent-tool not installed" and by_label["absent"].median is None
    assert result.ratio(by_label["peer"]) == pytest.approx(by_label["peer"].median / by_label["cu"].median)
    # alternating, the order rotated each repetition
    order = log.read_text().split()
    assert order == ["cu", "peer", "floor", "peer", "floor", "cu", "floor", "cu", "peer"]
    assert [t["status"] for t in result.targets()] == ["met", "MISSED"]
    rows = harness.case_rows([result])
    assert [r[1] for r in rows] == ["cu", "peer", "broken", "absent", "floor: floor"]
    assert rows[2][2] == "failed" and rows[3][2] == "n/a"


def _timed(role: str, label: str, walls: list[float], case: str = "c") -> "harness.CmdResult":
    return harness.CmdResult(role, label, [], [harness.Sample(w, 10.0, 10.0, 0, None, w) for w in walls],
                             rounds_of=case)


def test_ratio_targets_say_when_the_rounds_split() -> None:
    """A ratio target is judged on the medians, and its figure and status also give each round's
    ratio (run i of each command sits in round i of the alternation): a verdict the rounds do not
    all share says so, one they share stays plain, and commands timed in different cases' rounds
    are not paired."""
    case = harness.Case("c", "c", {}, cuaudit=harness.Cmd("cu", ("x",)),
                        targets=(harness.Target("speedup", 3, "auditwheel"), harness.Target("over_floor", 1)))

    def targets(cu: list[float], peer: list[float], floor: list[float], *, peer_case: str = "c") -> list[dict]:
        result = harness.CaseResult(case, commands=[
            _timed("cuaudit", "cu", cu), _timed("peer", "auditwheel show", peer, peer_case), _timed("floor", "f", floor)])
        return result.targets()

    # rounds: auditwheel/cuaudit 3.2, 2.9, 3.1 (median 3.1: met); cuaudit/floor 1.1, 0.9, 1.02 (median 1.02: missed)
    split = targets([1.0, 1.0, 1.0], [3.2, 2.9, 3.1], [1 / 1.1, 1 / 0.9, 1 / 1.02])
    assert [t["status"] for t in split] == ["met (2 of 3 rounds met)", "MISSED (1 of 3 rounds met)"]
    assert split[0]["measured"] == "3.10× (rounds 2.90-3.20×)"
    assert split[1]["measured"] == "1.02× floor (rounds 0.90-1.10×)"
    # every round agrees: the plain verdict, with the range
    firm = targets([1.0, 1.0, 1.0], [3.5, 3.3, 3.4], [0.5, 0.5, 0.5])
    assert [t["status"] for t in firm] == ["met", "MISSED"]
    assert firm[0]["measured"] == "3.40× (rounds 3.30-3.50×)"
    # a peer timed in another case's rounds (a command two cases share): medians only
    other = targets([1.0, 1.0, 1.0], [3.2, 2.9, 3.1], [1.0, 1.0, 1.0], peer_case="other")
    assert other[0] == {"target": "≥ 3× faster than auditwheel", "status": "met", "measured": "3.10×"}


def test_two_variable_fit_separates_per_mb_and_per_file_costs() -> None:
    mb, files = [1, 10, 100, 5, 50], [100, 20, 1000, 3000, 7]
    a, b, c, r2 = harness.linear_fit2(mb, files, [0.2 + 0.01 * x + 0.003 * z for x, z in zip(mb, files)])
    assert (a, b, c, r2) == (pytest.approx(0.2), pytest.approx(0.01), pytest.approx(0.003), pytest.approx(1.0))


def test_every_corpus_wheel_is_checked_against_auditwheel() -> None:
    """Issue 14: a cold `check` is faster than `auditwheel show` on *every* wheel of the corpus.
    The cases are the manifest's wheels, each with that target (fails if a wheel is added to
    tests/corpus.toml and no case times it, or a case loses its auditwheel row or target)."""
    import fnmatch

    import cases

    wheels = [a["file"] for a in cases.corpus_wheels()]
    assert len(wheels) >= 20  # both sets of the manifest, the large one included
    by_wheel = {}
    for case in cases.CASES:
        if case.name.startswith("check-") and "wheel" in case.inputs:
            for w in wheels:
                if fnmatch.fnmatchcase(w, case.inputs["wheel"].pattern):
                    by_wheel.setdefault(w, []).append(case)
    assert sorted(by_wheel) == sorted(wheels)
    for w, found in by_wheel.items():
        full = [c for c in found if "--select" not in " ".join(c.cuaudit.argv)]
        assert full, w
        for case in full:
            assert any(p.label.startswith("auditwheel show") for p in case.peers), case.name
            assert any(t.kind == "speedup" and t.value >= 1 and t.peer == "auditwheel" for t in case.targets), case.name
