"""In-memory event store: the fake for tests, with the same semantics as the SQL adapters."""

from __future__ import annotations

import bisect
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from datetime import UTC, datetime

from kaiwo_eventstore.events import (
    ANY,
    AppendResult,
    ExpectedVersion,
    NewEvent,
    StoredEvent,
    Tracking,
)
from kaiwo_eventstore.port import DEFAULT_BATCH, DEFAULT_PAGE
from kaiwo_eventstore.selection import (
    check_page,
    check_shares,
    check_time_range,
    nth_of,
    type_names,
)
from kaiwo_eventstore.versioning import plan_append, stored_events


def _utc_now() -> datetime:
    return datetime.now(UTC)


class InMemoryEventStore:
    """Everything in lists and dicts; positions are 1, 2, 3... without gaps.

    Appends run without awaiting in between, so concurrent tasks are serialised by the event
    loop exactly as the SQL adapters serialise them with a lock.
    """

    def __init__(self, *, clock: Callable[[], datetime] = _utc_now) -> None:
        self._clock = clock
        self._events: list[StoredEvent] = []
        self._positions: list[int] = []
        self._ids: set[str] = set()
        self._streams: dict[str, list[StoredEvent]] = {}
        self._consumers: dict[str, int] = {}
        self._cluster: str | None = None

    async def cluster(self) -> str | None:
        return self._cluster

    async def bind_cluster(self, identity: str) -> str:
        if self._cluster is None:
            self._cluster = identity
        return self._cluster

    async def append(
        self,
        events: Sequence[NewEvent],
        *,
        expected_version: ExpectedVersion = ANY,
        tracking: Tracking | None = None,
    ) -> AppendResult:
        batch_streams = {event.stream_id for event in events}
        plan = plan_append(
            events,
            expected_version=expected_version,
            stored_ids=[event.event_id for event in events if event.event_id in self._ids],
            current_versions={
                stream: len(self._streams[stream])
                for stream in batch_streams
                if stream in self._streams
            },
        )
        first = len(self._events) + 1
        stored = stored_events(
            plan, positions=range(first, first + len(plan.to_store)), recorded_at=self._clock()
        )
        for event in stored:
            self._events.append(event)
            self._positions.append(event.global_position)
            self._ids.add(event.event_id)
            self._streams.setdefault(event.stream_id, []).append(event)
        if tracking is not None:
            self._consumers[tracking.consumer] = tracking.position
        return AppendResult(stored=stored, duplicates=plan.duplicates)

    async def append_next(
        self, events: Sequence[NewEvent], *, tracking: Tracking | None = None
    ) -> AppendResult:
        return await self.append(events, expected_version=ANY, tracking=tracking)

    async def stream_version(self, stream_id: str) -> int:
        return len(self._streams.get(stream_id, ()))

    async def read_stream(
        self, stream_id: str, *, from_version: int = 1, to_version: int | None = None
    ) -> list[StoredEvent]:
        stream = self._streams.get(stream_id, [])
        return stream[max(from_version, 1) - 1 : to_version]

    async def read_all(
        self, from_position: int = 1, limit: int = DEFAULT_PAGE
    ) -> list[StoredEvent]:
        check_page(batch_size=limit)
        start = bisect.bisect_left(self._positions, from_position)
        return self._events[start : start + limit]

    async def iter_all(
        self,
        from_position: int = 1,
        *,
        batch_size: int = DEFAULT_BATCH,
        to_position: int | None = None,
    ) -> AsyncGenerator[Sequence[StoredEvent], None]:
        check_page(batch_size=batch_size)
        position = from_position
        while True:
            batch = await self.read_all(position, batch_size)
            if to_position is not None:
                batch = [event for event in batch if event.global_position <= to_position]
            if batch:
                yield batch
            if len(batch) < batch_size:
                return
            position = batch[-1].global_position + 1

    async def iter_by_type(
        self,
        event_type: str,
        from_position: int = 1,
        *,
        batch_size: int = DEFAULT_BATCH,
        correlated: Callable[[str], bool] | None = None,
    ) -> AsyncGenerator[Sequence[StoredEvent], None]:
        check_page(batch_size=batch_size)
        start = bisect.bisect_left(self._positions, from_position)
        batch: list[StoredEvent] = []
        for event in self._events[start:]:
            if event.type == event_type and (
                correlated is None or correlated(event.correlation_id)
            ):
                batch.append(event)
                if len(batch) == batch_size:
                    yield batch
                    batch = []
        if batch:
            yield batch

    async def read_by_time(
        self,
        start: datetime,
        end: datetime,
        *,
        from_position: int = 1,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        check_time_range(start, end)
        return self._select(lambda event: start <= event.time < end, from_position, limit)

    async def read_by_type(
        self, types: Iterable[str], *, from_position: int = 1, limit: int | None = None
    ) -> list[StoredEvent]:
        return self._of_types(types, from_position, limit)

    async def read_by_correlation(
        self, correlation_id: str, *, from_position: int = 1, limit: int | None = None
    ) -> list[StoredEvent]:
        return self._select(
            lambda event: event.correlation_id == correlation_id, from_position, limit
        )

    async def read_by_subject(
        self,
        subject: str,
        types: Iterable[str],
        *,
        from_position: int = 1,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        return self._of_types(types, from_position, limit, subject=subject)

    def _of_types(
        self,
        types: Iterable[str],
        from_position: int,
        limit: int | None,
        *,
        subject: str | None = None,
    ) -> list[StoredEvent]:
        """Events of ``types`` (about ``subject`` only, when given)."""
        wanted = set(type_names(types))
        return self._select(
            lambda event: event.type in wanted and (subject is None or event.subject == subject),
            from_position,
            limit,
        )

    async def last_position(self) -> int:
        return self._positions[-1] if self._positions else 0

    async def positions_of_type(self, event_type: str, shares: Sequence[float]) -> list[int]:
        check_shares(shares)
        positions = [event.global_position for event in self._events if event.type == event_type]
        return [positions[nth_of(share, len(positions))] for share in shares] if positions else []

    async def save_position(self, consumer: str, position: int) -> None:
        self._consumers[consumer] = position

    async def position(self, consumer: str) -> int:
        return self._consumers.get(consumer, 0)

    async def close(self) -> None:
        return None

    def _select(
        self, keep: Callable[[StoredEvent], bool], from_position: int, limit: int | None
    ) -> list[StoredEvent]:
        if limit is not None:
            check_page(batch_size=limit)
        start = bisect.bisect_left(self._positions, from_position)
        found: list[StoredEvent] = []
        for event in self._events[start:]:
            if keep(event):
                found.append(event)
                if limit is not None and len(found) == limit:
                    break
        return found
