"""Hostile inputs (issue 13): nothing audited runs, crashes cuaudit, blows up or is written outside.

Every input here is built byte by byte in the test; each test fails on the
code before its fix.
"""

from __future__ import annotations

import io
import json
import os
import stat
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import make_tree, make_wheel


def _script(path: Path, marker: Path, tail: bytes = b"") -> Path:
    """An executable that leaves ``marker`` behind if anything runs it (a zip may follow it)."""
    path.write_bytes(f"#!/bin/sh\ntouch '{marker}'\nexit 0\n".encode() + tail)
    path.chmod(0o755)
    return path


# -- nothing audited is ever executed -------------------------------------------------


def test_diff_never_runs_an_input_named_python(tmp_path, cli):
    old = make_wheel(tmp_path, "prov", "1.0", {"prov/__init__.py": ""})
    new = make_wheel(tmp_path, "prov", "2.0", {"prov/__init__.py": ""})
    marker = tmp_path / "ran"
    # A valid zip with a shell script in front: still a wheel for zipfile.
    consumer = _script(tmp_path / "python3", marker, make_wheel(tmp_path, "cons", "1.0", {"cons/x.py": ""}).read_bytes())
    for argv in (
        ("diff", old, new, "--consumers", consumer),
        ("diff", consumer, new),
        ("diff", old, consumer),
    ):
        rc, out, err = cli(*argv, "--isolated", "--no-cache", "--format", "json")
        assert not marker.exists(), f"{argv} executed an input"
        assert rc in (0, 1), err


def test_diff_consumers_python_names_an_interpreter_explicitly(tmp_path, cli):
    old = make_wheel(tmp_path, "prov", "1.0", {"prov/__init__.py": ""})
    new = make_wheel(tmp_path, "prov", "2.0", {"prov/__init__.py": ""})
    rc, out, err = cli("diff", old, new, "--consumers-python", sys.executable, "--isolated", "--no-cache",
                       "--format", "json")
    report = json.loads(out)
    # the running interpreter's environment: cuaudit's own dependencies are consumers
    assert rc == 0 and report["stats"]["artifacts"] > 5, err
