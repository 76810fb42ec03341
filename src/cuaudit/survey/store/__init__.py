"""Where a survey keeps its results: :class:`SurveyStore` is the interface, ``db.py`` the SQLite one.

A server database takes over by implementing the same interface (the schema
in ``db.py`` is plain SQL: tables, integer keys, text and numbers, no SQLite
extension) and being returned by :func:`open_store` for its URL.
"""

from __future__ import annotations

from cuaudit.survey.store.db import SCHEMA_VERSION, SQLiteSurveyStore, SurveyStore, WheelRow


def open_store(location: str) -> SurveyStore:
    """The store at ``location``: a file path (SQLite); ``sqlite:///PATH`` is the same."""
    if location.startswith("sqlite:///"):
        location = location[len("sqlite:///"):]
    elif "://" in location:
        from cuaudit.model import ConfigError

        raise ConfigError(f"--db {location}: only SQLite files (a path or sqlite:///PATH) are supported")
    return SQLiteSurveyStore(location)


__all__ = ["SCHEMA_VERSION", "SQLiteSurveyStore", "SurveyStore", "WheelRow", "open_store"]
