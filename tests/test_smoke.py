"""The pipeline end to end on inputs built here."""

from __future__ import annotations

from conftest import codes

from cuaudit import audit
from cuaudit.config import Config


def test_clean_wheel_has_no_findings(wheel_factory):
    whl = wheel_factory("demo", "1.0", {"demo/__init__.py": "x = 1\n"})
    report = audit([str(whl)], config=Config(cache=False))
    assert report.findings == []
    assert report.artifacts[0].name == "demo" and report.artifacts[0].version == "1.0"


def test_missing_path_is_cu001_and_scan_goes_on(wheel_factory, tmp_path):
    whl = wheel_factory("demo", "1.0", {"demo/__init__.py": "x = 1\n"})
    report = audit([str(tmp_path / "nope.whl"), str(whl)], config=Config(cache=False))
    assert codes(report) == ["CU001"]
    assert len(report.artifacts) == 2
    assert report.exit_code() == 1
