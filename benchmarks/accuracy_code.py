"""User code that reaches submodules as attributes: cuaudit next to pyright, ty and mypy.

Each script imports something and reaches one submodule through an attribute
chain.  The runtime decides each one (the script run by the benchmark venv's
interpreter in a fresh ``python -I``): AttributeError or not.  Each tool's
claim is an error it reports on the chain's line (cuaudit: CU104 with the
environment given by ``--python``; pyright, ty, mypy: an attribute error on
that line, with the same interpreter's packages).  The peers come from their
own venv (``~/.cache/cuaudit/peers-venv``: ``pip install "pyright[nodejs]" ty mypy``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

#: name -> script; the last line is the chain
SCRIPTS = {
    "importlib_util": "import importlib\nimportlib.util.find_spec('json')\n",
    "concurrent_futures": "import concurrent\nconcurrent.futures.ThreadPoolExecutor\n",
    "xml_etree": "import xml\nxml.etree.ElementTree\n",
    "xml_etree_et": "import xml.etree\nxml.etree.ElementTree.fromstring\n",
    "email_mime": "import email\nemail.mime.text\n",
    "logging_handlers": "import logging\nlogging.handlers.RotatingFileHandler\n",
    "http_client": "import http\nhttp.client.HTTPConnection\n",
    "urllib_request": "import urllib\nurllib.request.urlopen\n",
    "os_path": "import os\nos.path.join\n",
    "sympy_series_gruntz": "import sympy.series\nsympy.series.gruntz\n",
    "pygments_lexers_python": "import pygments.lexers\npygments.lexers.python.PythonLexer\n",
    "pydantic_main": "import pydantic\npydantic.main.BaseModel\n",
    "matplotlib_pyplot": "import matplotlib\nmatplotlib.pyplot.plot\n",
    "numpy_testing": "import numpy\nnumpy.testing.assert_equal\n",
    "numpy_polynomial": "import numpy\nnumpy.polynomial.Polynomial\n",
    "pandas_plotting": "import pandas\npandas.plotting.scatter_matrix\n",
    "requests_adapters": "import requests\nrequests.adapters.HTTPAdapter\n",
    "rich_console": "import rich\nrich.console.Console\n",
    "scipy_sparse_csgraph": "import scipy.sparse\nscipy.sparse.csgraph.dijkstra\n",
    "sqlalchemy_orm": "import sqlalchemy\nsqlalchemy.orm.Session\n",
    "anyio_abc": "import anyio\nanyio.abc.TaskGroup\n",
    "dateutil_parser": "import dateutil\ndateutil.parser.parse\n",
    "networkx_algorithms_flow": "import networkx\nnetworkx.algorithms.flow.maximum_flow\n",
    "babel_dates": "import babel\nbabel.dates.format_date\n",
}

PEERS_VENV = Path(os.environ.get("CUAUDIT_ACCURACY_CACHE", Path.home() / ".cache" / "cuaudit")) / "peers-venv"


def runtime(python: str, path: Path) -> bool:
    """True when the script's chain raises AttributeError in a fresh interpreter."""
    proc = subprocess.run([python, "-I", str(path)], capture_output=True, text=True, timeout=300)
    return proc.returncode != 0 and "AttributeError" in proc.stderr


def cuaudit_claims(python: str, root: Path) -> dict[str, bool]:
    from cuaudit import audit
    from cuaudit.config import Config

    report = audit([str(root)], env=python, config=Config(select=("CU104",)))
    hit = {Path(f.location.member or "").stem for f in report.findings if f.location.line == 2}
    return {name: name in hit for name in SCRIPTS}


def _peer(cmd: list[str], root: Path, pattern: str) -> dict[str, bool] | None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root, timeout=900)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = proc.stdout + proc.stderr
    found: dict[str, bool] = {name: False for name in SCRIPTS}
    for line in out.splitlines():
        m = re.search(r"([A-Za-z0-9_]+)\.py[:\"]?\s*:?(\d+)", line)
        if m and m.group(1) in found and m.group(2) == "2" and re.search(pattern, line, re.I):
            found[m.group(1)] = True
    return found


def peers(python: str, root: Path) -> dict[str, dict[str, bool] | None]:
    bin_ = PEERS_VENV / "bin"
    files = [f"{n}.py" for n in SCRIPTS]
    return {
        "pyright": _peer([str(bin_ / "pyright"), "--pythonpath", python, *files], root, r"attribute|is not a known"),
        "ty": _peer([str(bin_ / "ty"), "check", "--python", python, "--output-format", "concise", *files], root,
                    r"attribute|submodule"),
        "mypy": _peer([str(bin_ / "mypy"), "--python-executable", python, "--no-incremental", "--ignore-missing-imports",
                       "--follow-imports=silent", "--no-error-summary", *files], root, r"has no attribute"),
    }


def main(python: str) -> int:
    """Score the scripts with ``python`` (the interpreter of the pinned environment) as the runtime."""
    with tempfile.TemporaryDirectory(prefix="cuaudit-code-") as tmp:
        root = Path(tmp)
        for name, text in SCRIPTS.items():
            (root / f"{name}.py").write_text(text)
        truth = {name: runtime(python, root / f"{name}.py") for name in SCRIPTS}
        tools = {"cuaudit": cuaudit_claims(python, root), **peers(python, root)}
    traps = sum(truth.values())
    print(f"scripts: {len(SCRIPTS)}; runtime traps: {traps}; not traps: {len(SCRIPTS) - traps}")
    print("| tool | traps found | false claims | missed |\n|---|---|---|---|")
    for tool, claims in tools.items():
        if claims is None:
            print(f"| {tool} | not available | | |")
            continue
        found = sum(1 for n in SCRIPTS if claims[n] and truth[n])
        false = [n for n in SCRIPTS if claims[n] and not truth[n]]
        missed = [n for n in SCRIPTS if truth[n] and not claims[n]]
        print(f"| {tool} | {found} of {traps} | {len(false)}{' (' + ', '.join(false) + ')' if false else ''} | "
              f"{', '.join(missed)} |")
    print(json.dumps({"truth": truth}, sort_keys=True))
    return 0


if __name__ == "__main__":
    # `benchmarks/accuracy.py code` passes its pinned venv; run alone, this interpreter is the runtime
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else sys.executable))
