"""Appending to the SQL event store, in commit order.

Ordering rule: a reader following ``global_position`` must never see position N+1 committed
before N, or it would skip N for good. So every append holds the table's write lock for its
whole transaction (PostgreSQL ``LOCK TABLE events IN EXCLUSIVE MODE`` under a
``lock_timeout``; SQLite ``BEGIN IMMEDIATE``), which makes insert order equal commit order.
Readers are not blocked by that lock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from kaiwo_eventstore.codec import encode_document
from kaiwo_eventstore.errors import StoreBusyError
from kaiwo_eventstore.events import (
    ANY,
    AppendResult,
    ExpectedVersion,
    NewEvent,
    StoredEvent,
    Tracking,
)
from kaiwo_eventstore.sql.bookkeeping import upsert_position
from kaiwo_eventstore.sql.connections import SqlConnections
from kaiwo_eventstore.sql.engines import dump_json
from kaiwo_eventstore.sql.failures import bypassed_lock_conflict, raise_if_unavailable
from kaiwo_eventstore.sql.lookups import POSTGRES_LOOKUP, SQLITE_LOOKUP, StoreState, read_state
from kaiwo_eventstore.sql.retries import appended_with_retries
from kaiwo_eventstore.sql.schema import events
from kaiwo_eventstore.versioning import AppendPlan, check_batch, plan_append, stored_events

DEFAULT_LOCK_TIMEOUT = timedelta(seconds=10)
_LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL SQLSTATE raised when lock_timeout expires


class SqlAppender:
    """Appends batches (with the consumer position they complete, if any) under the lock."""

    def __init__(
        self,
        connections: SqlConnections,
        *,
        clock: Callable[[], datetime],
        lock_timeout: timedelta = DEFAULT_LOCK_TIMEOUT,
    ) -> None:
        self._connections = connections
        self._clock = clock
        self._lock_timeout_ms = int(lock_timeout.total_seconds() * 1000)
        self._lookup = sa.text(POSTGRES_LOOKUP if connections.is_postgresql else SQLITE_LOOKUP)

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
            async with self._connections.writing() as connection:
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
                    await upsert_position(self._connections, connection, tracking)
        except IntegrityError as error:
            raise bypassed_lock_conflict(events, expected_version) from error
        except DBAPIError as error:
            if _is_lock_timeout(error):
                msg = f"the events table stayed locked longer than {self._lock_timeout_ms} ms"
                raise StoreBusyError(msg) from error
            raise_if_unavailable(error)
            raise
        except (OSError, TimeoutError) as error:  # the driver lost or never had its connection
            raise_if_unavailable(error)
            raise
        return AppendResult(stored=stored, duplicates=plan.duplicates)

    async def append_next(
        self, events: Sequence[NewEvent], *, tracking: Tracking | None = None
    ) -> AppendResult:
        return await appended_with_retries(
            lambda: self.append(events, expected_version=ANY, tracking=tracking)
        )

    async def _lock_for_append(self, connection: AsyncConnection) -> None:
        if self._connections.is_postgresql:
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
        return values if self._connections.is_postgresql else dump_json(values)

    async def _insert(
        self, connection: AsyncConnection, plan: AppendPlan, *, state: StoreState
    ) -> tuple[StoredEvent, ...]:
        if not plan.to_store:
            return ()
        recorded_at = self._clock().astimezone(UTC)
        positions = await self._next_positions(connection, len(plan.to_store), state=state)
        stored = stored_events(plan, positions=positions, recorded_at=recorded_at)
        # One executemany without RETURNING: numbering ourselves under the write lock is
        # what keeps a 100-event append to a single round trip.
        await connection.execute(sa.insert(events), [_row_of(event) for event in stored])
        return stored

    async def _next_positions(
        self, connection: AsyncConnection, count: int, *, state: StoreState
    ) -> list[int]:
        """``count`` increasing positions after every committed one (the write lock is held)."""
        if self._connections.is_postgresql:
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


def _row_of(event: StoredEvent) -> dict[str, Any]:
    row = event._asdict()
    row["event_type"] = row.pop("type")
    row["data"] = encode_document(event.data)
    row["metadata"] = encode_document(event.metadata)
    return row


def _is_lock_timeout(error: DBAPIError) -> bool:
    original = error.orig
    code = getattr(original, "sqlstate", None) or getattr(original, "pgcode", None)
    if code == _LOCK_NOT_AVAILABLE:
        return True
    return "database is locked" in str(original)
