"""Every fix says what a user can do now and what the maintainer should fix, naming wheels, not sonames.

Issue 15: CU203's fix said "install what provides libcublas.so.11" while CU201
knew the wheel (``nvidia-cublas-cu11``), and CU201's "run `cuaudit repair`"
left users surprised when `import cupy` then failed on the next library.
The ELF files are compiled here (``test_linkage``'s fixtures); then the real
cupy-cuda11x 12.3.0 wheel.
"""

from __future__ import annotations

import pytest
from conftest import corpus_file
from test_linkage import EXT, _installed, built, cfg, findings  # noqa: F401 - built is a fixture

from cuaudit import audit
from cuaudit.config import Config
from cuaudit.report import fix_parts, fix_text


def test_not_found_names_the_wheel_that_ships_the_library(built, tmp_path):  # noqa: F811
    from cuaudit.inputs.environment import find_distributions

    site = tmp_path / "site-packages"
    _installed(site, "demo", {f"demo/_blas.{EXT}": built["ext_cublas"].read_bytes()})
    report = audit(find_distributions([str(site)]), config=cfg())
    (cublas,) = [f for f in findings(report, "CU203") if f.location.symbol == "libcublas.so.11"]
    assert cublas.fix.user == "`pip install nvidia-cublas-cu11` (it ships libcublas.so.11)"
    assert "Requires-Dist: nvidia-cublas-cu11" in cublas.fix.maintainer and "RUNPATH" in cublas.fix.maintainer
    assert "install what provides" not in cublas.fix.description


def test_fix_lines_in_every_format():
    from cuaudit.model import Fix

    both = Fix(user="pip install x", maintainer="link with -Wl,--as-needed")
    assert both.description == "now: pip install x; at the source: link with -Wl,--as-needed"
    assert fix_parts(both) == [("user fix", "pip install x"), ("maintainer fix", "link with -Wl,--as-needed")]
    assert fix_text(both) == "\nUser fix: pip install x\nMaintainer fix: link with -Wl,--as-needed"
    assert fix_parts(Fix("only a description")) == [("fix", "only a description")]
    assert Fix("given", user="u").description == "given"  # a description given stays the whole fix


@pytest.mark.corpus
def test_cupy_fixes_name_wheels_and_tell_the_whole_truth_about_repair(corpus):
    wheel = corpus_file(corpus, "cupy_cuda11x-12.3.0-*.whl")
    report = audit([str(wheel)], config=Config(select=("CU2", "CU1"), cache=False))
    by = {(f.code, f.location.symbol, f.location.member): f for f in report.findings}
    cublas = next(f for (c, s, _), f in by.items() if c == "CU201" and s == "libcublas.so.11")
    assert cublas.fix.user.startswith("`pip install nvidia-cublas-cu11` (it ships libcublas.so.11)")
    assert "removes every unused entry of every module at once" in cublas.fix.user
    assert "what remains are the libraries the modules really use" in cublas.fix.user
    assert cublas.fix.maintainer.startswith("link with -Wl,--as-needed (or drop -lcublas)")
    driver = next(f for (c, s, _), f in by.items() if c == "CU201" and s == "libcuda.so.1")
    assert driver.fix.user.startswith("no wheel ships the NVIDIA driver")
    undeclared = next(f for (c, s, _), f in by.items() if c == "CU205" and s == "libcufft.so.10")
    assert undeclared.fix.user == "`pip install nvidia-cufft-cu11` (it ships libcufft.so.10)"
    trap = next(f for (c, s, _), f in by.items() if c == "CU102" and s == "cupy.cuda.nccl")
    assert trap.fix.user == "Write `import cupy.cuda.nccl` before using `cupy.cuda.nccl`."
    assert "__getattr__" in trap.fix.maintainer
    # every finding of these families has both lines
    assert all(f.fix.user and f.fix.maintainer for f in report.findings
               if f.code in ("CU102", "CU104", "CU105", "CU202", "CU203", "CU205") or (f.code == "CU201" and f.severity.name != "INFO"))
