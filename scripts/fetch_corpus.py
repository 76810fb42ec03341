#!/usr/bin/env python3
"""Download the pinned real-artifact corpus (tests/corpus.toml) and check every SHA-256.

    python scripts/fetch_corpus.py [DIR] [--large]

DIR defaults to $CUAUDIT_CORPUS or ~/.cache/cuaudit/corpus.  Files already
there with the right hash are kept; a file with another hash is downloaded
again.  The index is PIP_INDEX_URL (a PEP 691 JSON simple index) or PyPI's.
Exit status: 0 every file present, 1 some could not be fetched (listed),
2 usage.  Nothing is installed, built or run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE.parent / "tests" / "corpus.toml"


def load_manifest(path: Path = MANIFEST) -> list[dict]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    with open(path, "rb") as fh:
        return list(tomllib.load(fh)["artifact"])


def default_dir() -> Path:
    return Path(os.environ.get("CUAUDIT_CORPUS") or Path.home() / ".cache" / "cuaudit" / "corpus")


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def index_url() -> str:
    return (os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple/").rstrip("/") + "/"


def file_url(project: str, filename: str) -> str:
    req = urllib.request.Request(index_url() + urllib.parse.quote(project) + "/",
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        listing = json.load(resp)
    for f in listing.get("files", []):
        if f.get("filename") == filename:
            return urllib.parse.urljoin(resp.url, f["url"])
    raise LookupError(f"{filename} is not listed by {index_url()}{project}/")


def fetch(entry: dict, dest: Path) -> None:
    target = dest / entry["file"]
    if target.exists() and sha256_of(target) == entry["sha256"]:
        return
    url = file_url(entry["project"], entry["file"])
    fd, part = tempfile.mkstemp(dir=dest, prefix=".part-")
    try:
        h = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=120) as resp:
            for block in iter(lambda: resp.read(1 << 20), b""):
                h.update(block)
                out.write(block)
        if h.hexdigest() != entry["sha256"]:
            raise ValueError(f"{entry['file']}: SHA-256 {h.hexdigest()} is not the pinned {entry['sha256']}")
        os.replace(part, target)
    finally:
        if os.path.exists(part):
            os.unlink(part)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", nargs="?", type=Path, default=None)
    ap.add_argument("--large", action="store_true", help="also the benchmark set (about 1.5 GB more)")
    args = ap.parse_args(argv)
    dest = (args.dir or default_dir()).expanduser()
    dest.mkdir(parents=True, exist_ok=True)
    failed = []
    for entry in load_manifest():
        if entry["set"] == "large" and not args.large:
            continue
        try:
            fetch(entry, dest)
        except Exception as exc:  # noqa: BLE001 - report every file that failed, then exit 1
            failed.append(f"{entry['file']}: {exc}")
    for line in failed:
        print(f"failed: {line}", file=sys.stderr)
    print(f"{dest}: {len(list(dest.iterdir()))} files")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
