"""Reading the SQL event store: by stream, in global order (batched and prefetched for
replay), by time, type and correlation."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.types import NullType

from kaiwo_eventstore.events import StoredEvent
from kaiwo_eventstore.port import DEFAULT_BATCH, DEFAULT_PAGE
from kaiwo_eventstore.selection import (
    check_page,
    check_shares,
    check_time_range,
    nth_of,
    type_names,
)
from kaiwo_eventstore.sql.connections import SqlConnections
from kaiwo_eventstore.sql.prefetch import prefetched
from kaiwo_eventstore.sql.replay import fetch_range, fetch_type
from kaiwo_eventstore.sql.rows import decode_rows, row_decoder
from kaiwo_eventstore.sql.schema import events

_COLUMNS = tuple(
    # Untyped on purpose: rows are decoded by row_decoder(), much faster than per-column
    # result processors, which is what lets replay read well over 100,000 events/s.
    sa.type_coerce(column, NullType()).label(column.name)
    for column in (
        events.c.global_position,
        events.c.event_id,
        events.c.stream_id,
        events.c.stream_version,
        events.c.event_type,
        events.c.subject,
        events.c.source,
        events.c.time,
        events.c.correlation_id,
        events.c.causation_id,
        events.c.data,
        events.c.metadata,
        events.c.recorded_at,
    )
)  # the order of StoredEvent's fields


_Query = sa.Select[*tuple[Any, ...]]


class SqlReader:
    """Every read of the events table."""

    def __init__(self, connections: SqlConnections) -> None:
        self._connections = connections
        self._decode = row_decoder(connections.dialect)

    async def stream_version(self, stream_id: str) -> int:
        statement = sa.select(sa.func.max(events.c.stream_version)).where(
            events.c.stream_id == stream_id
        )
        async with self._connections.reading() as connection:
            found = (await connection.execute(statement)).scalar_one_or_none()
        return int(found) if found is not None else 0

    async def last_position(self) -> int:
        statement = sa.select(sa.func.max(events.c.global_position))
        async with self._connections.reading() as connection:
            found = (await connection.execute(statement)).scalar_one_or_none()
        return int(found) if found is not None else 0

    async def positions_of_type(self, event_type: str, shares: Sequence[float]) -> list[int]:
        check_shares(shares)
        of_type = events.c.event_type == event_type
        async with self._connections.reading() as connection:
            count = (
                await connection.execute(
                    sa.select(sa.func.count()).select_from(events).where(of_type)
                )
            ).scalar_one()
            if not count:
                return []
            found: list[int] = []
            for share in shares:
                statement = (
                    sa.select(events.c.global_position)
                    .where(of_type)
                    .order_by(events.c.global_position)
                    .limit(1)
                    .offset(nth_of(share, count))
                )
                found.append(int((await connection.execute(statement)).scalar_one()))
        return found

    async def read_stream(
        self, stream_id: str, *, from_version: int = 1, to_version: int | None = None
    ) -> list[StoredEvent]:
        statement = sa.select(*_COLUMNS).where(
            events.c.stream_id == stream_id, events.c.stream_version >= from_version
        )
        if to_version is not None:
            statement = statement.where(events.c.stream_version <= to_version)
        return await self._fetch(statement.order_by(events.c.stream_version))

    async def read_all(
        self, from_position: int = 1, limit: int = DEFAULT_PAGE
    ) -> list[StoredEvent]:
        check_page(batch_size=limit)
        rows = await self._fetch_rows(from_position, to_position=None, limit=limit)
        return decode_rows(self._decode, rows)

    def iter_all(
        self,
        from_position: int = 1,
        *,
        batch_size: int = DEFAULT_BATCH,
        to_position: int | None = None,
    ) -> AsyncGenerator[Sequence[StoredEvent], None]:
        """Batches in global order (see :func:`~kaiwo_eventstore.sql.prefetch.prefetched`)."""
        check_page(batch_size=batch_size)

        def fetch(position: int) -> Awaitable[list[Any]]:
            return self._fetch_rows(position, to_position=to_position, limit=batch_size)

        return prefetched(fetch, from_position, batch_size=batch_size, decode=self._decode)

    def iter_by_type(
        self,
        event_type: str,
        from_position: int = 1,
        *,
        batch_size: int = DEFAULT_BATCH,
        correlated: Callable[[str], bool] | None = None,
    ) -> AsyncGenerator[Sequence[StoredEvent], None]:
        check_page(batch_size=batch_size)

        async def fetch(position: int) -> list[Any]:
            async with self._connections.reading() as connection:
                return await fetch_type(
                    connection, event_type=event_type, from_position=position, limit=batch_size
                )

        return prefetched(
            fetch, from_position, batch_size=batch_size, correlated=correlated, decode=self._decode
        )

    async def read_by_time(
        self,
        start: datetime,
        end: datetime,
        *,
        from_position: int = 1,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        check_time_range(start, end)
        statement = _after(from_position, limit).where(events.c.time >= start, events.c.time < end)
        return await self._fetch(statement)

    async def read_by_type(
        self, types: Iterable[str], *, from_position: int = 1, limit: int | None = None
    ) -> list[StoredEvent]:
        return await self._of_types(types, from_position, limit)

    async def read_by_correlation(
        self, correlation_id: str, *, from_position: int = 1, limit: int | None = None
    ) -> list[StoredEvent]:
        statement = _after(from_position, limit).where(events.c.correlation_id == correlation_id)
        return await self._fetch(statement)

    async def read_by_subject(
        self,
        subject: str,
        types: Iterable[str],
        *,
        from_position: int = 1,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        return await self._of_types(types, from_position, limit, subject=subject)

    async def _of_types(
        self,
        types: Iterable[str],
        from_position: int,
        limit: int | None,
        *,
        subject: str | None = None,
    ) -> list[StoredEvent]:
        """Events of ``types`` (about ``subject`` only, when given)."""
        wanted = type_names(types)
        if not wanted:
            return []
        statement = _after(from_position, limit).where(events.c.event_type.in_(wanted))
        if subject is not None:
            statement = statement.where(events.c.subject == subject)
        return await self._fetch(statement)

    async def _fetch_rows(
        self, from_position: int, *, to_position: int | None, limit: int
    ) -> list[Any]:
        async with self._connections.reading() as connection:
            return await fetch_range(
                connection, from_position=from_position, to_position=to_position, limit=limit
            )

    async def _fetch(self, statement: _Query) -> list[StoredEvent]:
        async with self._connections.reading() as connection:
            result = await connection.execute(statement)
            return decode_rows(self._decode, result)


def _after(from_position: int, limit: int | None) -> _Query:
    statement = (
        sa.select(*_COLUMNS)
        .where(events.c.global_position >= from_position)
        .order_by(events.c.global_position)
    )
    if limit is not None:
        check_page(batch_size=limit)
        statement = statement.limit(limit)
    return statement
