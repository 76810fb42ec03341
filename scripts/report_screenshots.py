"""Screenshots of the HTML report for docs/: a wheel report and an environment report.

    python scripts/report_screenshots.py

Renders `cuaudit check cupy-cuda11x==12.3.0` (the corpus wheel) and `cuaudit env`
of a virtual environment made from corpus wheels (cupy-cuda11x 12.3.0, NumPy
1.26.4, fastrlock, the CUDA runtime, NVRTC and cuRAND wheels; no cuBLAS: the
CPU-only box of issue 15), then shoots each page with headless Chromium
(Debian's ``chromium``) into ``docs/report-wheel.png`` and ``docs/report-env.png``.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("CUAUDIT_CORPUS") or Path.home() / ".cache" / "cuaudit" / "corpus")
ENV_WHEELS = ["cupy_cuda11x-12.3.0-*.whl", "numpy-1.26.4-*.whl", "fastrlock-*.whl", "nvidia_cuda_runtime_cu11-*.whl",
              "nvidia_cuda_nvrtc_cu11-*.whl", "nvidia_curand_cu11-*.whl"]


def chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def screenshot(html: Path, png: Path, *, width: int = 1100, height: int = 900) -> None:
    """One headless Chromium run: the page as a PNG of width x height."""
    browser = chromium()
    if browser is None:
        raise SystemExit("no chromium: apt-get install chromium")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             f"--user-data-dir={profile}", f"--window-size={width},{height}", f"--screenshot={png}", html.as_uri()],
            check=True, capture_output=True, timeout=120,
        )


def cuaudit(*args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, "-m", "cuaudit", *args, "--isolated"], env=env)
    if done.returncode not in (0, 1):  # 1: findings, as expected
        raise SystemExit(f"cuaudit {' '.join(args)} failed ({done.returncode})")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        wheel = glob.glob(str(CORPUS / ENV_WHEELS[0]))[0]
        cuaudit("check", wheel, "-f", "html", "-o", str(tmp_path / "wheel.html"))
        venv = tmp_path / "env"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        wheels = [glob.glob(str(CORPUS / w))[0] for w in ENV_WHEELS]
        subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                        "--no-deps", "--no-index", *wheels], check=True)
        cuaudit("env", "--python", str(venv / "bin" / "python"), "-f", "html", "-o", str(tmp_path / "env.html"))
        screenshot(tmp_path / "wheel.html", REPO / "docs" / "report-wheel.png")
        screenshot(tmp_path / "env.html", REPO / "docs" / "report-env.png")
    quantize = shutil.which("pngquant")  # Debian's pngquant: a third of the size, same look
    for png in ("report-wheel.png", "report-env.png"):
        if quantize:
            subprocess.run([quantize, "--force", "--quality", "60-85", "--output", str(REPO / "docs" / png),
                            str(REPO / "docs" / png)], check=True)


if __name__ == "__main__":
    main()
