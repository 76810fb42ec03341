"""The fact cache property (issue 11): an extractor's output depends only on the bytes it
read, the member's path and its version; CU0xx findings depend on no selection.

- the same bytes audited as a wheel, a tree and an installed distribution: for every
  registered extractor, the facts of a cold run equal those of a warm run whatever was
  audited before in the same cache (a tree of site-packages and the installed
  distribution share content keys: before promotion_source ignored the artifact kind,
  each inherited the other's facts);
- findings with and without ``--no-cache`` are equal on corpus wheels and on an
  environment installed from them;
- CU0xx findings are the same under any ``--select``/``--ignore`` that keeps CU0.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest
from conftest import corpus_file, make_tree, make_wheel
from devicecode_bytes import container, elf_with, entry
from test_inputs import central_header, end_record, local_header, raw_zip

from cuaudit import facts as facts_registry
from cuaudit.config import Config
from cuaudit.engine import audit, gather
from cuaudit.inputs.environment import InstalledDistribution

PROMOTION = """\
import numpy as np
import cupy as cp
from . import sub
from .sub import helper  # cuaudit: ignore[CU101]

ALPHA = 0.5
a = np.ones(3, dtype=np.uint8) + 300
b = np.float32(3) * np.float64(2)


@cp.fuse()
def kernel(x):
    return x * ALPHA + 1

ok = np.can_cast(300, np.uint8)
\x0c
out = cp.empty(3)
cp.copyto(out, 0.5)  # cuaudit: ignore[CU406]
"""

SETUP = """\
import torch
from setuptools import setup

if torch.cuda.is_available():
    ext = ["k.cu"]
setup(name="cp")
"""

PYPROJECT = """\
[build-system]
requires = ["setuptools", "torch"]

[project]
name = "cp"
version = "1.0"
dependencies = ["numpy>=2", "cupy-cuda12x==13.3.0"]

[tool.scikit-build]
cmake.define.CMAKE_CUDA_ARCHITECTURES = "native"
"""

def _ld_so_cache(entries: list[tuple[str, str]]) -> bytes:
    """A glibc-ld.so.cache1.1 image (the new format) with x86-64 entries."""
    import struct

    head = 48 + 24 * len(entries)
    strings = b""
    table = b""
    for soname, path in entries:
        key = head + len(strings)
        strings += soname.encode() + b"\0"
        value = head + len(strings)
        strings += path.encode() + b"\0"
        table += struct.pack("<iIIIQ", 0x0303, key, value, 0, 0)
    header = b"glibc-ld.so.cache1.1" + struct.pack("<II", len(entries), len(strings))
    return header.ljust(48, b"\0") + table + strings


LD_SO_CACHE = _ld_so_cache([("libfoo.so.1", "/usr/lib/libfoo.so.1")])

#: one member for every extractor (a fake CUDA extension module for the ELF readers)
FILES: dict[str, str | bytes] = {
    "cp/__init__.py": PROMOTION,
    "cp/sub.py": "import os\n\ndef helper():\n    import json\n",
    "cp/sub.pyi": "def helper() -> None: ...\n",
    "cp/broken.py": "import numpy\ndef (:\n",
    "cp/latin.py": b"x = '\xff'\n",
    "cp/tests/test_k.py": "import numpy as np\nx = np.ones(2, np.uint8) + 300\n",
    "cp/_k.cpython-311-x86_64-linux-gnu.so": elf_with({".nv_fatbin": container(entry(2, 80))}),
    "setup.py": SETUP,
    "pyproject.toml": PYPROJECT,
    "requirements.txt": "numpy>=2  # new\ncupy-cuda12x\n",
    "CMakeLists.txt": "set(CMAKE_CUDA_ARCHITECTURES native)\n",
    # the loader's configuration (read as system evidence, but an extractor like any other)
    "etc/ld.so.cache": LD_SO_CACHE,
    "etc/ld.so.conf": "include ld.so.conf.d/*.conf\n/opt/lib  # comment\n",
}


def _inputs(tmp_path: Path) -> dict[str, object]:
    """The same bytes as a wheel, a tree (of a site dir) and an installed distribution."""
    whl = make_wheel(tmp_path, "cp", "1.0", FILES, requires=["numpy>=2"])
    site = tmp_path / "site"
    with zipfile.ZipFile(whl) as zf:
        zf.extractall(site)  # what an installer does with a pure wheel
    installed = InstalledDistribution(None, "cp", "1.0", str(site / "cp-1.0.dist-info"))
    return {"wheel": str(whl), "tree": str(site), "installed": installed}


def _facts(target: object, cache_dir: Path | None) -> tuple[dict, list, int]:
    config = Config(cache=cache_dir is not None, cache_dir=str(cache_dir) if cache_dir else None, jobs=1)
    if isinstance(target, InstalledDistribution):  # a fresh artifact each time, as a new process has
        target = InstalledDistribution(None, target.ref.name, target.ref.version, target.meta_dir)
    got = gather([target], config=config, extractors=facts_registry.all_extractors())
    facts = {(path, name): value for (_i, path, name), value in got.extraction.facts.items()}
    got.extraction.close()  # on-demand facts read after gather() are cached when it closes
    problems = sorted((f.code, f.location.member or "", f.location.line or 0, f.message) for f in got.problems)
    return facts, problems, got.extraction.extracted


def test_the_fixture_exercises_every_registered_extractor(tmp_path):
    inputs = _inputs(tmp_path)
    facts, problems, _ = _facts(inputs["wheel"], None)
    names = {name for (_path, name) in facts}
    assert names == set(facts_registry.all_extractors()) - {"format"}  # the format check's fact is None
    assert {(c, m) for c, m, _l, _msg in problems} >= {("CU006", "cp/broken.py"), ("CU006", "cp/latin.py")}


@pytest.mark.parametrize("target", ["wheel", "tree", "installed"])
def test_facts_of_a_warm_run_equal_a_cold_run_whatever_was_audited_before(tmp_path, target):
    inputs = _inputs(tmp_path)
    cold, cold_problems, _ = _facts(inputs[target], None)
    assert cold
    others = [k for k in inputs if k != target]
    for n, before in enumerate(itertools.permutations(others)):
        cache = tmp_path / f"cache{n}"
        for other in before:
            _facts(inputs[other], cache)
        for run in ("first", "again"):
            warm, warm_problems, extracted = _facts(inputs[target], cache)
            assert warm == cold, (target, before, run, {k for k in cold if warm.get(k) != cold[k]})
            assert warm_problems == cold_problems, (target, before, run)
        assert extracted == 0  # the second run was served from the cache


def test_installed_distributions_and_their_site_dir_as_a_tree_keep_their_own_findings(tmp_path):
    # the reported case: audit site-packages as a tree, then as installed, in one cache;
    # CU403 is for code the user builds, never for an installed library
    inputs = _inputs(tmp_path)
    cache = tmp_path / "cache"
    config = Config(cache_dir=str(cache), jobs=1, select=("CU4",))

    def cu403(target):
        return sorted(f.location.member for f in audit([target], config=config).findings if f.code == "CU403")

    for order in (("tree", "installed"), ("installed", "tree")):
        shutil.rmtree(cache, ignore_errors=True)
        seen = {name: cu403(inputs[name]) for name in order}
        assert seen == {"tree": ["cp/__init__.py", "cp/tests/test_k.py"], "installed": []}, order


# -- findings with and without --no-cache --------------------------------------------------------------


def summary(report) -> list[tuple]:
    return sorted((f.code, f.location.artifact.path, f.location.member or "", f.location.line or 0, str(f.severity),
                   f.message) for f in report.findings)


#: a Cython extension, CuPy (Python, ELF, fatbin, C-API), a CUDA sdist (build scripts);
#: numpy is in the environment below
CORPUS_WHEELS = ("fastrlock-0.8.3-*.whl", "cupy_cuda12x-13.3.0-*.whl", "torch_linear_assignment-0.0.5.tar.gz")


@pytest.mark.corpus
@pytest.mark.slow
def test_findings_with_and_without_the_cache_are_equal_on_corpus_wheels(corpus, tmp_path):
    paths = [str(corpus_file(corpus, p)) for p in CORPUS_WHEELS]
    uncached = audit(paths, config=Config(cache=False))
    cached = Config(cache_dir=str(tmp_path / "cache"))
    cold, warm = audit(paths, config=cached), audit(paths, config=cached)
    assert uncached.findings and warm.stats["facts_extracted"] == 0
    assert summary(cold) == summary(uncached) and summary(warm) == summary(uncached)


@pytest.fixture(scope="module")
def corpus_venv(corpus, tmp_path_factory) -> str:
    """A virtual environment with numpy, CuPy and fastrlock installed from corpus wheels."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = str(root / "bin" / "python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    wheels = [str(corpus_file(corpus, p)) for p in ("fastrlock-0.8.3-*.whl", "cupy_cuda12x-13.3.0-*.whl",
                                                    "numpy-2.0.2-*.whl")]
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--no-compile", "--target", site, *wheels], check=True)
    return python


@pytest.mark.corpus
@pytest.mark.slow
def test_findings_with_and_without_the_cache_are_equal_on_an_installed_environment(corpus_venv, tmp_path,
                                                                                    monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)  # the environment, not this checkout
    uncached = audit([], env=corpus_venv, config=Config(cache=False), command="env")
    cached = Config(cache_dir=str(tmp_path / "cache"))
    cold = audit([], env=corpus_venv, config=cached, command="env")
    warm = audit([], env=corpus_venv, config=cached, command="env")
    assert {f.location.artifact.name for f in uncached.findings} >= {"cupy-cuda12x"}
    assert warm.stats["facts_extracted"] == 0
    assert summary(cold) == summary(uncached) and summary(warm) == summary(uncached)


# -- CU0xx findings whatever is selected ----------------------------------------------------------------------


def _bad_inputs(tmp_path: Path) -> list[str]:
    files = {"bad/__init__.py": "import numpy as np\nx = np.ones(2, np.uint8) + 300\n",
             "bad/syntax.py": "def (:\n", "bad/latin.py": b"x = '\xff'\n",
             "pyproject.toml": '[project]\nname = "bad"\nversion = = 1\n', "setup.py": "from setuptools import (\n"}
    tree = make_tree(tmp_path / "tree", files)
    whl = make_wheel(tmp_path, "bad", "1.0", {k: v for k, v in files.items() if k != "setup.py"})
    # a member whose stored CRC does not match, one whose data runs past the end of the file
    crc = tmp_path / "crc-1.0-py3-none-any.whl"
    crc.write_bytes(raw_zip([("crc/mod.py", b"b = 2\n", {"crc": 0xDEADBEEF}), ("crc/ok.py", b"def (:\n", {})]))
    data = b"a = 1\n"
    body = local_header(b"past/a.py", data) + data
    central = central_header(b"past/a.py", offset=0, csize=10_000, usize=len(data), crc=zlib.crc32(data))
    past = tmp_path / "past-1.0-py3-none-any.whl"
    past.write_bytes(body + central + end_record(1, len(central), len(body)))
    return [str(tree), str(whl), str(crc), str(past)]


@pytest.mark.parametrize("selection", [dict(select=("CU1", "CU0")), dict(select=("CU4", "CU0")),
                                       dict(select=("CU5", "CU0")), dict(ignore=("CU301",)),
                                       dict(ignore=("CU4", "CU1"))], ids=str)
def test_input_findings_do_not_depend_on_the_selection(tmp_path, selection):
    inputs = _bad_inputs(tmp_path)

    def cu0(report) -> list[tuple]:
        return [s for s in summary(report) if s[0].startswith("CU0")]

    reference = cu0(audit(inputs, config=Config(cache=False, select=("CU0",))))
    assert {(code, Path(art).name, member) for code, art, member, *_ in reference} >= {
        ("CU006", "tree", "bad/syntax.py"), ("CU006", "tree", "bad/latin.py"), ("CU007", "tree", "pyproject.toml"),
        ("CU007", "tree", "setup.py"), ("CU006", "bad-1.0-py3-none-any.whl", "bad/syntax.py"),
        ("CU007", "bad-1.0-py3-none-any.whl", "pyproject.toml"), ("CU002", "crc-1.0-py3-none-any.whl", "crc/mod.py"),
        ("CU006", "crc-1.0-py3-none-any.whl", "crc/ok.py"),
    }
    assert any(code == "CU002" and Path(art).name.startswith("past") for code, art, *_ in reference)
    assert cu0(audit(inputs, config=Config(cache=False, **selection))) == reference
