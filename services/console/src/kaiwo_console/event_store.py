"""The event store the console reads, opened at a schema revision this version reads.

The console opens the store without migrating it (the recorder owns its schema). It did not
look at the revision either: a store taken back to 0001 (operations.md, "Upgrading") or
written by a newer kaiwo was read as if it were this version's, every history read failing
or misreading the documents, while the console reported itself ready. Now a store at a
revision this version does not read ends the console at start with one line naming the
revision and how to upgrade it: the check ``kaiwo events`` makes (decision 0230,
:func:`kaiwo_eventstore.sql.revision.unreadable_revision`; decision 0242).

A database without the schema yet is no error here: the recorder makes it when it starts,
possibly after the console, and the history feed reads it from then on.
"""

from __future__ import annotations

from kaiwo_eventstore import EventStore, open_event_store
from kaiwo_eventstore.sql.revision import KnowsItsRevision, unreadable_revision
from kaiwo_runtime.redaction import redact_url
from kaiwo_runtime.startup import StartupError


async def open_readable_store(url: str) -> EventStore:
    """The store at ``url``, unmigrated; a :class:`StartupError` (one line, the URL's
    password masked) when it is at a revision this version does not read."""
    store = await open_event_store(url, migrate=False)
    try:
        problem = await _unreadable(store)
    except BaseException:
        await store.close()
        raise
    if problem is not None:
        await store.close()
        raise StartupError(f"the event store {redact_url(url)} {problem}")
    return store


async def _unreadable(store: EventStore) -> str | None:
    if not isinstance(store, KnowsItsRevision):
        return None  # no schema to be at (the in-memory store)
    found = await store.revision()
    if found is None:
        return None  # not made yet: the recorder makes it (module docstring)
    return unreadable_revision(found)
