"""The SQL event store: SQLite (embedded default) and PostgreSQL through SQLAlchemy Core.

:class:`SqlEventStore` is the :class:`~kaiwo_eventstore.port.EventStore` its parts make
together, over one :class:`~kaiwo_eventstore.sql.connections.SqlConnections`:

* appending, in commit order under the table's write lock (:mod:`.appending`, which says why);
* reading (:mod:`.reading`);
* consumer positions and the cluster the store records (:mod:`.bookkeeping`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from kaiwo_eventstore.events import (
    ANY,
    AppendResult,
    ExpectedVersion,
    NewEvent,
    StoredEvent,
    Tracking,
)
from kaiwo_eventstore.port import DEFAULT_BATCH, DEFAULT_PAGE
from kaiwo_eventstore.sql.appending import DEFAULT_LOCK_TIMEOUT, SqlAppender
from kaiwo_eventstore.sql.bookkeeping import SqlClusterBinding, SqlPositions
from kaiwo_eventstore.sql.connections import SqlConnections
from kaiwo_eventstore.sql.engines import create_engine
from kaiwo_eventstore.sql.reading import SqlReader
from kaiwo_eventstore.sql.retries import APPEND_ATTEMPTS
from kaiwo_eventstore.sql.revision import VERSION_TABLE

__all__ = ["APPEND_ATTEMPTS", "DEFAULT_LOCK_TIMEOUT", "SqlEventStore"]


def _utc_now() -> datetime:
    return datetime.now(UTC)


class SqlEventStore:
    """:class:`~kaiwo_eventstore.port.EventStore` on an async SQLAlchemy engine."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        clock: Callable[[], datetime] = _utc_now,
        lock_timeout: timedelta = DEFAULT_LOCK_TIMEOUT,
    ) -> None:
        connections = SqlConnections(engine)
        self._engine = engine
        self._connections = connections
        self._appender = SqlAppender(connections, clock=clock, lock_timeout=lock_timeout)
        self._reader = SqlReader(connections)
        self._positions = SqlPositions(connections)
        self._cluster = SqlClusterBinding(connections)

    @classmethod
    async def open(
        cls,
        url: str | URL,
        *,
        migrate: bool = True,
        clock: Callable[[], datetime] = _utc_now,
        lock_timeout: timedelta = DEFAULT_LOCK_TIMEOUT,
    ) -> SqlEventStore:
        """Connect to ``url`` and, unless told not to, bring the schema to the latest revision."""
        engine = create_engine(url)
        if migrate:
            from kaiwo_eventstore.sql.migrate import upgrade_to_head

            await upgrade_to_head(engine)
        return cls(engine, clock=clock, lock_timeout=lock_timeout)

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    async def close(self) -> None:
        await self._engine.dispose()

    async def revision(self) -> str | None:
        """The schema revision the database is at (None: no schema). Asked of the catalog
        first, so that an error here is the database's (unreachable, refused), never a
        missing table taken for one."""
        async with self._connections.reading() as connection:
            if not await connection.run_sync(
                lambda sync: sa.inspect(sync).has_table(VERSION_TABLE)
            ):
                return None
            found = await connection.scalar(
                sa.select(sa.column("version_num")).select_from(sa.table(VERSION_TABLE))
            )
        return str(found) if found is not None else None

    # ------------------------------------------------------------------ appending

    async def append(
        self,
        events: Sequence[NewEvent],
        *,
        expected_version: ExpectedVersion = ANY,
        tracking: Tracking | None = None,
    ) -> AppendResult:
        return await self._appender.append(
            events, expected_version=expected_version, tracking=tracking
        )

    async def append_next(
        self, events: Sequence[NewEvent], *, tracking: Tracking | None = None
    ) -> AppendResult:
        return await self._appender.append_next(events, tracking=tracking)

    # ------------------------------------------------------------------ bookkeeping

    async def save_position(self, consumer: str, position: int) -> None:
        await self._positions.save_position(consumer, position)

    async def position(self, consumer: str) -> int:
        return await self._positions.position(consumer)

    async def cluster(self) -> str | None:
        return await self._cluster.cluster()

    async def bind_cluster(self, identity: str) -> str:
        return await self._cluster.bind_cluster(identity)

    # ------------------------------------------------------------------ reading

    async def stream_version(self, stream_id: str) -> int:
        return await self._reader.stream_version(stream_id)

    async def last_position(self) -> int:
        return await self._reader.last_position()

    async def positions_of_type(self, event_type: str, shares: Sequence[float]) -> list[int]:
        return await self._reader.positions_of_type(event_type, shares)

    async def read_stream(
        self, stream_id: str, *, from_version: int = 1, to_version: int | None = None
    ) -> list[StoredEvent]:
        return await self._reader.read_stream(
            stream_id, from_version=from_version, to_version=to_version
        )

    async def read_all(
        self, from_position: int = 1, limit: int = DEFAULT_PAGE
    ) -> list[StoredEvent]:
        return await self._reader.read_all(from_position, limit)

    def iter_all(
        self,
        from_position: int = 1,
        *,
        batch_size: int = DEFAULT_BATCH,
        to_position: int | None = None,
    ) -> AsyncGenerator[Sequence[StoredEvent], None]:
        return self._reader.iter_all(from_position, batch_size=batch_size, to_position=to_position)

    def iter_by_type(
        self,
        event_type: str,
        from_position: int = 1,
        *,
        batch_size: int = DEFAULT_BATCH,
        correlated: Callable[[str], bool] | None = None,
    ) -> AsyncGenerator[Sequence[StoredEvent], None]:
        return self._reader.iter_by_type(
            event_type, from_position, batch_size=batch_size, correlated=correlated
        )

    async def read_by_time(
        self,
        start: datetime,
        end: datetime,
        *,
        from_position: int = 1,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        return await self._reader.read_by_time(start, end, from_position=from_position, limit=limit)

    async def read_by_type(
        self, types: Iterable[str], *, from_position: int = 1, limit: int | None = None
    ) -> list[StoredEvent]:
        return await self._reader.read_by_type(types, from_position=from_position, limit=limit)

    async def read_by_correlation(
        self, correlation_id: str, *, from_position: int = 1, limit: int | None = None
    ) -> list[StoredEvent]:
        return await self._reader.read_by_correlation(
            correlation_id, from_position=from_position, limit=limit
        )

    async def read_by_subject(
        self,
        subject: str,
        types: Iterable[str],
        *,
        from_position: int = 1,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        return await self._reader.read_by_subject(
            subject, types, from_position=from_position, limit=limit
        )
