"""What the planning loop does with an input before it plans: take it into the projection,
find the owners it affects, the public events it shows."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.plans import ObjectRef
from kaiwo_runtime.bus import Delivery, PoisonMessage

from kaiwo_planner.domain.fanout import owners_to_replan
from kaiwo_planner.domain.publication import Published
from kaiwo_planner.domain.settings.cluster_settings import kaiwo_config
from kaiwo_planner.domain.state.index_entry import KAIWO_GROUP, KUEUE_GROUP, api_group_of
from kaiwo_planner.domain.state.observed_objects import Change
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.state.projection import Projection
from kaiwo_planner.domain.status.planned_status import status_to_assume
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

MODEL_GROUP: Final = "kubeai.org"


def holds_observed_version(projection: Projection, delivery: Delivery) -> bool:
    """The delivery's message id is ``<uid>:<resourceVersion>`` (:func:`~kaiwo_contracts.
    events.envelope.observed_event_id`, the identity JetStream deduplicates observations
    by) of a version the projection holds. A reobserved observation has another id
    (``reobserved:…``) and is always taken in."""
    uid, colon, version = (delivery.message_id or "").partition(":")
    return bool(colon) and projection.objects.holds_version(uid, version)


def is_model(owner: Mapping[str, Any], *, namespace: str | None) -> bool:
    """``owner`` is a KubeAI Model in ``namespace`` (what a scale decision must name)."""
    metadata = owner.get("metadata") or {}
    return (
        api_group_of(str(owner.get("apiVersion", ""))) == MODEL_GROUP
        and owner.get("kind") == "Model"
        and metadata.get("namespace") == namespace
    )


def resolve(projection: Projection, ref: ObjectRef) -> ObjectRef | None:
    """``ref`` with its uid, when the projection holds the object it names."""
    if ref.uid:
        found = projection.by_uid(ref.uid)
    else:
        found = projection.find(
            group=api_group_of(ref.api_version),
            kind=ref.kind,
            name=ref.name,
            namespace=ref.namespace,
        )
    return ObjectRef.of(found) if found is not None else None


def told(projection: Projection, observed: ObservedObjectV1) -> PublicState | None:
    """What subscribers were told of the observed workload (None: never seen)."""
    if not is_public_workload(observed.object):
        return None
    previous = projection.by_uid(observed.uid)
    return public_state(previous) if previous is not None else None


def public_events(
    was: PublicState | None,
    envelope: Envelope[ObservedObjectV1],
    context: Callable[[], PlanningContext],
) -> tuple[PublicEvent, ...]:
    """The public events the observation shows, against what subscribers were told."""
    if not is_public_workload(envelope.data.object):
        return ()
    config = kaiwo_config(context())
    return derive_public_events(
        was,
        envelope.data,
        observed_at=envelope.time,
        default_queue=config.spec.default_cluster_queue_name,
    )


def kueue_before(projection: Projection, observed: ObservedObjectV1) -> Mapping[str, Any] | None:
    """The previous version of an observed Kueue Workload (None: first seen, or another
    kind)."""
    if not is_kueue_workload(observed):
        return None
    return projection.by_uid(observed.uid)


def queued(
    previous: Mapping[str, Any] | None,
    envelope: Envelope[ObservedObjectV1],
    projection: Projection,
    context: Callable[[], PlanningContext],
) -> tuple[PublicEvent, ...]:
    """``queued`` with the estimated start, when a Kueue Workload started waiting."""
    observed = envelope.data
    if not is_kueue_workload(observed):
        return ()

    def named(namespace: str, name: str) -> Mapping[str, Any] | None:
        for kind in ("KaiwoJob", "KaiwoService"):
            found = projection.find(group=KAIWO_GROUP, kind=kind, name=name, namespace=namespace)
            if found is not None:
                return found
        return None

    workload = owning_workload(observed.object, projection.by_uid, named)
    if workload is None:
        return ()

    def listed(group: str, kind: str) -> tuple[Mapping[str, Any], ...]:
        return projection.objects_of_kind(group=group, kind=kind)

    config = kaiwo_config(context())
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


def apply_observation(
    projection: Projection, observed: ObservedObjectV1, sequence: int, metrics: PlannerMetrics
) -> Change | None:
    """Take ``observed`` into the projection; None when it is stale. One that cannot be taken
    in raises ``PoisonMessage``."""
    try:
        change = projection.apply(observed, sequence=sequence)
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        metrics.observations.labels("rejected").inc()
        raise PoisonMessage(f"cannot take in the observed object: {error!r}") from error
    metrics.projection_objects.set(len(projection))
    if change is None:
        metrics.stale_events.inc()
        metrics.observations.labels("stale").inc()
        return None
    metrics.observations.labels("applied").inc()
    return change


def owners_of(
    change: Change, observed: ObservedObjectV1, projection: Projection, record: Published | None
) -> tuple[ObjectRef, ...]:
    """The owners to plan for ``change`` (``record``: the last publication for the observed
    object). When only the object's resourceVersion moved, no plan can change (plans leave
    versions out of their fingerprints), so none but the object itself, and that only while
    the status its last plan set has not come back: the write was made onto the old version
    and must be made again."""
    if change.content_changed or observed.reobserved:
        return owners_to_replan(change, projection)
    if record is not None and status_to_assume(change.object, record.status) is not None:
        return (change.ref,)
    return ()
