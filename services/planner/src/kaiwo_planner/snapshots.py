"""When the planner's state is written to its bucket, and reading it back."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from kaiwo_runtime.cluster_binding import foreign_state_problem
from kaiwo_runtime.kv import KeyValue

from kaiwo_planner.domain.publication import Published
from kaiwo_planner.domain.state.projection import Projection, SnapshotFormatError
from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.owner_key import OwnerKey
from kaiwo_planner.replan_timers import ReplanTimers
from kaiwo_planner.settings import PlannerSettings
from kaiwo_planner.snapshot_store import SnapshotStore

log = structlog.get_logger("kaiwo.planner")


class ForeignSnapshotError(Exception):
    """The stored snapshot is of another cluster: nothing is loaded, nothing overwritten
    (which state is right is the administrator's call, decision 0042)."""


@dataclass(frozen=True, slots=True)
class Restored:
    """What a snapshot held: the projection, the record of every owner, the timers."""

    projection: Projection
    owners: dict[OwnerKey, Published]
    timers: ReplanTimers


class Snapshots:
    """Counts the changes since the last snapshot, says when one is due, writes and reads it.

    ``cluster``: the identity of the cluster the observations come from (None: not known
    yet). Snapshots record it, and a snapshot of another cluster is refused.
    """

    def __init__(
        self,
        kv: KeyValue,
        *,
        settings: PlannerSettings,
        clock: Callable[[], datetime],
        metrics: PlannerMetrics,
        cluster: str | None,
    ) -> None:
        self._store = SnapshotStore(kv)
        self._settings = settings
        self._clock = clock
        self._metrics = metrics
        self.cluster = cluster
        self._changes = 0
        self._last_at: datetime | None = None

    def note_change(self) -> None:
        """An input changed what the next snapshot holds."""
        self._changes += 1

    def taken_at(self, now: datetime) -> None:
        """Count the time to the next snapshot from ``now`` (start-up holds a fresh state)."""
        self._last_at = now

    def due(self, now: datetime, *, objects: int) -> bool:
        if self._changes == 0:
            return False
        # A snapshot costs time in proportion to the projection, so it waits for at least as
        # many changes as objects: the cost per observation stays constant as clusters grow.
        every = max(self._settings.snapshot_every_events, objects)
        if self._changes >= every:
            return True
        last = self._last_at
        return last is None or (now - last).total_seconds() >= self._settings.snapshot_every_seconds

    def forget_manifest(self) -> None:
        """Another replica wrote snapshots meanwhile."""
        self._store.forget_manifest()

    async def save(self, document: Mapping[str, Any], *, objects: int, obs_sequence: int) -> None:
        started = time.perf_counter()
        try:
            size = await self._store.save(document)
        except Exception:
            self._metrics.snapshots.labels("failed").inc()
            raise
        self._metrics.snapshots.labels("written").inc()
        self._metrics.snapshot_bytes.set(size)
        self._metrics.snapshot_seconds.observe(time.perf_counter() - started)
        self._changes = 0
        self._last_at = self._clock()
        log.info("snapshot written", bytes=size, objects=objects, obs_sequence=obs_sequence)

    async def load(self) -> Restored | None:
        """The stored snapshot, if there is a readable one."""
        document = await self._store.load()
        if document is None:
            return None
        recorded = document.get("cluster")
        bucket = self._settings.snapshot_bucket
        problem = foreign_state_problem(
            recorded if isinstance(recorded, str) else None,
            self.cluster,
            state=f"the planner's snapshot in {bucket}",
        )
        if problem is not None:
            raise ForeignSnapshotError(
                f"{problem}; give this cluster its own NATS (or buckets), or delete "
                f"{bucket} to start it afresh"
            )
        try:
            return Restored(
                projection=Projection.from_document(
                    document["projection"],
                    tombstone_retention=self._settings.tombstone_retention,
                ),
                owners={
                    OwnerKey.from_document(str(key)): Published.from_document(record)
                    for key, record in document["owners"].items()
                },
                timers=ReplanTimers.from_document(document["timers"]),
            )
        except (SnapshotFormatError, KeyError, TypeError, ValueError) as error:
            log.warning("snapshot unreadable; starting without it", error=str(error))
            return None
