"""Active-active (``KAIWO_BUS_PARTITIONS`` > 1, decision 0030): every replica reads the whole
of ``KAIWO_OBS``, the findings and the scale decisions by stream sequence instead of the
durable consumers (one shared by active replicas would hand each a part), so its projection
is the whole cluster, and plans only the owners of the partitions it holds (:meth:`holds`,
the partition function of the subjects). :meth:`PartitionedFeed.gained` reads to the
stream's end, forgets the partition's records and timers and plans its owners once;
:meth:`PartitionedFeed.released` waits for the round in hand. Each round it also plans the
preemption victims of its partitions (their beneficiaries may be another replica's). Public
events are published by every replica under the same ids (JetStream keeps one); only the
holder of partition 0 writes the snapshot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

import structlog
from kaiwo_contracts.events.streams import (
    GATEWAY_STREAM,
    MONITOR_STREAM,
    OBSERVED_STREAM,
    uid_partition,
)
from kaiwo_contracts.events.subjects import Family, family_filter
from kaiwo_runtime.bus import NON_RETRYABLE, Bus, Delivery, StoredMessage
from kaiwo_runtime.logging import bound_context

from kaiwo_planner.domain.fanout import all_workloads, queue_config
from kaiwo_planner.domain.models.replanning import all_models
from kaiwo_planner.domain.scheduling.preemption_candidates import preemption_victims
from kaiwo_planner.feeds import RoundTail, first_delivery
from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.planning_loop import PlanningLoop
from kaiwo_planner.publisher import Trigger
from kaiwo_planner.snapshots import Snapshots

log = structlog.get_logger("kaiwo.planner")

FOLLOW_IDLE_SECONDS: Final = 0.2
"""How long a replica that found nothing new waits before reading again."""
FOLLOW_BATCH: Final = 64
"""Messages read from one stream per round (timers and snapshots between)."""
VICTIM_SCAN_SECONDS: Final = 1.0
"""How often a replica looks for preemption victims in its partitions."""


@dataclass(frozen=True, slots=True)
class _Followed:
    """A stream read by sequence: its subjects, what handles its messages, and the first
    sequence the loop has not taken in."""

    stream: str
    subjects: str
    handler: Callable[[Delivery], Awaitable[None]]
    floor: Callable[[], int]


class PartitionedFeed:
    """Every stream read by sequence; the owners of the partitions held planned."""

    keeps_restored_records: Final = False
    """Whoever held partition 0 wrote the snapshot: its records and timers are of its
    partitions, and each partition this replica takes on is planned afresh."""

    def __init__(self, bus: Bus, *, metrics: PlannerMetrics | None = None) -> None:
        self._bus = bus
        self._metrics = metrics or PlannerMetrics()
        self._partitions = bus.topology.partitions
        self._held: frozenset[int] = frozenset()
        self._lock = asyncio.Lock()
        """A partition changes hands between rounds, never during one."""
        self._read_from: dict[str, int] = {}
        self._victims: frozenset[str] = frozenset()
        self._next_victim_scan: datetime | None = None

    @property
    def held(self) -> frozenset[int]:
        return self._held

    def holds(self, uid: str) -> bool:
        return uid_partition(uid, self._partitions) in self._held

    @property
    def writes_snapshots(self) -> bool:
        """One writer of the shared snapshot at a time: the holder of partition 0 (every
        replica's projection is the whole cluster, so any holder's snapshot serves all)."""
        return 0 in self._held

    async def round(self, loop: PlanningLoop, tail: RoundTail, *, wait_seconds: float) -> int:
        async with self._lock:
            handled, _ = await self._read_streams(loop)
            await tail()
        if handled == 0 and wait_seconds > 0:
            await asyncio.sleep(min(wait_seconds, FOLLOW_IDLE_SECONDS))
        return handled

    async def catch_up(self, loop: PlanningLoop) -> int:
        """Read every followed stream until each was read to its end once; how many
        messages. (Not until nothing new comes: on a busy cluster something always does.)"""
        total, at_end = 0, False
        while not at_end:
            handled, at_end = await self._read_streams(loop)
            total += handled
        return total

    def _followed(self, loop: PlanningLoop) -> tuple[_Followed, ...]:
        mon, gateway = family_filter(Family.MONITOR), family_filter(Family.GATEWAY)
        projection = loop.projection
        return (
            _Followed(
                OBSERVED_STREAM,
                family_filter(Family.OBSERVED),
                loop.handle_observation,
                loop.observations_from,
            ),
            _Followed(
                MONITOR_STREAM,
                f"{mon.removesuffix('>')}utilization.>",
                loop.handle_finding,
                lambda: projection.findings.last_sequence + 1,
            ),
            _Followed(
                GATEWAY_STREAM,
                f"{gateway.removesuffix('>')}scale.>",
                loop.handle_scale_decision,
                lambda: projection.scale_requests.last_sequence + 1,
            ),
        )

    async def _read_streams(
        self, loop: PlanningLoop, *, batch: int = FOLLOW_BATCH
    ) -> tuple[int, bool]:
        """Read each followed stream on by up to ``batch`` messages: how many were handled,
        and whether every stream was read to its end. A failure to publish raises (the bus
        is away) and the message is read again."""
        handled, ends = 0, 0
        followed = self._followed(loop)
        for one in followed:
            for _ in range(batch):
                # After what the loop took in, or after what was read and skipped.
                start = max(one.floor(), self._read_from.get(one.stream, 1))
                stored = await self._bus.read_next_stored(one.stream, start, subjects=one.subjects)
                if stored is None:
                    ends += 1
                    break
                await self._handle_stored(one, stored)
                self._read_from[one.stream] = stored.sequence + 1
                handled += 1
        return handled, ends == len(followed)

    async def _handle_stored(self, followed: _Followed, stored: StoredMessage) -> None:
        try:
            await followed.handler(first_delivery(stored, consumer="planner"))
        except NON_RETRYABLE as error:
            # No consumer to dead-letter it: every replica skips it alike (the recorder
            # keeps it, and the watcher's next observation of the object supersedes it).
            self._metrics.observations.labels("rejected").inc()
            log.warning(
                "unreadable message skipped",
                stream=stored.stream,
                seq=stored.sequence,
                error=str(error),
            )

    async def gained(self, loop: PlanningLoop, partition: int, snapshots: Snapshots) -> None:
        """Plan the owners of ``partition`` from now on (its lease is held).

        The projection is first read to the stream's end: the previous holder let go after
        planning from some point of the stream, and this replica's plans must not come from
        an older state than its last ones. The owners' records are forgotten, so each owner's
        plan is published once (a whole desired state: the executor skips what is in place).
        """
        async with self._lock:
            await self.catch_up(loop)
            loop.records.forget(self._in(partition))
            self._held = self._held | {partition}
            self._metrics.partitions_held.set(len(self._held))
            if partition == 0:
                snapshots.forget_manifest()  # another replica wrote snapshots meanwhile
            projection = loop.projection
            in_partition = self._in(partition)
            owners = tuple(
                ref
                for ref in (
                    *queue_config(projection),
                    *all_workloads(projection),
                    *all_models(projection),
                )
                if ref.uid and in_partition(ref.uid)
            )
            with bound_context({"trigger": "partition", "partition": str(partition)}):
                await loop.plan_round(owners, Trigger("resync", loop.clock()))
            log.info("partition taken on", partition=partition, owners=len(owners))

    async def released(self, loop: PlanningLoop, partition: int) -> None:
        """Plan no owner of ``partition`` any more; returns after the round in hand."""
        async with self._lock:
            self._held = self._held - {partition}
            self._metrics.partitions_held.set(len(self._held))
            loop.records.forget(self._in(partition))

    def _in(self, partition: int) -> Callable[[str], bool]:
        return lambda uid: uid_partition(uid, self._partitions) == partition

    async def scan(self, loop: PlanningLoop, now: datetime) -> None:
        """Plan the preemption victims of this replica's partitions that became victims since
        the last look (their beneficiaries may be planned by another replica: decision 0030)."""
        if self._next_victim_scan is not None and now < self._next_victim_scan:
            return
        self._next_victim_scan = now + timedelta(seconds=VICTIM_SCAN_SECONDS)
        context = loop.context()
        victims = {ref.uid: ref for ref in preemption_victims(context, now=now) if ref.uid}
        new = [victims[uid] for uid in sorted(set(victims) - self._victims) if self.holds(uid)]
        self._victims = frozenset(victims)
        if new:
            with bound_context({"trigger": "preemption"}):
                await loop.plan_round(tuple(new), Trigger("timer", now))
