"""The accuracy benchmark's quick mode (what CI runs) and the loader's own search path.

The quick mode builds one package per cause of issue 12, judges every public
``parent.sub`` statically and then imports each for real in a fresh
interpreter: every claim must be confirmed and every runtime trap claimed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import accuracy  # noqa: E402


def test_quick_mode_matches_the_runtime(capsys):
    s = accuracy.quick()
    out = capsys.readouterr().out
    assert s.decided == s.pairs == 18  # every fixture pair imports cleanly
    assert s.false_claims == [] and s.misses == []
    assert s.runtime_traps == 11 and s.true_claims == 11
    assert s.abstained == 1  # registry.alpha: named by the registry, imported only through it
    assert "| quick (fixtures) |" in out and "precision" in out


def test_score_counts_abstentions_on_traps_as_misses():
    P = accuracy.Pair
    s = accuracy.score([
        P("d", "a", "x", "trap", "", "trap"), P("d", "a", "y", "trap", "", "ok"),
        P("d", "a", "z", "unknown", "", "trap"), P("d", "a", "w", "works", "", "trap"),
        P("d", "a", "v", "works", "", "parent-failed"),
    ])
    assert (s.decided, s.runtime_traps, s.claimed, s.true_claims, s.abstained, s.undecided) == (4, 3, 2, 1, 1, 1)
    assert s.precision == 0.5 and round(s.recall, 3) == 0.333
    assert [p.sub for p in s.misses] == ["z", "w"] and [p.sub for p in s.false_claims] == ["y"]


def test_default_dirs_are_read_from_the_loader(tmp_path):
    from cuaudit.analysis.libraries import DEFAULT_DIRS, default_dirs

    fake = tmp_path / "ld.so"
    fake.write_bytes(b"\x7fELF junk\0/etc/ld.so.cache\0/lib/aarch64-linux-gnu/\0/usr/lib/aarch64-linux-gnu/\0/lib/\0/usr/lib/\0more")
    assert default_dirs(str(fake)) == ("/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib", "/usr/lib")
    assert default_dirs(str(tmp_path / "missing")) == DEFAULT_DIRS


@pytest.mark.skipif(not os.path.exists("/lib64/ld-linux-x86-64.so.2"), reason="needs the x86-64 loader")
def test_default_dirs_agree_with_the_loaders_own_list():
    """`ld.so --help` prints the loader's system search path; the static read must give the same."""
    from cuaudit.analysis.libraries import default_dirs

    out = subprocess.run(["/lib64/ld-linux-x86-64.so.2", "--help"], capture_output=True, text=True).stdout
    printed = [ln.split("(")[0].strip() for ln in out.splitlines() if ln.strip().endswith("(system search path)")]
    if not printed:
        pytest.skip("this loader does not print its search path")
    assert list(default_dirs()) == printed


def test_cu503_only_where_a_build_passes_the_flag(tree_factory):
    """Docstrings, modules that happen to be called build.py, and scripts that build nothing
    take no architectures from the build machine (CU503 fired on cuaudit's own facts/build.py)."""
    from cuaudit import audit
    from cuaudit.config import Config

    root = tree_factory({
        "setup.py": '"""Never use -arch=native here."""\nfrom setuptools import setup, Extension\n'
                    'setup(ext_modules=[Extension("k", ["k.cu"], extra_compile_args=["-arch=native"])])\n',
        "pkg/__init__.py": "",
        "pkg/build.py": 'FLAGS = ["-arch=native"]  # a module of the package, not a build script\n',
        "scripts/gpu_check.py": 'import cupy\nprint(cupy.cuda.Device().compute_capability)\n',
    })
    report = audit([str(root)], config=Config(cache=False, select=("CU503",)))
    assert [(f.location.member, f.location.line) for f in report.findings] == [("setup.py", 3)]
    own = audit([str(REPO / "src"), str(REPO / "scripts")], config=Config(cache=False, select=("CU5",)))
    assert own.findings == []
