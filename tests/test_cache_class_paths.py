"""The fact cache's pickles name classes by their module path: a class that moves breaks every
cache written before, silently (a row or bundle that does not unpickle is a miss, and its facts
are extracted again: the engine's split made the accuracy-venv's next run extract 40,046 of
41,236).  ``tests/data/cache_class_paths.txt`` lists every path a cache has held; each must stay
importable, and a cold audit's cache names nothing else."""

from __future__ import annotations

import importlib
import io
import pickle
import sqlite3
from pathlib import Path

from conftest import compile_so, make_installed

from cuaudit import audit
from cuaudit.config import Config

LISTED = Path(__file__).parent / "data" / "cache_class_paths.txt"


def _listed() -> list[str]:
    return [line.strip() for line in LISTED.read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_every_class_a_cache_has_held_is_still_where_its_pickles_look():
    for path in _listed():
        module, _, name = path.rpartition(".")
        assert getattr(importlib.import_module(module), name, None) is not None, f"{path} no longer loads"


def test_a_cold_audit_caches_only_listed_classes(tmp_path):
    so = compile_so(tmp_path, "libx", "int f(void) { return 1; }\n")
    files = {
        "pkg/__init__.py": "from . import core\n",
        "pkg/core.py": "import numpy as np\nx = np.float32(3) + 1\n\n\ndef setup():\n    import os\n    return os.sep\n\n\nsetup()\n",
        "pkg/broken.py": "def (:\n",
        "pkg/_ext.cpython-311-x86_64-linux-gnu.so": so.read_bytes(),
        "pkg/bad.cpython-311-x86_64-linux-gnu.so": b"\x7fELF" + b"\x02" * 60,  # CU005: a cached failure
    }
    cache = tmp_path / "cache"
    audit([make_installed(tmp_path / "site", "pkg", files)], config=Config(cache_dir=str(cache), jobs=1), command="env")
    named: set[str] = set()

    class Recording(pickle.Unpickler):
        def find_class(self, module: str, name: str):  # type: ignore[no-untyped-def]
            if module.split(".")[0] == "cuaudit":
                named.add(f"{module}.{name}")
            return super().find_class(module, name)

    def load(blob: bytes) -> object:
        return Recording(io.BytesIO(blob)).load()

    seen: set[int] = set()

    def inner(value: object) -> None:  # facts kept as their pickles inside a bundle or a program
        if id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, bytes) and value[:1] == b"\x80":
            try:
                inner(load(value))
            except Exception:  # noqa: BLE001 - bytes that merely start like a pickle
                pass
        elif isinstance(value, dict):
            for v in value.values():
                inner(v)
        elif isinstance(value, (list, tuple, set, frozenset)):
            for v in value:
                inner(v)
        elif type(value).__module__.split(".")[0] == "cuaudit" and hasattr(value, "__dict__"):
            for v in vars(value).values():  # an import-time program's function bodies, still pickled
                inner(v)

    db = sqlite3.connect(cache / "facts.sqlite3")
    try:
        for (blob,) in db.execute("SELECT value FROM facts"):
            inner(load(blob))
    finally:
        db.close()
    # what this audit writes: rows by content, bundles, a cached failure, the snapshot
    assert {"cuaudit.extraction.ByContent", "cuaudit.workers.Pickled", "cuaudit.workers.CachedFailure",
            "cuaudit.snapshot.Snapshot"} <= named, named
    new = named - set(_listed())
    assert not new, f"classes cached under paths not listed: add them to {LISTED.name} (and keep them there): {sorted(new)}"
