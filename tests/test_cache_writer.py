"""Writes behind (``FactStore.put_many(behind=True)``): the facts an environment's import closures
read are written in a thread while the parent computes on; nothing queued is lost, the thread is
gone whenever nothing is queued, and no pool forks while one writes."""

from __future__ import annotations

import os
import pickle
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

from conftest import make_installed

from cuaudit import audit
from cuaudit.config import Config
from cuaudit.store import FactStore


def _writers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "cuaudit-cache-writer"]


def _rows(folder: Path) -> dict[str, object]:
    db = sqlite3.connect(folder / "facts.sqlite3")
    try:
        return {k: pickle.loads(v) for k, v in db.execute("SELECT key, value FROM facts")}
    finally:
        db.close()


def test_what_is_queued_behind_is_written_in_order_and_the_thread_ends(tmp_path):
    store = FactStore(str(tmp_path))
    store.put_many([(f"k{i}", i) for i in range(5000)], behind=True)
    store.put_many([("k0", "second")], behind=True)  # a later batch wins
    store.put_many([("k1", "now")])  # and this thread may write meanwhile
    store.wait()
    rows = _rows(tmp_path)
    assert len(rows) == 5000 and rows["k0"] == "second" and rows["k4999"] == 4999 and rows["k1"] in (1, "now")
    assert _writers() == []  # nothing queued: no thread left for a fork to copy
    store.close()


def test_a_process_that_exits_without_waiting_still_writes_what_it_queued(tmp_path):
    code = ("import sys; from cuaudit.store import FactStore; s = FactStore(sys.argv[1]); "
            "s.put_many([(f'k{i}', b'x' * 1000) for i in range(20000)], behind=True)")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")})
    assert len(_rows(tmp_path)) == 20000


def test_no_worker_pool_forks_while_the_writer_writes(tmp_path, monkeypatch):
    # a pool's workers fork at its first submit: the engine waits for the writer before it starts
    # one (a thread inside SQLite, or its connection, must not cross a fork)
    import concurrent.futures
    import time

    import cuaudit.engine as engine

    seen: list[int] = []
    real = concurrent.futures.ProcessPoolExecutor

    class Spy(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            seen.append(len(_writers()))
            super().__init__(*args, **kwargs)

    write = FactStore._write

    def slow(self, db, items):
        time.sleep(0.3)
        write(self, db, items)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Spy)
    monkeypatch.setattr(FactStore, "_write", slow)
    ex = engine.Extraction(Config(cache_dir=str(tmp_path / "cache"), jobs=2), None)
    ex.store.put_many([("k", 1)], behind=True)
    assert len(_writers()) == 1
    try:
        ex._workers([], 2, 2, True)
    finally:
        ex.stop_workers()
    assert seen == [0] and _rows(tmp_path / "cache") == {"k": 1}


def test_an_environment_audit_writes_its_facts_behind_and_leaves_no_thread(tmp_path, monkeypatch):
    import cuaudit.engine as engine

    files = {"pkg/__init__.py": "from . import m0\n", **{f"pkg/m{i}.py": f"import pkg.m{i + 1}\nX = {i}\n" for i in range(40)},
             "pkg/m40.py": "Y = 1\n"}
    dist = make_installed(tmp_path / "site", "pkg", files)
    behind: list[int] = []
    put_many = FactStore.put_many

    def spy(self, items, *, behind_=None, **kw):
        items = list(items)
        if kw.get("behind"):
            behind.append(len(items))
        return put_many(self, items, **kw)

    monkeypatch.setattr(FactStore, "put_many", spy)
    monkeypatch.setattr(engine, "_LOOSE_BATCH", 8)
    first = audit([dist], config=Config(cache_dir=str(tmp_path / "cache"), jobs=1), command="explain")
    assert sum(behind) >= 40 and _writers() == []
    keys = _rows(tmp_path / "cache")
    assert sum(":import_time:" in k and ":sha256:" in k for k in keys) >= 40  # every program, by content
    again = audit([dist], config=Config(cache_dir=str(tmp_path / "cache"), jobs=1), command="explain")
    assert again.stats["facts_extracted"] == 0 and [f.code for f in again.findings] == [f.code for f in first.findings]
