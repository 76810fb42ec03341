"""pytest plugin: trace NEP 50 promotion changes while your test suite runs.

Registered through the ``pytest11`` entry point (inactive unless asked)::

    pytest --cuaudit-trace [--cuaudit-trace-report=trace.json]

or without the entry point: ``pytest -p cuaudit.trace.pytest_plugin --cuaudit-trace``.
Test modules keep pytest's assertion rewriting: the promotion hooks are
added to pytest's own rewrite (its .pyc cache is bypassed while tracing, so
no traced code is ever cached).  Other modules under the root directory (the
package under test) are rewritten by cuaudit's import hook.  The findings
(CU410-CU413) are listed in the terminal summary, once per source location
with counts; ``--cuaudit-trace-report`` writes the raw records as JSON.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("cuaudit", "cuaudit NEP 50 promotion tracer")
    group.addoption("--cuaudit-trace", action="store_true", default=False,
                    help="record NumPy operations whose result differs between NumPy 1.x and NumPy 2 (NEP 50)")
    group.addoption("--cuaudit-trace-report", metavar="FILE", default=None,
                    help="write the tracer's records (JSON) to FILE")
    group.addoption("--cuaudit-trace-include", action="append", default=[], metavar="DIR",
                    help="trace modules under DIR (default: the root directory)")


_state: dict[str, Any] = {}


def pytest_configure(config: Any) -> None:
    if not config.getoption("cuaudit_trace"):
        return
    from _pytest.assertion import rewrite as assertion_rewrite

    from cuaudit.trace import runtime
    from cuaudit.trace.rewrite import rewrite
    from cuaudit.trace.runner import TracedFinder

    runtime.install_builtins()
    original = assertion_rewrite.rewrite_asserts
    include = [os.path.abspath(d) for d in config.getoption("cuaudit_trace_include")] or [str(config.rootpath)]
    finder = TracedFinder(include)

    def rewrite_asserts(mod: Any, source: bytes, module_path: Any = None, config: Any = None) -> None:
        original(mod, source, module_path, config)
        # pytest also rewrites the modules of plugins installed from entry points
        # (hypothesis's): only the project's own modules are traced
        if module_path is None or not finder.wanted(str(module_path)):
            return
        text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
        rewrite(mod, str(module_path), text, runtime.SITES)

    assertion_rewrite.rewrite_asserts = rewrite_asserts
    _state["restore"] = (assertion_rewrite, original, assertion_rewrite._read_pyc, sys.dont_write_bytecode)
    assertion_rewrite._read_pyc = lambda *a, **k: None  # never reuse (or write) traced bytecode
    sys.dont_write_bytecode = True
    # after pytest's own hook: it keeps the test modules, cuaudit takes the rest
    from _pytest.assertion.rewrite import AssertionRewritingHook

    pos = next((i + 1 for i, f in enumerate(sys.meta_path) if isinstance(f, AssertionRewritingHook)), 0)
    sys.meta_path.insert(pos, finder)
    _state["finder"] = finder


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    if "finder" not in _state:
        return
    from cuaudit.trace import runtime
    from cuaudit.trace.findings import findings_from_trace

    data = runtime.snapshot()
    path = config.getoption("cuaudit_trace_report")
    if path:
        runtime.write(path)
    findings, _ = findings_from_trace(data, str(config.rootpath))
    tr = terminalreporter
    tr.section("cuaudit NEP 50 promotion trace")
    tr.write_line(f"NumPy {data.get('numpy')}: {data.get('checked_operations', 0)} operations with scalar operands "
                  f"checked at {data.get('sites_rewritten', 0)} rewritten sites")
    for f in findings:
        tr.write_line(f"{f.location.member}:{f.location.line}:{f.location.column}: {f.code} [{f.severity}] {f.message}")
    if not findings:
        tr.write_line("no operation changed behaviour between NumPy 1.x and NumPy 2")
    if path:
        tr.write_line(f"records written to {path}")


def pytest_unconfigure(config: Any) -> None:
    finder = _state.pop("finder", None)
    if finder is not None and finder in sys.meta_path:
        sys.meta_path.remove(finder)
    restore = _state.pop("restore", None)
    if restore:
        module, original, read_pyc, dont_write = restore
        module.rewrite_asserts = original
        module._read_pyc = read_pyc
        sys.dont_write_bytecode = dont_write
