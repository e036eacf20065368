"""Turn raw database rows into :class:`StoredEvent` without per-column SQLAlchemy processing.

``data`` and ``metadata`` are stored deflated (:mod:`kaiwo_eventstore.codec`) and inflated
here. PostgreSQL (asyncpg) returns aware datetimes; SQLite returns UTC timestamps as text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Final

from kaiwo_eventstore.bulk import cyclic_gc_paused
from kaiwo_eventstore.codec import decode_document
from kaiwo_eventstore.events import StoredEvent

_new_event = StoredEvent._make
CORRELATION_COLUMN: Final = StoredEvent._fields.index("correlation_id")
"""Where a raw row (its columns in StoredEvent's field order) holds the correlation id."""
RowDecoder = Callable[[tuple[Any, ...]], StoredEvent]


def row_decoder(dialect: str) -> RowDecoder:
    return _decode_sqlite_row if dialect == "sqlite" else _decode_postgres_row


def decode_rows(decode: RowDecoder, rows: Iterable[tuple[Any, ...]]) -> list[StoredEvent]:
    """Every row as a :class:`StoredEvent` (see :mod:`kaiwo_eventstore.bulk` for the pause)."""
    with cyclic_gc_paused():
        return [decode(row) for row in rows]


def _decode_sqlite_row(row: tuple[Any, ...]) -> StoredEvent:
    (position, event_id, stream, version, kind, subject, source, time, correlation,
     causation, data, metadata, recorded_at) = row  # fmt: skip
    return _new_event(
        (
            position,
            event_id,
            stream,
            version,
            kind,
            subject,
            source,
            _utc_from_text(time),
            correlation,
            causation,
            decode_document(data),
            decode_document(metadata),
            _utc_from_text(recorded_at),
        )
    )


def _decode_postgres_row(row: tuple[Any, ...]) -> StoredEvent:
    (position, event_id, stream, version, kind, subject, source, time, correlation,
     causation, data, metadata, recorded_at) = row  # fmt: skip
    return _new_event(
        (
            position,
            event_id,
            stream,
            version,
            kind,
            subject,
            source,
            _as_utc(time),
            correlation,
            causation,
            decode_document(data),
            decode_document(metadata),
            _as_utc(recorded_at),
        )
    )


def _utc_from_text(value: str) -> datetime:
    # Stored without offset but always in UTC; appending one is cheaper than .replace().
    return datetime.fromisoformat(value + "+00:00")


def _as_utc(value: datetime) -> datetime:
    return value if value.tzinfo is UTC else value.astimezone(UTC)
