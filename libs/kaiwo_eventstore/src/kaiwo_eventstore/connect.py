"""Open an event store from a URL: ``memory://`` for the fake, else an SQL database."""

from __future__ import annotations

from kaiwo_eventstore.memory import InMemoryEventStore
from kaiwo_eventstore.port import EventStore

MEMORY_URL = "memory://"


async def open_event_store(url: str, *, migrate: bool = True) -> EventStore:
    """The store at ``url``, its schema brought up to date unless ``migrate`` is False.

    ``memory://`` is the in-process fake; ``sqlite:///path.db`` (or ``sqlite://`` for an
    in-memory database) is the embedded default; ``postgresql://user@host/db`` is production.
    """
    if url == MEMORY_URL:
        return InMemoryEventStore()
    from kaiwo_eventstore.sql.store import SqlEventStore

    return await SqlEventStore.open(url, migrate=migrate)
