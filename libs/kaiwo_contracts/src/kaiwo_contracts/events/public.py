"""Public workload events: the small, stable family external subscribers read.

One message per transition of a workload's life (:class:`WorkloadTransition`), on
``kaiwo.public.workload.<namespace>.<kind>.<uid>`` in the stream ``KAIWO_PUBLIC``. The payload
names the workload and says where it stands; it never carries the object, its spec or any
env value, so anyone allowed to watch workloads may read it. A change that needs a new field
meaning something else is a new version (``...public.workload.v2``) on the same subjects.

Ids (``ce-id``, also ``Nats-Msg-Id``) are determined by what happened, so a producer that
derives the same transition twice (a redelivery, a restart) publishes the same id and
JetStream keeps one copy: ``<uid>:submitted`` and ``<uid>:deleted`` (once per uid), else
``<uid>:<transition>:<resourceVersion>`` (the object version that showed it).

A preemption is also told as a decision of its own, :class:`PreemptionV1` (type
``...public.preemption.v1``, on the victim's subject, right after its ``preempted``
transition): victim, beneficiary and reason as references. It is a type of its own because
``WorkloadEventV1`` is closed (no field is added to a version); subscribers skip types they
do not know, so those of v1 see no change.

:class:`WorkloadEventV2` (type ``...public.workload.v2``, decision 0055) is v1 with one more
field, ``estimate`` (the workload's place in its ClusterQueue and its estimated start, with
the 80% band and the basis), and one more transition, ``queued``: its Kueue Workload started
waiting in a ClusterQueue (first, or again after an eviction). The planner publishes
``queued`` as v2 only; the other transitions stay v1 (subscribers of v1 see no change). Id
``<uid>:queued:<resourceVersion of the Kueue Workload>``. ``queued`` after an eviction carries
Kueue's ``Evicted`` reason and message in ``reason`` and ``message`` (decision 0171); a
service's pod made to replace an evicted one, those of the service's ``Evicted`` condition
(decision 0180).
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from pydantic import AwareDatetime, Field

from kaiwo_contracts.events.envelope import EventPayload, WireModel, event_type
from kaiwo_contracts.queue_estimates.eta import Method

PUBLIC_FAMILY = "public"
MESSAGE_MAX_CHARS = 512
"""Condition messages are cut to this many characters: the payload stays small."""


class WorkloadTransition(StrEnum):
    """What happened to the workload; the order within one observation is this order."""

    SUBMITTED = "submitted"
    """First seen by the operator (created, or existing when it started without history)."""
    ADMITTED = "admitted"
    """Kueue admitted it (its ``Admitted`` condition turned True)."""
    PHASE_CHANGED = "phase-changed"
    """``status.status`` changed; ``previousPhase`` says from what."""
    UNDERUTILIZED = "underutilized"
    """Its GPUs are underused (``ResourceUnderutilization`` turned True)."""
    RECOVERED = "recovered"
    """Its GPUs are used again (``ResourceUnderutilization`` no longer True)."""
    PREEMPTED = "preempted"
    """It is being stopped to free its GPUs for others (``reason`` says why)."""
    TERMINATED = "terminated"
    """It was stopped early and its children removed (phase ``TERMINATED``)."""
    COMPLETED = "completed"
    """It finished successfully (phase ``COMPLETE``)."""
    FAILED = "failed"
    """It failed (phase ``FAILED``)."""
    DELETED = "deleted"
    """The object is gone from the API server."""


class WorkloadTransitionV2(StrEnum):
    """v2's transitions: v1's, and ``queued``."""

    SUBMITTED = "submitted"
    QUEUED = "queued"
    """Its Kueue Workload waits in a ClusterQueue (first, or again after an eviction)."""
    ADMITTED = "admitted"
    PHASE_CHANGED = "phase-changed"
    UNDERUTILIZED = "underutilized"
    RECOVERED = "recovered"
    PREEMPTED = "preempted"
    TERMINATED = "terminated"
    COMPLETED = "completed"
    FAILED = "failed"
    DELETED = "deleted"


EstimateMethod = Method
"""What an estimated start rests on (decision 0050)."""


class StartEstimate(WireModel):
    """Where a waiting workload stands in its ClusterQueue and when it should start."""

    cluster_queue: str
    resource: str = Field(description='The GPU resource it waits for ("" for none)')
    gpus: int = Field(ge=0)
    position: int = Field(ge=1, description="1 for the next to start in its GPU lane")
    start: AwareDatetime | None = Field(
        default=None, description="The median estimated start (null: no estimate)"
    )
    earliest: AwareDatetime | None = Field(default=None, description="The band's 10th percentile")
    latest: AwareDatetime | None = Field(default=None, description="The band's 90th percentile")
    method: EstimateMethod
    recorded_runs: int = Field(ge=0, description="Recorded run times the estimate drew from")
    declared: int = Field(ge=0, description="Declared durations ahead of it that counted")
    admissions_per_hour: float | None = Field(default=None, ge=0)
    capacity_gpus: int = Field(ge=0, description="The queue's nominal quota of the resource")


class WorkloadRef(WireModel):
    """Which workload: enough to find it (``kubectl get <kind> -n <namespace> <name>``)."""

    kind: str
    namespace: str
    name: str
    uid: str


class WorkloadEventV1(EventPayload):
    """One transition of one workload (KaiwoJob, KaiwoService)."""

    EVENT_TYPE: ClassVar[str] = event_type(PUBLIC_FAMILY, "workload")

    transition: WorkloadTransition
    workload: WorkloadRef
    user: str | None = Field(default=None, description="spec.user: who the workload runs for")
    queue: str | None = Field(
        default=None, description="The Kaiwo cluster queue it was submitted to (spec.clusterQueue)"
    )
    phase: str = Field(description='status.status after the transition ("" before the first)')
    previous_phase: str | None = Field(
        default=None, description="status.status before the transition (phase-changed only)"
    )
    reason: str | None = Field(
        default=None, description="The reason of the condition behind the transition"
    )
    message: str | None = Field(default=None, max_length=MESSAGE_MAX_CHARS)
    observed_at: AwareDatetime = Field(
        description="When the operator observed the object version that showed the transition"
    )
    created_at: AwareDatetime | None = Field(
        default=None, description="metadata.creationTimestamp of the workload"
    )
    resource_version: str = Field(
        min_length=1, description="metadata.resourceVersion of the version observed"
    )


class WorkloadEventV2(EventPayload):
    """One transition of one workload, with its estimated start while it waits (v1 + the
    ``estimate`` field and the ``queued`` transition)."""

    EVENT_TYPE: ClassVar[str] = event_type(PUBLIC_FAMILY, "workload", 2)

    transition: WorkloadTransitionV2
    workload: WorkloadRef
    user: str | None = Field(default=None, description="spec.user: who the workload runs for")
    queue: str | None = Field(
        default=None, description="The Kaiwo cluster queue it was submitted to (spec.clusterQueue)"
    )
    phase: str = Field(description='status.status after the transition ("" before the first)')
    previous_phase: str | None = Field(
        default=None, description="status.status before the transition (phase-changed only)"
    )
    reason: str | None = Field(
        default=None,
        description=(
            "The reason of the condition behind the transition; for queued after an "
            "eviction, Kueue's Evicted reason (Preempted, ClusterQueueStopped, ...), that of "
            "the workload's Evicted condition for a pod made to replace an evicted one, null "
            "on a first wait"
        ),
    )
    message: str | None = Field(
        default=None,
        max_length=MESSAGE_MAX_CHARS,
        description="That condition's message (for queued, Kueue's Evicted message)",
    )
    observed_at: AwareDatetime = Field(
        description="When the operator observed the object version that showed the transition"
    )
    created_at: AwareDatetime | None = Field(
        default=None, description="metadata.creationTimestamp of the workload"
    )
    resource_version: str = Field(
        min_length=1, description="metadata.resourceVersion of the version observed"
    )
    estimate: StartEstimate | None = Field(
        default=None,
        description=(
            "Its place in its ClusterQueue and estimated start, while it waits (queued); "
            "computed from what the cluster holds when the transition is observed"
        ),
    )


class PreemptionV1(EventPayload):
    """A preemption decision: which workload is stopped, for which pending one, and why."""

    EVENT_TYPE: ClassVar[str] = event_type(PUBLIC_FAMILY, "preemption")

    victim: WorkloadRef
    beneficiary: WorkloadRef | None = Field(
        default=None,
        description=(
            "The pending workload the GPUs are freed for (status.preemptedFor of the victim); "
            "null when it was preempted for nobody in particular (GPU idle policy Always)"
        ),
    )
    reason: str = Field(
        description=(
            "The victim's WorkloadTerminatedEarly (or Preempted) reason: DurationExceeded, "
            "DurationExceededWithActiveGpuDemand, GpuIdlePreemption, ..."
        )
    )
    message: str | None = Field(default=None, max_length=MESSAGE_MAX_CHARS)
    observed_at: AwareDatetime = Field(
        description="When the operator observed the victim's version that showed the decision"
    )
    resource_version: str = Field(
        min_length=1, description="metadata.resourceVersion of the victim's version observed"
    )


def public_preemption_id(*, uid: str, resource_version: str) -> str:
    """``<uid>:preemption:<resourceVersion>`` of the victim."""
    return f"{uid}:preemption:{resource_version}"


def public_queued_id(*, uid: str, kueue_resource_version: str) -> str:
    """``<uid>:queued:<resourceVersion of the Kueue Workload>``."""
    return f"{uid}:queued:{kueue_resource_version}"


def public_event_id(*, uid: str, transition: WorkloadTransition, resource_version: str) -> str:
    """``<uid>:submitted``, ``<uid>:deleted``, else ``<uid>:<transition>:<resourceVersion>``."""
    if transition in (WorkloadTransition.SUBMITTED, WorkloadTransition.DELETED):
        return f"{uid}:{transition.value}"
    return f"{uid}:{transition.value}:{resource_version}"


__all__ = [
    "MESSAGE_MAX_CHARS",
    "PUBLIC_FAMILY",
    "EstimateMethod",
    "PreemptionV1",
    "StartEstimate",
    "WorkloadEventV1",
    "WorkloadEventV2",
    "WorkloadRef",
    "WorkloadTransition",
    "WorkloadTransitionV2",
    "public_event_id",
    "public_preemption_id",
    "public_queued_id",
]
