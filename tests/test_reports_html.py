"""The HTML report in a real browser: headless Chromium (Debian's ``chromium``).

Skipped, with the reason, where no Chromium is installed (CI installs none).
A page that parses but does not render, a filter that does not hide info
findings, or a 20 000-finding report too large to open would each fail here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from test_reports_human import hostile_report, make_report

from cuaudit.model import ArtifactKind, ArtifactRef, Finding, Fix, Location, Severity
from cuaudit.report import html as html_report

BROWSER = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no headless Chromium (apt-get install chromium)")


def chromium(tmp_path: Path, page: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{page.stem}"
    return subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         f"--user-data-dir={profile}", *args, page.as_uri()],
        capture_output=True, timeout=180,
    )


def shoot(tmp_path: Path, html: str, name: str, size: str = "1100,1400") -> bytes:
    page = tmp_path / f"{name}.html"
    page.write_text(html, encoding="utf-8")
    png = tmp_path / f"{name}.png"
    done = chromium(tmp_path, page, f"--window-size={size}", f"--screenshot={png}")
    assert png.exists(), done.stderr.decode(errors="replace")[-2000:]
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG")
    return data


def mixed_report():
    ref = ArtifactRef(ArtifactKind.WHEEL, "/w/demo-1.0-py3-none-any.whl", "demo", "1.0")
    items = [Finding("CU201", Severity.ERROR, "demo/_a.so needs `libcublas.so.11` but uses none of its symbols",
                     Location(ref, "demo/_a.so", symbol="libcublas.so.11"),
                     fix=Fix(user="`pip install nvidia-cublas-cu11`", maintainer="link with -Wl,--as-needed")),
             Finding("CU102", Severity.WARNING, "`import demo; demo.sub` raises AttributeError",
                     Location(ref, "demo/__init__.py", line=3, symbol="demo.sub"))]
    items += [Finding("CU101", Severity.INFO, f"info number {i} that only -v or the info filter shows",
                      Location(ref, f"demo/m{i}/__init__.py", symbol=f"demo.m{i}.x")) for i in range(6)]
    return make_report(items)


def test_renders_and_the_info_filter_hides_info(tmp_path):
    report = mixed_report()
    out = html_report.render(report)
    assert "<code>libcublas.so.11</code>" in out and "<code>pip install nvidia-cublas-cu11</code>" in out
    dom = chromium(tmp_path, _write(tmp_path, "dom", out), "--dump-dom").stdout.decode()
    assert "Found 8 findings (1 error, 1 warning, 6 info)" in dom and "demo 1.0" in dom
    default = shoot(tmp_path, out, "default")
    # Info is off at first: the page looks exactly as if the info findings were not in it.
    without_info = re.sub(r'<h4 class="mono member sevset-i">[^<]*</h4>\n?<div class="finding sev-info">.*?</div></div>\n',
                          "", out, flags=re.S)
    assert without_info.count('class="finding sev-info"') == 0 < out.count('class="finding sev-info"')
    assert shoot(tmp_path, without_info, "without-info") == default
    # Checked, the info findings show.
    shown = out.replace('id="f-i" aria-label', 'id="f-i" checked aria-label')
    assert shoot(tmp_path, shown, "info-on") != shoot(tmp_path, without_info.replace(
        'id="f-i" aria-label', 'id="f-i" checked aria-label'), "info-on-without")


def _write(tmp_path: Path, name: str, html: str) -> Path:
    page = tmp_path / f"{name}.html"
    page.write_text(html, encoding="utf-8")
    return page


def test_hostile_names_render_as_text(tmp_path):
    out = html_report.render(hostile_report())
    dom = chromium(tmp_path, _write(tmp_path, "hostile", out), "--dump-dom").stdout.decode()
    assert "\\x1b[2J" in dom and "\\xff\\xfe" in dom and "\\u202e" in dom
    assert "\u202e" not in dom and "\x1b" not in dom


def test_twenty_thousand_findings_stay_a_reasonable_page(tmp_path):
    refs = [ArtifactRef(ArtifactKind.INSTALLED, "/site", f"dist{i}", "1.0") for i in range(200)]
    items = []
    for i, ref in enumerate(refs):
        for j in range(100):
            sev = (Severity.ERROR, Severity.WARNING, Severity.INFO, Severity.INFO)[j % 4]
            code = {Severity.ERROR: "CU201", Severity.WARNING: "CU102", Severity.INFO: "CU101"}[sev]
            symbol = f"lib{j % 7}.so" if sev is Severity.ERROR else f"dist{i}.m{j}"
            items.append(Finding(code, sev, f"dist{i}/m{j}.so: {symbol} is the cause of `this` finding",
                                 Location(ref, f"dist{i}/m{j}.so", symbol=symbol), key=symbol,
                                 fix=Fix(user="pip install the-wheel", maintainer="link with -Wl,--as-needed"),
                                 evidence={"needed": [f"lib{k}.so" for k in range(5)]}))
    report = make_report(items, artifacts=refs)
    out = html_report.render(report)
    assert len(out) < 8_000_000, len(out)  # ~340 bytes a finding, info without fixes, evidence capped
    assert out.count("<details class=\"artifact") == 200
    assert out.count(" open>") <= html_report.OPEN_ARTIFACTS
    started = time.perf_counter()
    shoot(tmp_path, out, "large", size="1100,900")
    assert time.perf_counter() - started < 60
