"""Reports of the corpus and of one environment, normalised so that two runs compare byte for byte.

``tests/test_findings_unchanged.py`` compares today's reports with the goldens
in ``tests/golden/findings/`` (written by ``python tests/findings_golden.py
--write``, from the code the goldens are meant to pin): speed work must not
change a single finding.  Normalised: the timing and cache counters of
``stats`` are dropped, and the corpus / environment paths become placeholders.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "findings"

#: stats that depend on the clock or on what the cache already held
VOLATILE_STATS = ("seconds", "facts_extracted", "facts_cached", "facts_by_content", "evidence_facts_extracted", "evidence_facts_cached",
                  "snapshot_reused")

#: the environment pinned by a golden: corpus wheels installed with pip --no-deps --no-index
ENV_WHEELS = (
    "fastrlock-0.8.3-*.whl",
    "rmm_cu12-24.12.0-*.whl",
    "nvidia_cuda_runtime_cu11-11.8.89-*.whl",
    "numpy-2.0.2-*.whl",
    "cupy_cuda12x-14.2.0-*.whl",
    "cuda_bindings-12.9.4-*.whl",
)


def normalise(report_json: str, replacements: dict[str, str]) -> str:
    data = json.loads(report_json)
    for key in VOLATILE_STATS:
        data.get("stats", {}).pop(key, None)
    # the variables of the shell that ran the audit (PATH) are the machine's, not a finding's
    (data.get("environment") or {}).pop("environ", None)
    text = json.dumps(data, indent=1, sort_keys=True)
    # longest first: a venv inside the corpus folder keeps its own placeholder
    for old, new in sorted(replacements.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(json.dumps(old)[1:-1], new)
    return text + "\n"


def code_dir() -> str:
    """The ``src`` folder whose code writes the reports (the audited interpreter inherits it in PYTHONPATH)."""
    return os.environ.get("CUAUDIT_GOLDEN_SRC") or str(REPO / "src")


def run_report(args: list[str], cache_dir: str | None) -> str:
    """``cuaudit ARGS --format json`` in a fresh process of this interpreter, with the source tree's code
    (or the ``src`` folder named by ``CUAUDIT_GOLDEN_SRC``: goldens are written from main's code, e.g.
    ``git archive main src | tar -x -C /tmp/main`` and ``CUAUDIT_GOLDEN_SRC=/tmp/main/src``)."""
    # The code comes in through sys.path, not PYTHONPATH: an audited interpreter (env --python)
    # inherits the environment, and would then find cuaudit's own sources as installed code.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cache = ["--cache-dir", cache_dir] if cache_dir else ["--no-cache"]
    launch = (f"import sys; sys.path.insert(0, {code_dir()!r}); sys.argv[0] = 'cuaudit'; "
              "from cuaudit.cli import entry; entry()")
    proc = subprocess.run([sys.executable, "-c", launch, *args, "--isolated", "--format", "json", "--exit-zero",
                           *cache], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"cuaudit {' '.join(args)} failed: {proc.stderr[-2000:]}")
    return proc.stdout


ENV_GOLDEN = "env.json.gz"


def env_report(make_venv, corpus: Path, tmp: Path, cache_dir: str | None) -> str:
    """``cuaudit env`` of a venv of :data:`ENV_WHEELS` built under ``tmp`` (once per ``tmp``)."""
    venv = tmp / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        make_venv(venv, [sorted(corpus.glob(p))[0] for p in ENV_WHEELS])
    return normalise(run_report(["env", "--python", str(python)], cache_dir), {str(venv): "<venv>", str(corpus): "<corpus>", code_dir(): "<src>"})


def golden_name(wheel: str) -> str:
    return f"check-{wheel}.json.gz"


def read_golden(name: str) -> str | None:
    path = GOLDEN / name
    if not path.exists():
        return None
    return gzip.decompress(path.read_bytes()).decode()


def write_golden(name: str, text: str) -> None:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    # mtime 0: the file changes only when the report does
    (GOLDEN / name).write_bytes(gzip.compress(text.encode(), mtime=0))


def main() -> int:
    import argparse
    import tempfile

    sys.path.insert(0, str(REPO / "tests"))
    from conftest import _corpus_dir, corpus_python  # noqa: F401 - the suite's own corpus lookup

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="write the goldens (from the code checked out now)")
    parser.add_argument("--only", default="", help="substring of the corpus file names to do")
    args = parser.parse_args()
    corpus = _corpus_dir()
    files = sorted(p for p in corpus.iterdir() if p.name.endswith((".whl", ".tar.gz")) and args.only in p.name)
    for f in files:
        text = normalise(run_report(["check", str(f)], None), {str(corpus): "<corpus>"})
        if args.write:
            write_golden(golden_name(f.name), text)
        print(f.name, "ok" if args.write else text == read_golden(golden_name(f.name)), flush=True)
    if not args.only:
        from conftest import make_venv

        with tempfile.TemporaryDirectory() as tmp:
            text = env_report(make_venv, corpus, Path(tmp), None)
            if args.write:
                write_golden(ENV_GOLDEN, text)
            print(ENV_GOLDEN, "ok" if args.write else text == read_golden(ENV_GOLDEN), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
