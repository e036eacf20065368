"""Async engines set up for the event store's transaction rules on each dialect.

SQLite: the driver's own transaction handling is switched off so that appends can open with
``BEGIN IMMEDIATE`` (take the write lock first: one writer at a time, hence commit order =
insert order) while reads open with a plain deferred ``BEGIN``. Files use WAL so readers never
wait for the writer. ``:memory:`` databases live in one shared connection.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import from_json, to_json
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

WRITE_OPTION = "kaiwo_eventstore_write"
"""Execution option marking a connection whose transaction appends (SQLite: BEGIN IMMEDIATE)."""

SQLITE_BUSY_TIMEOUT_MS = 30_000

_ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}


def async_url(url: str | URL) -> URL:
    """``url`` with the async driver this package uses (``sqlite://`` -> aiosqlite, etc.)."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend not in _ASYNC_DRIVERS:
        msg = f"unsupported event store database {backend!r}: use sqlite or postgresql"
        raise ValueError(msg)
    return parsed.set(drivername=_ASYNC_DRIVERS[backend])


def is_memory_sqlite(url: URL) -> bool:
    if url.get_backend_name() != "sqlite":
        return False
    return url.database in (None, "", ":memory:") or url.query.get("mode") == "memory"


def dump_json(value: Any) -> str:
    """Compact JSON (pydantic-core: several times faster than the standard library)."""
    return to_json(value).decode()


def create_engine(url: str | URL, *, echo: bool = False) -> AsyncEngine:
    """An engine for ``url`` (``sqlite[+aiosqlite]://...`` or ``postgresql[+asyncpg]://...``)."""
    parsed = async_url(url)
    options: dict[str, Any] = {
        "echo": echo,
        "json_serializer": dump_json,
        "json_deserializer": from_json,
    }
    if parsed.get_backend_name() == "postgresql":
        return create_async_engine(parsed, pool_pre_ping=True, **options)
    if is_memory_sqlite(parsed):
        options["poolclass"] = StaticPool
    engine = create_async_engine(parsed, **options)
    _configure_sqlite(engine, memory=is_memory_sqlite(parsed))
    return engine


def _configure_sqlite(engine: AsyncEngine, *, memory: bool) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            if not memory:
                cursor.execute("PRAGMA journal_mode = WAL")
                # WAL + NORMAL: a crash of the process loses nothing committed; a power cut
                # may lose the last commits but never corrupts the file.
                cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        writes = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")
