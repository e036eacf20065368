"""The event store in an SQLite file over the standard library's ``sqlite3`` (decision 0088).

``open_event_store("sqlite:///PATH")`` answers with this store: the recorder of ``kaiwo up``
and every ``kaiwo events`` command use it. It keeps the schema the alembic revisions make,
and the rules of :class:`~kaiwo_eventstore.sql.store.SqlEventStore` on SQLite, with the same
SQL (:mod:`.lookups`, :mod:`.replay`), row decoding and batch prefetch; what it leaves out is
SQLAlchemy, whose import alone is 20 MB of the process that records (and alembic 5 MB more,
loaded here only when a store is not at the head revision).

One connection, used by one thread of its own, in autocommit mode: each read is one
statement, and each write is one ``BEGIN IMMEDIATE`` ... ``COMMIT``, which takes the
database's write lock first, so that insert order is commit order (see
:mod:`kaiwo_eventstore.sql.appending`). Another process (or another store on the same file)
waits up to ``busy_timeout`` for that lock. The file is in WAL mode: readers never wait.

Times are stored as SQLAlchemy stores them on SQLite (UTC, no offset, fixed width:
``2025-03-01 12:00:00.000000``), so that the two stores read each other's rows and a range
of times is a range of text.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, ParamSpec, TypeVar

from kaiwo_eventstore.codec import encode_document
from kaiwo_eventstore.errors import (
    EventStoreError,
    StoreBusyError,
)
from kaiwo_eventstore.events import (
    ANY,
    AppendResult,
    ExpectedVersion,
    NewEvent,
    StoredEvent,
    Tracking,
)
from kaiwo_eventstore.port import DEFAULT_BATCH, DEFAULT_PAGE
from kaiwo_eventstore.selection import (
    check_page,
    check_shares,
    check_time_range,
    nth_of,
    type_names,
)
from kaiwo_eventstore.sql.failures import bypassed_lock_conflict, raise_if_unavailable
from kaiwo_eventstore.sql.lookups import SQLITE_LOOKUP, read_state
from kaiwo_eventstore.sql.prefetch import prefetched
from kaiwo_eventstore.sql.replay import NO_UPPER_BOUND, SQLITE_RANGE, SQLITE_TYPE
from kaiwo_eventstore.sql.retries import appended_with_retries
from kaiwo_eventstore.sql.revision import SCHEMA_HEAD
from kaiwo_eventstore.sql.rows import decode_rows, row_decoder
from kaiwo_eventstore.versioning import check_batch, plan_append, stored_events

__all__ = ["SqliteFileEventStore", "upgrade_apart"]

BUSY_TIMEOUT_MS: Final = 30_000

# Columns in the order of StoredEvent's fields, as in .replay's statements.
_SELECT: Final = (
    "SELECT global_position, event_id, stream_id, stream_version, event_type, subject,"
    " source, time, correlation_id, causation_id, data, metadata, recorded_at FROM events"
)
_INSERT: Final = (
    "INSERT INTO events (global_position, event_id, stream_id, stream_version, event_type,"
    " subject, source, time, correlation_id, causation_id, data, metadata, recorded_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_REVISION: Final = "SELECT version_num FROM eventstore_alembic_version"
_UPSERT_POSITION: Final = (
    "INSERT INTO consumer_positions (consumer, global_position) VALUES (?, ?)"
    " ON CONFLICT (consumer) DO UPDATE SET global_position = excluded.global_position"
)

_decode = row_decoder("sqlite")
_P = ParamSpec("_P")
_T = TypeVar("_T")


def _utc_now() -> datetime:
    return datetime.now(UTC)


def utc_text(value: datetime) -> str:
    """``value`` as the store keeps a time on SQLite (UTC, fixed width, no offset)."""
    if value.tzinfo is None or value.utcoffset() is None:
        msg = f"naive datetime {value.isoformat()} given where UTC time is stored"
        raise ValueError(msg)
    utc = value.astimezone(UTC)
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d} "
        f"{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}.{utc.microsecond:06d}"
    )


async def upgrade_apart(path: Path) -> None:
    """Bring the store at ``path`` to the head revision in a child process, so that a
    long-running caller never loads alembic and SQLAlchemy; an :class:`EventStoreError`
    with the child's last line of error when it fails."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kaiwo_eventstore.sql.migrate",
        f"sqlite:///{path}",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, errors = await child.communicate()
    if child.returncode != 0:
        lines = errors.decode(errors="replace").strip().splitlines() or ["no output"]
        msg = f"migrating {path} failed (exit status {child.returncode}): {lines[-1]}"
        raise EventStoreError(msg)


class SqliteFileEventStore:
    """:class:`~kaiwo_eventstore.port.EventStore` in an SQLite file (see the module
    docstring). Open with :meth:`open`."""

    def __init__(self, path: Path, *, clock: Callable[[], datetime] = _utc_now) -> None:
        self._path = path
        self._clock = clock
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kaiwo-sqlite")
        self._connection: sqlite3.Connection | None = None

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        migrate: bool = True,
        migrate_apart: bool = False,
        clock: Callable[[], datetime] = _utc_now,
    ) -> SqliteFileEventStore:
        """The store in ``path`` (created when missing). ``migrate``: bring the schema to the
        head revision unless it is there (``migrate_apart``: in a child process, see
        :func:`upgrade_apart`)."""
        store = cls(path, clock=clock)
        try:
            await store._run(store._connect)
            if migrate and await store.revision() != SCHEMA_HEAD:
                if migrate_apart:
                    await upgrade_apart(path)
                else:
                    from kaiwo_eventstore.sql.migrate import upgrade_to_head

                    await upgrade_to_head(f"sqlite:///{path}")
        except BaseException:
            await store.close()
            raise
        return store

    async def revision(self) -> str | None:
        """The schema revision the file is at (None: no schema, a new file)."""
        return await self._run(self._revision)

    async def close(self) -> None:
        if self._connection is not None:
            await self._run(self._connection.close)
            self._connection = None
        self._thread.shutdown(wait=False)

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
            return await self._run(self._append, events, expected_version, tracking)
        except sqlite3.IntegrityError as error:
            raise bypassed_lock_conflict(events, expected_version) from error
        except sqlite3.OperationalError as error:
            if "database is locked" in str(error):
                msg = f"the database stayed locked longer than {BUSY_TIMEOUT_MS} ms"
                raise StoreBusyError(msg) from error
            raise_if_unavailable(error)
            raise
        except (sqlite3.Error, OSError) as error:
            raise_if_unavailable(error)
            raise

    async def append_next(
        self, events: Sequence[NewEvent], *, tracking: Tracking | None = None
    ) -> AppendResult:
        return await appended_with_retries(
            lambda: self.append(events, expected_version=ANY, tracking=tracking)
        )

    # ------------------------------------------------------------------ bookkeeping

    async def save_position(self, consumer: str, position: int) -> None:
        await self._run(self._write, _UPSERT_POSITION, (consumer, position))

    async def position(self, consumer: str) -> int:
        found = await self._value(
            "SELECT global_position FROM consumer_positions WHERE consumer = ?", (consumer,)
        )
        return int(found) if found is not None else 0

    async def cluster(self) -> str | None:
        found = await self._value("SELECT cluster_uid FROM store_cluster", ())
        return str(found) if found is not None else None

    async def bind_cluster(self, identity: str) -> str:
        return await self._run(self._bind_cluster, identity)

    # ------------------------------------------------------------------ reading

    async def stream_version(self, stream_id: str) -> int:
        found = await self._value(
            "SELECT max(stream_version) FROM events WHERE stream_id = ?", (stream_id,)
        )
        return int(found) if found is not None else 0

    async def last_position(self) -> int:
        found = await self._value("SELECT max(global_position) FROM events", ())
        return int(found) if found is not None else 0

    async def positions_of_type(self, event_type: str, shares: Sequence[float]) -> list[int]:
        check_shares(shares)
        count = int(
            await self._value("SELECT count(*) FROM events WHERE event_type = ?", (event_type,))
        )
        if not count:
            return []
        nth = (
            "SELECT global_position FROM events WHERE event_type = ?"
            " ORDER BY global_position LIMIT 1 OFFSET ?"
        )
        return [int(await self._value(nth, (event_type, nth_of(share, count)))) for share in shares]

    async def read_stream(
        self, stream_id: str, *, from_version: int = 1, to_version: int | None = None
    ) -> list[StoredEvent]:
        upper = NO_UPPER_BOUND if to_version is None else to_version
        return await self._events(
            f"{_SELECT} WHERE stream_id = ? AND stream_version >= ? AND stream_version <= ?"
            " ORDER BY stream_version",
            (stream_id, from_version, upper),
        )

    async def read_all(
        self, from_position: int = 1, limit: int = DEFAULT_PAGE
    ) -> list[StoredEvent]:
        check_page(batch_size=limit)
        return await self._events(SQLITE_RANGE, (from_position, NO_UPPER_BOUND, limit))

    def iter_all(
        self,
        from_position: int = 1,
        *,
        batch_size: int = DEFAULT_BATCH,
        to_position: int | None = None,
    ) -> AsyncGenerator[Sequence[StoredEvent], None]:
        check_page(batch_size=batch_size)
        upper = NO_UPPER_BOUND if to_position is None else to_position

        async def fetch(position: int) -> list[Any]:
            return await self._run(self._rows, SQLITE_RANGE, (position, upper, batch_size))

        return prefetched(fetch, from_position, batch_size=batch_size, decode=_decode)

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
            return await self._run(self._rows, SQLITE_TYPE, (event_type, position, batch_size))

        return prefetched(
            fetch, from_position, batch_size=batch_size, correlated=correlated, decode=_decode
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
        return await self._after(
            from_position, limit, "time >= ? AND time < ?", (utc_text(start), utc_text(end))
        )

    async def read_by_type(
        self, types: Iterable[str], *, from_position: int = 1, limit: int | None = None
    ) -> list[StoredEvent]:
        return await self._of_types(types, from_position, limit)

    async def read_by_correlation(
        self, correlation_id: str, *, from_position: int = 1, limit: int | None = None
    ) -> list[StoredEvent]:
        return await self._after(from_position, limit, "correlation_id = ?", (correlation_id,))

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
        condition = "event_type IN (SELECT value FROM json_each(?))"
        parameters: list[Any] = [json.dumps(list(wanted))]
        if subject is not None:
            condition += " AND subject = ?"
            parameters.append(subject)
        return await self._after(from_position, limit, condition, parameters)

    # ------------------------------------------------------------------ the thread's side

    async def _run(self, call: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, lambda: call(*args, **kwargs))

    def _connect(self) -> None:
        connection = sqlite3.connect(self._path, isolation_level=None)
        try:
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            connection.execute("PRAGMA journal_mode = WAL")
            # WAL + NORMAL: a crash of the process loses nothing committed; a power cut may
            # lose the last commits but never corrupts the file.
            connection.execute("PRAGMA synchronous = NORMAL")
        except BaseException:
            connection.close()
            raise
        self._connection = connection

    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            msg = f"the event store {self._path} is closed"
            raise EventStoreError(msg)
        return self._connection

    def _revision(self) -> str | None:
        try:
            row = self._db().execute(_REVISION).fetchone()
        except sqlite3.OperationalError:  # no version table: a new (or foreign) database
            return None
        return str(row[0]) if row is not None else None

    def _rows(self, statement: str, parameters: Sequence[Any]) -> list[Any]:
        return self._db().execute(statement, parameters).fetchall()

    async def _value(self, statement: str, parameters: Sequence[Any]) -> Any:
        rows = await self._run(self._rows, statement, parameters)
        return rows[0][0] if rows else None

    async def _events(self, statement: str, parameters: Sequence[Any]) -> list[StoredEvent]:
        return decode_rows(_decode, await self._run(self._rows, statement, parameters))

    async def _after(
        self, from_position: int, limit: int | None, condition: str, parameters: Sequence[Any]
    ) -> list[StoredEvent]:
        statement = f"{_SELECT} WHERE global_position >= ? AND {condition}"
        statement += " ORDER BY global_position"
        if limit is not None:
            check_page(batch_size=limit)
            statement += f" LIMIT {int(limit)}"
        return await self._events(statement, (from_position, *parameters))

    def _transaction(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """``work`` in one write transaction, holding the write lock from its start."""
        connection = self._db()
        connection.execute("BEGIN IMMEDIATE")
        try:
            result = work(connection)
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return result

    def _write(self, statement: str, parameters: Sequence[Any]) -> None:
        self._transaction(lambda connection: connection.execute(statement, parameters))

    def _bind_cluster(self, identity: str) -> str:
        def bind(connection: sqlite3.Connection) -> str:
            found = connection.execute("SELECT cluster_uid FROM store_cluster").fetchone()
            if found is not None:
                return str(found[0])
            connection.execute("INSERT INTO store_cluster (cluster_uid) VALUES (?)", (identity,))
            return identity

        return self._transaction(bind)

    def _append(
        self,
        events: Sequence[NewEvent],
        expected_version: ExpectedVersion,
        tracking: Tracking | None,
    ) -> AppendResult:
        def append(connection: sqlite3.Connection) -> AppendResult:
            ids = list(dict.fromkeys(event.event_id for event in events))
            streams = list(dict.fromkeys(event.stream_id for event in events))
            state = read_state(
                connection.execute(
                    SQLITE_LOOKUP, {"ids": json.dumps(ids), "streams": json.dumps(streams)}
                )
            )
            plan = plan_append(
                events,
                expected_version=expected_version,
                stored_ids=state.stored_ids,
                current_versions=state.versions,
            )
            recorded_at = self._clock().astimezone(UTC)
            first = state.last_position + 1
            positions = range(first, first + len(plan.to_store))
            stored = stored_events(plan, positions=positions, recorded_at=recorded_at)
            connection.executemany(_INSERT, [_row_of(event) for event in stored])
            if tracking is not None:
                connection.execute(_UPSERT_POSITION, (tracking.consumer, tracking.position))
            return AppendResult(stored=stored, duplicates=plan.duplicates)

        return self._transaction(append)


def _row_of(event: StoredEvent) -> tuple[Any, ...]:
    return (
        event.global_position,
        event.event_id,
        event.stream_id,
        event.stream_version,
        event.type,
        event.subject,
        event.source,
        utc_text(event.time),
        event.correlation_id,
        event.causation_id,
        encode_document(event.data),
        encode_document(event.metadata),
        utc_text(event.recorded_at),
    )
