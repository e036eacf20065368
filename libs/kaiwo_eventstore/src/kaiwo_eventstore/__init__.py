"""Append-only event store (an SQLite file embedded, PostgreSQL in production).

The port is :class:`EventStore`; adapters are :class:`InMemoryEventStore`,
``kaiwo_eventstore.sql.sqlite_file.SqliteFileEventStore`` (``sqlite3``) and
``kaiwo_eventstore.sql.store.SqlEventStore`` (SQLAlchemy 2 async), the last two imported
lazily by :func:`open_event_store`, so the fake needs no database driver. The schema comes
only from the alembic revisions in ``kaiwo_eventstore/migrations``, applied by
:func:`upgrade_to_head`.
"""

from kaiwo_eventstore.bulk import cyclic_gc_paused
from kaiwo_eventstore.connect import MEMORY_URL, open_event_store, sqlite_file
from kaiwo_eventstore.errors import (
    ConcurrencyError,
    EventStoreError,
    StoreBusyError,
    StoreUnavailableError,
)
from kaiwo_eventstore.events import (
    ANY,
    NO_STREAM,
    STREAM_EXISTS,
    AppendResult,
    ExpectedVersion,
    NewEvent,
    StoredEvent,
    StreamState,
    Tracking,
)
from kaiwo_eventstore.memory import InMemoryEventStore
from kaiwo_eventstore.port import EventStore


async def upgrade_to_head(url: str) -> None:
    """Apply every pending schema revision to the database at ``url``."""
    from kaiwo_eventstore.sql.migrate import upgrade_to_head as upgrade

    await upgrade(url)


__all__ = [
    "ANY",
    "MEMORY_URL",
    "NO_STREAM",
    "STREAM_EXISTS",
    "AppendResult",
    "ConcurrencyError",
    "EventStore",
    "EventStoreError",
    "ExpectedVersion",
    "InMemoryEventStore",
    "NewEvent",
    "StoreBusyError",
    "StoreUnavailableError",
    "StoredEvent",
    "StreamState",
    "Tracking",
    "cyclic_gc_paused",
    "open_event_store",
    "sqlite_file",
    "upgrade_to_head",
]
