"""The fact cache: SQLite, embedded, in the user cache directory.

Keyed by (extractor, extractor version, cuaudit version, member content key),
so a second audit of the same files reads nothing but their stat (or zip
directory) and is near-instant.  Values are pickles of the extractors' frozen
dataclasses; a value that no longer unpickles is a miss, never an error.
"""

from __future__ import annotations

import os
import pickle
import sqlite3
from typing import Any, Iterable

from cuaudit import __version__

_SCHEMA = 1
_MISS = object()


def default_cache_dir() -> str:
    env = os.environ.get("CUAUDIT_CACHE_DIR")
    if env:
        return env
    from platformdirs import user_cache_dir

    return user_cache_dir("cuaudit", appauthor=False)


class FactStore:
    """A key -> pickled fact table.  ``FactStore(None)`` caches nothing."""

    def __init__(self, directory: str | None) -> None:
        self.path = os.path.join(directory, "facts.sqlite3") if directory else None
        self._db: sqlite3.Connection | None = None
        self.hits = 0
        self.misses = 0

    def _conn(self) -> sqlite3.Connection | None:
        if self.path is None:
            return None
        if self._db is None:
            try:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                self._db = self._open()
            except sqlite3.DatabaseError:
                # Not a database (a truncated copy, a crash mid-write): it is only
                # a cache, so start it again; if that fails too, run uncached.
                try:
                    for suffix in ("", "-wal", "-shm"):
                        if os.path.exists(self.path + suffix):
                            os.remove(self.path + suffix)
                    self._db = self._open()
                except (sqlite3.Error, OSError):
                    self.path = None
                    return None
            except (sqlite3.Error, OSError):
                self.path = None  # an unusable cache (read-only home) means no cache
                return None
        return self._db

    def _open(self) -> sqlite3.Connection:
        assert self.path is not None
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("CREATE TABLE IF NOT EXISTS facts (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
            db.execute("SELECT count(*) FROM facts WHERE key = ''").fetchone()
        except sqlite3.Error:
            db.close()
            raise
        return db

    @staticmethod
    def key(extractor: str, version: int, content_key: str) -> str:
        return f"{_SCHEMA}:{__version__}:{extractor}:{version}:{content_key}"

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        db = self._conn()
        keys = list(keys)
        out: dict[str, Any] = {}
        if db is None or not keys:
            self.misses += len(keys)
            return out
        try:
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                rows = db.execute(f"SELECT key, value FROM facts WHERE key IN ({','.join('?' * len(chunk))})", chunk)
                for key, blob in rows:
                    try:
                        out[key] = pickle.loads(blob)
                    except Exception:  # noqa: BLE001 - stale pickles are misses
                        continue
        except sqlite3.Error:
            pass
        self.hits += len(out)
        self.misses += len(keys) - len(out)
        return out

    def put_many(self, items: Iterable[tuple[str, Any]]) -> None:
        db = self._conn()
        if db is None:
            return
        rows = []
        for k, v in items:
            try:
                rows.append((k, pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL)))
            except Exception:  # noqa: BLE001 - a fact that does not pickle is simply not cached
                continue
        if not rows:
            return
        try:
            db.execute("BEGIN")
            db.executemany("INSERT OR REPLACE INTO facts (key, value) VALUES (?, ?)", rows)
            db.execute("COMMIT")
        except sqlite3.Error:
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
