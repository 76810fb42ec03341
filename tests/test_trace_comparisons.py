"""The NEP 50 tracer beyond arithmetic: comparisons with Python scalars, and Python integers
out of range for the dtype of a NumPy function's result (issue 12)."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

pytest.importorskip("numpy")

PROG = """
import numpy as np
a = np.float32(16777217)
same = a == 16777217
x = np.arange(3, dtype=np.uint8)
small = x < 2
big = x < 300
try:
    np.full(3, 300, dtype=np.uint8)
except OverflowError:
    pass
b = np.zeros(2, dtype=np.uint8)
try:
    b.fill(-1)
except OverflowError:
    pass
ok = np.full(3, 200, dtype=np.uint8)
"""


def test_comparisons_and_out_of_range_ints(cli, tmp_path, monkeypatch):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(PROG))
    monkeypatch.chdir(tmp_path)
    rc, out, _ = cli("trace", "-f", "json", "--", sys.executable, str(script))
    report = json.loads(out)
    got = {(f["location"]["line"], f["code"]): f for f in report["findings"]}
    # unchanged comparisons (x < 2, x < 300) and in-range ints (200) are not reported
    assert sorted(got) == [(4, "CU413"), (9, "CU411"), (14, "CU411")]
    cmp = got[(4, "CU413")]["evidence"]["observed"][0]
    assert cmp["legacy"] == "False (compared in float64)" and cmp["numpy2"] == "True"
    assert "out of bounds for uint8" in got[(9, "CU411")]["message"]
    assert "fill" in got[(14, "CU411")]["message"]
    assert rc == 1
