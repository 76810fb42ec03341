"""Every program cuaudit starts is bounded (issue 13): one test family per place that starts one.

Each place gets hostile programs built here as shell scripts: one that never
answers and leaves a ``sleep`` child behind (both must be gone when cuaudit
moves on), one that prints without end (cut off, memory bounded), one that
answers in the wrong shape (a clean outcome, never a crash).  The
environment's interpreter (``--python``) has its own in ``test_hostile.py``;
``test_layering.py`` checks that no module but ``inputs/process.py`` starts
a process.
"""

from __future__ import annotations

import json
import os
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from cuaudit.inputs import process
from test_hostile import alarm  # noqa: F401 - a fixture

#: how a hostile program misbehaves; ``{pidfile}`` receives its child's process id
HANG = "sleep 300 &\necho $! > '{pidfile}'\nexec sleep 300\n"
FLOOD = "exec cat /dev/zero\n"


def hostile(path: Path, body: str) -> tuple[Path, Path]:
    """An executable shell script at ``path`` and the file its child's process id goes to."""
    pidfile = path.parent / (path.name + ".child")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body.replace("{pidfile}", str(pidfile)))
    path.chmod(0o755)
    return path, pidfile


def assert_gone(pidfile: Path) -> None:
    """The hostile program's ``sleep`` child is not running (gone, or a zombie nobody reaped yet)."""
    child = int(pidfile.read_text())
    for _ in range(50):
        try:
            state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.1)
    pytest.fail(f"the hostile program's child {child} survived (state {state})")


@pytest.fixture
def short_deadline(monkeypatch):
    """Every run_bounded call gets a 1 s deadline (callers with fixed timeouts of 10-60 s).

    Patched where callers find it: the module (explain and survey import it when they run)
    and the download's module, which imported it by name.
    """
    from cuaudit.inputs import index

    real = process.run_bounded

    def run(argv, **kwargs):
        return real(argv, **{**kwargs, "timeout": 1})

    monkeypatch.setattr(process, "run_bounded", run)
    monkeypatch.setattr(index, "run_bounded", run)


@pytest.fixture
def smi_on_path(tmp_path, monkeypatch):
    """Put a hostile ``nvidia-smi`` first on PATH; returns its child's pid file."""
    def install(body: str) -> Path:
        _, pidfile = hostile(tmp_path / "bin" / "nvidia-smi", body)
        monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
        return pidfile

    return install


# -- the runner itself -------------------------------------------------------------------------


def test_runner_relaying_output_still_kills_the_group_at_the_deadline(tmp_path, alarm):  # noqa: F811
    script, pidfile = hostile(tmp_path / "prog", HANG)
    alarm(20)
    out = os.open(os.devnull, os.O_WRONLY)
    try:
        with pytest.raises(process.BoundExceeded, match="no answer within 1 s"):
            process.run_bounded([str(script)], timeout=1, relay=(out, out))
    finally:
        os.close(out)
    assert_gone(pidfile)


# -- probes (--probe): imports, capi, gpu ---------------------------------------------------------


def test_imports_probe_interpreter_that_hangs_is_killed_with_its_child(tmp_path, alarm):  # noqa: F811
    from cuaudit.probe.imports import probe_submodules

    python, pidfile = hostile(tmp_path / "python", HANG)
    alarm(20)
    results, runs = probe_submodules(str(python), [], {"pkg": ["a", "b"]}, timeout=1)
    assert {r.status for r in results.values()} == {"timeout"} and len(results) == 2
    assert runs[0].outcome == "timed out after 1 s"
    assert_gone(pidfile)


def test_imports_probe_interpreter_printing_without_end_is_cut_off(tmp_path, alarm, monkeypatch):  # noqa: F811
    from cuaudit.probe.imports import probe_submodules

    python, _ = hostile(tmp_path / "python", FLOOD)
    alarm(30)
    tracemalloc.start()
    try:
        results, runs = probe_submodules(str(python), [], {"pkg": ["a"]}, timeout=20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert results[("pkg", "a")].status == "timeout" and "printed more than" in runs[0].outcome
    assert peak < 3 * process.MAX_OUTPUT


def test_imports_probe_answer_of_the_wrong_shape_is_no_answer(tmp_path):
    from cuaudit.probe.imports import probe_submodules

    python, _ = hostile(tmp_path / "python", "printf 'OK\\nTRAP\\tpkg\\nERROR\\t\\t\\t\\t\\nOK\\tother\\tbound\\n\\377\\376\\tx\\n'\n")
    results, runs = probe_submodules(str(python), [], {"pkg": ["a"]}, timeout=20)
    # lines too short, or about a submodule nobody asked for, answer nothing
    assert results[("pkg", "a")].status == "parent-failed" and results[("pkg", "a")].exception == "NoAnswer"
    assert set(results) == {("pkg", "a")} and runs[0].outcome.startswith("1 submodules checked")


def test_capi_probe_interpreter_that_hangs_is_killed_with_its_child(tmp_path, alarm):  # noqa: F811
    from cuaudit.probe.capi import probe_consumer

    python, pidfile = hostile(tmp_path / "python", HANG)
    alarm(20)
    result = probe_consumer(str(python), "cons", str(tmp_path / "cons.so"), {"prov": {}}, timeout=1)
    assert result.outcome == "timed out after 1s" and result.runs == 1 and not result.complete
    assert_gone(pidfile)


@pytest.mark.parametrize("log", [
    '{"event": "lookup", "module": 1, "name": "f"}',  # a field of the wrong type
    '[1, 2]',  # not an event
    '{"event": ["lookup"]}',  # an unhashable kind
    '{"event": "lookup", "module": "prov"',  # not JSON
    '{"event": "boom"}',  # a kind the probe never writes
])
def test_capi_probe_log_of_the_wrong_shape_is_a_clean_outcome(tmp_path, log):
    from cuaudit.probe.capi import probe_consumer

    # the audited module runs in the probe's process: it can write anything to the probe's log ($4)
    python, _ = hostile(tmp_path / "python", f"cat > \"$4\" <<'EOF'\n{log}\nEOF\n")
    result = probe_consumer(str(python), "cons", str(tmp_path / "cons.so"), {"prov": {}}, timeout=20)
    assert result.outcome.startswith("the probe's log is not what the probe writes") and not result.imports


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_capi_probe_log_replaced_by_a_fifo_is_never_opened_for_reading(tmp_path, alarm):  # noqa: F811
    from cuaudit.probe.capi import probe_consumer

    python, _ = hostile(tmp_path / "python", 'rm -f "$4"; mkfifo "$4"\n')
    alarm(20)
    result = probe_consumer(str(python), "cons", str(tmp_path / "cons.so"), {"prov": {}}, timeout=10)
    assert result.outcome.startswith("the probe's log is not what the probe writes")


def test_capi_probe_lookup_of_a_name_it_never_offered_is_ignored(tmp_path):
    from cuaudit.probe.capi import probe_consumer

    log = '{"event": "lookup", "module": "elsewhere", "name": "f"}\n{"event": "imported"}'
    python, _ = hostile(tmp_path / "python", f"cat > \"$4\" <<'EOF'\n{log}\nEOF\n")
    result = probe_consumer(str(python), "cons", str(tmp_path / "cons.so"), {"prov": {}}, timeout=20)
    assert result.complete and result.outcome == "imported" and not result.imports


def test_capi_probe_log_without_end_is_not_read(tmp_path, monkeypatch, alarm):  # noqa: F811
    from cuaudit.probe import capi

    monkeypatch.setattr(capi, "MAX_OUTPUT", 1 << 20)
    python, _ = hostile(tmp_path / "python", "head -c 3000000 /dev/zero > \"$4\"\n")
    alarm(30)
    tracemalloc.start()
    try:
        result = capi.probe_consumer(str(python), "cons", str(tmp_path / "cons.so"), {"prov": {}}, timeout=20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "over 1048576 bytes" in result.outcome and peak < 4 << 20


def test_gpu_probe_nvidia_smi_that_hangs_is_killed_with_its_child(smi_on_path, alarm):  # noqa: F811
    from cuaudit.probe.gpu import probe_request

    pidfile = smi_on_path(HANG)
    alarm(20)
    found, [record] = probe_request(timeout=1)
    assert found == [] and record.outcome == "failed: no answer within 1 s"
    assert_gone(pidfile)


@pytest.mark.parametrize("body, outcome", [
    (FLOOD, "failed: printed more than"),
    ("echo '{\"compute_cap\": 8.0}'; echo '\\033[2Jsm_90'\n", "exit 0: no GPU"),  # not compute capabilities
])
def test_gpu_probe_nvidia_smi_that_floods_or_answers_in_another_shape(smi_on_path, alarm, body, outcome):  # noqa: F811
    from cuaudit.probe.gpu import probe_request

    smi_on_path(body)
    alarm(30)
    _, [record] = probe_request(timeout=20)
    assert record.outcome.startswith(outcome), record.outcome


# -- explain: nvidia-smi for the GPU's architecture and the driver's version --------------------


@pytest.mark.parametrize("body", [HANG, FLOOD, "echo 'not a capability'\n"])
def test_explain_nvidia_smi_that_hangs_floods_or_answers_otherwise_gives_no_answer(smi_on_path, short_deadline, alarm, body):  # noqa: F811
    from cuaudit.explain.answers import gpu_arch

    pidfile = smi_on_path(body)
    alarm(20)
    assert gpu_arch("CUDA error: no kernel image is available") is None
    if body is HANG:
        assert_gone(pidfile)


def test_explain_driver_version_from_a_hanging_nvidia_smi_is_none(smi_on_path, short_deadline, alarm, monkeypatch):  # noqa: F811
    from cuaudit.explain import answers

    real_open = open
    monkeypatch.setattr("builtins.open", lambda p, *a, **k: (_ for _ in ()).throw(OSError("no /proc"))
                        if str(p).startswith("/proc/driver") else real_open(p, *a, **k))
    pidfile = smi_on_path(HANG)
    alarm(20)
    assert answers.driver_version() is None
    assert_gone(pidfile)


# -- survey / --index: pip ------------------------------------------------------------------


@pytest.mark.parametrize("body", [HANG, FLOOD, "printf 'global.index-url\\n=\\n\\377\\n'\n"])
def test_survey_pip_config_that_hangs_floods_or_answers_otherwise_falls_back(tmp_path, monkeypatch, short_deadline, alarm, body):  # noqa: F811
    from cuaudit.survey.index import DEFAULT_INDEX, configured_index_url

    python, pidfile = hostile(tmp_path / "python", body)
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.setattr(sys, "executable", str(python))
    alarm(20)
    assert configured_index_url() == DEFAULT_INDEX
    if body is HANG:
        assert_gone(pidfile)


@pytest.mark.parametrize("body, message", [(HANG, "no answer within 1 s"), (FLOOD, "printed more than")])
def test_index_download_by_a_pip_that_hangs_or_floods_is_cu010(tmp_path, monkeypatch, short_deadline, alarm, body, message):  # noqa: F811
    from cuaudit.inputs.index import fetch_requirement

    python, pidfile = hostile(tmp_path / "python", body)
    monkeypatch.setattr(sys, "executable", str(python))
    alarm(30)
    art = fetch_requirement("demo==1.0", cache_dir=str(tmp_path / "cache"))
    assert [p.code for p in art.problems] == ["CU010"] and message in art.problems[0].message
    assert os.listdir(tmp_path / "cache" / "downloads") == []  # nothing half-written is left
    if body is HANG:
        assert_gone(pidfile)


def test_index_download_by_a_pip_that_claims_success_but_writes_nothing_is_cu010(tmp_path, monkeypatch):
    from cuaudit.inputs.index import fetch_requirement

    python, _ = hostile(tmp_path / "python", "echo 'Saved demo-1.0-py3-none-any.whl'\nexit 0\n")
    monkeypatch.setattr(sys, "executable", str(python))
    art = fetch_requirement("demo==1.0", cache_dir=str(tmp_path / "cache"))
    assert [p.code for p in art.problems] == ["CU010"]


# -- trace: the program the user runs ------------------------------------------------------------


def test_trace_program_that_hangs_is_killed_with_its_child(tmp_path, cli, alarm):  # noqa: F811
    python, pidfile = hostile(tmp_path / "python", HANG)
    (tmp_path / "prog.py").write_text("pass\n")
    alarm(30)
    rc, out, err = cli("trace", "--timeout", "1", "--", python, tmp_path / "prog.py")
    assert rc == 2 and "left no trace records (stopped after 1s (timeout))" in err
    assert_gone(pidfile)


def test_trace_program_printing_without_end_into_captured_output_is_cut_off(tmp_path, cli, alarm):  # noqa: F811
    python, _ = hostile(tmp_path / "python", FLOOD)
    (tmp_path / "prog.py").write_text("pass\n")
    alarm(60)
    rc, out, err = cli("trace", "--timeout", "30", "--", python, tmp_path / "prog.py")
    assert rc == 2 and "(stopped: printed more than" in err and len(err) < 1024


@pytest.mark.parametrize("records", ['[1, 2]', '"text"'])
def test_trace_records_of_the_wrong_shape_are_a_clean_error(tmp_path, cli, records):
    # the runner's records file is the second argument after --out
    python, _ = hostile(tmp_path / "python", f"while [ \"$1\" != --out ]; do shift; done\necho '{records}' > \"$2\"\n")
    (tmp_path / "prog.py").write_text("pass\n")
    rc, out, err = cli("trace", "--", python, tmp_path / "prog.py")
    assert rc == 2 and "Traceback" not in err, err
    json.dumps(err)
