"""cuaudit trace: runs programs written here under NumPy 2 and checks what is recorded."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

np = pytest.importorskip("numpy")
if int(np.__version__.split(".")[0]) < 2:  # pragma: no cover
    pytest.skip("the tracer observes NumPy 2 behaviour", allow_module_level=True)

from cuaudit.trace.findings import interpreter_and_program  # noqa: E402

ACCEPTANCE = """\
import numpy as np
try:
    np.array([100], np.uint8) + 300
except OverflowError:
    pass
x = np.array([1.], np.float32) * np.float64(3)
try:
    np.can_cast(300, np.uint8)
except TypeError:
    pass
"""


def trace_json(cli, tmp_path, monkeypatch, source: str, *extra: str, name: str = "prog.py"):
    script = tmp_path / name
    script.write_text(textwrap.dedent(source))
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli("trace", "-f", "json", *extra, "--", sys.executable, str(script))
    return rc, json.loads(out), err


def test_acceptance_lines_report_legacy_and_new_behaviour(cli, tmp_path, monkeypatch):
    rc, report, _ = trace_json(cli, tmp_path, monkeypatch, ACCEPTANCE)
    assert rc == 1
    got = {(f["location"]["line"], f["code"]): f for f in report["findings"]}
    assert sorted(got) == [(3, "CU411"), (6, "CU410"), (8, "CU411")]
    add = got[(3, "CU411")]
    assert "uint16" in add["message"] and "OverflowError" in add["message"]
    assert add["evidence"]["observed"][0]["operands"] == "uint8 array + Python int 300"
    mul = got[(6, "CU410")]
    assert mul["evidence"]["observed"][0]["legacy"] == "float32"
    assert mul["evidence"]["observed"][0]["numpy2"] == "float64"
    cc = got[(8, "CU411")]
    assert cc["evidence"]["observed"][0]["legacy"] == "False" and "TypeError" in cc["message"]
    assert all(f["origin"] == "probe" for f in report["findings"])
    assert report["command"] == "trace"
    assert report["probes"] and "exit status 0" in report["probes"][0]["outcome"]


def test_each_location_once_with_counts(cli, tmp_path, monkeypatch):
    rc, report, _ = trace_json(cli, tmp_path, monkeypatch, """\
        import numpy as np
        a = np.ones(4, np.float32)
        for i in range(7):
            b = a * np.float64(2)
            c = np.int8(i) + 1
        """)
    counts = {f["location"]["line"]: f["evidence"]["count"] for f in report["findings"]}
    assert counts == {4: 7, 5: 7}
    assert "seen 7 times" in report["findings"][0]["message"]


def test_unchanged_operations_are_not_reported(cli, tmp_path, monkeypatch):
    rc, report, _ = trace_json(cli, tmp_path, monkeypatch, """\
        import numpy as np
        a = np.ones(4, np.float32)
        u = np.ones(4, np.uint8)
        b = a * 2.0 + a * a - 1
        c = np.float32(2) * a
        d = u == 300
        e = u < 1000
        f = np.add(a, a)
        g = 3 * 4 + len([1, 2]) * 2
        h = "ab" * 2
        u += 1
        """)
    assert rc == 0
    assert report["findings"] == []


def test_overflow_warning_and_changed_answer(cli, tmp_path, monkeypatch):
    rc, report, _ = trace_json(cli, tmp_path, monkeypatch, """\
        import numpy as np, warnings
        warnings.simplefilter("ignore")
        h = np.zeros(3, np.float16) + 70000.0
        ok = np.can_cast(np.float64(1.0), np.float32)
        rt = np.result_type(np.int8, 300)
        """)
    codes = {f["location"]["line"]: f["code"] for f in report["findings"]}
    assert codes == {3: "CU412", 4: "CU413", 5: "CU410"}
    rt = next(f for f in report["findings"] if f["location"]["line"] == 5)
    assert rt["evidence"]["observed"][0]["legacy"] == "int16"


def test_in_place_forms_keep_their_meaning_and_are_traced(cli, tmp_path, monkeypatch):
    rc, report, err = trace_json(cli, tmp_path, monkeypatch, """\
        import numpy as np
        class Box:
            pass
        box = Box()
        box.v = np.ones(3, np.float64)
        box.v *= 2
        a = np.arange(6, dtype=np.int64)
        a[1:3] += 10
        a[::2] -= 1
        assert a.tolist() == [-1, 11, 11, 3, 3, 5], a
        assert box.v.tolist() == [2.0, 2.0, 2.0]
        n = 5
        n += 2
        assert n == 7
        u = np.zeros(2, np.uint8)
        try:
            u[0:1] += 300
        except OverflowError:
            print("raised")
        """)
    assert report["probes"][0]["outcome"] == "exit status 0", err
    assert [(f["location"]["line"], f["code"]) for f in report["findings"]] == [(17, "CU411")]


def test_crashing_program_still_reports(cli, tmp_path, monkeypatch):
    rc, report, err = trace_json(cli, tmp_path, monkeypatch, """\
        import numpy as np
        np.array([1], np.int8) + 1000
        """)
    assert "exit status 1" in report["probes"][0]["outcome"]
    assert [f["code"] for f in report["findings"]] == ["CU411"]
    assert "OverflowError" in err  # the program's own traceback


def test_imported_user_modules_are_traced_and_libraries_are_not(cli, tmp_path, monkeypatch):
    (tmp_path / "helpers.py").write_text("import numpy as np\ndef widen(a):\n    return a * np.float64(3)\n")
    rc, report, _ = trace_json(cli, tmp_path, monkeypatch, """\
        import numpy as np
        from helpers import widen
        widen(np.ones(2, np.float32))
        np.linspace(0, 1, 5, dtype=np.float32).mean()  # NumPy's own code is not rewritten
        """)
    assert [(f["location"]["member"], f["location"]["line"]) for f in report["findings"]] == [("helpers.py", 3)]


def test_text_and_github_formats(cli, tmp_path, monkeypatch):
    script = tmp_path / "p.py"
    script.write_text(ACCEPTANCE)
    monkeypatch.chdir(tmp_path)
    rc, out, _ = cli("trace", "--", sys.executable, str(script))
    assert "CU411" in out and "p.py" in out and "NumPy 1.x gave uint16 result" in out
    rc, out, _ = cli("trace", "-f", "github", "--", sys.executable, str(script))
    assert "::error" in out and "CU411" in out


def test_module_form_and_script_arguments(cli, tmp_path, monkeypatch):
    (tmp_path / "tool.py").write_text(
        "import sys, numpy as np\nassert sys.argv[1:] == ['--n', '2'], sys.argv\nnp.int16(1) + 1\n")
    monkeypatch.chdir(tmp_path)
    rc, out, _ = cli("trace", "-f", "json", "--", sys.executable, "-m", "tool", "--n", "2")
    report = json.loads(out)
    assert [f["code"] for f in report["findings"]] == ["CU410"]


def test_command_line_splitting():
    assert interpreter_and_program(["python3", "-X", "dev", "a.py", "1"], "py") == ("python3", ["-X", "dev"], ["--", "a.py", "1"])
    assert interpreter_and_program(["a.py", "x"], "/usr/bin/python") == ("/usr/bin/python", [], ["a.py", "x"])
    assert interpreter_and_program(["python", "-m", "pkg.mod", "y"], "py") == ("python", [], ["-m", "pkg.mod", "--", "y"])
    with pytest.raises(ValueError):
        interpreter_and_program(["python", "-c", "1"], "py")
    with pytest.raises(ValueError):
        interpreter_and_program(["ls"], "py")


@pytest.mark.parametrize("explicit", [False, True], ids=["entry-point", "dash-p"])
def test_pytest_plugin(tmp_path, explicit):
    (tmp_path / "mylib.py").write_text("import numpy as np\ndef bump(a):\n    return a + 300\n")
    (tmp_path / "test_it.py").write_text(textwrap.dedent("""\
        import numpy as np
        import pytest
        from mylib import bump
        def test_bump():
            with pytest.raises(OverflowError):
                bump(np.array([1], np.uint8))
        def test_scalar():
            assert (np.float32(1) * 3.0).dtype == np.float32
        """))
    report = tmp_path / "records.json"
    import os

    env = dict(os.environ)
    extra = []
    if explicit:  # without the pytest11 entry point
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        extra = ["-p", "cuaudit.trace.pytest_plugin"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra,
         "--cuaudit-trace", f"--cuaudit-trace-report={report}", "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cuaudit NEP 50 promotion trace" in proc.stdout
    assert "mylib.py:3:12: CU411" in proc.stdout
    assert "test_it.py:8:13: CU410" in proc.stdout
    data = json.loads(report.read_text())
    assert {(r["file"].rsplit("/", 1)[-1], r["kind"]) for r in data["records"]} == {("mylib.py", "error"), ("test_it.py", "dtype")}
    assert not list(tmp_path.rglob("*.pyc"))  # no traced bytecode left behind


def test_records_become_one_finding_per_location_in_every_format(tmp_path):
    from cuaudit.config import Config
    from cuaudit.engine import ProbeRecord
    from cuaudit.report import render
    from cuaudit.trace.findings import build_report

    (tmp_path / "m.py").write_text("x = 1\n# cuaudit: ignore[CU410]\n")
    rec = {"file": str(tmp_path / "m.py"), "line": 1, "column": 5, "end_line": 1, "end_column": 12,
           "operation": "*", "source": "a * s", "kind": "dtype", "legacy": "float32", "new": "float64"}
    data = {"numpy": "2.4.6", "records": [
        {**rec, "operands": "float32 array * np.float64(3.0)", "count": 5},
        {**rec, "operands": "float32 array * np.int64(3)", "count": 2},
        {**rec, "line": 2, "operands": "float32 array * np.int64(3)", "count": 1},  # suppressed inline
    ]}
    probe = ProbeRecord(what="traced m.py", command="python m.py", seconds=0.1, outcome="exit status 0")
    report = build_report(data, root=str(tmp_path), config=Config(cache=False), probe=probe, seconds=0.1)
    [f] = report.findings
    assert f.evidence["count"] == 7 and len(f.evidence["observed"]) == 2
    assert "and 1 other operand combination" in f.message and "seen 7 times" in f.message
    assert report.suppressed == 1
    for fmt in ("text", "json", "sarif", "github", "html"):
        assert "CU410" in render(report, fmt), fmt


def test_rewritten_program_behaves_like_the_original(tmp_path):
    """Class bodies (name mangling), globals, nonlocals, slices, star-args, ufunc methods, % formatting..."""
    from pathlib import Path

    prog = Path(__file__).parent / "data" / "trace_semantics_prog.py"
    plain = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, check=True).stdout
    out = tmp_path / "records.json"
    traced = subprocess.run([sys.executable, "-m", "cuaudit.trace.runner", "--out", str(out), "--", str(prog)],
                            capture_output=True, text=True)
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout == plain
    data = json.loads(out.read_text())
    assert data["sites_rewritten"] > 20
    assert {r["source"] for r in data["records"]} == {"np.float32(2) ** 2", "np.uint8(200) // 3"}


def test_trace_honours_per_path_ignores_and_the_baseline(cli, tmp_path, monkeypatch):
    """trace ends in the one finishing step: per-path ignores and --baseline apply to it as to check."""
    rc, report, _ = trace_json(cli, tmp_path, monkeypatch, ACCEPTANCE)
    assert rc == 1 and {f["code"] for f in report["findings"]} == {"CU410", "CU411"}

    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[tool.cuaudit.per-path-ignores]\n"*prog.py" = ["CU410"]\n')
    rc, report, _ = trace_json(cli, tmp_path, monkeypatch, ACCEPTANCE, "--config", str(cfg))
    assert {f["code"] for f in report["findings"]} == {"CU411"}

    baseline = tmp_path / "baseline.json"
    rc, _out, _err = cli("trace", "--write-baseline", str(baseline), "--", sys.executable, str(tmp_path / "prog.py"))
    assert baseline.is_file() and "CU411" in baseline.read_text()
    rc, report, _ = trace_json(cli, tmp_path, monkeypatch, ACCEPTANCE, "--baseline", str(baseline))
    assert rc == 0 and report["findings"] == []
    # a new legacy-behaviour line is not in the baseline: it is reported
    rc, report, _ = trace_json(cli, tmp_path, monkeypatch, ACCEPTANCE + "y = np.array([1.], np.float32) * np.float64(5)\n",
                               "--baseline", str(baseline))
    assert rc == 1 and [(f["code"], f["location"]["line"]) for f in report["findings"]] == [("CU410", 11)]
