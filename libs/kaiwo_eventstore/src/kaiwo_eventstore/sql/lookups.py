"""The one look-up an append makes under the write lock, written per dialect.

It returns, in one round trip, which of the batch's ids are already stored, each stream's
last version and (SQLite) the last global position, as ``(kind, key, value)`` rows. Ids and
streams travel as one array parameter each (PostgreSQL ``text[]``, SQLite a JSON array read
with ``json_each``): nothing to expand or recompile per batch size. Each stream's version is
a correlated ``max()``, which both databases answer with one seek into
``uq_events_stream_version``; a ``GROUP BY`` would read every version of a long stream.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# Plain SQL text: the SQLAlchemy store runs it as ``sa.text``, the sqlite3 one as it is.
POSTGRES_LOOKUP = (
    "SELECT 'id', event_id, NULL::bigint FROM events"
    " WHERE event_id = ANY(CAST(:ids AS text[]))"
    " UNION ALL"
    " SELECT 'stream', s.id,"
    " (SELECT max(e.stream_version) FROM events e WHERE e.stream_id = s.id)"
    " FROM unnest(CAST(:streams AS text[])) AS s(id)"
)

SQLITE_LOOKUP = (
    "SELECT 'id', event_id, NULL FROM events"
    " WHERE event_id IN (SELECT value FROM json_each(:ids))"
    " UNION ALL"
    " SELECT 'stream', j.value,"
    " (SELECT max(e.stream_version) FROM events e WHERE e.stream_id = j.value)"
    " FROM json_each(:streams) AS j"
    " UNION ALL"
    " SELECT 'last', '', (SELECT max(global_position) FROM events)"
)


@dataclass(frozen=True, slots=True)
class StoreState:
    """What an append needs to know before it writes."""

    stored_ids: tuple[str, ...]
    versions: dict[str, int]
    last_position: int


def read_state(rows: Iterable[tuple[Any, ...]]) -> StoreState:
    stored: list[str] = []
    versions: dict[str, int] = {}
    last = 0
    for kind, key, value in rows:
        if kind == "id":
            stored.append(key)
        elif kind == "stream" and value:
            versions[key] = int(value)
        elif kind == "last" and value:
            last = int(value)
    return StoreState(stored_ids=tuple(stored), versions=versions, last_position=last)
