"""The SQL event store: SQLite (embedded default) and PostgreSQL through SQLAlchemy Core.

Ordering rule: a reader following ``global_position`` must never see position N+1 committed
before N, or it would skip N for good. So every append holds the table's write lock for its
whole transaction (PostgreSQL ``LOCK TABLE events IN EXCLUSIVE MODE`` under a
``lock_timeout``; SQLite ``BEGIN IMMEDIATE``), which makes insert order equal commit order.
Readers are not blocked by that lock. Within one process, appenders also queue on an
``asyncio.Lock`` first so that waiting writers do not each hold a pooled connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Sequence,
)
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.types import NullType

from kaiwo_eventstore.codec import encode_document
from kaiwo_eventstore.errors import ConcurrencyError, StoreBusyError, StoreUnavailableError
from kaiwo_eventstore.events import (
    ANY,
    AppendResult,
    ExpectedVersion,
    NewEvent,
    StoredEvent,
    Tracking,
    describe_expectation,
)
from kaiwo_eventstore.port import DEFAULT_BATCH, DEFAULT_PAGE
from kaiwo_eventstore.selection import check_page, check_time_range, type_names
from kaiwo_eventstore.sql.engines import WRITE_OPTION, create_engine, dump_json
from kaiwo_eventstore.sql.failures import unavailable_reason
from kaiwo_eventstore.sql.lookups import POSTGRES_LOOKUP, SQLITE_LOOKUP, StoreState, read_state
from kaiwo_eventstore.sql.replay import fetch_range, fetch_type
from kaiwo_eventstore.sql.rows import decode_rows, row_decoder
from kaiwo_eventstore.sql.schema import consumer_positions, events, store_cluster
from kaiwo_eventstore.versioning import AppendPlan, check_batch, plan_append

DEFAULT_LOCK_TIMEOUT = timedelta(seconds=10)
APPEND_ATTEMPTS = 8
_LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL SQLSTATE raised when lock_timeout expires

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
        self._engine = engine
        self._clock = clock
        self._lock_timeout_ms = int(lock_timeout.total_seconds() * 1000)
        self._dialect = engine.dialect.name
        self._decode = row_decoder(self._dialect)
        self._lookup = POSTGRES_LOOKUP if self._dialect == "postgresql" else SQLITE_LOOKUP
        self._write_lock = asyncio.Lock()
        # An in-memory SQLite database is one shared connection: every use must take turns.
        shared = self._dialect == "sqlite" and engine.pool.__class__.__name__ == "StaticPool"
        self._read_lock: asyncio.Lock | None = self._write_lock if shared else None

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

    # ------------------------------------------------------------------ appending

    async def append(
        self,
        events: Sequence[NewEvent],
        *,
        expected_version: ExpectedVersion = ANY,
        tracking: Tracking | None = None,
    ) -> AppendResult:
        check_batch(events, expected_version=expected_version)
        if not events and tracking is None:
            return AppendResult(stored=())
        try:
            async with self._write_lock, self._engine.connect() as connection:
                await connection.execution_options(**{WRITE_OPTION: True})
                async with connection.begin():
                    await self._lock_for_append(connection)
                    state = await self._read_state(connection, events)
                    plan = plan_append(
                        events,
                        expected_version=expected_version,
                        stored_ids=state.stored_ids,
                        current_versions=state.versions,
                    )
                    stored = await self._insert(connection, plan, state=state)
                    if tracking is not None:
                        await self._upsert_position(connection, tracking)
        except IntegrityError as error:
            # Only a writer that bypassed the lock can get here; report it as a conflict.
            stream = events[0].stream_id if events else "?"
            raise ConcurrencyError(
                stream_id=stream, expected=describe_expectation(expected_version), actual=None
            ) from error
        except DBAPIError as error:
            if _is_lock_timeout(error):
                msg = f"the events table stayed locked longer than {self._lock_timeout_ms} ms"
                raise StoreBusyError(msg) from error
            _raise_if_unavailable(error)
            raise
        except (OSError, TimeoutError) as error:  # the driver lost or never had its connection
            _raise_if_unavailable(error)
            raise
        return AppendResult(stored=stored, duplicates=plan.duplicates)

    async def append_next(
        self, events: Sequence[NewEvent], *, tracking: Tracking | None = None
    ) -> AppendResult:
        delay = 0.01
        for _attempt in range(APPEND_ATTEMPTS - 1):
            try:
                return await self.append(events, expected_version=ANY, tracking=tracking)
            except (ConcurrencyError, StoreBusyError):
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
        return await self.append(events, expected_version=ANY, tracking=tracking)

    async def _lock_for_append(self, connection: AsyncConnection) -> None:
        if self._dialect == "postgresql":
            # Custom plans: a generic plan made while the table was small would scan it.
            await connection.execute(
                sa.text(
                    "SELECT set_config('lock_timeout', :timeout, true),"
                    " set_config('plan_cache_mode', 'force_custom_plan', true)"
                ),
                {"timeout": str(self._lock_timeout_ms)},
            )
            await connection.exec_driver_sql("LOCK TABLE events IN EXCLUSIVE MODE")
        # SQLite: BEGIN IMMEDIATE (see engines.py) already holds the database's write lock.

    async def _read_state(
        self, connection: AsyncConnection, batch: Sequence[NewEvent]
    ) -> StoreState:
        ids = list(dict.fromkeys(event.event_id for event in batch))
        streams = list(dict.fromkeys(event.stream_id for event in batch))
        result = await connection.execute(
            self._lookup, {"ids": self._array(ids), "streams": self._array(streams)}
        )
        return read_state(result)

    def _array(self, values: list[str]) -> list[str] | str:
        return values if self._dialect == "postgresql" else dump_json(values)

    async def _insert(
        self, connection: AsyncConnection, plan: AppendPlan, *, state: StoreState
    ) -> tuple[StoredEvent, ...]:
        if not plan.to_store:
            return ()
        recorded_at = self._clock().astimezone(UTC)
        positions = await self._next_positions(connection, len(plan.to_store), state=state)
        stored = tuple(
            StoredEvent(
                global_position=position,
                event_id=item.event.event_id,
                stream_id=item.event.stream_id,
                stream_version=item.stream_version,
                type=item.event.type,
                subject=item.event.subject,
                source=item.event.source,
                time=item.event.time.astimezone(UTC),
                correlation_id=item.event.correlation_id,
                causation_id=item.event.causation_id,
                data=item.event.data,
                metadata=item.event.metadata,
                recorded_at=recorded_at,
            )
            for position, item in zip(positions, plan.to_store, strict=True)
        )
        # One executemany without RETURNING: numbering ourselves under the write lock is
        # what keeps a 100-event append to a single round trip.
        await connection.execute(sa.insert(events), [_row_of(event) for event in stored])
        return stored

    async def _next_positions(
        self, connection: AsyncConnection, count: int, *, state: StoreState
    ) -> list[int]:
        """``count`` increasing positions after every committed one (the write lock is held)."""
        if self._dialect == "postgresql":
            # Drawn from the identity sequence, so plain INSERTs by hand keep working.
            result = await connection.execute(
                sa.text(
                    "SELECT nextval(pg_get_serial_sequence('events', 'global_position')) "
                    "FROM generate_series(1, :count)"
                ),
                {"count": count},
            )
            return sorted(int(value) for value in result.scalars())
        start = state.last_position + 1
        return list(range(start, start + count))

    # ------------------------------------------------------------------ consumer positions

    async def save_position(self, consumer: str, position: int) -> None:
        async with self._write_lock, self._engine.connect() as connection:
            await connection.execution_options(**{WRITE_OPTION: True})
            async with connection.begin():
                await self._upsert_position(connection, Tracking(consumer, position))

    async def position(self, consumer: str) -> int:
        statement = sa.select(consumer_positions.c.global_position).where(
            consumer_positions.c.consumer == consumer
        )
        async with self._reading() as connection:
            found = (await connection.execute(statement)).scalar_one_or_none()
        return int(found) if found is not None else 0

    async def cluster(self) -> str | None:
        async with self._reading() as connection:
            found = (await connection.execute(sa.select(store_cluster.c.cluster_uid))).first()
        return str(found[0]) if found is not None else None

    async def bind_cluster(self, identity: str) -> str:
        async with self._write_lock, self._engine.connect() as connection:
            await connection.execution_options(**{WRITE_OPTION: True})
            async with connection.begin():
                found = (await connection.execute(sa.select(store_cluster.c.cluster_uid))).first()
                if found is not None:
                    return str(found[0])
                insert = postgresql.insert if self._dialect == "postgresql" else sqlite.insert
                # Replicas of one recorder starting together record the same identity once.
                await connection.execute(
                    insert(store_cluster).values(cluster_uid=identity).on_conflict_do_nothing()
                )
        return identity

    async def _upsert_position(self, connection: AsyncConnection, tracking: Tracking) -> None:
        insert = postgresql.insert if self._dialect == "postgresql" else sqlite.insert
        statement = insert(consumer_positions).values(
            consumer=tracking.consumer, global_position=tracking.position
        )
        await connection.execute(
            statement.on_conflict_do_update(
                index_elements=[consumer_positions.c.consumer],
                set_={"global_position": statement.excluded.global_position},
            )
        )

    # ------------------------------------------------------------------ reading

    async def stream_version(self, stream_id: str) -> int:
        statement = sa.select(sa.func.max(events.c.stream_version)).where(
            events.c.stream_id == stream_id
        )
        async with self._reading() as connection:
            found = (await connection.execute(statement)).scalar_one_or_none()
        return int(found) if found is not None else 0

    async def last_position(self) -> int:
        statement = sa.select(sa.func.max(events.c.global_position))
        async with self._reading() as connection:
            found = (await connection.execute(statement)).scalar_one_or_none()
        return int(found) if found is not None else 0

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
        return await self._fetch_range(from_position, to_position=None, limit=limit)

    async def iter_all(
        self,
        from_position: int = 1,
        *,
        batch_size: int = DEFAULT_BATCH,
        to_position: int | None = None,
    ) -> AsyncGenerator[Sequence[StoredEvent], None]:
        """Batches in global order (see :meth:`_prefetched`)."""
        check_page(batch_size=batch_size)

        def fetch(position: int) -> Awaitable[list[Any]]:
            return self._fetch_rows(position, to_position=to_position, limit=batch_size)

        async for batch in self._prefetched(fetch, from_position, batch_size=batch_size):
            yield batch

    async def iter_by_type(
        self, event_type: str, from_position: int = 1, *, batch_size: int = DEFAULT_BATCH
    ) -> AsyncGenerator[Sequence[StoredEvent], None]:
        check_page(batch_size=batch_size)

        async def fetch(position: int) -> list[Any]:
            async with self._reading() as connection:
                return await fetch_type(
                    connection, event_type=event_type, from_position=position, limit=batch_size
                )

        async for batch in self._prefetched(fetch, from_position, batch_size=batch_size):
            yield batch

    async def _prefetched(
        self,
        fetch: Callable[[int], Awaitable[list[Any]]],
        from_position: int,
        *,
        batch_size: int,
    ) -> AsyncGenerator[Sequence[StoredEvent], None]:
        """Decoded batches of ``fetch``; the next batch is fetched while this one is consumed.

        The prefetch lets the database (or SQLite's thread) work while Python decodes and
        the caller handles a batch. Close the iterator (``contextlib.aclosing``) when
        stopping early, so the prefetch is cancelled at once rather than on collection.
        """
        pending: asyncio.Future[list[Any]] | None = asyncio.ensure_future(fetch(from_position))
        try:
            while pending is not None:
                rows = await pending
                pending = None
                if len(rows) == batch_size:
                    pending = asyncio.ensure_future(fetch(rows[-1][0] + 1))
                if rows:
                    yield decode_rows(self._decode, rows)
        finally:
            if pending is not None:
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pending

    async def _fetch_range(
        self, from_position: int, *, to_position: int | None, limit: int
    ) -> list[StoredEvent]:
        rows = await self._fetch_rows(from_position, to_position=to_position, limit=limit)
        return decode_rows(self._decode, rows)

    async def _fetch_rows(
        self, from_position: int, *, to_position: int | None, limit: int
    ) -> list[Any]:
        async with self._reading() as connection:
            return await fetch_range(
                connection, from_position=from_position, to_position=to_position, limit=limit
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
        statement = self._after(from_position, limit).where(
            events.c.time >= start, events.c.time < end
        )
        return await self._fetch(statement)

    async def read_by_type(
        self, types: Iterable[str], *, from_position: int = 1, limit: int | None = None
    ) -> list[StoredEvent]:
        wanted = type_names(types)
        if not wanted:
            return []
        statement = self._after(from_position, limit).where(events.c.event_type.in_(wanted))
        return await self._fetch(statement)

    async def read_by_correlation(
        self, correlation_id: str, *, from_position: int = 1, limit: int | None = None
    ) -> list[StoredEvent]:
        statement = self._after(from_position, limit).where(
            events.c.correlation_id == correlation_id
        )
        return await self._fetch(statement)

    @staticmethod
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

    async def _fetch(self, statement: _Query) -> list[StoredEvent]:
        async with self._reading() as connection:
            result = await connection.execute(statement)
            return decode_rows(self._decode, result)

    @contextlib.asynccontextmanager
    async def _reading(self) -> AsyncIterator[AsyncConnection]:
        async with contextlib.AsyncExitStack() as stack:
            if self._read_lock is not None:
                await stack.enter_async_context(self._read_lock)
            yield await stack.enter_async_context(self._engine.connect())


def _row_of(event: StoredEvent) -> dict[str, Any]:
    row = event._asdict()
    row["event_type"] = row.pop("type")
    row["data"] = encode_document(event.data)
    row["metadata"] = encode_document(event.metadata)
    return row


def _raise_if_unavailable(error: Exception) -> None:
    """Raise :class:`StoreUnavailableError` when ``error`` refuses every write (full disk,
    read-only, lost connection: :mod:`kaiwo_eventstore.sql.failures`)."""
    reason = unavailable_reason(error)
    if reason is not None:
        raise StoreUnavailableError(reason) from error


def _is_lock_timeout(error: DBAPIError) -> bool:
    original = error.orig
    code = getattr(original, "sqlstate", None) or getattr(original, "pgcode", None)
    if code == _LOCK_NOT_AVAILABLE:
        return True
    return "database is locked" in str(original)
