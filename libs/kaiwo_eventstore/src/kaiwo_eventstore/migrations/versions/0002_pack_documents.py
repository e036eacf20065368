"""Store each event's data and metadata deflated with a preset dictionary (binary columns).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-28

The JSON columns become binary ones holding :func:`kaiwo_eventstore.codec.encode_document`
(decision 0052). Rows already stored are converted in place, a thousand at a time, inside
the migration's one transaction, so a store is either wholly converted or not at all. The
columns keep their names, so every read stays the same statement. Downgrade restores JSON
columns from the packed ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from kaiwo_eventstore.codec import decode_document, encode_document
from pydantic_core import from_json, to_json

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CHUNK = 1000
_COLUMNS = ("data", "metadata")


def upgrade() -> None:
    postgres = op.get_context().dialect.name == "postgresql"
    _add_columns("bytea" if postgres else "BLOB", postgres=postgres)
    _convert(lambda value: encode_document(_parsed(value)), placeholder=":{}")
    _swap_columns()


def downgrade() -> None:
    postgres = op.get_context().dialect.name == "postgresql"
    _add_columns("jsonb" if postgres else "JSON", postgres=postgres)
    _convert(
        lambda value: to_json(decode_document(bytes(value))).decode(),
        placeholder="CAST(:{} AS jsonb)" if postgres else ":{}",
    )
    _swap_columns()


def _add_columns(sql_type: str, *, postgres: bool) -> None:
    # SQLite adds a NOT NULL column only with a default. No row keeps it (every row is
    # converted below); PostgreSQL's is dropped again at once.
    default = {"bytea": "'\\x'::bytea", "jsonb": "'{}'::jsonb", "BLOB": "x''"}.get(sql_type, "'{}'")
    for column in _COLUMNS:
        op.execute(
            f"ALTER TABLE events ADD COLUMN {column}_new {sql_type} NOT NULL DEFAULT {default}"
        )
        if postgres:
            op.execute(f"ALTER TABLE events ALTER COLUMN {column}_new DROP DEFAULT")


def _convert(convert: Callable[[Any], Any], *, placeholder: str) -> None:
    """Fill the new columns from the old ones, chunk by chunk in position order."""
    connection = op.get_bind()
    # The placeholders are this module's constants: no outside text reaches the statement.
    update = sa.text(
        f"UPDATE events SET data_new = {placeholder.format('data')},"  # noqa: S608
        f" metadata_new = {placeholder.format('metadata')} WHERE global_position = :position"
    )
    select = sa.text(
        "SELECT global_position, data, metadata FROM events"
        " WHERE global_position > :after ORDER BY global_position LIMIT :chunk"
    )
    after = 0
    while rows := connection.execute(select, {"after": after, "chunk": _CHUNK}).all():
        connection.execute(
            update,
            [
                {"position": position, "data": convert(data), "metadata": convert(metadata)}
                for position, data, metadata in rows
            ],
        )
        after = rows[-1][0]


def _swap_columns() -> None:
    for column in _COLUMNS:
        op.execute(f"ALTER TABLE events DROP COLUMN {column}")
        op.execute(f"ALTER TABLE events RENAME COLUMN {column}_new TO {column}")


def _parsed(value: Any) -> Any:
    """A JSON column's value as read: text (SQLite, or PostgreSQL without a codec) or parsed."""
    return from_json(value) if isinstance(value, str | bytes) else value
