"""What can go wrong when appending: a stale expectation, or a store that cannot take writes now
(too busy to lock, full, read-only, or its connection lost)."""

from __future__ import annotations


class EventStoreError(Exception):
    """Base of every error the event store raises on purpose."""


class ConcurrencyError(EventStoreError):
    """The stream is not at the version the caller expected (optimistic concurrency).

    ``actual`` is None when the conflict surfaced as a unique-constraint violation from a
    writer that raced past the lock, so the current version was not read.
    """

    def __init__(self, *, stream_id: str, expected: str, actual: int | None) -> None:
        self.stream_id = stream_id
        self.expected = expected
        self.actual = actual
        found = "a concurrent change" if actual is None else f"version {actual}"
        super().__init__(f"stream {stream_id!r}: expected {expected}, found {found}")


class StoreUnavailableError(EventStoreError):
    """The store cannot take writes now, whatever is written: its disk is full, it is
    read-only, its connection is lost. Nothing was stored; retrying the same events later is
    safe and is the only right answer (a caller must not take this as "these events are
    refused")."""


class StoreBusyError(StoreUnavailableError):
    """The append lock was not granted within the lock timeout; retrying later is safe."""
