"""The planning loop: an input in, the projection moved on, owners planned, news published.

For each observation (from whichever :class:`~kaiwo_planner.feeds.Feed` delivers it):

1. apply it to the :class:`~kaiwo_planner.domain.state.projection.Projection` (a stale or duplicate
   observation is dropped; one whose message id ``<uid>:<resourceVersion>`` names the version
   the projection holds, as each of a relist's thousands does, before its envelope is even
   decoded, decision 0054);
2. find the owners it may affect (:func:`~kaiwo_planner.domain.fanout.owners_to_replan`);
   none when only the object's resourceVersion moved (a relist after a restore: no plan can
   change), but the object itself while the status its last plan set has not come back;
3. plan each one with the pure planning function, ``now`` = the observation's envelope time,
   in a round (:class:`~kaiwo_planner.owner_round.OwnerRounds`) that also plans the owners
   their plans ask for;
4. publish a ``PlanDecidedV1`` when :func:`~kaiwo_planner.domain.publication.publication` says
   the plan is news (a new fingerprint, desired objects gone ``absent`` or ``drifted`` since
   the owner was last planned, or a status left behind on an older owner version).

A child deleted by hand causes exactly one plan that names it,
:data:`~kaiwo_planner.owner_round.CHILD_GONE_GRACE` later, so that a deleted owner, whose
children go after it, gets none; a child's deletion that leaves nothing to make again (a
pruned queue gone) is planned at once (decision 0181).

Public workload events. Before it plans, the loop derives the public events the observation
shows (what the previous version in the projection told subscribers, against the new one) and
publishes them first. They are remembered with the unfinished owners, so a redelivery after a
failed publish sends them again, under the same ids (JetStream keeps one copy).

Findings (``UtilizationV1``) and scale decisions (``ScaleDecidedV1``) are kept by the
projection, latest per workload or Model, and plan that owner again when they may change its
plan; a scale decision for a Model the projection does not hold is refused and counted.

Failures. A message that is not a valid observation raises ``PoisonMessage``. A planning
function that raises for one owner is logged and counted, and the other owners are still
planned. A publish that fails raises, so the input is delivered again; the owners not yet
published are planned again then.

Replay: every plan records ``planned_at``, ``trigger`` and the sequences of the three streams
the projection took in, which is all the pure planner needs to reproduce it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog
from kaiwo_contracts.events.autoscaling import ScaleDecidedV1
from kaiwo_contracts.events.monitor import UtilizationV1
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.plans import ObjectRef
from kaiwo_runtime.bus import Delivery, PoisonMessage
from kaiwo_runtime.logging import bound_context

from kaiwo_planner.domain.fanout import (
    all_gpu_workloads,
    all_workloads,
    configuration_objects,
    queue_config,
)
from kaiwo_planner.domain.models.replanning import all_models
from kaiwo_planner.domain.publication import Published
from kaiwo_planner.domain.queues.default_objects import default_object_plans
from kaiwo_planner.domain.queues.previous_run import timer_rechecks_gaps
from kaiwo_planner.domain.state.context_keeper import PlanningContextKeeper
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.state.projection import Projection
from kaiwo_planner.domain.state.scale_request import ScaleRequest
from kaiwo_planner.domain.state.workload_finding import WorkloadFinding
from kaiwo_planner.inputs import (
    apply_observation,
    holds_observed_version,
    is_model,
    kueue_before,
    owners_of,
    public_events,
    queued,
    told,
)
from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.owner_key import OwnerKey
from kaiwo_planner.owner_records import OwnerRecords
from kaiwo_planner.owner_round import OwnerRounds, PlanFunction, Unfinished
from kaiwo_planner.publisher import PlanPublisher, Release, Sequences, Trigger
from kaiwo_planner.snapshot_store import SNAPSHOT_FORMAT
from kaiwo_planner.snapshots import Restored, Snapshots

log = structlog.get_logger("kaiwo.planner")


class PlanningLoop:
    """Keeps the projection and the owner records; plans and publishes for each input.

    ``holds`` says whether this replica plans an owner (by uid): always, but for a
    partitioned feed. ``clock`` gives the time of timers and of the default objects' plans;
    planning otherwise only ever sees the ``now`` of its trigger.
    """

    def __init__(
        self,
        *,
        plan_fn: PlanFunction,
        publisher: PlanPublisher,
        snapshots: Snapshots,
        metrics: PlannerMetrics,
        clock: Callable[[], datetime],
        holds: Callable[[str], bool],
        tombstone_retention: int,
        default_cluster_queue: str,
    ) -> None:
        self._publisher = publisher
        self._snapshots = snapshots
        self._metrics = metrics
        self.clock = clock
        self.holds = holds
        self._default_cluster_queue = default_cluster_queue
        self._projection = Projection(tombstone_retention=tombstone_retention)
        self._contexts = PlanningContextKeeper()
        self.records = OwnerRecords(metrics)
        self._rounds = OwnerRounds(
            state=self, plan_fn=plan_fn, publisher=publisher, metrics=metrics, holds=holds
        )

    @property
    def projection(self) -> Projection:
        return self._projection

    def context(self) -> PlanningContext:
        return self._contexts.context(self._projection)

    def observations_from(self) -> int:
        """The observation to read next: an unfinished one again, or the one after what the
        projection took in."""
        unfinished = self._rounds.unfinished
        return unfinished.sequence if unfinished is not None else self._projection.last_sequence + 1

    # ------------------------------------------------------------------ inputs

    async def handle_observation(self, delivery: Delivery) -> None:
        """One observation in, zero or more plans out."""
        sequence = delivery.stream_sequence
        unfinished = self._rounds.unfinished
        resuming = unfinished is not None and unfinished.sequence == sequence
        if not resuming and sequence <= self._projection.last_sequence:
            self._metrics.observations.labels("skipped").inc()
            return
        if not resuming and holds_observed_version(self._projection, delivery):
            # A relist's copy of what the projection holds: dropped before the envelope is
            # decoded (thousands of them after a relist; apply would drop each anyway).
            self._projection.pass_over(sequence)
            self._metrics.stale_events.inc()
            self._metrics.observations.labels("stale").inc()
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
                was = told(self._projection, observed)
                waited = kueue_before(self._projection, observed)
                change = apply_observation(self._projection, observed, sequence, self._metrics)
                if change is None:
                    return
                record = self.records.get(OwnerKey.of_uid(observed.uid))
                owners = owners_of(change, observed, self._projection, record)
                announcements = public_events(was, envelope, self.context) + queued(
                    waited, envelope, self._projection, self.context
                )
            if announcements:
                self._rounds.unfinished = Unfinished(
                    sequence=sequence, owners=owners, announcements=announcements
                )
                await self._publisher.announce(announcements, cause=envelope)
            why = Trigger(
                "observation", envelope.time, envelope, child_gone=_child_gone(observed, owners)
            )
            await self.plan_round(owners, why, sequence=sequence)
            self._snapshots.note_change()

    async def handle_finding(self, delivery: Delivery) -> None:
        """A monitor finding in, the workload's plan out."""
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
            await self.plan_round(
                (ObjectRef.of(owner),), Trigger("finding", envelope.time, envelope)
            )
            self._snapshots.note_change()

    async def handle_scale_decision(self, delivery: Delivery) -> None:
        """The autoscaler's decision in, the Model's plan (with its scale) out."""
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
            if owner is None or not is_model(owner, namespace=decision.model.namespace):
                self._metrics.scale_decisions.labels("refused").inc()
                log.warning(
                    "scale decision for a Model that does not exist; refused",
                    model=decision.model.display(),
                )
                return
            if not news:
                self._metrics.scale_decisions.labels("unchanged").inc()
                return
            self._metrics.scale_decisions.labels("taken").inc()
            await self.plan_round((ObjectRef.of(owner),), Trigger("scale", envelope.time, envelope))
            self._snapshots.note_change()

    # ------------------------------------------------------------------ planning

    async def plan_round(
        self, owners: tuple[ObjectRef, ...], why: Trigger, *, sequence: int | None = None
    ) -> None:
        """Plan ``owners`` and the others their plans ask for (:class:`OwnerRounds`)."""
        await self._rounds.plan_round(owners, why, sequence=sequence)

    async def fire_due_timers(self) -> int:
        """Plan every owner whose time has come, with ``now`` = its due time."""
        fired = 0
        timers = self.records.timers
        while (found := timers.pop_due(self.clock())) is not None:
            due, uid = found
            owner = self._projection.by_uid(uid)
            if owner is None:
                continue
            with bound_context({"owner_uid": uid, "trigger": "timer"}):
                try:
                    why = Trigger("timer", due, reapply_gaps=timer_rechecks_gaps(owner))
                    await self.plan_round((ObjectRef.of(owner),), why)
                except BaseException:
                    if uid not in timers:  # try again on the next round
                        timers.arm(uid, due)
                    raise
            fired += 1
            self._snapshots.note_change()
        self._metrics.timers_pending.set(len(timers))
        return fired

    async def resync(self, *, reapply_gaps: bool = True) -> int:
        """Plan every owner now (the queue config, every workload, Model and GpuWorkload, and
        the configuration objects, whose plans say only when they are invalid); returns how
        many.

        ``reapply_gaps``: publish again for owners whose desired objects are still absent or
        drifted, though nothing changed since the last plan.
        """
        owners = (
            *queue_config(self._projection),
            *all_workloads(self._projection),
            *all_models(self._projection),
            *all_gpu_workloads(self._projection),
            *configuration_objects(self._projection),
        )
        why = Trigger("resync", self.clock(), reapply_gaps=reapply_gaps)
        with bound_context({"trigger": "resync"}):
            await self.plan_round(owners, why)
        if owners:
            self._snapshots.note_change()
        return len(owners)

    async def create_missing_defaults(self) -> int:
        """Publish the create-only plans of the singletons the cluster lacks (the KaiwoConfig
        and KaiwoQueueConfig ``kaiwo``), each once while it stays missing; returns how many
        were published."""
        plans = default_object_plans(
            self._projection.cluster_state(),
            default_cluster_queue=self._default_cluster_queue,
        )
        missing = {OwnerKey.default(plan.owner.kind) for plan in plans}
        for key in [k for k in self.records.defaults() if k not in missing]:
            self.records.drop(key)  # it exists now: should it go, it is created again
        published = 0
        for plan in plans:
            key = OwnerKey.default(plan.owner.kind)
            if not self.holds(key.subject_uid):
                continue
            fingerprint = plan.fingerprint()
            known = self.records.get(key)
            if known is not None and known.fingerprint == fingerprint:
                continue
            release = Release(
                ref=plan.owner,
                plan=plan,
                absent=self._projection.missing(plan.desired),
                drifted=(),
                assumed=None,
                fingerprint=fingerprint,
                subject_uid=key.subject_uid,
            )
            why = Trigger("resync", self.clock())
            await self._publisher.publish_plan(release, why, Sequences.of(self._projection))
            self.records.put(key, Published(fingerprint=fingerprint))
            published += 1
        return published

    # ------------------------------------------------------------------ snapshots

    def snapshot_document(self, cluster: str | None) -> dict[str, Any]:
        """Projection, owner records and timers as JSON-ready data."""
        return {
            "format": SNAPSHOT_FORMAT,
            "cluster": cluster,
            "projection": self._projection.to_document(),
            "owners": self.records.to_document(),
            "timers": self.records.timers.to_document(),
        }

    def adopt(self, restored: Restored, *, with_records: bool) -> None:
        """Continue from a snapshot; its owner records and timers only ``with_records``."""
        self._projection = restored.projection
        self.records = (
            OwnerRecords(self._metrics, restored.owners, restored.timers)
            if with_records
            else OwnerRecords(self._metrics)
        )
        self._metrics.projection_objects.set(len(restored.projection))


def _child_gone(observed: ObservedObjectV1, owners: tuple[ObjectRef, ...]) -> bool:
    """``observed`` is the deletion of a child of the owners to plan (not of one of them)."""
    return observed.event_type == "DELETED" and all(o.uid != observed.uid for o in owners)
