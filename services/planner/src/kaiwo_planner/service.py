"""The planner service: observations in, plans out.

For each observation on the durable consumer ``planner-obs`` (stream ``KAIWO_OBS``):

1. apply it to the :class:`~kaiwo_planner.domain.state.projection.Projection` (a stale or duplicate
   observation is acknowledged and dropped; one whose message id ``<uid>:<resourceVersion>``
   names the version the projection holds, as each of a relist's thousands does, before its
   envelope is even decoded);
2. find the owners it may affect (:func:`~kaiwo_planner.domain.state.fanout.owners_to_replan`);
   none when only the object's resourceVersion moved (a relist after a restore: no plan can
   change), but the object itself while the status its last plan set has not come back;
3. plan each one with the pure planning function, ``now`` = the observation's envelope time;
4. publish a ``PlanDecidedV1`` on ``kaiwo.plan.<kind>.<scope>.<uid>`` only when the plan's
   fingerprint differs from the last one published for that owner, or when desired objects
   went missing from the projection (``absent``) or are observed without what the plan asks
   of them (``drifted``: a field changed by hand) since the owner was last planned; or when
   the owner moved on to a new resourceVersion while its status is still not the planned
   one. (The executor writes a status only onto the owner version it was planned from, so a
   plan made from a version that changed before the write lands is carried out without its
   status; the same decision is then published again for the newer version.)

   A plan names as ``absent`` and ``drifted`` only what became so since the owner was last
   planned. A child the executor is still creating or updating stays missing (or stale) in
   the projection until its observation comes back; naming it again in every plan meanwhile
   would make the executor create or apply it again each time (on a real API server: the
   twelve Kueue objects of a queue config re-created 60 times over while the first
   observations of a start-up came in). A child deleted or edited by hand causes exactly one
   plan that names it (a deleted one :data:`CHILD_GONE_GRACE` later, so that a deleted
   owner, whose children go after it, gets none).

Resync. At start-up and every ``resync_every_seconds`` (default 10 minutes, like a
controller's resync) every owner is planned again. The periodic resync also publishes a plan
for each owner whose desired objects are absent or drifted even when that is what was found
last time: an apply that failed for good, or drift the planner missed, is corrected within
one resync. (At start-up the restored records say what was published; a restart does not
send those plans again.)

Timers. A planning result may ask to be planned again at ``replan_at`` (a duration runs out,
a deadline passes). The service keeps one pending time per owner and plans it then, with
``now`` = the due time and trigger ``timer``.

Restart. The projection, the last published fingerprint and absent set of every owner, and
the timers are written to the key-value bucket ``kaiwo-planner`` every N observations or T
seconds and on shutdown (compressed JSON in chunks under a manifest, so a large projection
fits NATS' message size). On start the service restores the snapshot, then reads the stream
from the snapshot's sequence + 1 to its end with ``read_stored`` (observations acknowledged
after the snapshot was taken would otherwise be lost: the durable consumer only continues
after its ack floor), then lets the consumer continue; anything it delivers at or below the
projection's sequence is skipped. Nothing is replayed from the beginning of the stream.

Failures. A message that is not a valid observation is dead-lettered (``PoisonMessage`` or
the envelope's own error). A planning function that raises for one owner is logged and
counted, and the other owners are still planned. A publish that fails raises, so the bus
redelivers the observation; the owners not yet published are planned again then.

Public workload events. Before it plans, the service derives the public events the
observation shows (:func:`~kaiwo_planner.domain.status.public_events.derive_public_events`: what the
previous version in the projection told subscribers, against the new version) and publishes
them on ``kaiwo.public.workload.…``. They go out before the plans of the same observation and
are remembered with the unfinished owners, so a redelivery after a failed publish sends them
again, under the same ids (JetStream keeps one copy).

Findings. The durable consumer ``planner-mon`` (stream ``KAIWO_MON``) delivers the monitor's
``UtilizationV1`` per workload and tick; the projection keeps the latest per workload
(:mod:`kaiwo_planner.domain.status.findings`) and the workload is planned again, ``now`` = the
finding's envelope time, when the finding may change its plan (an open underutilized or idle
stretch, or a change of state). A workload a finding makes preemptable is planned on the
finding; the pending workloads it is preempted for are named in its plan.

Scale decisions. The durable consumer ``planner-scale`` (stream ``KAIWO_GATEWAY``) delivers
the autoscaler's ``ScaleDecidedV1`` per Model; the projection keeps the latest per Model
(:mod:`kaiwo_planner.domain.models.autoscaling`) and the Model is planned again, ``now`` = the
decision's envelope time, trigger ``scale``: its plan sets the replicas through the scale
subresource while the decision still applies, bounded by the Model's ``maxReplicas`` and the
cluster's ceiling. A decision for a Model the projection does not hold (by uid, kind and
namespace) is refused: logged, counted (``kaiwo_planner_scale_decisions_total{outcome=
"refused"}``) and nothing is planned.

Active-active (``KAIWO_BUS_PARTITIONS`` > 1, decision 0030). Every replica reads the whole of
``KAIWO_OBS``, the findings and the scale decisions by stream sequence instead of the durable
consumers (one shared by active replicas would hand each a part), so its projection is the
whole cluster, and plans only the owners of the partitions it holds (:meth:`holds`, the
partition function of the subjects). :meth:`gained` reads to the stream's end, forgets the
partition's records and timers and plans its owners once; :meth:`released` waits for the round
in hand. Each round it also plans the preemption victims of its partitions (their
beneficiaries may be another replica's). Public events are published by every replica under
the same ids (JetStream keeps one); only the holder of partition 0 writes the snapshot.

Replay: every plan records ``planned_at``, ``trigger``, ``obs_sequence`` (the projection's
last applied stream sequence), ``mon_sequence`` (the last finding's) and ``scale_sequence``
(the last scale decision's), which is all the pure planner needs to reproduce it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Final, Protocol

import structlog
from kaiwo_contracts.events.autoscaling import ScaleDecidedV1
from kaiwo_contracts.events.envelope import (
    Envelope,
    object_subject,
    plan_event_id,
    service_source,
)
from kaiwo_contracts.events.monitor import UtilizationV1
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.plans import PlanDecidedV1, PlanTrigger
from kaiwo_contracts.events.streams import (
    GATEWAY_STREAM,
    MONITOR_STREAM,
    OBSERVED_STREAM,
    PLANNER_FINDINGS_CONSUMER,
    PLANNER_SCALE_CONSUMER,
    ConsumerSpec,
    uid_partition,
)
from kaiwo_contracts.events.subjects import ANY_TAIL, ANY_TOKEN, Family, family_filter, plan_subject
from kaiwo_contracts.plans import ObjectRef, Plan
from kaiwo_runtime.bus import NON_RETRYABLE, Bus, BusError, Delivery, PoisonMessage, StoredMessage
from kaiwo_runtime.cluster_binding import foreign_state_problem
from kaiwo_runtime.kv import KeyValue
from kaiwo_runtime.logging import bound_context

from kaiwo_planner.domain.models.autoscaling import ScaleRequest
from kaiwo_planner.domain.models.replanning import all_models
from kaiwo_planner.domain.planning import PlanningResult, plan_object
from kaiwo_planner.domain.publication import Published, publication
from kaiwo_planner.domain.queues.default_objects import default_object_plans
from kaiwo_planner.domain.scheduling.preemption_candidates import preemption_victims
from kaiwo_planner.domain.state.cluster_settings import kaiwo_config
from kaiwo_planner.domain.state.context_keeper import PlanningContextKeeper
from kaiwo_planner.domain.state.fanout import (
    all_gpu_workloads,
    all_workloads,
    owners_to_replan,
    queue_config,
)
from kaiwo_planner.domain.state.object_index import KAIWO_GROUP, KUEUE_GROUP
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.state.projection import (
    Change,
    Projection,
    SnapshotFormatError,
    api_group,
    object_ref,
)
from kaiwo_planner.domain.status.findings import WorkloadFinding
from kaiwo_planner.domain.status.planned_status import owner_with_status, status_to_assume
from kaiwo_planner.domain.status.public_events import (
    PublicEvent,
    PublicState,
    derive_public_events,
    is_public_workload,
    public_state,
)
from kaiwo_planner.domain.status.queued_events import (
    QueueObjects,
    derive_queued_event,
    is_kueue_workload,
    owning_workload,
)
from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.replan_timers import ReplanTimers
from kaiwo_planner.settings import PlannerSettings
from kaiwo_planner.snapshot_store import SNAPSHOT_FORMAT, SnapshotStore

log = structlog.get_logger("kaiwo.planner")

SOURCE: Final = service_source("planner")
OBSERVATION_CONSUMER: Final = "planner-obs"
FINDINGS_WAIT_SECONDS: Final = 0.01
"""Findings are fetched after observations; waiting for them would delay observations."""
OBSERVATIONS_PER_ROUND: Final = 256
"""Observations handled in one round while they keep coming, before findings, timers, resync
and snapshots have their turn. The consumer hands them out one at a time
(``max_ack_pending=1``, for per-object order): a round per observation waited for findings
and scale decisions after each one, a minute of waiting for a relist of 3,000 objects."""
FOLLOW_IDLE_SECONDS: Final = 0.2
"""Active-active: how long a replica that found nothing new waits before reading again."""
CHILD_GONE_GRACE: Final = timedelta(seconds=5)
"""How long the owners of a deleted child wait before they are planned again.

Deleting a workload deletes it at once and its children after it (garbage collection), but
the two kinds are watched apart: the child's deletion can reach the planner first. Planned at
once, the owner would get a plan re-creating the child that the executor must refuse (the
owner is gone) and dead-letter; after the grace the owner's own deletion has come in and
nothing is planned. A child deleted by hand is re-created once the grace has passed."""
FOLLOW_BATCH: Final = 64
"""Active-active: messages read from one stream per round (timers and snapshots between)."""
VICTIM_SCAN_SECONDS: Final = 1.0
MODEL_GROUP: Final = "kubeai.org"
"""Active-active: how often a replica looks for preemption victims in its partitions."""


class PlanFunction(Protocol):
    """The pure planner (:func:`kaiwo_planner.domain.planning.plan_object`)."""

    def __call__(
        self, *, owner: Mapping[str, Any], context: PlanningContext, now: datetime
    ) -> PlanningResult: ...


def default_plan_function() -> PlanFunction:
    """The real planner: :func:`kaiwo_planner.domain.planning.plan_object`."""
    return plan_object


class ForeignSnapshotError(Exception):
    """The stored snapshot is of another cluster: nothing is loaded, nothing overwritten
    (which state is right is the administrator's call, decision 0042)."""


@dataclass(frozen=True, slots=True)
class _Unfinished:
    """An observation applied whose owners were not all published (a publish failed)."""

    sequence: int
    owners: tuple[ObjectRef, ...]
    announcements: tuple[PublicEvent, ...] = ()
    """Public events of the observation not yet published."""


@dataclass(frozen=True, slots=True)
class _Followed:
    """A stream an active-active replica reads by sequence, and what handles its messages."""

    stream: str
    subjects: str
    handler: Callable[[Delivery], Awaitable[None]]


# --------------------------------------------------------------------------- the service


class PlannerService:
    """Consumes observations, keeps the projection, plans owners, publishes changed plans.

    ``clock`` gives the current time for timers, snapshots and envelope times; planning
    itself only ever sees the ``now`` of its trigger.
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
    ) -> None:
        """``cluster``: the identity of the cluster the observations come from (the uid of
        kube-system, as the watcher recorded it; None: not known yet). Snapshots record it,
        and a snapshot of another cluster is refused (:class:`ForeignSnapshotError`)."""
        self._bus = bus
        self._cluster = cluster
        self._clock = clock
        self._plan_fn = plan_fn or default_plan_function()
        self._settings = settings or PlannerSettings()
        self.metrics = metrics or PlannerMetrics()
        self._partitions = bus.topology.partitions
        self._held: frozenset[int] = frozenset()
        """Active-active: the partitions whose owners this replica plans."""
        self._lock = asyncio.Lock()
        """Active-active: a partition changes hands between rounds, never during one."""
        self._started = asyncio.Event()
        self._read_from: dict[str, int] = {}
        self._victims: frozenset[str] = frozenset()
        self._next_victim_scan: datetime | None = None
        self._consumer = (
            None if self.active_active else consumer or bus.topology.consumer(OBSERVATION_CONSUMER)
        )
        self._findings_consumer = next(
            (c for c in bus.topology.consumers if c.durable_name == PLANNER_FINDINGS_CONSUMER),
            None,
        )
        self._scale_consumer = next(
            (c for c in bus.topology.consumers if c.durable_name == PLANNER_SCALE_CONSUMER),
            None,
        )
        self._store = SnapshotStore(kv)
        self._projection = Projection(tombstone_retention=self._settings.tombstone_retention)
        self._contexts = PlanningContextKeeper()
        self._owners: dict[str, Published] = {}
        self._timers = ReplanTimers()
        self._unfinished: _Unfinished | None = None
        self._changes_since_snapshot = 0
        self._last_snapshot_at: datetime | None = None
        self._next_resync_at: datetime | None = None
        self._ready = False

    # ------------------------------------------------------------------ state, for probes

    @property
    def projection(self) -> Projection:
        return self._projection

    @property
    def ready(self) -> bool:
        """True once the snapshot is restored and the stream caught up."""
        return self._ready

    @property
    def active_active(self) -> bool:
        """Partitions: every replica reads everything and plans its partitions' owners."""
        return self._partitions > 1

    @property
    def partitions_held(self) -> frozenset[int]:
        return self._held

    async def started(self) -> None:
        """Returns once the projection is restored and caught up (:meth:`start`)."""
        await self._started.wait()

    def holds(self, uid: str) -> bool:
        """Whether this replica plans the owner ``uid`` (always, without partitions)."""
        return not self.active_active or uid_partition(uid, self._partitions) in self._held

    @property
    def next_timer(self) -> datetime | None:
        return self._timers.next_due

    def published_fingerprint(self, owner_uid: str) -> str | None:
        record = self._owners.get(owner_uid)
        return record.fingerprint if record is not None else None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Restore the snapshot, catch up with the stream, re-plan if configured."""
        restored = await self.restore()
        if restored:
            caught_up = await self.catch_up()
            log.info(
                "projection restored",
                objects=len(self._projection),
                obs_sequence=self._projection.last_sequence,
                caught_up=caught_up,
            )
        else:
            log.info("no snapshot; the projection starts empty")
        if self._settings.resync_on_start:
            await self.resync(reapply_gaps=False)
        now = self._clock()
        self._last_snapshot_at = now
        self._schedule_resync(now)
        self._ready = True
        self._started.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Start, then handle observations and timers until ``stop`` is set; snapshot on exit."""
        await self.start()
        try:
            while not stop.is_set():
                try:
                    await self.step()
                except BusError as error:  # e.g. disconnected: wait for the reconnect
                    log.warning("bus unavailable", error=str(error))
                    await asyncio.sleep(min(self._settings.poll_seconds, 1.0))
        finally:
            self._ready = False
            try:
                if self._writes_snapshots:
                    await self.save_snapshot()
            except Exception as error:  # shutting down: say so, the next start catches up
                log.warning("final snapshot failed", error=str(error))

    async def step(self, *, wait_seconds: float | None = None) -> int:
        """One round: pull observations (waiting at most until the next timer), fire due
        timers, resync and snapshot when due. Returns the number of observations handled."""
        wait = self._seconds_to_wait() if wait_seconds is None else wait_seconds
        if self.active_active:
            async with self._lock:
                handled, _ = await self._read_streams()
                await self._round_tail()
            if handled == 0 and wait > 0:
                await asyncio.sleep(min(wait, FOLLOW_IDLE_SECONDS))
            return handled
        assert self._consumer is not None
        handled = await self._read_observations(self._consumer, wait_seconds=wait)
        if self._findings_consumer is not None:
            try:
                handled += await self._bus.process(
                    self._findings_consumer,
                    self.handle_finding,
                    max_messages=64,
                    wait_seconds=FINDINGS_WAIT_SECONDS,
                )
            except BusError as error:  # findings wait; timers, resync and snapshots must not
                log.warning("monitor findings unavailable", error=str(error))
        if self._scale_consumer is not None:
            try:
                handled += await self._bus.process(
                    self._scale_consumer,
                    self.handle_scale_decision,
                    max_messages=64,
                    wait_seconds=FINDINGS_WAIT_SECONDS,
                )
            except BusError as error:  # like findings: the rest of the round goes on
                log.warning("scale decisions unavailable", error=str(error))
        await self._round_tail()
        return handled

    async def _read_observations(self, consumer: ConsumerSpec, *, wait_seconds: float) -> int:
        """Handle the observations that are there, up to :data:`OBSERVATIONS_PER_ROUND`
        (waiting ``wait_seconds`` for the first); returns how many."""
        handled = await self._bus.process(
            consumer, self.handle, max_messages=64, wait_seconds=wait_seconds
        )
        while 0 < handled < OBSERVATIONS_PER_ROUND:
            more = await self._bus.process(
                consumer, self.handle, max_messages=64, wait_seconds=FINDINGS_WAIT_SECONDS
            )
            if more == 0:
                break
            handled += more
        return handled

    async def _round_tail(self) -> None:
        """After reading: defaults, timers, victims, resync and snapshot, when due."""
        await self.create_missing_defaults()
        await self.fire_due_timers()
        now = self._clock()
        if self.active_active:
            await self._plan_victims(now)
        if self._next_resync_at is not None and now >= self._next_resync_at:
            await self.resync()
            self._schedule_resync(now)
        if self._writes_snapshots and self._snapshot_due(now):
            await self.save_snapshot()

    # ------------------------------------------------------------------ active-active

    @property
    def _writes_snapshots(self) -> bool:
        """One writer of the shared snapshot at a time: the holder of partition 0 (every
        replica's projection is the whole cluster, so any holder's snapshot serves all)."""
        return not self.active_active or 0 in self._held

    def _followed(self) -> tuple[_Followed, ...]:
        mon, gateway = family_filter(Family.MONITOR), family_filter(Family.GATEWAY)
        return (
            _Followed(OBSERVED_STREAM, family_filter(Family.OBSERVED), self.handle),
            _Followed(MONITOR_STREAM, f"{mon.removesuffix('>')}utilization.>", self.handle_finding),
            _Followed(
                GATEWAY_STREAM, f"{gateway.removesuffix('>')}scale.>", self.handle_scale_decision
            ),
        )

    def _next_sequence(self, stream: str) -> int:
        """Where to read ``stream`` on: after what the projection took in (an unfinished
        observation again), or after what was read and skipped, whichever is later."""
        if stream == OBSERVED_STREAM:
            unfinished = self._unfinished
            floor = (
                unfinished.sequence
                if unfinished is not None
                else self._projection.last_sequence + 1
            )
        elif stream == MONITOR_STREAM:
            floor = self._projection.last_finding_sequence + 1
        else:
            floor = self._projection.last_scale_sequence + 1
        return max(floor, self._read_from.get(stream, 1))

    async def _read_streams(self, *, batch: int = FOLLOW_BATCH) -> tuple[int, bool]:
        """Read each followed stream on by up to ``batch`` messages: how many were handled,
        and whether every stream was read to its end. A failure to publish raises (the bus
        is away) and the message is read again."""
        handled, ends = 0, 0
        for followed in self._followed():
            for _ in range(batch):
                stored = await self._bus.read_next_stored(
                    followed.stream,
                    self._next_sequence(followed.stream),
                    subjects=followed.subjects,
                )
                if stored is None:
                    ends += 1
                    break
                await self._handle_stored(followed, stored)
                self._read_from[followed.stream] = stored.sequence + 1
                handled += 1
        return handled, ends == len(self._followed())

    async def _handle_stored(self, followed: _Followed, stored: StoredMessage) -> None:
        delivery = _first_delivery(stored, consumer="planner")
        try:
            await followed.handler(delivery)
        except NON_RETRYABLE as error:
            # No consumer to dead-letter it: every replica skips it alike (the recorder
            # keeps it, and the watcher's next observation of the object supersedes it).
            self.metrics.observations.labels("rejected").inc()
            log.warning(
                "unreadable message skipped",
                stream=stored.stream,
                seq=stored.sequence,
                error=str(error),
            )

    async def read_to_end(self) -> int:
        """Read every followed stream until each was read to its end once; how many
        messages. (Not until nothing new comes: on a busy cluster something always does.)"""
        total, at_end = 0, False
        while not at_end:
            handled, at_end = await self._read_streams()
            total += handled
        return total

    async def gained(self, partition: int) -> None:
        """Plan the owners of ``partition`` from now on (its lease is held).

        The projection is first read to the stream's end: the previous holder let go after
        planning from some point of the stream, and this replica's plans must not come from
        an older state than its last ones. The owners' records are forgotten, so each owner's
        plan is published once (a whole desired state: the executor skips what is in place).
        """
        await self._started.wait()
        async with self._lock:
            await self.read_to_end()
            self._forget(partition)
            self._held = self._held | {partition}
            self.metrics.partitions_held.set(len(self._held))
            if partition == 0:
                self._store.forget_manifest()  # another replica wrote snapshots meanwhile
            owners = tuple(
                ref
                for ref in (
                    *queue_config(self._projection),
                    *all_workloads(self._projection),
                    *all_models(self._projection),
                )
                if ref.uid and uid_partition(ref.uid, self._partitions) == partition
            )
            with bound_context({"trigger": "partition", "partition": str(partition)}):
                await self._plan_round(owners, now=self._clock(), trigger="resync", cause=None)
            log.info("partition taken on", partition=partition, owners=len(owners))

    async def released(self, partition: int) -> None:
        """Plan no owner of ``partition`` any more; returns after the round in hand."""
        async with self._lock:
            self._held = self._held - {partition}
            self.metrics.partitions_held.set(len(self._held))
            self._forget(partition)

    def _forget(self, partition: int) -> None:
        """Drop the records and timers of ``partition``'s owners: another replica plans
        them meanwhile, so what this one published last says nothing about what is in force."""
        for key in [k for k in self._owners if self._partition_of_record(k) == partition]:
            del self._owners[key]
        for uid in [
            u for u in self._timers.uids() if uid_partition(u, self._partitions) == partition
        ]:
            self._timers.cancel(uid)
        self.metrics.timers_pending.set(len(self._timers))

    def _partition_of_record(self, key: str) -> int:
        return uid_partition(_record_subject_uid(key), self._partitions)

    async def _plan_victims(self, now: datetime) -> None:
        """Plan the preemption victims of this replica's partitions that became victims since
        the last look (their beneficiaries may be planned by another replica: decision 0030)."""
        if self._next_victim_scan is not None and now < self._next_victim_scan:
            return
        self._next_victim_scan = now + timedelta(seconds=VICTIM_SCAN_SECONDS)
        context = self._contexts.context(self._projection)
        victims = {ref.uid: ref for ref in preemption_victims(context, now=now) if ref.uid}
        new = [victims[uid] for uid in sorted(set(victims) - self._victims) if self.holds(uid)]
        self._victims = frozenset(victims)
        if new:
            with bound_context({"trigger": "preemption"}):
                await self._plan_round(tuple(new), now=now, trigger="timer", cause=None)

    def _seconds_to_wait(self) -> float:
        wait = self._settings.poll_seconds
        due = self.next_timer
        if due is not None:
            wait = min(wait, (due - self._clock()).total_seconds())
        return max(wait, 0.0)

    def _schedule_resync(self, now: datetime) -> None:
        interval = self._settings.resync_every_seconds
        self._next_resync_at = now + timedelta(seconds=interval) if interval > 0 else None

    # ------------------------------------------------------------------ observations

    async def handle(self, delivery: Delivery) -> None:
        """The handler of ``planner-obs``: one observation in, zero or more plans out."""
        sequence = delivery.stream_sequence
        unfinished = self._unfinished
        resuming = unfinished is not None and unfinished.sequence == sequence
        if not resuming and sequence <= self._projection.last_sequence:
            self.metrics.observations.labels("skipped").inc()
            return
        if not resuming and self._holds_observed_version(delivery):
            # A relist's copy of what the projection holds: dropped before the envelope is
            # decoded (thousands of them after a relist; apply would drop each anyway).
            self._projection.pass_over(sequence)
            self.metrics.stale_events.inc()
            self.metrics.observations.labels("stale").inc()
            return
        envelope = delivery.envelope(ObservedObjectV1)
        observed = envelope.data
        context = {
            "event_id": envelope.id,
            "kind": observed.kind,
            "namespace": observed.namespace,
            "name": observed.name,
            "uid": observed.uid,
            "seq": str(sequence),
        }
        with bound_context(context):
            if resuming:
                assert unfinished is not None
                owners = unfinished.owners
                announcements = unfinished.announcements
            else:
                told = self._told(observed)
                waited = self._kueue_before(observed)
                change = self._apply(observed, sequence)
                if change is None:
                    return
                owners = self._plan_now(
                    observed, self._owners_of(change, observed), at=envelope.time
                )
                announcements = self._public_events(told, envelope) + self._queued(waited, envelope)
            if announcements:
                self._unfinished = _Unfinished(
                    sequence=sequence, owners=owners, announcements=announcements
                )
                await self._announce(announcements, cause=envelope)
            await self._plan_round(
                owners, now=envelope.time, trigger="observation", cause=envelope, sequence=sequence
            )
            self._changes_since_snapshot += 1

    async def handle_finding(self, delivery: Delivery) -> None:
        """The handler of ``planner-mon``: a monitor finding in, the workload's plan out."""
        envelope = delivery.envelope(UtilizationV1)
        reading = envelope.data
        uid = reading.workload.uid or ""
        if not uid:
            raise PoisonMessage("a utilization finding without the workload's uid")
        finding = WorkloadFinding.of(reading, at=envelope.time)
        with bound_context({"event_id": envelope.id, "uid": uid, "finding": "utilization"}):
            if not self._projection.apply_finding(finding, sequence=delivery.stream_sequence):
                return
            owner = self._projection.by_uid(uid)
            if owner is None:
                return
            await self._plan_round(
                (object_ref(owner),), now=envelope.time, trigger="finding", cause=envelope
            )
            self._changes_since_snapshot += 1

    async def handle_scale_decision(self, delivery: Delivery) -> None:
        """The handler of ``planner-scale``: the autoscaler's decision in, the Model's plan
        (with its scale) out."""
        envelope = delivery.envelope(ScaleDecidedV1)
        decision = envelope.data
        uid = decision.model.uid or ""
        if not uid:
            raise PoisonMessage("a scale decision without the Model's uid")
        request = ScaleRequest.of(decision, at=envelope.time)
        with bound_context({"event_id": envelope.id, "uid": uid, "decision": "scale"}):
            # Taken in whatever it names, as replay takes it in (it bounds nothing then: only
            # a Model with that uid ever reads it); acted on only for a Model that exists.
            news = self._projection.apply_scale_request(request, sequence=delivery.stream_sequence)
            owner = self._projection.by_uid(uid)
            if owner is None or not _is_model(owner, namespace=decision.model.namespace):
                self.metrics.scale_decisions.labels("refused").inc()
                log.warning(
                    "scale decision for a Model that does not exist; refused",
                    model=decision.model.display(),
                )
                return
            if not news:
                self.metrics.scale_decisions.labels("unchanged").inc()
                return
            self.metrics.scale_decisions.labels("taken").inc()
            await self._plan_round(
                (object_ref(owner),), now=envelope.time, trigger="scale", cause=envelope
            )
            self._changes_since_snapshot += 1

    def _holds_observed_version(self, delivery: Delivery) -> bool:
        """The delivery's message id is ``<uid>:<resourceVersion>`` (:func:`~kaiwo_contracts.
        events.envelope.observed_event_id`, the identity JetStream deduplicates observations
        by) of a version the projection holds. A reobserved observation has another id
        (``reobserved:…``) and is always taken in."""
        uid, colon, version = (delivery.message_id or "").partition(":")
        return bool(colon) and self._projection.holds_version(uid, version)

    def _owners_of(self, change: Change, observed: ObservedObjectV1) -> tuple[ObjectRef, ...]:
        """The owners to plan for ``change``. When only the object's resourceVersion moved,
        no plan can change (plans leave versions out of their fingerprints), so none but the
        object itself, and that only while the status its last plan set has not come back:
        the write was made onto the old version and must be made again."""
        if change.content_changed or observed.reobserved:
            return owners_to_replan(change, self._projection)
        record = self._owners.get(observed.uid)
        if record is not None and status_to_assume(change.object, record.status) is not None:
            return (change.ref,)
        return ()

    def _apply(self, observed: ObservedObjectV1, sequence: int) -> Change | None:
        try:
            change = self._projection.apply(observed, sequence=sequence)
        except (TypeError, ValueError, KeyError, AttributeError) as error:
            self.metrics.observations.labels("rejected").inc()
            raise PoisonMessage(f"cannot take in the observed object: {error!r}") from error
        self.metrics.projection_objects.set(len(self._projection))
        if change is None:
            self.metrics.stale_events.inc()
            self.metrics.observations.labels("stale").inc()
            return None
        self.metrics.observations.labels("applied").inc()
        return change

    def _plan_now(
        self, observed: ObservedObjectV1, owners: tuple[ObjectRef, ...], *, at: datetime
    ) -> tuple[ObjectRef, ...]:
        """The owners to plan for ``observed`` now; the owners of a deleted child are planned
        after :data:`CHILD_GONE_GRACE` instead (a timer no later than one they had)."""
        if observed.event_type != "DELETED" or any(o.uid == observed.uid for o in owners):
            return owners
        due = at + CHILD_GONE_GRACE
        for owner in owners:
            if owner.uid and self.holds(owner.uid):
                earlier = self._timers.due(owner.uid)
                self._timers.arm(owner.uid, due if earlier is None else min(due, earlier))
        self.metrics.timers_pending.set(len(self._timers))
        return ()

    def _told(self, observed: ObservedObjectV1) -> PublicState | None:
        """What subscribers were told of the observed workload (None: never seen)."""
        if not is_public_workload(observed.object):
            return None
        previous = self._projection.by_uid(observed.uid)
        return public_state(previous) if previous is not None else None

    def _public_events(
        self, told: PublicState | None, envelope: Envelope[ObservedObjectV1]
    ) -> tuple[PublicEvent, ...]:
        if not is_public_workload(envelope.data.object):
            return ()
        config = kaiwo_config(self._contexts.context(self._projection))
        return derive_public_events(
            told,
            envelope.data,
            observed_at=envelope.time,
            default_queue=config.spec.default_cluster_queue_name,
        )

    def _kueue_before(self, observed: ObservedObjectV1) -> Mapping[str, Any] | None:
        """The previous version of an observed Kueue Workload (None: first seen, or another
        kind)."""
        if not is_kueue_workload(observed):
            return None
        return self._projection.by_uid(observed.uid)

    def _queued(
        self, previous: Mapping[str, Any] | None, envelope: Envelope[ObservedObjectV1]
    ) -> tuple[PublicEvent, ...]:
        """``queued`` with the estimated start, when a Kueue Workload started waiting."""
        observed = envelope.data
        if not is_kueue_workload(observed):
            return ()
        projection = self._projection

        def named(namespace: str, name: str) -> Mapping[str, Any] | None:
            for kind in ("KaiwoJob", "KaiwoService"):
                found = projection.find(
                    group=KAIWO_GROUP, kind=kind, name=name, namespace=namespace
                )
                if found is not None:
                    return found
            return None

        workload = owning_workload(observed.object, projection.by_uid, named)
        if workload is None:
            return ()

        def listed(group: str, kind: str) -> tuple[Mapping[str, Any], ...]:
            return projection.objects_of_kind(group=group, kind=kind)

        config = kaiwo_config(self._contexts.context(projection))
        event = derive_queued_event(
            previous,
            observed,
            workload=workload,
            queues=QueueObjects(
                cluster_queues=listed(KUEUE_GROUP, "ClusterQueue"),
                local_queues=listed(KUEUE_GROUP, "LocalQueue"),
                kueue_workloads=listed(KUEUE_GROUP, "Workload"),
                workloads=listed(KAIWO_GROUP, "KaiwoJob") + listed(KAIWO_GROUP, "KaiwoService"),
            ),
            observed_at=envelope.time,
            default_queue=config.spec.default_cluster_queue_name,
        )
        return () if event is None else (event,)

    async def _announce(
        self, events: tuple[PublicEvent, ...], *, cause: Envelope[ObservedObjectV1]
    ) -> None:
        """Publish public workload events in order; a failure raises (the bus redelivers)."""
        for event in events:
            workload = event.workload
            envelope = Envelope.new(
                data=event.payload,
                source=SOURCE,
                time=self._clock(),
                id=event.id,
                subject=object_subject(namespace=workload.namespace, name=workload.name),
                correlationid=workload.uid,
                causationid=cause.id,
                traceparent=cause.traceparent,
            )
            ack = await self._bus.publish(envelope, event.subject)
            self.metrics.public_events.labels(event.label).inc()
            log.info(
                "public event published",
                transition=event.label,
                event_id=event.id,
                duplicate=ack.duplicate,
            )

    async def catch_up(self) -> int:
        """Apply what the stream holds after the projection's sequence; returns how many."""
        if self._consumer is None:  # active-active: the replica reads the streams anyway
            return await self.read_to_end()
        sequence = self._projection.last_sequence + 1
        handled = 0
        while (stored := await self._bus.read_stored(self._consumer.stream, sequence)) is not None:
            if any(_subject_matches(f, stored.subject) for f in self._consumer.filter_subjects):
                delivery = _first_delivery(stored, consumer=self._consumer.durable_name)
                try:
                    await self.handle(delivery)
                    handled += 1
                except NON_RETRYABLE as error:  # the consumer dead-letters it, if it still can
                    log.warning(
                        "unreadable observation while catching up", seq=sequence, error=str(error)
                    )
            sequence += 1
        return handled

    async def create_missing_defaults(self) -> int:
        """Publish the create-only plans of the singletons the cluster lacks (the KaiwoConfig
        and KaiwoQueueConfig ``kaiwo``), each once while it stays missing; returns how many
        were published."""
        plans = default_object_plans(
            self._projection.cluster_state(),
            default_cluster_queue=self._settings.default_cluster_queue_name,
        )
        missing = {f"default/{plan.owner.kind}" for plan in plans}
        for key in [k for k in self._owners if k.startswith("default/") and k not in missing]:
            del self._owners[key]  # it exists now: should it go, it is created again
        published = 0
        for plan in plans:
            key = f"default/{plan.owner.kind}"
            if not self.holds(_record_subject_uid(key)):
                continue
            fingerprint = plan.fingerprint()
            known = self._owners.get(key)
            if known is not None and known.fingerprint == fingerprint:
                continue
            await self._publish(
                plan.owner,
                plan,
                now=self._clock(),
                trigger="resync",
                cause=None,
                gaps=(self._projection.missing(plan.desired), ()),
                assumed=None,
                plan_fingerprint=fingerprint,
                subject_uid=_record_subject_uid(key),
            )
            self._owners[key] = Published(fingerprint=fingerprint)
            published += 1
        return published

    # ------------------------------------------------------------------ timers and resync

    async def fire_due_timers(self) -> int:
        """Plan every owner whose time has come, with ``now`` = its due time."""
        fired = 0
        while (found := self._timers.pop_due(self._clock())) is not None:
            due, uid = found
            owner = self._projection.by_uid(uid)
            if owner is None:
                continue
            ref = object_ref(owner)
            with bound_context({"owner_uid": uid, "trigger": "timer"}):
                try:
                    await self._plan_round((ref,), now=due, trigger="timer", cause=None)
                except BaseException:
                    if uid not in self._timers:  # try again on the next round
                        self._timers.arm(uid, due)
                    raise
            fired += 1
            self._changes_since_snapshot += 1
        self.metrics.timers_pending.set(len(self._timers))
        return fired

    async def resync(self, *, reapply_gaps: bool = True) -> int:
        """Plan every owner now (the queue config, every workload, Model and GpuWorkload);
        returns how many.

        ``reapply_gaps``: publish again for owners whose desired objects are still absent or
        drifted, though nothing changed since the last plan.
        """
        now = self._clock()
        owners = (
            *queue_config(self._projection),
            *all_workloads(self._projection),
            *all_models(self._projection),
            *all_gpu_workloads(self._projection),
        )
        with bound_context({"trigger": "resync"}):
            await self._plan_round(
                owners, now=now, trigger="resync", cause=None, reapply_gaps=reapply_gaps
            )
        if owners:
            self._changes_since_snapshot += 1
        return len(owners)

    def _set_timer(self, uid: str, replan_at: datetime | None, *, now: datetime) -> None:
        if replan_at is None or replan_at <= now:
            if replan_at is not None:
                log.warning(
                    "planner asked to re-plan in the past; ignored", replan_at=str(replan_at)
                )
            self._timers.cancel(uid)
            return
        self._timers.arm(uid, replan_at)
        self.metrics.timers_pending.set(len(self._timers))

    # ------------------------------------------------------------------ planning one owner

    async def _plan_round(
        self,
        owners: tuple[ObjectRef, ...],
        *,
        now: datetime,
        trigger: PlanTrigger,
        cause: Envelope[Any] | None,
        sequence: int | None = None,
        reapply_gaps: bool = False,
    ) -> None:
        """Plan ``owners`` in order, then any others their plans ask for, each at most once.

        With a ``sequence``, the owners still to plan are remembered until the round ends,
        so a redelivery of that observation after a failed publish plans just those.
        """
        queue = list(owners)
        seen = {ref.uid for ref in owners}
        index = 0
        while index < len(queue):
            if sequence is not None:
                self._unfinished = _Unfinished(sequence=sequence, owners=tuple(queue[index:]))
            extra = await self._plan_owner(
                queue[index], now=now, trigger=trigger, cause=cause, reapply_gaps=reapply_gaps
            )
            for ref in extra:
                if ref.uid not in seen:
                    seen.add(ref.uid)
                    queue.append(ref)
            index += 1
        self._unfinished = None

    def _resolve(self, ref: ObjectRef) -> ObjectRef | None:
        """``ref`` with its uid, when the projection holds the object it names."""
        if ref.uid:
            found = self._projection.by_uid(ref.uid)
        else:
            found = self._projection.find(
                group=api_group(ref.api_version),
                kind=ref.kind,
                name=ref.name,
                namespace=ref.namespace,
            )
        return object_ref(found) if found is not None else None

    async def _plan_owner(
        self,
        ref: ObjectRef,
        *,
        now: datetime,
        trigger: PlanTrigger,
        cause: Envelope[Any] | None,
        reapply_gaps: bool = False,
    ) -> tuple[ObjectRef, ...]:
        """Plan one owner and publish the plan if it is news; returns the others to plan."""
        uid = ref.uid or ""
        if not self.holds(uid):  # another replica's partition: it plans this owner
            return ()
        owner = self._projection.by_uid(uid) if uid else None
        if owner is None:  # deleted, or never seen: its children go with it (owner refs)
            self._owners.pop(uid, None)
            self._timers.cancel(uid)
            return ()
        record = self._owners.get(uid)
        assumed = status_to_assume(owner, record.status if record is not None else None)
        if assumed is None and record is not None and record.status is not None:
            # The write came back: hold the projection's equal copy, not a second one.
            record = self._owners[uid] = replace(record, status=owner.get("status"))
        outcome = self._plan(ref, owner_with_status(owner, assumed), now=now)
        if outcome is None:
            return ()
        self._set_timer(uid, outcome.replan_at, now=now)
        also = tuple(
            found for found in map(self._resolve, outcome.also_replan) if found is not None
        )
        plan = outcome.plan
        if plan is None:
            self.metrics.plans.labels(ref.kind, "no_plan").inc()
            return also
        decided = publication(
            plan=plan,
            owner=owner,
            last=record,
            absent=self._projection.missing((*plan.desired, *plan.shared)),
            drifted=self._projection.drifted(plan.desired, ours_too=reapply_gaps),
            reapply_gaps=reapply_gaps,
        )
        if not decided.publish:
            self._owners[uid] = decided.record
            self.metrics.plans.labels(ref.kind, "unchanged").inc()
            return also
        await self._publish(
            ref,
            plan,
            now=now,
            trigger=trigger,
            cause=cause,
            gaps=(decided.absent, decided.drifted),
            assumed=assumed,
            # Often the decision's fingerprint is the plan's own: then hash it once.
            plan_fingerprint=decided.fingerprint if decided.fingerprint_is_the_plans else None,
        )
        self._owners[uid] = decided.record
        self.metrics.plans.labels(ref.kind, "published").inc()
        return also

    def _plan(
        self, ref: ObjectRef, owner: Mapping[str, Any], *, now: datetime
    ) -> PlanningResult | None:
        started = time.perf_counter()
        try:
            context = self._contexts.context(self._projection)
            return self._plan_fn(owner=owner, context=context, now=now)
        except Exception:
            log.exception("planning failed", owner=ref.display(), owner_uid=ref.uid)
            self.metrics.plans.labels(ref.kind, "error").inc()
            return None
        finally:
            self.metrics.plan_duration.observe(time.perf_counter() - started)

    async def _publish(
        self,
        ref: ObjectRef,
        plan: Plan,
        *,
        now: datetime,
        trigger: PlanTrigger,
        cause: Envelope[Any] | None,
        gaps: tuple[tuple[ObjectRef, ...], tuple[ObjectRef, ...]],
        assumed: dict[str, Any] | None,
        plan_fingerprint: str | None,
        subject_uid: str | None = None,
    ) -> None:
        """Publish ``plan``; ``gaps`` are its absent and drifted desired objects.
        ``subject_uid`` stands for the owner's uid in the subject when it has none yet."""
        absent, drifted = gaps
        uid = ref.uid or subject_uid or ""
        if cause is not None:
            cause_id = cause.id
        elif trigger == "timer":
            cause_id = f"timer:{uid}:{now.isoformat()}"
        else:
            cause_id = f"{trigger}:{self._projection.last_sequence}:{now.isoformat()}"
        payload = PlanDecidedV1.of(
            plan,
            planned_at=now,
            trigger=trigger,
            obs_sequence=self._projection.last_sequence,
            mon_sequence=self._projection.last_finding_sequence,
            scale_sequence=self._projection.last_scale_sequence,
            absent=absent,
            drifted=drifted,
            assumed_status=assumed,
            fingerprint=plan_fingerprint,
        )
        envelope = Envelope.new(
            data=payload,
            source=SOURCE,
            time=self._clock(),
            subject=object_subject(namespace=plan.owner.namespace, name=plan.owner.name),
            correlationid=uid,
            causationid=cause.id if cause is not None else None,
            traceparent=cause.traceparent if cause is not None else None,
            id=plan_event_id(plan=plan, causation_id=cause_id, fingerprint=payload.fingerprint),
        )
        # Under the plan's own owner: the root of a GPU workload no Kaiwo kind owns plans the
        # creation of its GpuWorkload (decision 0047), which has no uid yet: the root's
        # stands for it (the correlation id), as the subject check expects.
        owner = plan.owner
        ack = await self._bus.publish(
            envelope,
            plan_subject(kind=owner.kind, namespace=owner.namespace, uid=owner.uid or uid),
        )
        log.info(
            "plan published",
            owner=ref.display(),
            owner_uid=uid,
            trigger=trigger,
            plan_id=envelope.id,
            fingerprint=payload.fingerprint[:12],
            absent=len(absent),
            drifted=len(drifted),
            duplicate=ack.duplicate,
        )

    # ------------------------------------------------------------------ snapshots

    def _snapshot_due(self, now: datetime) -> bool:
        if self._changes_since_snapshot == 0:
            return False
        # A snapshot costs time in proportion to the projection, so it waits for at least as
        # many changes as objects: the cost per observation stays constant as clusters grow.
        every = max(self._settings.snapshot_every_events, len(self._projection))
        if self._changes_since_snapshot >= every:
            return True
        last = self._last_snapshot_at
        return last is None or (now - last).total_seconds() >= self._settings.snapshot_every_seconds

    def snapshot_document(self) -> dict[str, Any]:
        """Projection, owner records and timers as JSON-ready data."""
        return {
            "format": SNAPSHOT_FORMAT,
            "cluster": self._cluster,
            "projection": self._projection.to_document(),
            "owners": {uid: record.to_document() for uid, record in sorted(self._owners.items())},
            "timers": self._timers.to_document(),
        }

    async def save_snapshot(self) -> None:
        started = time.perf_counter()
        try:
            size = await self._store.save(self.snapshot_document())
        except Exception:
            self.metrics.snapshots.labels("failed").inc()
            raise
        self.metrics.snapshots.labels("written").inc()
        self.metrics.snapshot_bytes.set(size)
        self.metrics.snapshot_seconds.observe(time.perf_counter() - started)
        self._changes_since_snapshot = 0
        self._last_snapshot_at = self._clock()
        log.info(
            "snapshot written",
            bytes=size,
            objects=len(self._projection),
            obs_sequence=self._projection.last_sequence,
        )

    async def restore(self) -> bool:
        """Load the snapshot, if there is a readable one; returns whether one was loaded."""
        document = await self._store.load()
        if document is None:
            return False
        recorded = document.get("cluster")
        problem = foreign_state_problem(
            recorded if isinstance(recorded, str) else None,
            self._cluster,
            state=f"the planner's snapshot in {self._settings.snapshot_bucket}",
        )
        if problem is not None:
            raise ForeignSnapshotError(
                f"{problem}; give this cluster its own NATS (or buckets), or delete "
                f"{self._settings.snapshot_bucket} to start it afresh"
            )
        try:
            projection = Projection.from_document(
                document["projection"], tombstone_retention=self._settings.tombstone_retention
            )
            owners = {
                str(uid): Published.from_document(record)
                for uid, record in document["owners"].items()
            }
            timers = ReplanTimers.from_document(document["timers"])
        except (SnapshotFormatError, KeyError, TypeError, ValueError) as error:
            log.warning("snapshot unreadable; starting without it", error=str(error))
            return False
        if self.active_active:
            # Whoever held partition 0 wrote it: its records and timers are of its partitions,
            # and each partition this replica takes on is planned afresh.
            owners, timers = {}, ReplanTimers()
        self._projection = projection
        self._owners = owners
        self._timers = timers
        self.metrics.projection_objects.set(len(projection))
        self.metrics.timers_pending.set(len(timers))
        return True


def _is_model(owner: Mapping[str, Any], *, namespace: str | None) -> bool:
    """``owner`` is a KubeAI Model in ``namespace`` (what a scale decision must name)."""
    metadata = owner.get("metadata") or {}
    return (
        api_group(str(owner.get("apiVersion", ""))) == MODEL_GROUP
        and owner.get("kind") == "Model"
        and metadata.get("namespace") == namespace
    )


def _record_subject_uid(key: str) -> str:
    """The uid token an owner record is published under: the owner's uid, or for a default
    singleton (``default/KaiwoConfig``) the stand-in its plan's subject carries."""
    return key.replace("/", "-").lower() if key.startswith("default/") else key


def _subject_matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: ``*`` is one token, ``>`` one or more trailing tokens."""
    wanted, given = pattern.split("."), subject.split(".")
    for index, token in enumerate(wanted):
        if token == ANY_TAIL:
            return len(given) > index
        if index >= len(given) or token not in (ANY_TOKEN, given[index]):
            return False
    return len(given) == len(wanted)


def _first_delivery(stored: StoredMessage, *, consumer: str) -> Delivery:
    """A stored message handed to a handler as its first delivery: read by sequence, not
    delivered by a consumer."""
    return Delivery(
        stream=stored.stream,
        consumer=consumer,
        stream_sequence=stored.sequence,
        attempt=1,
        subject=stored.subject,
        headers=stored.headers,
        body=stored.body,
    )
