"""The tables, as SQLAlchemy metadata. Migrations create them; this describes them.

Production code never calls ``metadata.create_all``: the alembic revisions under
``kaiwo_eventstore/migrations`` are the only way the schema comes to exist, and a test checks
that they produce exactly this metadata on SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect


class UtcDateTime(sa.types.TypeDecorator[datetime]):
    """A timestamp stored in UTC and read back timezone-aware.

    SQLite has no time zones: values are converted to UTC and stored without an offset,
    whose fixed-width text sorts in time order; on the way out UTC is attached again.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            msg = f"naive datetime {value.isoformat()} given where UTC time is stored"
            raise ValueError(msg)
        utc = value.astimezone(UTC)
        return utc.replace(tzinfo=None) if dialect.name == "sqlite" else utc

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:  # noqa: ARG002
        if value is None:
            return None
        assert isinstance(value, datetime)
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


# SQLite only auto-numbers a column declared exactly INTEGER PRIMARY KEY (the rowid alias).
Position = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
# Deflated JSON (kaiwo_eventstore.codec): bytea on PostgreSQL, BLOB on SQLite.
Document = sa.LargeBinary()

metadata = sa.MetaData()

events = sa.Table(
    "events",
    metadata,
    sa.Column("global_position", Position, sa.Identity(always=False), primary_key=True),
    sa.Column("event_id", sa.Text(), nullable=False),
    sa.Column("stream_id", sa.Text(), nullable=False),
    sa.Column("stream_version", sa.BigInteger(), nullable=False),
    sa.Column("event_type", sa.Text(), nullable=False),
    sa.Column("subject", sa.Text(), nullable=True),
    sa.Column("source", sa.Text(), nullable=False),
    sa.Column("time", UtcDateTime(), nullable=False),
    sa.Column("correlation_id", sa.Text(), nullable=False),
    sa.Column("causation_id", sa.Text(), nullable=True),
    sa.Column("data", Document, nullable=False),
    sa.Column("metadata", Document, nullable=False),
    sa.Column(
        "recorded_at", UtcDateTime(), nullable=False, server_default=sa.func.current_timestamp()
    ),
    sa.UniqueConstraint("event_id", name="uq_events_event_id"),
    sa.UniqueConstraint("stream_id", "stream_version", name="uq_events_stream_version"),
    sa.Index("ix_events_event_type", "event_type", "global_position"),
    sa.Index("ix_events_time", "time"),
    sa.Index("ix_events_correlation_id", "correlation_id", "global_position"),
)

consumer_positions = sa.Table(
    "consumer_positions",
    metadata,
    sa.Column("consumer", sa.Text(), primary_key=True),
    sa.Column("global_position", sa.BigInteger(), nullable=False),
)

store_cluster = sa.Table(
    "store_cluster",
    metadata,
    sa.Column("cluster_uid", sa.Text(), primary_key=True),
)
"""The cluster the store's events come from: one row at most (decision 0042)."""
