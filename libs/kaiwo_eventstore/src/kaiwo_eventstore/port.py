"""The event store port: what services and the command may ask of any adapter."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from datetime import datetime
from typing import Protocol

from kaiwo_eventstore.events import (
    ANY,
    AppendResult,
    ExpectedVersion,
    NewEvent,
    StoredEvent,
    Tracking,
)

DEFAULT_PAGE = 1000
DEFAULT_BATCH = 2000


class EventStore(Protocol):
    """Append-only log of events, by stream and in one global (commit) order.

    Positions and versions start at 1; ``0`` means "nothing yet" wherever a position or a
    version is returned. ``from_*`` bounds are inclusive. Every read is ordered by global
    position.
    """

    async def append(
        self,
        events: Sequence[NewEvent],
        *,
        expected_version: ExpectedVersion = ANY,
        tracking: Tracking | None = None,
    ) -> AppendResult:
        """Store ``events`` in one transaction, all or nothing.

        Ids already stored (or repeated inside the batch) are skipped and reported in
        ``AppendResult.duplicates``, never an error. With an expectation other than ``ANY``
        every event must belong to one stream, which must be at that version, else
        :class:`~kaiwo_eventstore.errors.ConcurrencyError`. ``tracking`` is saved in the
        same transaction.
        """
        ...

    async def append_next(
        self, events: Sequence[NewEvent], *, tracking: Tracking | None = None
    ) -> AppendResult:
        """Append at each stream's next versions, retrying on conflict (the recorder's call)."""
        ...

    async def stream_version(self, stream_id: str) -> int:
        """The stream's last version; 0 when it holds no event."""
        ...

    async def read_stream(
        self, stream_id: str, *, from_version: int = 1, to_version: int | None = None
    ) -> list[StoredEvent]: ...

    async def read_all(
        self, from_position: int = 1, limit: int = DEFAULT_PAGE
    ) -> list[StoredEvent]:
        """Up to ``limit`` events from ``from_position`` on, in global order."""
        ...

    def iter_all(
        self,
        from_position: int = 1,
        *,
        batch_size: int = DEFAULT_BATCH,
        to_position: int | None = None,
    ) -> AsyncGenerator[Sequence[StoredEvent], None]:
        """Every event from ``from_position`` (to ``to_position``), in batches: for replay."""
        ...

    def iter_by_type(
        self,
        event_type: str,
        from_position: int = 1,
        *,
        batch_size: int = DEFAULT_BATCH,
        correlated: Callable[[str], bool] | None = None,
    ) -> AsyncGenerator[Sequence[StoredEvent], None]:
        """Every event of ``event_type`` from ``from_position`` on, in global order, in
        batches: replay reads each type it needs as a stream of its own, in bounded memory,
        and decodes no event of another type. With ``correlated``, only the events whose
        correlation id it accepts, the others not decoded (a replay process takes the plans
        of some workloads). A batch holds up to ``batch_size`` events, and none is empty."""
        ...

    async def read_by_time(
        self,
        start: datetime,
        end: datetime,
        *,
        from_position: int = 1,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        """Events whose ``time`` is in ``[start, end)``."""
        ...

    async def read_by_type(
        self, types: Iterable[str], *, from_position: int = 1, limit: int | None = None
    ) -> list[StoredEvent]: ...

    async def read_by_correlation(
        self, correlation_id: str, *, from_position: int = 1, limit: int | None = None
    ) -> list[StoredEvent]: ...

    async def read_by_subject(
        self,
        subject: str,
        types: Iterable[str],
        *,
        from_position: int = 1,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        """Events of ``types`` about ``subject`` (an object's ``namespace/name``, or a
        cluster-scoped object's name), in global order. Only those are decoded: finding a
        workload by name reads one object's history, not every observation in the store."""
        ...

    async def last_position(self) -> int:
        """The greatest global position stored; 0 when the store is empty."""
        ...

    async def positions_of_type(self, event_type: str, shares: Sequence[float]) -> list[int]:
        """For each share from 0 to 1 (excluded), the global position of the event of
        ``event_type`` that far into those stored: the ``floor(share * count)``-th, counted
        from 0. None are read, only their positions (a replay splits its plans so); an empty
        list when there is no such event."""
        ...

    async def save_position(self, consumer: str, position: int) -> None:
        """Record how far ``consumer`` got (overwrites, so a consumer may rewind)."""
        ...

    async def position(self, consumer: str) -> int:
        """The position last saved for ``consumer``; 0 when none was."""
        ...

    async def cluster(self) -> str | None:
        """The identity of the cluster the store's events come from (the uid of
        kube-system), None while none is recorded."""
        ...

    async def bind_cluster(self, identity: str) -> str:
        """Record ``identity`` when the store records no cluster; returns the one recorded
        (``identity``, or another cluster's: then the caller must not write)."""
        ...

    async def close(self) -> None: ...
