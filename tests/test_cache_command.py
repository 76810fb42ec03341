"""``cuaudit cache``: sizes and entries, clean, the size cap (least recently used first), no fetch leftovers."""

from __future__ import annotations

import json
import os
import time

from conftest import make_wheel
from cuaudit.store import FactStore, cache_usage, prune, remove_leftovers


def _facts(cache, n: int, size: int, used: int) -> list[str]:
    store = FactStore(str(cache))
    keys = [f"k{used}-{i}" for i in range(n)]
    store.put_many([(k, os.urandom(size)) for k in keys])
    db = store._conn()
    db.executemany("UPDATE facts SET used = ? WHERE key = ?", [(used, k) for k in keys])
    store.close()
    return keys


def test_info_and_clean(cli, tmp_path):
    cache = tmp_path / "c"
    _facts(cache, 3, 1000, 1)
    (cache / "downloads" / "demo-1.0").mkdir(parents=True)
    make_wheel(cache / "downloads" / "demo-1.0", "demo", "1.0", {"demo/__init__.py": "x = 1\n" * 1000})
    rc, out, _ = cli("cache", "info", "--cache-dir", cache, "--format", "json", "--isolated")
    doc = json.loads(out)
    assert rc == 0 and doc["facts"]["entries"] == 3 and doc["downloads"]["entries"] == 1
    assert doc["facts"]["bytes"] > 3000 and doc["downloads"]["bytes"] > 0
    rc, out, _ = cli("cache", "clean", "--downloads", "--cache-dir", cache, "--isolated")
    assert rc == 0 and cache_usage(str(cache)).downloads_entries == 0 and cache_usage(str(cache)).facts_entries == 3
    rc, out, _ = cli("cache", "clean", "--cache-dir", cache, "--isolated")
    assert cache_usage(str(cache)).total_bytes == 0


def test_prune_drops_least_recently_used_first(tmp_path):
    cache = tmp_path / "c"
    old = _facts(cache, 20, 50_000, used=100)
    new = _facts(cache, 20, 50_000, used=int(time.time()))
    before = cache_usage(str(cache)).total_bytes
    freed = prune(str(cache), before - 500_000)
    assert freed >= 500_000
    assert cache_usage(str(cache)).total_bytes <= before - 500_000
    left = FactStore(str(cache)).get_many(old + new)
    assert set(new) <= set(left)  # the recently used survive
    assert len(set(old) & set(left)) < len(old)


def test_reading_a_fact_marks_it_used(tmp_path):
    cache = tmp_path / "c"
    (key,) = _facts(cache, 1, 10, used=5)
    FactStore(str(cache)).get_many([key])
    store = FactStore(str(cache))
    (used,) = store._conn().execute("SELECT used FROM facts WHERE key = ?", (key,)).fetchone()
    assert used > 5


def test_a_fact_read_within_the_hour_is_not_rewritten(tmp_path):
    # marking a bundle used rewrites its row (megabytes): to the hour is enough for pruning
    cache = tmp_path / "c"
    recent = int(time.time()) - 600
    (fresh,) = _facts(cache, 1, 10, used=recent)
    (stale,) = _facts(cache, 1, 10, used=recent - 7200)
    FactStore(str(cache)).get_many([fresh, stale])
    db = FactStore(str(cache))._conn()
    used = dict(db.execute("SELECT key, used FROM facts"))
    assert used[fresh] == recent and used[stale] > recent


def test_a_value_that_does_not_pickle_is_left_out_and_the_others_kept(tmp_path):
    # a value that does not pickle (met while the rows stream to SQLite) must not end the batch
    store = FactStore(str(tmp_path / "c"))
    store.put_many(iter([("a", 1), ("b", lambda: 0), ("c", {"x": (2, "y")})]))
    assert store.get_many(["a", "b", "c"]) == {"a": 1, "c": {"x": (2, "y")}}


def test_failed_fetch_leaves_no_folder(tmp_path, monkeypatch):
    from cuaudit.inputs import index
    from cuaudit.inputs.process import Completed

    failed = Completed(1, b"", b"ERROR: No matching distribution found for nosuch==1.0")
    monkeypatch.setattr(index, "run_bounded", lambda *a, **k: failed)
    art = index.fetch_requirement("nosuch==1.0", cache_dir=str(tmp_path))
    assert art.problems and art.problems[0].code == "CU010"
    assert os.listdir(tmp_path / "downloads") == []


def test_old_partial_files_are_swept(tmp_path):
    folder = tmp_path / "downloads" / "x-1.0"
    (folder / ".part-abc").mkdir(parents=True)
    (folder / "x.whl.part").write_bytes(b"half")
    past = time.time() - 7200
    for p in (folder / ".part-abc", folder / "x.whl.part"):
        os.utime(p, (past, past))
    assert remove_leftovers(str(tmp_path)) == 3
    assert not folder.exists()


def test_cap_is_configurable(cli, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.cuaudit]\ncache-max-size = "1MB"\n')
    rc, out, _ = cli("cache", "info", "--config", tmp_path / "pyproject.toml", "--cache-dir", tmp_path / "c",
                     "--format", "json")
    assert json.loads(out)["max_size_bytes"] == 1024**2
    (tmp_path / "pyproject.toml").write_text('[tool.cuaudit]\ncache-max-size = "lots"\n')
    rc, _out, err = cli("cache", "info", "--config", tmp_path / "pyproject.toml")
    assert rc == 2 and "cache-max-size" in err
