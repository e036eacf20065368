"""Open an event store from a URL: ``memory://`` for the fake, else an SQL database."""

from __future__ import annotations

from pathlib import Path

from kaiwo_eventstore.memory import InMemoryEventStore
from kaiwo_eventstore.port import EventStore

MEMORY_URL = "memory://"


def sqlite_file(url: str) -> Path | None:
    """The database file of a ``sqlite:///<path>`` URL (None for memory or other databases)."""
    scheme, separator, rest = url.partition(":///")
    if not separator or not scheme.startswith("sqlite"):
        return None
    path = rest.partition("?")[0]
    return Path(path) if path and path != ":memory:" else None


async def open_event_store(
    url: str, *, migrate: bool = True, migrate_apart: bool = False
) -> EventStore:
    """The store at ``url``, its schema brought up to date unless ``migrate`` is False.

    ``memory://`` is the in-process fake; ``sqlite:///path.db`` is the embedded default, a
    file read and written over ``sqlite3`` (:mod:`kaiwo_eventstore.sql.sqlite_file`; with
    ``migrate_apart``, a schema that is not at the head is migrated in a child process);
    ``postgresql://user@host/db``, production, and any other SQLite URL (in memory, with
    driver options) go through SQLAlchemy.
    """
    if url == MEMORY_URL:
        return InMemoryEventStore()
    database = sqlite_file(url)
    if database is not None and url.startswith("sqlite:///") and "?" not in url:
        from kaiwo_eventstore.sql.sqlite_file import SqliteFileEventStore

        return await SqliteFileEventStore.open(
            database, migrate=migrate, migrate_apart=migrate_apart
        )
    from kaiwo_eventstore.sql.store import SqlEventStore

    return await SqlEventStore.open(url, migrate=migrate)
