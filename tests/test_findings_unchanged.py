"""Speed work changes no finding: reports of the corpus and of an environment, byte for byte.

The goldens in ``tests/golden/findings/`` were written from main before the
speed work (``python tests/findings_golden.py --write``); each report here is
normalised the same way (timing and cache counters dropped, paths replaced)
and must equal its golden, with a cold cache and again from a filled cache.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import make_venv
from findings_golden import (ENV_GOLDEN, GOLDEN, env_report, golden_name, normalise, read_golden,
                             run_report)

import sys

# The goldens were written by cuaudit running on CPython 3.11; cuaudit parses audited sources with the
# ast of the Python it runs on, so another version may legitimately differ in positions.
pytestmark = [pytest.mark.corpus,
              pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="goldens written with cuaudit on Python 3.11")]

GOLDEN_FILES = sorted(p.name for p in GOLDEN.glob("check-*.json.gz"))
#: wheels whose cold check takes more than a few seconds on two cores
LARGE = ("torch-", "nvidia_cublas_cu12-", "cupy_cuda", "numpy-", "nvidia_cublas_cu11-", "nvidia_cufft",
         "nvidia_cusparse", "nvidia_curand", "nvidia_cuda_nvrtc")


def _artifact(name: str) -> str:
    return name.removeprefix("check-").removesuffix(".json.gz")


@pytest.mark.parametrize(
    "golden",
    [pytest.param(g, marks=pytest.mark.slow) if _artifact(g).startswith(LARGE) else g for g in GOLDEN_FILES],
)
def test_check_report_is_unchanged(golden: str, corpus: Path, tmp_path: Path) -> None:
    path = corpus / _artifact(golden)
    if not path.exists():
        pytest.skip(f"{path.name} is not in the corpus (the large set: scripts/fetch_corpus.py --large)")
    expected = read_golden(golden)
    cold = normalise(run_report(["check", str(path)], None), {str(corpus): "<corpus>"})
    assert cold == expected
    # filled by the first run, read by the second: the cached path gives the same report
    cache = str(tmp_path / "cache")
    assert normalise(run_report(["check", str(path)], cache), {str(corpus): "<corpus>"}) == expected
    assert normalise(run_report(["check", str(path)], cache), {str(corpus): "<corpus>"}) == expected


def test_env_report_is_unchanged(corpus: Path, tmp_path: Path) -> None:
    expected = read_golden(ENV_GOLDEN)
    assert env_report(make_venv, corpus, tmp_path, None) == expected
    cache = str(tmp_path / "cache")
    assert env_report(make_venv, corpus, tmp_path, cache) == expected
    assert env_report(make_venv, corpus, tmp_path, cache) == expected


def test_goldens_cover_the_corpus() -> None:
    # the goldens pin every kind of input the corpus has, and an environment
    assert any(g.endswith(".whl.json.gz") for g in GOLDEN_FILES)
    assert any(g.endswith(".tar.gz.json.gz") for g in GOLDEN_FILES)
    assert golden_name("x.whl") == "check-x.whl.json.gz"
    assert read_golden(ENV_GOLDEN) is not None
