"""Create the events table and the consumer positions.

Revision ID: 0001
Revises:
Create Date: 2025-01-01

Written by hand rather than from the live metadata, so that later changes to
``kaiwo_eventstore.sql.schema`` need a new revision instead of silently changing this one.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    postgres = op.get_context().dialect.name == "postgresql"
    # SQLite only auto-numbers a column declared exactly INTEGER PRIMARY KEY.
    position = sa.BigInteger() if postgres else sa.Integer()
    document: sa.types.TypeEngine[object] = JSONB() if postgres else sa.JSON()
    op.create_table(
        "events",
        sa.Column("global_position", position, sa.Identity(always=False), primary_key=True),
        sa.Column("event_id", sa.Text(), nullable=False),
        sa.Column("stream_id", sa.Text(), nullable=False),
        sa.Column("stream_version", sa.BigInteger(), nullable=False),
        sa.Column("event_type", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=True),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("correlation_id", sa.Text(), nullable=False),
        sa.Column("causation_id", sa.Text(), nullable=True),
        sa.Column("data", document, nullable=False),
        sa.Column("metadata", document, nullable=False),
        sa.Column(
            "recorded_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.func.current_timestamp(),
        ),
        sa.UniqueConstraint("event_id", name="uq_events_event_id"),
        sa.UniqueConstraint("stream_id", "stream_version", name="uq_events_stream_version"),
    )
    op.create_index("ix_events_event_type", "events", ["event_type", "global_position"])
    op.create_index("ix_events_time", "events", ["time"])
    op.create_index("ix_events_correlation_id", "events", ["correlation_id", "global_position"])
    op.create_table(
        "consumer_positions",
        sa.Column("consumer", sa.Text(), primary_key=True),
        sa.Column("global_position", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("consumer_positions")
    op.drop_index("ix_events_correlation_id", table_name="events")
    op.drop_index("ix_events_time", table_name="events")
    op.drop_index("ix_events_event_type", table_name="events")
    op.drop_table("events")
