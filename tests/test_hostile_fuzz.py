"""A short run of every atheris harness of ``fuzz/`` (seconds each): the long campaign is in docs/security.md.

Each harness starts from the inputs ``fuzz/make_seeds.py`` builds and runs a
few hundred mutations under libFuzzer's limits (1 GB, 30 s per input); any
exception other than "this input is bad" fails it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris")

REPO = Path(__file__).resolve().parent.parent
FUZZ = REPO / "fuzz"

#: harnesses whose readers have known bugs that the campaign found, with who fixes them; the
#: short run still runs (and passes when they are fixed: strict=False)
KNOWN: dict[str, str] = {}  # the Cython readers' crashes were in the readers formats/elf.py replaced


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fuzz-seeds")
    subprocess.run([sys.executable, str(FUZZ / "make_seeds.py"), str(root)], check=True,
                   env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    return root


@pytest.mark.parametrize("harness", ["zip", "tar", "elf", "fatbin", "cython", "text", "report"])
def test_harness_short_run(harness, seeds, tmp_path, request):
    if harness in KNOWN:
        request.applymarker(pytest.mark.xfail(reason=KNOWN[harness], strict=False))
    proc = subprocess.run(
        [sys.executable, str(FUZZ / f"fuzz_{harness}.py"), "-runs=400", "-max_total_time=20", "-rss_limit_mb=1024",
         "-timeout=30", "-seed=1", f"-artifact_prefix={tmp_path}/", str(seeds / harness)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Done " in proc.stderr


# -- fuzz/run_all.py: the parallel campaign and its results table ------------------------------------


def _run_all():
    sys.path.insert(0, str(FUZZ))
    try:
        import run_all
    finally:
        sys.path.remove(str(FUZZ))
    return run_all


def test_run_all_gives_every_target_a_core_and_spare_ones_to_the_slowest():
    run_all = _run_all()
    targets = list(run_all.TARGETS)
    [wave] = run_all.allocate(targets, 15)
    assert sum(wave.values()) == 15 and min(wave.values()) == 1 and set(wave) == set(targets)
    assert wave["report"] > wave["elf"] and wave["text"] > wave["tar"]
    waves = run_all.allocate(targets, 2)  # fewer cores than targets: waves, each target once
    assert [t for w in waves for t in w] == targets and all(sum(w.values()) <= 2 for w in waves)


def test_run_all_counts_distinct_crashes_hangs_and_ooms(tmp_path):
    import argparse
    import tarfile

    run_all = _run_all()
    crashes = tmp_path / "work" / "crashes" / "zip"
    crashes.mkdir(parents=True)
    for name in ("crash-ValueError-wheel.py-12-0123456789ab", "crash-ValueError-wheel.py-12-ba9876543210",
                 "crash-KeyError-wheel.py-40-0123456789ab", "crash-Hang-harness-00000000000a",
                 "oom-" + "1" * 40, "timeout-" + "2" * 40, "slow-unit-" + "3" * 40):
        (crashes / name).write_bytes(b"input")
    (tmp_path / "work" / "logs").mkdir()
    (tmp_path / "work" / "logs" / "zip-0.log.0").write_text("#10\tNEW\nstat::number_of_executed_units: 1234\n")
    results = {"zip": run_all.Result("zip", 1, seconds=10, executions=1234)}
    args = argparse.Namespace(work=str(tmp_path / "work"), out=str(tmp_path / "out"))
    (tmp_path / "out").mkdir()
    run_all.collect(args, results)
    r = results["zip"]
    assert sorted(r.crashes) == ["KeyError at wheel.py-40", "ValueError at wheel.py-12"]
    assert (r.hangs, r.ooms, r.other_artifacts) == (2, 1, 1)
    with tarfile.open(tmp_path / "out" / "details.tar.gz") as tar:
        names = tar.getnames()
    assert "logs/zip-0.log.0" in names and len([n for n in names if n.startswith("crashes/zip/")]) == 5
    assert "| `zip` | 1 | 1,234 | 123 | 2: " in run_all.table(results)
    assert run_all._executions("#99\tpulse\n#120\tNEW\n") == 120  # killed before its final stats


def test_run_all_short_campaign_writes_the_table(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(FUZZ / "run_all.py"), "--seconds", "8", "--jobs", "1", "--targets", "elf",
                           "--out", str(out), "--work", str(tmp_path / "work")],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    import json

    [elf] = json.loads((out / "results.json").read_text())["results"]
    assert elf["target"] == "elf" and elf["executions"] > 0 and elf["crashes"] == [] and 0 < elf["peak_rss_mb"] < 1024
    assert "| `elf` | 1 |" in (out / "results.md").read_text()
