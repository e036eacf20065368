"""Publishing what the planning loop decided: plans and public workload events."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import structlog
from kaiwo_contracts.events.envelope import (
    Envelope,
    object_subject,
    plan_event_id,
    service_source,
)
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.plans import PlanDecidedV1, PlanTrigger
from kaiwo_contracts.events.subjects import plan_subject
from kaiwo_contracts.plans import ObjectRef, Plan
from kaiwo_runtime.bus import Bus

from kaiwo_planner.domain.state.projection import Projection
from kaiwo_planner.domain.status.public_events import PublicEvent
from kaiwo_planner.metrics import PlannerMetrics

log = structlog.get_logger("kaiwo.planner")

SOURCE: Final = service_source("planner")


@dataclass(frozen=True, slots=True)
class Trigger:
    """Why a round of planning runs: what triggered it, its ``now``, the message that caused
    it (None: a timer, a resync), and whether plans go out again for owners whose desired
    objects are still absent or drifted though nothing changed (the periodic resync)."""

    kind: PlanTrigger
    now: datetime
    cause: Envelope[Any] | None = None
    reapply_gaps: bool = False
    child_gone: bool = False
    """A child's deletion (not an owner's own) caused the round: a plan that would make
    something missing waits (:data:`~kaiwo_planner.owner_round.CHILD_GONE_GRACE`)."""


@dataclass(frozen=True, slots=True)
class Sequences:
    """The last stream sequences the projection took in: all replay needs besides the plan."""

    observations: int
    findings: int
    scale_decisions: int

    @classmethod
    def of(cls, projection: Projection) -> Sequences:
        return cls(
            projection.last_sequence,
            projection.findings.last_sequence,
            projection.scale_requests.last_sequence,
        )


@dataclass(frozen=True, slots=True)
class Release:
    """A plan to publish, with its absent and drifted desired objects and the status it
    assumes. ``subject_uid`` stands for the owner's uid when it has none yet."""

    ref: ObjectRef
    plan: Plan
    absent: tuple[ObjectRef, ...]
    drifted: tuple[ObjectRef, ...]
    assumed: dict[str, Any] | None
    fingerprint: str | None
    """The plan's own fingerprint when known (it is then not hashed again)."""
    subject_uid: str | None = None
    preempting: frozenset[str] = frozenset()
    """Owners whose preemption for idleness was published and not observed yet."""


class PlanPublisher:
    """Publishes plans on ``kaiwo.plan.…`` and public events on ``kaiwo.public.workload.…``.
    A failure raises: the bus delivers the input again."""

    def __init__(self, bus: Bus, *, clock: Callable[[], datetime], metrics: PlannerMetrics) -> None:
        self._bus = bus
        self._clock = clock
        self._metrics = metrics

    async def publish_plan(self, release: Release, why: Trigger, sequences: Sequences) -> None:
        plan, cause, now = release.plan, why.cause, why.now
        uid = release.ref.uid or release.subject_uid or ""
        if cause is not None:
            cause_id = cause.id
        elif why.kind == "timer":
            cause_id = f"timer:{uid}:{now.isoformat()}"
        else:
            cause_id = f"{why.kind}:{sequences.observations}:{now.isoformat()}"
        payload = PlanDecidedV1.of(
            plan,
            planned_at=now,
            trigger=why.kind,
            obs_sequence=sequences.observations,
            mon_sequence=sequences.findings,
            scale_sequence=sequences.scale_decisions,
            absent=release.absent,
            drifted=release.drifted,
            assumed_status=release.assumed,
            preempting=release.preempting,
            fingerprint=release.fingerprint,
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
            owner=release.ref.display(),
            owner_uid=uid,
            trigger=why.kind,
            plan_id=envelope.id,
            fingerprint=payload.fingerprint[:12],
            absent=len(release.absent),
            drifted=len(release.drifted),
            duplicate=ack.duplicate,
        )

    async def announce(
        self, events: tuple[PublicEvent, ...], *, cause: Envelope[ObservedObjectV1]
    ) -> None:
        """Publish public workload events in order."""
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
            if not ack.duplicate:  # a repeat JetStream already had is no new event
                self._metrics.public_events.labels(event.label).inc()
            log.info(
                "public event published",
                owner_uid=workload.uid,
                transition=event.label,
                event_id=event.id,
                duplicate=ack.duplicate,
            )
