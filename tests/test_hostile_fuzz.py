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
KNOWN: dict[str, str] = {
    # found by the campaign in the readers formats/elf.py replaced; no failure seen since (remove when it stays so)
    "cython": "facts/cython*.py and extension_strings.py: short tables and huge offsets (binary-formats helper)",
}


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
