"""Shared test helpers: fixtures built from strings, the real corpus, the CLI.

Every helper here builds its inputs itself (tiny wheels, trees, ELF files
compiled with ``cc``); ``corpus`` gives the real public artifacts pinned in
``tests/corpus.toml`` (downloaded once into a cache by
``scripts/fetch_corpus.py``, skipped with a reason only when the download is
impossible).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never read or write the user's fact cache."""
    os.environ["CUAUDIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("cuaudit-cache"))
    for var in [v for v in os.environ if v.startswith("CUAUDIT_") and v != "CUAUDIT_CACHE_DIR" and v != "CUAUDIT_CORPUS"]:
        del os.environ[var]


# -- fixtures built from strings --------------------------------------------------


def make_wheel(
    directory: Path,
    name: str,
    version: str,
    files: dict[str, bytes | str],
    *,
    tag: str = "py3-none-any",
    requires: list[str] = (),
    record: bool = True,
) -> Path:
    """A valid wheel (WHEEL, METADATA, RECORD) holding ``files``."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    meta = [f"Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"] + [f"Requires-Dist: {r}" for r in requires]
    contents: dict[str, bytes] = {k: (v.encode() if isinstance(v, str) else v) for k, v in files.items()}
    contents[f"{info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    contents[f"{info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: cuaudit-tests\nRoot-Is-Purelib: true\nTag: {tag}\n".encode()
    if record:
        lines = []
        for path, data in contents.items():
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            lines.append(f"{path},sha256={digest},{len(data)}")
        lines.append(f"{info}/RECORD,,")
        contents[f"{info}/RECORD"] = ("\n".join(lines) + "\n").encode()
    path = directory / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in contents.items():
            zf.writestr(member, data)
    return path


def make_tree(directory: Path, files: dict[str, bytes | str]) -> Path:
    """A directory holding ``files`` (paths relative, POSIX)."""
    for rel, data in files.items():
        p = directory / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
    return directory


def answering_interpreter(path: Path, site: Path, *, version: str = "3.11.0") -> Path:
    """A stand-in for ``python`` at ``path`` that answers cuaudit's question about its paths (its
    version, ``site`` as its one site folder) and runs nothing else."""
    import json

    answer = json.dumps({"executable": "/x/python", "version": version, "implementation": "cpython",
                         "platform": "linux-x86_64", "prefix": str(path.parent), "site_dirs": [str(site)],
                         "sys_path": [], "user_site": None})
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{answer}\nEOF\n")
    path.chmod(0o755)
    return path


def make_installed(site: Path, name: str, files: dict[str, bytes | str], version: str = "1.0"):
    """An installed distribution of ``files`` in the folder ``site`` (its dist-info names its top level)."""
    from cuaudit.inputs.environment import InstalledDistribution

    tops = sorted({rel.split("/")[0].removesuffix(".py") for rel in files})
    info = f"{name}-{version}.dist-info"
    make_tree(site, {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                     f"{info}/top_level.txt": "\n".join(tops) + "\n", **files})
    return InstalledDistribution(None, name, version, str(site / info))


def compile_so(directory: Path, name: str, source: str, *, libs: list[str] = (), flags: list[str] = ()) -> Path:
    """A shared library compiled with ``cc`` from C source (skips if no compiler)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) on this machine")
    src = directory / f"{name}.c"
    src.write_text(source)
    out = directory / name
    cmd = [cc, "-shared", "-fPIC", "-o", str(out), str(src), *flags, *[f"-l{lib}" for lib in libs]]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


def make_venv(base: Path, wheels: list[Path]) -> Path:
    """A venv at ``base`` with ``wheels`` installed (``pip --no-deps --no-index``): its ``python``.

    Built with a CPython 3.11 when a wheel is a cp311 build (the corpus wheels are),
    so the same tests run whatever Python runs the suite.
    """
    python = corpus_python() if any("-cp311-" in Path(w).name for w in wheels) else sys.executable
    subprocess.run([python, "-m", "venv", "--without-pip", str(base)], check=True, capture_output=True)
    py = base / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                           "--no-index", *map(str, wheels)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"could not install into a venv: {proc.stderr[-500:]}")
    return py


@pytest.fixture
def wheel_factory(tmp_path: Path):
    def factory(name: str = "demo", version: str = "1.0", files: dict | None = None, **kw) -> Path:
        return make_wheel(tmp_path, name, version, files or {}, **kw)

    return factory


@pytest.fixture
def tree_factory(tmp_path: Path):
    def factory(files: dict, sub: str = "tree") -> Path:
        return make_tree(tmp_path / sub, files)

    return factory


@pytest.fixture
def walking(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """``[True]`` while an ``extraction.Extraction.walk`` runs in this process (the import closures'),
    ``[False]`` otherwise: for spies that tell what happens during a walk from what happens after."""
    import cuaudit.extraction as extraction

    flag = [False]
    real = extraction.Extraction.walk

    def walk(self, *args, **kwargs):
        flag[0] = True
        try:
            return real(self, *args, **kwargs)
        finally:
            flag[0] = False

    monkeypatch.setattr(extraction.Extraction, "walk", walk)
    return flag


# -- the CLI, in process ----------------------------------------------------------------


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Run ``cuaudit ARGS`` in process: returns (exit code, stdout, stderr)."""
    from cuaudit.cli import main

    def run(*args: str) -> tuple[int, str, str]:
        rc = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return rc, out, err

    return run


def codes(report) -> list[str]:
    return sorted(f.code for f in report.findings)


# -- the real corpus -----------------------------------------------------------------


def _corpus_dir() -> Path:
    return Path(os.environ.get("CUAUDIT_CORPUS") or Path.home() / ".cache" / "cuaudit" / "corpus")


def _corpus_complete(d: Path, large: bool) -> bool:
    """Every pinned file of the set is there (hashes were checked when it was fetched)."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from fetch_corpus import load_manifest
    finally:
        sys.path.pop(0)
    return all((d / e["file"]).is_file() for e in load_manifest() if large or e["set"] == "default")


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The directory of the real public artifacts (tests/corpus.toml), downloaded once and cached.

    Fetched by the project's own scripts/fetch_corpus.py (pinned by SHA-256); skipped
    with the reason only when the package index cannot be reached.
    """
    d = _corpus_dir()
    if not _corpus_complete(d, large=False):
        proc = subprocess.run([sys.executable, str(REPO / "scripts" / "fetch_corpus.py"), str(d)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"the package index is unreachable, corpus download failed: {proc.stderr.strip()[-300:]}")
    return d


def corpus_python() -> str:
    """A CPython 3.11: the corpus wheels are cp311 builds, whatever Python runs the suite."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from harness import NotAvailable, corpus_python as find
    finally:
        sys.path.pop(0)
    try:
        return find()
    except NotAvailable as exc:
        pytest.skip(str(exc))


def corpus_file(corpus: Path, pattern: str) -> Path:
    matches = sorted(corpus.glob(pattern))
    if not matches:
        pytest.skip(f"{pattern} is not in the corpus at {corpus}")
    return matches[0]
