"""Value objects of the event store: what is appended, what is read back, what is expected."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, TypeAlias


class StreamState(enum.Enum):
    """Expectations about a stream that are not an exact version (EventStoreDB's names)."""

    ANY = "any"
    """No expectation: the events get the stream's next versions."""
    NO_STREAM = "no stream"
    """The stream must not exist yet (same as expecting version 0)."""
    STREAM_EXISTS = "stream exists"
    """The stream must already hold at least one event."""


ANY = StreamState.ANY
NO_STREAM = StreamState.NO_STREAM
STREAM_EXISTS = StreamState.STREAM_EXISTS

ExpectedVersion: TypeAlias = int | StreamState | None
"""An exact version (0 = empty stream), a :class:`StreamState`, or None meaning ``ANY``."""


def describe_expectation(expected: ExpectedVersion) -> str:
    """Human words for an expectation, used in error messages."""
    if expected is None or expected is ANY:
        return "any version"
    if isinstance(expected, StreamState):
        return expected.value
    return f"version {expected}"


@dataclass(frozen=True, slots=True)
class NewEvent:
    """One event to append; ``event_id`` is the CloudEvents ``id`` (= ``Nats-Msg-Id``).

    The id is any non-empty string (observed events use ``<uid>:<resourceVersion>``) and is
    the idempotency key: appending the same id again stores nothing. ``stream_id`` names the
    thing the event is about, e.g. ``kaiwojob/<uid>``, ``kaiwoqueueconfig/<name>``,
    ``node/<uid>``. ``data`` and ``metadata`` must be JSON-serialisable and are treated as
    read-only once handed over.
    """

    event_id: str
    stream_id: str
    type: str
    time: datetime
    source: str
    correlation_id: str
    data: dict[str, Any]
    subject: str | None = None
    causation_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("event_id", "stream_id", "type", "source", "correlation_id"):
            if not getattr(self, name):
                msg = f"NewEvent.{name} must be a non-empty string"
                raise ValueError(msg)
        if self.time.tzinfo is None or self.time.utcoffset() is None:
            msg = f"NewEvent.time must be timezone-aware, got {self.time.isoformat()}"
            raise ValueError(msg)


class StoredEvent(NamedTuple):
    """An event as recorded: the appended fields plus where and when it was recorded.

    ``global_position`` grows in commit order (a reader following it never skips an event
    committed later under a smaller number) but may have gaps; ``stream_version`` counts
    1, 2, 3... without gaps inside one stream. Times come back in UTC.

    Immutable like the other value objects, but a ``NamedTuple`` rather than a frozen
    dataclass: building one is about ten times cheaper, and replay builds millions.
    """

    global_position: int
    event_id: str
    stream_id: str
    stream_version: int
    type: str
    subject: str | None
    source: str
    time: datetime
    correlation_id: str
    causation_id: str | None
    data: dict[str, Any]
    metadata: dict[str, Any]
    recorded_at: datetime


@dataclass(frozen=True, slots=True)
class Tracking:
    """A consumer's position, saved in the same transaction as the events it produced."""

    consumer: str
    position: int


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What an append did: the events it stored and the ids it skipped as already stored."""

    stored: tuple[StoredEvent, ...]
    duplicates: tuple[str, ...] = ()

    @property
    def only_duplicates(self) -> bool:
        """True when every event was already stored (a redelivery)."""
        return not self.stored and bool(self.duplicates)

    @property
    def last_position(self) -> int | None:
        return self.stored[-1].global_position if self.stored else None
