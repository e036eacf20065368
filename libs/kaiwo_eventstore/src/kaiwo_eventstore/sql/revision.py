"""Which schema revision a store is at, without alembic (the SQLite file store checks it at
every start and loads the migration machinery only when the answer is not the head)."""

from __future__ import annotations

from typing import Final

SCHEMA_HEAD: Final = "0003"
"""The latest revision under ``kaiwo_eventstore/migrations`` (a test holds it to alembic's)."""

VERSION_TABLE: Final = "eventstore_alembic_version"
"""Own version table, so the event store can share a database with other alembic users."""
