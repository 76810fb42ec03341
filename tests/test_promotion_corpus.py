"""CU401 on the real CuPy/NumPy wheels of the corpus, installed (--no-deps) into test venvs.

The seed kernel is an error with cupy-cuda12x 13.3.0 + numpy 2.0.2 installed and
information with 13.4.1 (the release that fixed cupy.fuse's scalar check).  Nothing
is imported: the versions come from the environment's metadata.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import corpus_file, make_venv

from cuaudit import audit
from cuaudit.config import Config
from cuaudit.model import ArtifactKind, Severity

pytestmark = [pytest.mark.corpus, pytest.mark.slow]

SEED = """\
import cupy


@cupy.fuse()
def f(mu, dt, delta_phi):
    return 1 + mu * dt * delta_phi
"""


def _venv(root: Path, wheels: list[Path]) -> Path:
    return make_venv(root, wheels)


@pytest.fixture(scope="session")
def seed_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("seed") / "seed_kernel.py"
    path.write_text(SEED)
    return path


@pytest.fixture(scope="session", params=["13.3.0", "13.4.1"])
def cupy_env(request, corpus, tmp_path_factory):
    version = request.param
    wheels = [corpus_file(corpus, f"cupy_cuda12x-{version}-*.whl"), corpus_file(corpus, "numpy-2.0.2-*.whl")]
    root = tmp_path_factory.mktemp(f"cupy-{version}")
    # one fact cache per environment: the second audit of it reads the facts back
    return version, _venv(root / "venv", wheels), str(root / "cache")


def test_seed_kernel_severity_follows_the_installed_cupy(cupy_env, seed_file, tmp_path):
    version, python, cache = cupy_env
    report = audit([str(seed_file)], env=str(python), config=Config(select=("CU401",), cache_dir=cache))
    seed = [f for f in report.findings if f.location.artifact.kind is ArtifactKind.FILE]
    assert len(seed) == 1, [str(f.location) for f in report.findings][:5]
    f = seed[0]
    assert (f.location.line, f.location.column) == (6, 12)
    assert f"cupy-cuda12x {version} and numpy 2.0.2 are installed" in f.message
    if version == "13.3.0":
        assert f.severity is Severity.WARNING and "fall back" in f.message
        # CuPy 13.3.0's own fused kernels hit the same bug (cupyx.scipy.signal's B-spline helpers)
        own = [x for x in report.findings if x.location.artifact.name == "cupy-cuda12x"]
        assert own and all(x.severity is Severity.WARNING for x in own)
        assert {x.location.member for x in own} >= {"cupyx/scipy/signal/_bsplines.py"}
    else:
        assert f.severity is Severity.INFO
        assert "fixed in 13.4.1" in f.message


def test_cli_check_with_python(cupy_env, seed_file, cli, tmp_path):
    version, python, cache = cupy_env
    rc, out, _ = cli("check", str(seed_file), "--python", str(python), "--select", "CU401", "--cache-dir", cache,
                     "--format", "json", "--fail-on", "warning")
    import json

    data = json.loads(out)
    seed = [f for f in data["findings"] if f["location"]["artifact"]["kind"] == "file"]
    assert [f["severity"] for f in seed] == (["warning"] if version == "13.3.0" else ["info"])
    assert rc == (1 if version == "13.3.0" else 0)
