"""The survey database: one row per release and wheel, and what its audit found.

Schema version 1 (``meta.schema_version``; documented in ``docs/survey.md``):

- ``releases(id, package, version, upload_time, yanked)``: one per surveyed release (``yanked``: every
  file of it is yanked, PEP 592).
- ``wheels(id, release_id, filename, url, sha256, size, status, error, result_format,
  cuaudit_version, download_seconds, bytes_fetched, audit_seconds, worker, recorded_at,
  requires_python)``: the wheel audited for the release (``status`` ``ok`` or ``failed``).
- ``findings(wheel_id, code, severity, member, symbol, line, key, fingerprint, message)``:
  the audit's findings (``fingerprint`` is stable across releases: no versions in it).
- ``modules(wheel_id, member, kind)``: members that provide a Python module.
- ``capi_modules(wheel_id, member, module, cython, facts)``: each compiled module's Cython
  C-API facts as JSON; ``capi_exports`` and ``capi_imports`` are their flat tables
  (``capi_exports(wheel_id, module, name, signature, kind)``,
  ``capi_imports(wheel_id, module, provider, name, signature, kind)``).
- ``needed_libraries(wheel_id, member, soname, library)``: ``DT_NEEDED`` of each ELF file.
- ``device_code(wheel_id, member, kind, arch)``: the fat-binary entries (sass/ptx/lto).
- ``requirements(wheel_id, requirement)``: ``Requires-Dist`` lines.

Recording a wheel replaces its previous record in one transaction, so a task
that ran twice (a worker lost mid-task) is still recorded once.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sqlite3
from dataclasses import dataclass
from typing import Any, Iterable, Protocol

from cuaudit.survey.index import ReleaseFile
from cuaudit.survey.work import RESULT_FORMAT, ReleaseResult

SCHEMA_VERSION = 1

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS releases (
    id INTEGER PRIMARY KEY, package TEXT NOT NULL, version TEXT NOT NULL, upload_time TEXT, yanked INTEGER NOT NULL,
    UNIQUE (package, version));
CREATE TABLE IF NOT EXISTS wheels (
    id INTEGER PRIMARY KEY, release_id INTEGER NOT NULL REFERENCES releases(id), filename TEXT NOT NULL,
    url TEXT NOT NULL, sha256 TEXT NOT NULL, size INTEGER, status TEXT NOT NULL, error TEXT NOT NULL,
    result_format INTEGER NOT NULL, cuaudit_version TEXT NOT NULL, download_seconds REAL NOT NULL,
    bytes_fetched INTEGER NOT NULL, audit_seconds REAL NOT NULL, worker TEXT NOT NULL, recorded_at TEXT NOT NULL,
    requires_python TEXT NOT NULL,
    UNIQUE (release_id, filename));
CREATE TABLE IF NOT EXISTS findings (
    wheel_id INTEGER NOT NULL REFERENCES wheels(id), code TEXT NOT NULL, severity TEXT NOT NULL,
    member TEXT NOT NULL, symbol TEXT NOT NULL, line INTEGER, key TEXT NOT NULL, fingerprint TEXT NOT NULL,
    message TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS modules (wheel_id INTEGER NOT NULL REFERENCES wheels(id), member TEXT NOT NULL,
    kind TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS capi_modules (wheel_id INTEGER NOT NULL REFERENCES wheels(id), member TEXT NOT NULL,
    module TEXT NOT NULL, cython TEXT NOT NULL, facts TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS capi_exports (wheel_id INTEGER NOT NULL REFERENCES wheels(id), module TEXT NOT NULL,
    name TEXT NOT NULL, signature TEXT NOT NULL, kind TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS capi_imports (wheel_id INTEGER NOT NULL REFERENCES wheels(id), module TEXT NOT NULL,
    provider TEXT NOT NULL, name TEXT NOT NULL, signature TEXT NOT NULL, kind TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS needed_libraries (wheel_id INTEGER NOT NULL REFERENCES wheels(id),
    member TEXT NOT NULL, soname TEXT NOT NULL, library TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS device_code (wheel_id INTEGER NOT NULL REFERENCES wheels(id), member TEXT NOT NULL,
    kind TEXT NOT NULL, arch TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS requirements (wheel_id INTEGER NOT NULL REFERENCES wheels(id),
    requirement TEXT NOT NULL);
"""
_CHILD_TABLES = ("findings", "modules", "capi_modules", "capi_exports", "capi_imports", "needed_libraries",
                 "device_code", "requirements")


@dataclass(frozen=True)
class WheelRow:
    """One recorded wheel, with its release."""

    id: int
    package: str
    version: str
    filename: str
    status: str
    error: str
    upload_time: str | None
    size: int | None
    download_seconds: float
    bytes_fetched: int
    audit_seconds: float
    worker: str
    yanked: bool = False


class SurveyStore(Protocol):
    """What the survey and its reports need from a database."""

    def done(self, files: Iterable[ReleaseFile]) -> set[str]:
        """File names among ``files`` already recorded successfully by this cuaudit."""

    def record(self, result: ReleaseResult) -> None: ...

    def wheels(self, status: str | None = "ok") -> list[WheelRow]: ...

    def findings(self, wheel_id: int) -> list[dict[str, Any]]: ...

    def modules(self, wheel_id: int) -> list[tuple[str, str]]: ...

    def cython_facts(self, wheel_id: int) -> list[tuple[str, dict]]: ...

    def imported_modules(self, wheel_id: int) -> set[str]: ...

    def needed(self, wheel_id: int) -> list[tuple[str, str, str]]: ...

    def device_code(self, wheel_id: int) -> list[tuple[str, str, str]]: ...

    def requirements(self, wheel_id: int) -> list[str]: ...

    def close(self) -> None: ...


class SQLiteSurveyStore:
    """The embedded default: one SQLite file."""

    def __init__(self, path: str) -> None:
        from cuaudit.model import ConfigError

        self.path = path
        if os.path.dirname(os.path.abspath(path)):
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        try:
            self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            found = self.db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
            if found:
                row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                if row is None or int(row[0]) != SCHEMA_VERSION:
                    raise ConfigError(f"{path}: survey database schema {row[0] if row else '?'}, this cuaudit "
                                      f"reads schema {SCHEMA_VERSION}: survey into a new --db")
            self.db.executescript(_TABLES)
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"{path}: not a survey database: {exc}") from None

    def done(self, files: Iterable[ReleaseFile]) -> set[str]:
        from cuaudit import __version__

        names = {f.filename for f in files}
        rows = self.db.execute(
            "SELECT filename FROM wheels WHERE status='ok' AND result_format=? AND cuaudit_version=?",
            (RESULT_FORMAT, __version__),
        ).fetchall()
        return names & {r[0] for r in rows}

    def record(self, result: ReleaseResult) -> None:
        from cuaudit import __version__

        f = result.file
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("INSERT OR IGNORE INTO releases (package, version, upload_time, yanked) VALUES (?, ?, ?, ?)",
                       (f.package, f.version, f.upload_time.isoformat() if f.upload_time else None, int(f.yanked)))
            release_id = db.execute("SELECT id FROM releases WHERE package=? AND version=?",
                                    (f.package, f.version)).fetchone()[0]
            old = db.execute("SELECT id FROM wheels WHERE release_id=? AND filename=?",
                             (release_id, f.filename)).fetchone()
            if old:
                for table in _CHILD_TABLES:
                    db.execute(f"DELETE FROM {table} WHERE wheel_id=?", (old[0],))
                db.execute("DELETE FROM wheels WHERE id=?", (old[0],))
            cur = db.execute(
                "INSERT INTO wheels (release_id, filename, url, sha256, size, status, error, result_format, "
                "cuaudit_version, download_seconds, bytes_fetched, audit_seconds, worker, recorded_at, "
                "requires_python) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (release_id, f.filename, f.url, f.sha256, f.size, "failed" if result.error else "ok", result.error,
                 RESULT_FORMAT, __version__, result.download_seconds, result.bytes_fetched, result.audit_seconds,
                 result.worker, _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                 result.requires_python),
            )
            wid = cur.lastrowid
            db.executemany("INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           [(wid, x.code, x.severity, x.member, x.symbol, x.line, x.key, x.fingerprint, x.message)
                            for x in result.findings])
            db.executemany("INSERT INTO modules VALUES (?, ?, ?)", [(wid, m, k) for m, k in result.modules])
            for member, facts in result.cython:
                db.execute("INSERT INTO capi_modules VALUES (?, ?, ?, ?, ?)",
                           (wid, member, facts["module"], facts.get("cython", ""), json.dumps(facts, sort_keys=True)))
                db.executemany("INSERT INTO capi_exports VALUES (?, ?, ?, ?, ?)",
                               [(wid, facts["module"], e["name"], e["signature"], e["kind"])
                                for e in facts.get("exports", ())])
                db.executemany("INSERT INTO capi_imports VALUES (?, ?, ?, ?, ?, ?)",
                               [(wid, facts["module"], i["module"], i["name"], i["signature"], i["kind"])
                                for i in facts.get("imports", ())])
            db.executemany("INSERT INTO needed_libraries VALUES (?, ?, ?, ?)", [(wid, *n) for n in result.needed])
            db.executemany("INSERT INTO device_code VALUES (?, ?, ?, ?)", [(wid, *d) for d in result.device_code])
            db.executemany("INSERT INTO requirements VALUES (?, ?)", [(wid, r) for r in result.requires_dist])
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def wheels(self, status: str | None = "ok") -> list[WheelRow]:
        sql = ("SELECT w.id, r.package, r.version, w.filename, w.status, w.error, r.upload_time, w.size, "
               "w.download_seconds, w.bytes_fetched, w.audit_seconds, w.worker, r.yanked = 1 FROM wheels w "
               "JOIN releases r ON r.id = w.release_id")
        rows = self.db.execute(sql + (" WHERE w.status=?" if status else ""), (status,) if status else ()).fetchall()
        return [WheelRow(*r) for r in rows]

    def findings(self, wheel_id: int) -> list[dict[str, Any]]:
        cur = self.db.execute("SELECT code, severity, member, symbol, line, key, fingerprint, message FROM findings "
                              "WHERE wheel_id=?", (wheel_id,))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def modules(self, wheel_id: int) -> list[tuple[str, str]]:
        return [tuple(r) for r in self.db.execute("SELECT member, kind FROM modules WHERE wheel_id=?", (wheel_id,))]

    def cython_facts(self, wheel_id: int) -> list[tuple[str, dict]]:
        return [(m, json.loads(f)) for m, f in
                self.db.execute("SELECT member, facts FROM capi_modules WHERE wheel_id=?", (wheel_id,))]

    def imported_modules(self, wheel_id: int) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT DISTINCT provider FROM capi_imports WHERE wheel_id=?",
                                              (wheel_id,))}

    def needed(self, wheel_id: int) -> list[tuple[str, str, str]]:
        return [tuple(r) for r in self.db.execute(
            "SELECT member, soname, library FROM needed_libraries WHERE wheel_id=?", (wheel_id,))]

    def device_code(self, wheel_id: int) -> list[tuple[str, str, str]]:
        return [tuple(r) for r in self.db.execute("SELECT member, kind, arch FROM device_code WHERE wheel_id=?",
                                                  (wheel_id,))]

    def requirements(self, wheel_id: int) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT requirement FROM requirements WHERE wheel_id=?", (wheel_id,))]

    def close(self) -> None:
        self.db.close()
