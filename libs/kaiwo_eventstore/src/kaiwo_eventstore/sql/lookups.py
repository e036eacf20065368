"""The two look-ups an append makes under the write lock, written per dialect.

Both take the batch's ids as one array parameter (PostgreSQL ``text[]``, SQLite a JSON array
read with ``json_each``) and find each stream's last version with a correlated ``max()``,
which both databases answer with one seek into ``uq_events_stream_version``; a ``GROUP BY``
would read every version of a long stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa


@dataclass(frozen=True, slots=True)
class AppendLookups:
    stored_ids: sa.TextClause
    stream_versions: sa.TextClause


POSTGRES_QUERIES = AppendLookups(
    stored_ids=sa.text("SELECT event_id FROM events WHERE event_id = ANY(CAST(:ids AS text[]))"),
    stream_versions=sa.text(
        "SELECT s.id, (SELECT max(e.stream_version) FROM events e WHERE e.stream_id = s.id)"
        " FROM unnest(CAST(:ids AS text[])) AS s(id)"
    ),
)

SQLITE_QUERIES = AppendLookups(
    stored_ids=sa.text(
        "SELECT event_id FROM events WHERE event_id IN (SELECT value FROM json_each(:ids))"
    ),
    stream_versions=sa.text(
        "SELECT j.value, (SELECT max(e.stream_version) FROM events e WHERE e.stream_id = j.value)"
        " FROM json_each(:ids) AS j"
    ),
)
