"""The replay reads: events in global order (all, or of one type), straight from the driver.

``read_all``/``iter_all`` are the hot path of replay and of every catching-up consumer. Going
through SQLAlchemy's result rows costs about as much per event as the driver's own fetch, so
this one query is written in each driver's SQL dialect and run on the driver connection
underneath the pooled SQLAlchemy connection (same pool, same settings, JSON codecs included).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

# Columns in the order of StoredEvent's fields; the statements are constants (no user text).
# The SQLite ones serve the sqlite3 store too (kaiwo_eventstore.sql.sqlite_file).
SQLITE_RANGE = (
    "SELECT global_position, event_id, stream_id, stream_version, event_type, subject,"
    " source, time, correlation_id, causation_id, data, metadata, recorded_at"
    " FROM events WHERE global_position >= ? AND global_position <= ?"
    " ORDER BY global_position LIMIT ?"
)
_POSTGRES_RANGE = (
    "SELECT global_position, event_id, stream_id, stream_version, event_type, subject,"
    " source, time, correlation_id, causation_id, data, metadata, recorded_at"
    " FROM events WHERE global_position >= $1 AND global_position <= $2"
    " ORDER BY global_position LIMIT $3"
)
SQLITE_TYPE = (
    "SELECT global_position, event_id, stream_id, stream_version, event_type, subject,"
    " source, time, correlation_id, causation_id, data, metadata, recorded_at"
    " FROM events WHERE event_type = ? AND global_position >= ?"
    " ORDER BY global_position LIMIT ?"
)
_POSTGRES_TYPE = (
    "SELECT global_position, event_id, stream_id, stream_version, event_type, subject,"
    " source, time, correlation_id, causation_id, data, metadata, recorded_at"
    " FROM events WHERE event_type = $1 AND global_position >= $2"
    " ORDER BY global_position LIMIT $3"
)
NO_UPPER_BOUND = 2**63 - 1


async def fetch_range(
    connection: AsyncConnection, *, from_position: int, to_position: int | None, limit: int
) -> list[Any]:
    """Raw rows (positional, in StoredEvent field order) from ``from_position`` on."""
    upper = NO_UPPER_BOUND if to_position is None else to_position
    raw = await connection.get_raw_connection()
    driver: Any = raw.driver_connection
    if connection.dialect.name == "postgresql":
        return list(await driver.fetch(_POSTGRES_RANGE, from_position, upper, limit))
    return list(await driver.execute_fetchall(SQLITE_RANGE, (from_position, upper, limit)))


async def fetch_type(
    connection: AsyncConnection, *, event_type: str, from_position: int, limit: int
) -> list[Any]:
    """Raw rows of one type from ``from_position`` on: one seek into ``ix_events_event_type``
    (type, position), then the rows in position order."""
    raw = await connection.get_raw_connection()
    driver: Any = raw.driver_connection
    if connection.dialect.name == "postgresql":
        return list(await driver.fetch(_POSTGRES_TYPE, event_type, from_position, limit))
    return list(await driver.execute_fetchall(SQLITE_TYPE, (event_type, from_position, limit)))
