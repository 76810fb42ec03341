"""The fact cache: SQLite, embedded, in the user cache directory.

Keyed by (extractor, extractor version, cuaudit version, the grammar cuaudit
parses Python with, member content key), so a second audit of the same files
reads nothing but their stat (or zip directory) and is near-instant.  Values are pickles of the extractors' frozen
dataclasses; a value that no longer unpickles is a miss, never an error.
"""

from __future__ import annotations

import os
import pickle
import shutil
import sqlite3
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from cuaudit import __version__
from cuaudit.heap import gc_paused

_SCHEMA = 1
_MISS = object()
#: the Python grammar cuaudit's own interpreter parses audited sources with (``ast``, ``symtable``,
#: the pyc headers it trusts): a fact of a source depends on it (``f"{d["a"]}"`` parses on 3.12,
#: not on 3.11), so a cache shared by cuaudit under two interpreters keeps each one's facts apart
#: instead of answering one with the other's (the 3.11 run then missed that CU006)
GRAMMAR = f"{sys.implementation.name}-{sys.version_info[0]}.{sys.version_info[1]}"


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

    @property
    def keeps(self) -> bool:
        """Whether :meth:`put_many` keeps anything (False for ``FactStore(None)`` and a store that failed to open)."""
        return self.path is not None

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
            # a cold audit writes hundreds of MB at once: the default checkpoint every 4 MB (each
            # synced twice) cost 8 % of the writes of an 88-distribution environment; every 64 MB
            db.execute("PRAGMA wal_autocheckpoint=16384")
            db.execute("CREATE TABLE IF NOT EXISTS facts (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
            _add_used_column(db)
            db.execute("SELECT count(*) FROM facts WHERE key = ''").fetchone()
        except sqlite3.Error:
            db.close()
            raise
        return db

    @staticmethod
    def key(extractor: str, version: int, content_key: str) -> str:
        return f"{_SCHEMA}:{__version__}:{GRAMMAR}:{extractor}:{version}:{content_key}"

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        db = self._conn()
        keys = list(keys)
        out: dict[str, Any] = {}
        if db is None or not keys:
            self.misses += len(keys)
            return out
        try:
            with gc_paused():
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
        if out:
            _touch(db, list(out))
        return out

    def put_many(self, items: Iterable[tuple[str, Any]]) -> None:
        db = self._conn()
        if db is None:
            return
        now = int(time.time())

        def rows() -> Iterator[tuple[str, bytes, int]]:
            # pickled one by one as SQLite takes them: a cold audit's facts and bundles are never all
            # held pickled at once (the peak of a cold env is at its end, writing them)
            for k, v in items:
                try:
                    blob = pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL)
                except Exception:  # noqa: BLE001 - a fact that does not pickle is simply not cached
                    continue
                yield k, blob, now

        try:
            db.execute("BEGIN")
            db.executemany("INSERT OR REPLACE INTO facts (key, value, used) VALUES (?, ?, ?)", rows())
            db.execute("COMMIT")
        except sqlite3.Error:
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def close(self) -> None:
        """Close the connection (the next read or write opens it again)."""
        if self._db is not None:
            self._db.close()
            self._db = None


def content_digest(path: str, data: "bytes | memoryview | Any") -> str:
    """The content key of a member's path and bytes (facts depend on both): ``sha256:<hex>``.

    Unlike the keys of identity (a file's device, inode, size and times), two copies of the same
    file share it: see ``workers._ByContent``."""
    import hashlib

    h = hashlib.sha256(path.encode("utf-8", "surrogateescape"))
    h.update(b"\0")
    h.update(data)
    return f"sha256:{h.hexdigest()}"


# -- size, last use and pruning (`cuaudit cache`, the `cache-max-size` cap) --------------------------------


def _add_used_column(db: sqlite3.Connection) -> None:
    """``used``: when a fact was last read or written (seconds), for least-recently-used pruning.
    Added in place to a cache written before the column existed."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(facts)")}
    if "used" not in columns:
        db.execute("ALTER TABLE facts ADD COLUMN used INTEGER NOT NULL DEFAULT 0")
    db.execute("CREATE INDEX IF NOT EXISTS facts_used ON facts (used)")


#: ``used`` is kept to the hour: pruning needs no finer order, and an UPDATE rewrites the whole row,
#: a bundle of megabytes (a cached env run without its snapshot spent 6 % of its rules' time here)
TOUCH_EVERY = 3600


def _touch(db: sqlite3.Connection, keys: list[str]) -> None:
    # one UPDATE per 500 keys: a cached audit of an environment reads one bundle per distribution
    now = int(time.time())
    try:
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            db.execute(f"UPDATE facts SET used = ? WHERE key IN ({','.join('?' * len(chunk))}) AND used < ?",
                       [now, *chunk, now - TOUCH_EVERY])
    except sqlite3.Error:
        pass  # a read-only or busy cache still serves reads


def downloads_dir(cache_dir: str | None = None) -> str:
    return os.path.join(cache_dir or default_cache_dir(), "downloads")


def tree_size(path: str) -> int:
    """Bytes of the files under ``path`` (links not followed; files that vanish meanwhile count 0)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


@dataclass(frozen=True)
class CacheUsage:
    directory: str
    facts_path: str
    facts_bytes: int
    facts_entries: int
    downloads_path: str
    downloads_bytes: int
    downloads_entries: int

    @property
    def total_bytes(self) -> int:
        return self.facts_bytes + self.downloads_bytes


def cache_usage(cache_dir: str | None = None) -> CacheUsage:
    directory = cache_dir or default_cache_dir()
    facts = os.path.join(directory, "facts.sqlite3")
    fbytes = sum(os.path.getsize(facts + s) for s in ("", "-wal", "-shm") if os.path.exists(facts + s))
    entries = 0
    if os.path.exists(facts):
        try:
            db = sqlite3.connect(facts, timeout=30)
            try:
                entries = db.execute("SELECT count(*) FROM facts").fetchone()[0]
            finally:
                db.close()
        except sqlite3.Error:
            pass
    dl = downloads_dir(directory)
    folders = [d for d in _listdir(dl) if os.path.isdir(os.path.join(dl, d))]
    return CacheUsage(directory, facts, fbytes, entries, dl, tree_size(dl) if os.path.isdir(dl) else 0, len(folders))


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def remove_leftovers(cache_dir: str | None = None, *, only: str | None = None, min_age: float = 3600) -> int:
    """Remove what interrupted or failed fetches left: partial files, scratch folders, empty folders.

    Partial files younger than ``min_age`` seconds may belong to a fetch still running in
    another process, and stay; ``only`` limits the sweep to one download folder.
    """
    dl = downloads_dir(cache_dir)
    removed = 0
    now = time.time()
    for folder in [os.path.basename(only)] if only else _listdir(dl):
        path = os.path.join(dl, folder)
        if not os.path.isdir(path) or os.path.islink(path):
            continue
        for name in _listdir(path):
            target = os.path.join(path, name)
            try:
                age = now - os.lstat(target).st_mtime
            except OSError:
                continue
            if (name.startswith(".part-") or name.endswith(".part")) and age >= min_age:
                shutil.rmtree(target, ignore_errors=True) if os.path.isdir(target) else _unlink(target)
                removed += 1
        if not [n for n in _listdir(path) if n != ".used"]:
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def clean(cache_dir: str | None = None, *, facts: bool = True, downloads: bool = True) -> CacheUsage:
    """Empty the cache (or one part of it); returns what there was before."""
    before = cache_usage(cache_dir)
    if facts:
        for suffix in ("", "-wal", "-shm"):
            _unlink(before.facts_path + suffix)
    if downloads:
        shutil.rmtree(before.downloads_path, ignore_errors=True)
    return before


def prune(cache_dir: str | None, max_bytes: int) -> int:
    """Keep the cache under ``max_bytes``: least recently used downloads and facts go first. Returns bytes freed."""
    remove_leftovers(cache_dir)
    if max_bytes <= 0:
        return 0
    freed = 0
    # the database's own pages and slack are not in the facts' lengths: measure again, at most thrice
    for _ in range(3):
        step = _prune_once(cache_dir, max_bytes)
        freed += step
        if not step or cache_usage(cache_dir).total_bytes <= max_bytes:
            break
    return freed


def _prune_once(cache_dir: str | None, max_bytes: int) -> int:
    usage = cache_usage(cache_dir)
    excess = usage.total_bytes - max_bytes
    if excess <= 0:
        return 0
    freed = 0
    # candidates from both parts, oldest use first: (last use, kind, what, size)
    items: list[tuple[float, str, str, int]] = []
    for folder in _listdir(usage.downloads_path):
        path = os.path.join(usage.downloads_path, folder)
        if os.path.isdir(path):
            marker = os.path.join(path, ".used")
            used = os.path.getmtime(marker) if os.path.exists(marker) else os.path.getmtime(path)
            items.append((used, "download", path, tree_size(path)))
    db = None
    if os.path.exists(usage.facts_path):
        try:
            db = sqlite3.connect(usage.facts_path, timeout=30, isolation_level=None)
            _add_used_column(db)
            for key, used, size in db.execute("SELECT key, used, length(value) FROM facts ORDER BY used"):
                items.append((float(used), "fact", key, int(size)))
        except sqlite3.Error:
            db = None
    items.sort()
    doomed: list[str] = []
    for _used, kind, what, size in items:
        if freed >= excess:
            break
        freed += size
        if kind == "download":
            shutil.rmtree(what, ignore_errors=True)
        else:
            doomed.append(what)
    if db is not None:
        try:
            for i in range(0, len(doomed), 500):
                chunk = doomed[i : i + 500]
                db.execute(f"DELETE FROM facts WHERE key IN ({','.join('?' * len(chunk))})", chunk)
            if doomed:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                db.execute("VACUUM")  # give the pages back to the file system
        except sqlite3.Error:
            pass
        finally:
            db.close()
    return freed
