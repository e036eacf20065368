"""Which schema revision a store is at, without alembic (the SQLite file store checks it at
every start and loads the migration machinery only when the answer is not the head), and
whether this version can read a store at a given one."""

from __future__ import annotations

from typing import Final, Protocol, runtime_checkable

REVISIONS: Final = ("0001", "0002", "0003")
"""Every revision under ``kaiwo_eventstore/migrations``, oldest first (a test holds it to
alembic's)."""

SCHEMA_HEAD: Final = REVISIONS[-1]
"""The latest revision under ``kaiwo_eventstore/migrations`` (a test holds it to alembic's)."""

OLDEST_READABLE: Final = "0002"
"""The oldest revision whose rows this version reads: 0002 deflated every stored document
(decision 0052), which the reading code decodes and nothing else; 0003 only added the
table naming the store's cluster, which a reader does without."""

VERSION_TABLE: Final = "eventstore_alembic_version"
"""Own version table, so the event store can share a database with other alembic users."""

MIGRATE_COMMAND: Final = "python -m kaiwo_eventstore.sql.migrate"
"""The command that brings a store to the head revision (:func:`.migrate.main`); the
recorder runs the same migration when it starts."""


@runtime_checkable
class KnowsItsRevision(Protocol):
    """A store that can say which schema revision its database is at (the SQL stores; the
    in-memory fake has no schema)."""

    async def revision(self) -> str | None: ...


def unreadable_revision(found: str | None) -> str | None:
    """Why this version cannot read a store at revision ``found`` (None: no version table),
    in words that say what to do; None when it can."""
    readable = REVISIONS[REVISIONS.index(OLDEST_READABLE) :]
    reads = readable[0] if len(readable) == 1 else f"{readable[0]} to {readable[-1]}"
    if found in readable:
        return None
    if found is None:
        return (
            f"holds no event store schema (no table {VERSION_TABLE}): not a recorder's "
            "database, or one no recorder has started on yet"
        )
    if found in REVISIONS:
        return (
            f"is at schema revision {found}, older than this kaiwo reads ({reads}): upgrade "
            "it by starting this version's recorder (it migrates at start) or with "
            f"`{MIGRATE_COMMAND} URL`, after a backup"
        )
    return (
        f"is at schema revision {found}, which this kaiwo does not know (it reads {reads}): "
        "a newer kaiwo wrote it; read it with that version"
    )
