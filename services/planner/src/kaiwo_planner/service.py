"""The planner service: observations in, plans out.

For each observation on the durable consumer ``planner-obs`` (stream ``KAIWO_OBS``):

1. apply it to the :class:`~kaiwo_planner.domain.state.projection.Projection` (a stale or duplicate
   observation is acknowledged and dropped);
2. find the owners it may affect (:func:`~kaiwo_planner.domain.state.fanout.owners_to_replan`);
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
   plan that names it.

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

Replay: every plan records ``planned_at``, ``trigger``, ``obs_sequence`` (the projection's
last applied stream sequence) and ``mon_sequence`` (the last finding's), which is all the
pure planner needs to reproduce it.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import json
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Protocol, cast

import structlog
from kaiwo_contracts.events.envelope import (
    Envelope,
    object_subject,
    plan_event_id,
    service_source,
)
from kaiwo_contracts.events.monitor import UtilizationV1
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.plans import PlanDecidedV1, PlanTrigger
from kaiwo_contracts.events.streams import PLANNER_FINDINGS_CONSUMER, ConsumerSpec
from kaiwo_contracts.events.subjects import ANY_TAIL, ANY_TOKEN, plan_subject
from kaiwo_contracts.plans import ObjectRef, Plan, created_suspended, without_admission_gate
from kaiwo_runtime.bus import NON_RETRYABLE, Bus, BusError, Delivery, PoisonMessage
from kaiwo_runtime.kv import KeyValue
from kaiwo_runtime.logging import bound_context

from kaiwo_planner.domain.models.replanning import all_models
from kaiwo_planner.domain.planning import plan_object_with_timer
from kaiwo_planner.domain.queues.default_objects import default_object_plans
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.cluster_settings import kaiwo_config
from kaiwo_planner.domain.state.fanout import all_workloads, owners_to_replan, queue_config
from kaiwo_planner.domain.state.projection import (
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
from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.settings import PlannerSettings

log = structlog.get_logger("kaiwo.planner")

SOURCE: Final = service_source("planner")
OBSERVATION_CONSUMER: Final = "planner-obs"
SNAPSHOT_KEY: Final = "snapshot"
SNAPSHOT_FORMAT: Final = 1
FINDINGS_WAIT_SECONDS: Final = 0.01
"""Findings are fetched after observations; waiting for them would delay observations."""
CHUNK_BYTES: Final = 512 * 1024
"""Chunk size of the snapshot in the bucket; NATS refuses messages over 1 MiB by default."""


class PlanFunction(Protocol):
    """The pure planner: a :class:`Plan`, None, or a result with ``.plan`` and ``.replan_at``."""

    def __call__(
        self, *, owner: Mapping[str, Any], cluster: ClusterState, now: datetime
    ) -> object: ...


@dataclass(frozen=True, slots=True)
class PlanningOutcome:
    plan: Plan | None
    replan_at: datetime | None = None
    also_replan: tuple[ObjectRef, ...] = ()


def planning_outcome(result: object) -> PlanningOutcome:
    """Read what a :class:`PlanFunction` returned."""
    if result is None:
        return PlanningOutcome(plan=None)
    if isinstance(result, Plan):
        return PlanningOutcome(plan=result)
    plan = getattr(result, "plan", None)
    replan_at = getattr(result, "replan_at", None)
    also_replan = tuple(getattr(result, "also_replan", ()))
    if (
        (plan is not None and not isinstance(plan, Plan))
        or (replan_at is not None and not isinstance(replan_at, datetime))
        or not all(isinstance(ref, ObjectRef) for ref in also_replan)
    ):
        raise TypeError(f"a planning function returned {type(result).__name__}, not a plan")
    return PlanningOutcome(plan=plan, replan_at=replan_at, also_replan=also_replan)


def default_plan_function() -> PlanFunction:
    """The real planner: :func:`kaiwo_planner.domain.planning.plan_object_with_timer`."""
    return plan_object_with_timer


@dataclass(slots=True)
class _OwnerRecord:
    """What was last published for an owner, and what was last found absent."""

    fingerprint: str | None
    absent: tuple[ObjectRef, ...] = ()
    drifted: tuple[ObjectRef, ...] = ()
    resource_version: str | None = None
    """The owner's resourceVersion the last published plan was made from."""
    status: dict[str, Any] | None = None
    """The status of the last published plan: what the next plan starts from (see
    :mod:`kaiwo_planner.domain.status.planned_status`)."""


@dataclass(frozen=True, slots=True)
class _Unfinished:
    """An observation applied whose owners were not all published (a publish failed)."""

    sequence: int
    owners: tuple[ObjectRef, ...]
    announcements: tuple[PublicEvent, ...] = ()
    """Public events of the observation not yet published."""


# --------------------------------------------------------------------------- snapshots


class SnapshotStore:
    """The service's state in a key-value bucket: chunks, then a manifest naming them.

    The manifest is written last, so a crash while writing leaves the previous snapshot in
    force; chunks of the previous generation are deleted afterwards.
    """

    def __init__(self, kv: KeyValue, *, chunk_bytes: int = CHUNK_BYTES) -> None:
        self._kv = kv
        self._chunk_bytes = chunk_bytes
        self._manifest: dict[str, Any] | None = None

    async def load(self) -> dict[str, Any] | None:
        """The stored document, or None when there is none or it cannot be read (logged)."""
        raw = await self._kv.get(SNAPSHOT_KEY)
        if raw is None:
            return None
        try:
            manifest = json.loads(raw)
            generation, chunks = int(manifest["generation"]), int(manifest["chunks"])
            parts = [await self._kv.get(_chunk_key(generation, i)) for i in range(chunks)]
            if any(part is None for part in parts):
                raise SnapshotFormatError("a chunk of the snapshot is missing")
            compressed = b"".join(cast("list[bytes]", parts))
            if hashlib.sha256(compressed).hexdigest() != manifest["sha256"]:
                raise SnapshotFormatError("the snapshot's checksum does not match")
            document = await asyncio.to_thread(_decode, compressed)
        except (ValueError, KeyError, TypeError, zlib.error) as error:
            log.warning("snapshot unreadable; starting without it", error=str(error))
            return None
        self._manifest = manifest
        return document

    async def save(self, document: Mapping[str, Any]) -> int:
        """Write ``document``; returns the compressed size."""
        compressed = await asyncio.to_thread(_encode, document)
        previous = self._manifest or await self._stored_manifest()
        generation = int(previous["generation"]) + 1 if previous else 1
        chunks = [
            compressed[start : start + self._chunk_bytes]
            for start in range(0, len(compressed), self._chunk_bytes)
        ] or [b""]
        for index, chunk in enumerate(chunks):
            await self._kv.put(_chunk_key(generation, index), chunk)
        manifest = {
            "format": SNAPSHOT_FORMAT,
            "generation": generation,
            "chunks": len(chunks),
            "sha256": hashlib.sha256(compressed).hexdigest(),
            "bytes": len(compressed),
        }
        await self._kv.put(SNAPSHOT_KEY, json.dumps(manifest).encode())
        self._manifest = manifest
        if previous:
            for index in range(int(previous["chunks"])):
                await self._kv.delete(_chunk_key(int(previous["generation"]), index))
        return len(compressed)

    async def _stored_manifest(self) -> dict[str, Any] | None:
        raw = await self._kv.get(SNAPSHOT_KEY)
        if raw is None:
            return None
        try:
            manifest = json.loads(raw)
            int(manifest["generation"]), int(manifest["chunks"])
        except (ValueError, KeyError, TypeError):
            return None
        return cast("dict[str, Any]", manifest)


def _chunk_key(generation: int, index: int) -> str:
    return f"{SNAPSHOT_KEY}.{generation}.{index}"


def _encode(document: Mapping[str, Any]) -> bytes:
    return zlib.compress(json.dumps(document, separators=(",", ":")).encode(), 6)


def _decode(compressed: bytes) -> dict[str, Any]:
    document = json.loads(zlib.decompress(compressed))
    if not isinstance(document, dict) or document.get("format") != SNAPSHOT_FORMAT:
        raise SnapshotFormatError(f"not a planner snapshot of format {SNAPSHOT_FORMAT}")
    return document


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
    ) -> None:
        self._bus = bus
        self._clock = clock
        self._plan_fn = plan_fn or default_plan_function()
        self._settings = settings or PlannerSettings()
        self.metrics = metrics or PlannerMetrics()
        self._consumer = consumer or bus.topology.consumer(OBSERVATION_CONSUMER)
        self._findings_consumer = next(
            (c for c in bus.topology.consumers if c.durable_name == PLANNER_FINDINGS_CONSUMER),
            None,
        )
        self._store = SnapshotStore(kv)
        self._projection = Projection(tombstone_retention=self._settings.tombstone_retention)
        self._owners: dict[str, _OwnerRecord] = {}
        self._timers: dict[str, datetime] = {}
        self._timer_heap: list[tuple[datetime, str]] = []
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
    def next_timer(self) -> datetime | None:
        self._drop_cancelled_timers()
        return self._timer_heap[0][0] if self._timer_heap else None

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
                await self.save_snapshot()
            except Exception as error:  # shutting down: say so, the next start catches up
                log.warning("final snapshot failed", error=str(error))

    async def step(self, *, wait_seconds: float | None = None) -> int:
        """One round: pull observations (waiting at most until the next timer), fire due
        timers, resync and snapshot when due. Returns the number of observations handled."""
        wait = self._seconds_to_wait() if wait_seconds is None else wait_seconds
        handled = await self._bus.process(
            self._consumer, self.handle, max_messages=64, wait_seconds=wait
        )
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
        await self.create_missing_defaults()
        await self.fire_due_timers()
        now = self._clock()
        if self._next_resync_at is not None and now >= self._next_resync_at:
            await self.resync()
            self._schedule_resync(now)
        if self._snapshot_due(now):
            await self.save_snapshot()
        return handled

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
                found = self._apply(observed, sequence)
                if found is None:
                    return
                owners = found
                announcements = self._public_events(told, envelope)
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

    def _apply(self, observed: ObservedObjectV1, sequence: int) -> tuple[ObjectRef, ...] | None:
        try:
            change = self._projection.apply(observed, sequence=sequence)
        except (TypeError, ValueError, KeyError, AttributeError) as error:
            self.metrics.observations.labels("rejected").inc()
            raise PoisonMessage(f"cannot take in the observed object: {error!r}") from error
        self.metrics.projection_objects.set(len(self._projection))
        if change is None:
            self.metrics.stale_events.inc()
            self.metrics.observations.labels("stale").inc()
            log.debug("stale or duplicate observation dropped")
            return None
        self.metrics.observations.labels("applied").inc()
        return owners_to_replan(change, self._projection)

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
        config = kaiwo_config(self._projection.cluster_state())
        return derive_public_events(
            told,
            envelope.data,
            observed_at=envelope.time,
            default_queue=config.spec.default_cluster_queue_name,
        )

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
        sequence = self._projection.last_sequence + 1
        handled = 0
        while (stored := await self._bus.read_stored(self._consumer.stream, sequence)) is not None:
            if any(_subject_matches(f, stored.subject) for f in self._consumer.filter_subjects):
                delivery = Delivery(
                    stream=stored.stream,
                    consumer=self._consumer.durable_name,
                    stream_sequence=stored.sequence,
                    attempt=1,
                    subject=stored.subject,
                    headers=stored.headers,
                    body=stored.body,
                )
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
        plans = default_object_plans(self._projection.cluster_state())
        missing = {f"default/{plan.owner.kind}" for plan in plans}
        for key in [k for k in self._owners if k.startswith("default/") and k not in missing]:
            del self._owners[key]  # it exists now: should it go, it is created again
        published = 0
        for plan in plans:
            key = f"default/{plan.owner.kind}"
            fingerprint = plan.fingerprint()
            record = self._owners.get(key)
            if record is not None and record.fingerprint == fingerprint:
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
                subject_uid=key.replace("/", "-").lower(),
            )
            self._owners[key] = _OwnerRecord(fingerprint=fingerprint)
            published += 1
        return published

    # ------------------------------------------------------------------ timers and resync

    async def fire_due_timers(self) -> int:
        """Plan every owner whose time has come, with ``now`` = its due time."""
        fired = 0
        while True:
            self._drop_cancelled_timers()
            if not self._timer_heap or self._timer_heap[0][0] > self._clock():
                break
            due, uid = heapq.heappop(self._timer_heap)
            del self._timers[uid]
            owner = self._projection.by_uid(uid)
            if owner is None:
                continue
            ref = object_ref(owner)
            with bound_context({"owner_uid": uid, "trigger": "timer"}):
                try:
                    await self._plan_round((ref,), now=due, trigger="timer", cause=None)
                except BaseException:
                    if uid not in self._timers:  # try again on the next round
                        self._arm(uid, due)
                    raise
            fired += 1
            self._changes_since_snapshot += 1
        self.metrics.timers_pending.set(len(self._timers))
        return fired

    async def resync(self, *, reapply_gaps: bool = True) -> int:
        """Plan every owner now (the queue config, every workload and Model); returns how many.

        ``reapply_gaps``: publish again for owners whose desired objects are still absent or
        drifted, though nothing changed since the last plan.
        """
        now = self._clock()
        owners = (
            *queue_config(self._projection),
            *all_workloads(self._projection),
            *all_models(self._projection),
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
            self._timers.pop(uid, None)
            return
        self._arm(uid, replan_at)

    def _arm(self, uid: str, due: datetime) -> None:
        if self._timers.get(uid) == due:
            return
        self._timers[uid] = due
        heapq.heappush(self._timer_heap, (due, uid))
        self.metrics.timers_pending.set(len(self._timers))

    def _drop_cancelled_timers(self) -> None:
        heap = self._timer_heap
        while heap and self._timers.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)

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
        owner = self._projection.by_uid(uid) if uid else None
        if owner is None:  # deleted, or never seen: its children go with it (owner refs)
            self._owners.pop(uid, None)
            self._timers.pop(uid, None)
            return ()
        record = self._owners.get(uid)
        assumed = status_to_assume(owner, record.status if record is not None else None)
        if assumed is None and record is not None and record.status is not None:
            # The write came back: hold the projection's equal copy, not a second one.
            record.status = owner.get("status")
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
        absent = self._projection.missing((*plan.desired, *plan.shared))
        drifted = self._projection.drifted(plan.desired, ours_too=reapply_gaps)
        fingerprint, own = _decision_fingerprint(plan)
        if (
            record is not None
            and not _is_news(
                record,
                fingerprint=fingerprint,
                absent=absent,
                drifted=drifted,
                reapply_gaps=reapply_gaps,
            )
            and not _status_left_behind(plan, owner, record)
        ):
            # Nothing new to apply; remember what is missing so a later change shows up.
            record.absent, record.drifted = absent, drifted
            self.metrics.plans.labels(ref.kind, "unchanged").inc()
            return also
        # A resync names every gap again; otherwise only what is new since the last planning.
        before = record if record is not None and not reapply_gaps else _OwnerRecord(None)
        await self._publish(
            ref,
            plan,
            now=now,
            trigger=trigger,
            cause=cause,
            gaps=(_newly(absent, before.absent), _newly(drifted, before.drifted)),
            assumed=assumed,
            # Often the decision's fingerprint is the plan's own: then hash it once.
            plan_fingerprint=fingerprint if own else None,
        )
        self._owners[uid] = _OwnerRecord(
            fingerprint=fingerprint,
            absent=absent,
            drifted=drifted,
            resource_version=plan.observed_resource_version,
            status=plan.status if plan.status is not None else (record.status if record else None),
        )
        self.metrics.plans.labels(ref.kind, "published").inc()
        return also

    def _plan(
        self, ref: ObjectRef, owner: Mapping[str, Any], *, now: datetime
    ) -> PlanningOutcome | None:
        started = time.perf_counter()
        try:
            result = self._plan_fn(owner=owner, cluster=self._projection.cluster_state(), now=now)
            return planning_outcome(result)
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
            absent=absent,
            drifted=drifted,
            assumed_status=assumed,
            fingerprint=plan_fingerprint,
        )
        envelope = Envelope.new(
            data=payload,
            source=SOURCE,
            time=self._clock(),
            subject=object_subject(namespace=ref.namespace, name=ref.name),
            correlationid=uid,
            causationid=cause.id if cause is not None else None,
            traceparent=cause.traceparent if cause is not None else None,
            id=plan_event_id(plan=plan, causation_id=cause_id, fingerprint=payload.fingerprint),
        )
        ack = await self._bus.publish(
            envelope, plan_subject(kind=ref.kind, namespace=ref.namespace, uid=uid)
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
            "projection": self._projection.to_document(),
            "owners": {
                uid: {
                    "fingerprint": record.fingerprint,
                    "absent": [ref.model_dump(mode="json") for ref in record.absent],
                    "drifted": [ref.model_dump(mode="json") for ref in record.drifted],
                    "resourceVersion": record.resource_version,
                    "status": record.status,
                }
                for uid, record in sorted(self._owners.items())
            },
            "timers": {uid: due.isoformat() for uid, due in sorted(self._timers.items())},
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
        try:
            projection = Projection.from_document(
                document["projection"], tombstone_retention=self._settings.tombstone_retention
            )
            owners = {
                str(uid): _OwnerRecord(
                    fingerprint=record["fingerprint"],
                    absent=tuple(ObjectRef.model_validate(r) for r in record["absent"]),
                    drifted=tuple(ObjectRef.model_validate(r) for r in record.get("drifted") or ()),
                    resource_version=record.get("resourceVersion"),
                    status=record.get("status"),
                )
                for uid, record in document["owners"].items()
            }
            timers = {
                str(uid): datetime.fromisoformat(due) for uid, due in document["timers"].items()
            }
        except (SnapshotFormatError, KeyError, TypeError, ValueError) as error:
            log.warning("snapshot unreadable; starting without it", error=str(error))
            return False
        self._projection = projection
        self._owners = owners
        self._timers = timers
        self._timer_heap = [(due, uid) for uid, due in timers.items()]
        heapq.heapify(self._timer_heap)
        self.metrics.projection_objects.set(len(projection))
        self.metrics.timers_pending.set(len(timers))
        return True


def _decision_fingerprint(plan: Plan) -> tuple[str, bool]:
    """What makes a plan news: everything but its Events, and but the admission gate of its
    children. Events announce a transition, and a transition always changes the status too;
    a plan that differs from the last one only by not repeating its Events asks the executor
    for nothing. Nor does one that no longer sends a child's ``spec.suspend`` because the
    child exists now (``kaiwo_contracts.plans.without_admission_gate``).

    Returns the fingerprint and whether it is the plan's own."""
    gated = any(created_suspended(manifest) for manifest in plan.desired)
    if not plan.events and not gated:
        return plan.fingerprint(), True
    update: dict[str, Any] = {"events": ()}
    if gated:
        update["desired"] = tuple(without_admission_gate(m) for m in plan.desired)
    return plan.model_copy(update=update).fingerprint(), False


def _newly(found: tuple[ObjectRef, ...], before: tuple[ObjectRef, ...]) -> tuple[ObjectRef, ...]:
    """The refs of ``found`` not among ``before``."""
    if not before:
        return found
    known = set(before)
    return tuple(ref for ref in found if ref not in known)


def _is_news(
    record: _OwnerRecord,
    *,
    fingerprint: str,
    absent: tuple[ObjectRef, ...],
    drifted: tuple[ObjectRef, ...],
    reapply_gaps: bool,
) -> bool:
    """Whether a plan asks the executor for something the last published one did not.

    An absent or drifted object is news when it was not so last time. One still being created
    or updated stays in the set until its observation comes back, and must not cause a plan
    per observation meanwhile; nor does the set shrinking as the executor's writes come back
    one by one (a plan per returning object would send every write again, n² in all). With
    ``reapply_gaps`` (a periodic resync) a plan is news while anything is absent or drifted,
    so what a failed or missed apply left behind is corrected once per resync.
    """
    if record.fingerprint != fingerprint:
        return True
    if reapply_gaps and (absent or drifted):
        return True
    return not set(absent) <= set(record.absent) or not set(drifted) <= set(record.drifted)


def _status_left_behind(plan: Plan, owner: Mapping[str, Any], record: _OwnerRecord) -> bool:
    """The owner changed since the last plan was made and does not show the planned status:
    that plan's status write was (or will be) refused as stale, so publish it again."""
    return (
        plan.status is not None
        and plan.observed_resource_version != record.resource_version
        and owner.get("status") != plan.status
    )


def _subject_matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: ``*`` is one token, ``>`` one or more trailing tokens."""
    wanted, given = pattern.split("."), subject.split(".")
    for index, token in enumerate(wanted):
        if token == ANY_TAIL:
            return len(given) > index
        if index >= len(given) or token not in (ANY_TOKEN, given[index]):
            return False
    return len(given) == len(wanted)
