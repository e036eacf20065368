"""The planner service: observations in, plans out.

The parts, each in its own module:

- :class:`~kaiwo_planner.planning_loop.PlanningLoop`: an input applied to the projection, the
  owners it may affect planned, what is news published;
- a :class:`~kaiwo_planner.feeds.Feed` delivers the inputs: the durable consumers
  (:class:`~kaiwo_planner.feeds.DurableFeed`) or, with partitions, every stream read by
  sequence (:class:`~kaiwo_planner.partitioned_feed.PartitionedFeed`); ``__main__`` chooses;
- :class:`~kaiwo_planner.publisher.PlanPublisher`: plans and public workload events on the bus;
- :class:`~kaiwo_planner.snapshots.Snapshots`: when the state is written, and reading it back;
- :class:`~kaiwo_planner.owner_records.OwnerRecords`: the last publication and the pending
  re-plan time per owner, keyed by :class:`~kaiwo_planner.owner_key.OwnerKey`.

This class runs them: restore, catch up, then rounds until stopped.

Resync. At start-up and every ``resync_every_seconds`` (default 10 minutes, like a
controller's resync) every owner is planned again. The periodic resync also publishes a plan
for each owner whose desired objects are absent or drifted even when that is what was found
last time: an apply that failed for good, or drift the planner missed, is corrected within
one resync. (At start-up the restored records say what was published; a restart does not
send those plans again.)

Timers. A planning result may ask to be planned again at ``replan_at`` (a duration runs out,
a deadline passes). The loop keeps one pending time per owner and plans it then, with
``now`` = the due time and trigger ``timer``.

Restart. The projection, the last published fingerprint and absent set of every owner, and
the timers are written to the key-value bucket ``kaiwo-planner`` every N observations or T
seconds and on shutdown (compressed JSON in chunks under a manifest, so a large projection
fits NATS' message size). On start the service restores the snapshot, then the feed catches
up from the snapshot's sequence + 1 to the stream's end. Only a start without a snapshot reads
the stream from its beginning: the durable consumer's acknowledgements then stand for a state
that was lost with the process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta

import structlog
from kaiwo_contracts.events.streams import ConsumerSpec
from kaiwo_runtime.bus import Bus, BusError, Delivery
from kaiwo_runtime.kv import KeyValue
from kaiwo_runtime.startup import start_when_the_bus_answers

from kaiwo_planner.domain.planning import plan_object
from kaiwo_planner.domain.state.projection import Projection
from kaiwo_planner.feeds import DurableFeed, Feed
from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.owner_round import CHILD_GONE_GRACE, PlanFunction
from kaiwo_planner.partitioned_feed import PartitionedFeed
from kaiwo_planner.planning_loop import PlanningLoop
from kaiwo_planner.publisher import PlanPublisher
from kaiwo_planner.settings import PlannerSettings
from kaiwo_planner.snapshots import ForeignSnapshotError, Snapshots

__all__ = [
    "CHILD_GONE_GRACE",
    "ForeignSnapshotError",
    "PlanFunction",
    "PlannerService",
    "feed_for",
]

log = structlog.get_logger("kaiwo.planner")


def feed_for(
    bus: Bus, *, metrics: PlannerMetrics, consumer: ConsumerSpec | None = None
) -> DurableFeed | PartitionedFeed:
    """The partitioned feed with more than one partition (decision 0030), else the durable
    consumers (``consumer`` in place of ``planner-obs``)."""
    if bus.topology.partitions > 1:
        return PartitionedFeed(bus, metrics=metrics)
    return DurableFeed(bus, consumer=consumer)


class PlannerService:
    """Restores the loop's state, feeds it round by round, resyncs and snapshots.

    ``clock`` gives the current time for timers, snapshots and envelope times; planning
    itself only ever sees the ``now`` of its trigger. ``cluster``: the identity of the cluster
    the observations come from (None: not known yet); a snapshot of another cluster is
    refused (:class:`~kaiwo_planner.snapshots.ForeignSnapshotError`). ``feed``: where inputs
    come from (default: :func:`feed_for`).
    """

    def __init__(
        self,
        bus: Bus,
        kv: KeyValue,
        *,
        clock: Callable[[], datetime],
        plan_fn: PlanFunction | None = None,
        settings: PlannerSettings | None = None,
        metrics: PlannerMetrics | None = None,
        consumer: ConsumerSpec | None = None,
        cluster: str | None = None,
        feed: Feed | None = None,
    ) -> None:
        self._clock = clock
        self._settings = settings = settings or PlannerSettings()
        self.metrics = metrics = metrics or PlannerMetrics()
        self._feed = feed or feed_for(bus, metrics=metrics, consumer=consumer)
        self._snapshots = Snapshots(
            kv, settings=settings, clock=clock, metrics=metrics, cluster=cluster
        )
        self.loop = PlanningLoop(
            plan_fn=plan_fn or plan_object,
            publisher=PlanPublisher(bus, clock=clock, metrics=metrics),
            snapshots=self._snapshots,
            metrics=metrics,
            clock=clock,
            holds=self._feed.holds,
            tombstone_retention=settings.tombstone_retention,
            default_cluster_queue=settings.default_cluster_queue_name,
        )
        self._started = asyncio.Event()
        self._next_resync_at: datetime | None = None
        self._ready = False

    # ------------------------------------------------------------------ state, for probes

    @property
    def projection(self) -> Projection:
        return self.loop.projection

    @property
    def ready(self) -> bool:
        """True once the snapshot is restored and the stream caught up."""
        return self._ready

    @property
    def active_active(self) -> bool:
        """Partitions: every replica reads everything and plans its partitions' owners."""
        return isinstance(self._feed, PartitionedFeed)

    @property
    def partitions_held(self) -> frozenset[int]:
        """The partitions whose owners this replica plans (none without partitions)."""
        return self._feed.held if isinstance(self._feed, PartitionedFeed) else frozenset()

    async def started(self) -> None:
        """Returns once the projection is restored and caught up (:meth:`start`)."""
        await self._started.wait()

    @property
    def next_timer(self) -> datetime | None:
        return self.loop.records.timers.next_due

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Restore the snapshot, catch up with the stream, re-plan if configured."""
        restored = await self.restore()
        # Without a snapshot too: what the consumer acknowledged before a crash that left no
        # snapshot (a kill in the first seconds) is read again from the stream's start.
        caught_up = await self._feed.catch_up(self.loop)
        log.info(
            "projection restored"
            if restored
            else "no snapshot; the projection read from the stream",
            objects=len(self.projection),
            obs_sequence=self.projection.last_sequence,
            caught_up=caught_up,
        )
        if self._settings.resync_on_start:
            await self.loop.resync(reapply_gaps=False)
        now = self._clock()
        self._snapshots.taken_at(now)
        self._schedule_resync(now)
        self._ready = True
        self._started.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Start, then handle observations and timers until ``stop`` is set; snapshot on exit.

        A start the bus interrupts begins again from the snapshot; one that never completed
        writes no snapshot, which would replace the stored one with less."""
        pause = min(self._settings.poll_seconds, 1.0)
        if not await start_when_the_bus_answers(
            self.start, stop, what="the projection", pause_seconds=pause
        ):
            return
        try:
            while not stop.is_set():
                try:
                    await self.step()
                except BusError as error:  # e.g. disconnected: wait for the reconnect
                    log.warning("bus unavailable", error=str(error))
                    await asyncio.sleep(pause)
        finally:
            self._ready = False
            try:
                if self._feed.writes_snapshots:
                    await self.save_snapshot()
            except Exception as error:  # shutting down: say so, the next start catches up
                log.warning("final snapshot failed", error=str(error))

    async def step(self, *, wait_seconds: float | None = None) -> int:
        """One round: read inputs (waiting at most until the next timer), fire due timers,
        resync and snapshot when due. Returns the number of inputs handled."""
        wait = self._seconds_to_wait() if wait_seconds is None else wait_seconds
        return await self._feed.round(self.loop, self._round_tail, wait_seconds=wait)

    async def _round_tail(self) -> None:
        """After reading: defaults, timers, the feed's scan, resync and snapshot, when due."""
        await self.loop.create_missing_defaults()
        await self.loop.fire_due_timers()
        now = self._clock()
        await self._feed.scan(self.loop, now)
        if self._next_resync_at is not None and now >= self._next_resync_at:
            await self.loop.resync()
            self._schedule_resync(now)
        if self._feed.writes_snapshots and self._snapshots.due(now, objects=len(self.projection)):
            await self.save_snapshot()

    async def handle(self, delivery: Delivery) -> None:
        """The handler of ``planner-obs``: one observation in, zero or more plans out."""
        await self.loop.handle_observation(delivery)

    async def resync(self, *, reapply_gaps: bool = True) -> int:
        """Plan every owner now (:meth:`PlanningLoop.resync`); returns how many."""
        return await self.loop.resync(reapply_gaps=reapply_gaps)

    def _seconds_to_wait(self) -> float:
        wait = self._settings.poll_seconds
        due = self.next_timer
        if due is not None:
            wait = min(wait, (due - self._clock()).total_seconds())
        return max(wait, 0.0)

    def _schedule_resync(self, now: datetime) -> None:
        interval = self._settings.resync_every_seconds
        self._next_resync_at = now + timedelta(seconds=interval) if interval > 0 else None

    # ------------------------------------------------------------------ snapshots

    async def save_snapshot(self) -> None:
        projection = self.projection
        await self._snapshots.save(
            self.loop.snapshot_document(self._snapshots.cluster),
            objects=len(projection),
            obs_sequence=projection.last_sequence,
        )

    async def restore(self) -> bool:
        """Load the snapshot, if there is a readable one; returns whether one was loaded."""
        restored = await self._snapshots.load()
        if restored is None:
            return False
        self.loop.adopt(restored, with_records=self._feed.keeps_restored_records)
        return True

    # ------------------------------------------------------------------ partitions

    async def gained(self, partition: int) -> None:
        """Plan the owners of ``partition`` from now on (its lease is held)."""
        await self._started.wait()
        await self._partitioned().gained(self.loop, partition, self._snapshots)

    async def released(self, partition: int) -> None:
        """Plan no owner of ``partition`` any more; returns after the round in hand."""
        await self._partitioned().released(self.loop, partition)

    def _partitioned(self) -> PartitionedFeed:
        if not isinstance(self._feed, PartitionedFeed):
            raise TypeError("partitions are shared out only with a partitioned feed")
        return self._feed
