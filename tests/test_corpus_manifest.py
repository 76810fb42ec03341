"""The suite stands on its own: every real artifact a test or benchmark names is pinned in tests/corpus.toml."""

from __future__ import annotations

import fnmatch
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from fetch_corpus import load_manifest  # noqa: E402


def test_every_pattern_the_tests_use_is_pinned():
    files = [e["file"] for e in load_manifest()]
    text = "\n".join(p.read_text() for p in [*REPO.glob("tests/*.py"), *REPO.glob("benchmarks/*.py")])
    patterns = set(re.findall(r"corpus_file\((?:[a-z_]+, )?\"([^\"]+)\"", text))
    assert len(patterns) >= 15, patterns  # the scan itself works
    missing = [p for p in patterns if not any(fnmatch.fnmatch(f, p) for f in files)]
    assert missing == []


def test_the_manifest_pins_every_file_by_sha256():
    entries = load_manifest()
    assert len({e["file"] for e in entries}) == len(entries)
    for e in entries:
        assert re.fullmatch(r"[0-9a-f]{64}", e["sha256"]), e
        assert e["set"] in ("default", "large")
        assert e["file"].endswith((".whl", ".tar.gz")), e


def test_tests_do_not_depend_on_a_folder_beside_the_repository():
    sources = [p for p in [*REPO.glob("tests/*.py"), *REPO.glob("benchmarks/*.py"), REPO / ".ci" / "run"]
               if p.name != Path(__file__).name]
    text = "\n".join(p.read_text() for p in sources)
    assert "shared/corpus" not in text and "fetch.sh" not in text
