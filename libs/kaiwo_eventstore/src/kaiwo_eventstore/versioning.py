"""The append decision every adapter shares: which events are new and which versions they get.

Pure: adapters read the already-stored ids and the current stream versions under their write
lock, call :func:`plan_append`, and write what it returns. Keeping the rule here is what gives
the in-memory fake and the SQL adapters identical semantics.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from kaiwo_eventstore.errors import ConcurrencyError
from kaiwo_eventstore.events import (
    ANY,
    NO_STREAM,
    STREAM_EXISTS,
    ExpectedVersion,
    NewEvent,
    StoredEvent,
    describe_expectation,
)


@dataclass(frozen=True, slots=True)
class VersionedEvent:
    event: NewEvent
    stream_version: int


@dataclass(frozen=True, slots=True)
class AppendPlan:
    to_store: tuple[VersionedEvent, ...]
    duplicates: tuple[str, ...]


def check_batch(events: Sequence[NewEvent], *, expected_version: ExpectedVersion) -> None:
    """Reject malformed calls before any I/O: an expectation needs a single-stream batch."""
    if isinstance(expected_version, bool) or (
        isinstance(expected_version, int) and expected_version < 0
    ):
        msg = f"expected_version must be a version >= 0 or a StreamState, got {expected_version!r}"
        raise ValueError(msg)
    if expected_version is None or expected_version is ANY:
        return
    streams = {event.stream_id for event in events}
    if len(streams) > 1:
        msg = f"an expected version applies to one stream; the batch holds {sorted(streams)}"
        raise ValueError(msg)


def plan_append(
    events: Sequence[NewEvent],
    *,
    expected_version: ExpectedVersion,
    stored_ids: Collection[str],
    current_versions: Mapping[str, int],
) -> AppendPlan:
    """Drop duplicates, check the expectation, give each new event its stream's next version.

    ``stored_ids`` are the batch's ids already in the store; ``current_versions`` maps each
    stream of the batch to its last version (absent or 0 = empty). A batch whose every event
    is a duplicate is a redelivery: it succeeds without checking the expectation, which the
    first delivery already satisfied.
    """
    check_batch(events, expected_version=expected_version)
    seen: set[str] = set(stored_ids)
    fresh: list[NewEvent] = []
    duplicates: list[str] = []
    for event in events:
        if event.event_id in seen:
            duplicates.append(event.event_id)
        else:
            seen.add(event.event_id)
            fresh.append(event)
    if not fresh:
        return AppendPlan(to_store=(), duplicates=tuple(duplicates))
    _check_expectation(fresh[0].stream_id, expected_version, current_versions)
    next_versions = dict(current_versions)
    versioned: list[VersionedEvent] = []
    for event in fresh:
        version = next_versions.get(event.stream_id, 0) + 1
        next_versions[event.stream_id] = version
        versioned.append(VersionedEvent(event=event, stream_version=version))
    return AppendPlan(to_store=tuple(versioned), duplicates=tuple(duplicates))


def _check_expectation(
    stream_id: str, expected: ExpectedVersion, current_versions: Mapping[str, int]
) -> None:
    if expected is None or expected is ANY:
        return
    actual = current_versions.get(stream_id, 0)
    satisfied = (
        (expected is NO_STREAM and actual == 0)
        or (expected is STREAM_EXISTS and actual > 0)
        or (isinstance(expected, int) and actual == expected)
    )
    if not satisfied:
        raise ConcurrencyError(
            stream_id=stream_id, expected=describe_expectation(expected), actual=actual
        )


def stored_events(
    plan: AppendPlan, *, positions: Iterable[int], recorded_at: datetime
) -> tuple[StoredEvent, ...]:
    """The events ``plan`` stores, as stored: at ``positions`` (one for each, in order), their
    times in UTC, recorded at ``recorded_at``."""
    return tuple(
        StoredEvent(
            global_position=position,
            event_id=item.event.event_id,
            stream_id=item.event.stream_id,
            stream_version=item.stream_version,
            type=item.event.type,
            subject=item.event.subject,
            source=item.event.source,
            time=item.event.time.astimezone(UTC),
            correlation_id=item.event.correlation_id,
            causation_id=item.event.causation_id,
            data=item.event.data,
            metadata=item.event.metadata,
            recorded_at=recorded_at,
        )
        for position, item in zip(positions, plan.to_store, strict=True)
    )
