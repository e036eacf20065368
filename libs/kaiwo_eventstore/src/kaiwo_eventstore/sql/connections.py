"""How the SQL event store's parts reach the database: reads, and writes that queue on one lock.

Within one process, writers queue on an ``asyncio.Lock`` before they take a connection, so
that waiting writers do not each hold a pooled connection; an in-memory SQLite database is
one shared connection, so there readers take that lock too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from kaiwo_eventstore.sql.engines import WRITE_OPTION


class SqlConnections:
    """The engine, its dialect, and the store's one write lock."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        self.write_lock = asyncio.Lock()
        # An in-memory SQLite database is one shared connection: every use must take turns.
        shared = self.dialect == "sqlite" and engine.pool.__class__.__name__ == "StaticPool"
        self._read_lock: asyncio.Lock | None = self.write_lock if shared else None

    @property
    def is_postgresql(self) -> bool:
        return self.dialect == "postgresql"

    def insert(self, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
        """The dialect's INSERT into ``table``, the one with ``ON CONFLICT``."""
        return postgresql.insert(table) if self.is_postgresql else sqlite.insert(table)

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[AsyncConnection]:
        async with contextlib.AsyncExitStack() as stack:
            if self._read_lock is not None:
                await stack.enter_async_context(self._read_lock)
            yield await stack.enter_async_context(self.engine.connect())

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction, after the writers queued before it."""
        async with self.write_lock, self.engine.connect() as connection:
            await connection.execution_options(**{WRITE_OPTION: True})
            async with connection.begin():
                yield connection
