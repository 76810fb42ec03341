"""CU1xx on the real corpus: the CuPy NCCL trap, the standard library, and static-vs-probe
precision and recall over real packages installed in a fresh virtual environment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import corpus_file

from cuaudit import audit
from cuaudit.config import Config

pytestmark = pytest.mark.corpus

USER = """\
import cupy

def communicator(n, uid, rank):
    return cupy.cuda.nccl.NcclCommunicator(n, uid, rank)

try:
    cupy.cuda.nccl
    HAVE_NCCL = True
except AttributeError:
    HAVE_NCCL = False
"""


@pytest.fixture(scope="session")
def cupy_reports(corpus):
    """One static audit per CuPy wheel (the facts are cached between the two calls)."""
    out = {}
    for version in ("13.3.0", "14.2.0"):
        whl = corpus_file(corpus, f"cupy_cuda12x-{version}-*.whl")
        out[version] = audit([str(whl)], config=Config(select=("CU101", "CU102")))
    return out


@pytest.mark.parametrize("version", ["13.3.0", "14.2.0"])
def test_cupy_nccl_is_the_getattr_case(cupy_reports, version):
    report = cupy_reports[version]
    cuda = {f.key: f for f in report.findings if f.key.startswith("cupy.cuda.") and f.key.count(".") == 2}
    assert cuda["cupy.cuda.nccl"].code == "CU102"
    assert cuda["cupy.cuda.nccl"].location.member == "cupy/cuda/__init__.py"
    assert "cublas" in cuda["cupy.cuda.nccl"].evidence["handled"]
    for lazy in ("cublas", "cusolver", "cusparse", "curand"):
        assert f"cupy.cuda.{lazy}" not in cuda


def test_user_code_against_the_cupy_wheel(corpus, tmp_path, cli):
    whl = corpus_file(corpus, "cupy_cuda12x-13.3.0-*.whl")
    user = tmp_path / "app.py"
    user.write_text(USER)
    report = audit([str(user), str(whl)], config=Config(select=("CU104", "CU105")))
    mine = [(f.code, f.location.line) for f in report.findings if f.location.artifact.path == str(user)]
    assert mine == [("CU104", 4), ("CU105", 6)]
    rc, out, _ = cli("check", "--isolated", "--select", "CU104,CU105", "--fix", user, whl)
    assert user.read_text().startswith("import cupy\nimport cupy.cuda.nccl\n")
    report = audit([str(user), str(whl)], config=Config(select=("CU104", "CU105")))
    # with `import cupy.cuda.nccl` in the file, the attribute check no longer lies either
    assert [f.code for f in report.findings if f.location.artifact.path == str(user)] == []


def test_user_code_against_an_environment(corpus, tmp_path_factory):
    """The same file resolved against cupy installed in an environment (cuaudit env's view)."""
    # with cupy's own dependencies: in an environment without numpy, `import cupy` itself fails and
    # the model says nothing about its attributes (issue 12)
    venv = _venv(tmp_path_factory.mktemp("cupyenv"), [corpus_file(corpus, p) for p in (
        "cupy_cuda12x-13.3.0-*.whl", "numpy-2.0.2-*.whl", "fastrlock-0.8.3-*.whl")])
    user = tmp_path_factory.mktemp("u") / "app.py"
    user.write_text(USER)
    report = audit([str(user)], env=str(venv / "bin" / "python"), config=Config(select=("CU104", "CU105")))
    assert [(f.code, f.location.line) for f in report.findings if f.location.member == "app.py"] == [("CU104", 4), ("CU105", 6)]


def test_standard_library(tmp_path):
    user = tmp_path / "std.py"
    user.write_text("import concurrent\nimport os\nex = concurrent.futures.ThreadPoolExecutor()\nos.path.join('a', 'b')\n")
    report = audit([str(user)], config=Config(select=("CU104",), cache=False))
    assert [(f.location.line, f.key) for f in report.findings] == [(3, "concurrent.futures")]


# -- precision and recall against a real import ------------------------------------------------

PURE = ("packaging==24.1", "urllib3==2.2.3", "idna==3.10")


def _download(names: tuple[str, ...]) -> list[Path]:
    cache = Path.home() / ".cache" / "cuaudit" / "pypi-traps"
    cache.mkdir(parents=True, exist_ok=True)
    have = []
    for spec in names:
        name, version = spec.split("==")
        found = sorted(cache.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
        if not found:
            proc = subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", "-d", str(cache), spec],
                capture_output=True, text=True, timeout=300,
            )
            if proc.returncode != 0:
                pytest.skip(f"the package index is unreachable ({spec}): {proc.stderr.strip()[-200:]}")
            found = sorted(cache.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
        have += found
    return have


def _venv(where: Path, wheels: list[Path]) -> Path:
    """A virtual environment with the wheels installed (unpacked as pip does for pure wheels)."""
    import sysconfig
    import zipfile

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, capture_output=True)
    site = Path(sysconfig.get_paths(vars={"base": str(where), "platbase": str(where)})["purelib"])
    for whl in wheels:
        with zipfile.ZipFile(whl) as zf:
            zf.extractall(site)
    return where


@pytest.fixture(scope="session")
def real_env(corpus, tmp_path_factory):
    wheels = [corpus_file(corpus, "numpy-2.0.2-*.whl"), *_download(PURE)]
    return _venv(tmp_path_factory.mktemp("realenv"), wheels)


@pytest.mark.xfail(sys.version_info[:2] != (3, 11), strict=False,
                   reason="known gap (issue 12, open): cuaudit running on another Python than the audited 3.11 venv "
                          "disagrees with the probe on some pairs (seen on 3.10); the 3.11 run is the check")
def test_static_findings_match_the_probe(real_env):
    python = str(real_env / "bin" / "python")
    config = Config(select=("CU101", "CU102"))
    static = audit([], env=python, config=config)
    probed = audit([], env=python, config=Config(select=("CU101", "CU102"), probe=True))
    static_keys = {f.key for f in static.findings}
    probe_keys = {f.key for f in probed.findings}
    # precision: every static finding is a real AttributeError in a clean interpreter
    assert all(f.origin == "probe" and f.evidence["probe"]["status"] == "trap" for f in probed.findings if f.key in static_keys)
    # recall: the probe finds no trap among the public submodules that the static audit missed
    assert probe_keys == static_keys
    names = {f.location.artifact.name for f in static.findings}
    assert {"numpy", "packaging", "urllib3"} <= names
    assert {"numpy.lib.recfunctions", "packaging.version", "numpy.ma.mrecords"} <= static_keys
    assert len(probed.probes) > 20
