"""The ``queued`` public event (:class:`~kaiwo_contracts.events.public.WorkloadEventV2`):
a workload's Kueue Workload started waiting in a ClusterQueue, with its place and estimated
start (decision 0055). Pure.

:func:`derive_queued_event` takes the previous version of a Kueue Workload (None: first seen),
its new observation, the workload that owns it and what the estimate reads (the ClusterQueues,
LocalQueues, Kueue Workloads and workloads the planner holds). It tells ``queued`` when the
Kueue Workload is waiting (not admitted, not finished) and was not before (first seen, or
evicted after an admission), once per Kueue Workload version. The planner has no event
store: the recorded run times are those of the finished Kueue Workloads the cluster still
holds (:func:`~kaiwo_contracts.queue_estimates.kueue.history_in_cluster`). Waiting again after
an eviction, it carries Kueue's ``Evicted`` reason and message (decision 0171), or, when its
own Workload does not say (a service's pod made to replace an evicted one), the reason of the
workload's ``Evicted`` condition while it waits (decision 0180).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.public import (
    MESSAGE_MAX_CHARS,
    StartEstimate,
    WorkloadEventV2,
    WorkloadRef,
    WorkloadTransitionV2,
    public_queued_id,
)
from kaiwo_contracts.events.subjects import public_workload_subject
from kaiwo_contracts.queue_estimates.kueue import (
    Placed,
    cluster_estimates,
    cluster_queue_of,
    declared_durations,
    is_admitted,
    is_finished,
)

from kaiwo_planner.domain.children.labels import LABEL_RUN_ID
from kaiwo_planner.domain.status.kueue_admission import eviction_told
from kaiwo_planner.domain.status.public_events import (
    PublicEvent,
    aware_timestamp,
    is_public_workload,
    optional_text,
)

KUEUE_GROUP: Final = "kueue.x-k8s.io"

Obj = Mapping[str, Any]
Lookup = Callable[[str], Obj | None]
"""An object the planner holds, by uid."""
Named = Callable[[str, str], Obj | None]
"""A KaiwoJob or KaiwoService the planner holds, by namespace and name."""


@dataclass(frozen=True, slots=True)
class QueueObjects:
    """What the estimate reads, as the planner holds it."""

    cluster_queues: Sequence[Obj]
    local_queues: Sequence[Obj]
    kueue_workloads: Sequence[Obj]
    workloads: Sequence[Obj]


def is_kueue_workload(observed: ObservedObjectV1) -> bool:
    api_version = str(observed.object.get("apiVersion") or "")
    return api_version.split("/", maxsplit=1)[0] == KUEUE_GROUP and observed.kind == "Workload"


def is_waiting(kueue_workload: Obj) -> bool:
    return not is_admitted(kueue_workload) and not is_finished(kueue_workload)


def owning_workload(kueue_workload: Obj, lookup: Lookup, named: Named | None = None) -> Obj | None:
    """The KaiwoJob or KaiwoService behind a Kueue Workload: its owner, or its owner's owner
    (a Kueue Workload is owned by the Job or Deployment the planner made for the workload),
    or the workload its owner's ``kaiwo.silogen.ai/run-id`` label names (a pod Kueue admits
    on its own, as a serving Deployment's),
    or the object its ``kueue.x-k8s.io/job-uid`` label names; when the planner has not seen
    that Job yet (each kind is watched on its own, so the Workload may come first), the
    workload of the Job's name in its namespace (the planner names the Job after it)."""
    metadata = kueue_workload.get("metadata") or {}
    uids = [str(r.get("uid")) for r in metadata.get("ownerReferences") or () if r.get("uid")]
    label = (metadata.get("labels") or {}).get("kueue.x-k8s.io/job-uid")
    if label:
        uids.append(str(label))
    for uid in uids:
        owner = lookup(uid)
        if owner is None:
            continue
        if is_public_workload(owner):
            return owner
        owner_metadata = owner.get("metadata") or {}
        above_uids = [str(r.get("uid") or "") for r in owner_metadata.get("ownerReferences") or ()]
        # A serving Deployment's pod is admitted on its own (decision 0168): its Workload is
        # owned by the pod, whose controller is a ReplicaSet the planner does not hold; the
        # pod carries its workload's uid as the run-id label Kaiwo puts on every pod template.
        run_id = (owner_metadata.get("labels") or {}).get(LABEL_RUN_ID)
        if run_id:
            above_uids.append(str(run_id))
        for above_uid in above_uids:
            above = lookup(above_uid)
            if above is not None and is_public_workload(above):
                return above
    if named is None:
        return None
    namespace = str(metadata.get("namespace") or "")
    for ref in metadata.get("ownerReferences") or ():
        if lookup(str(ref.get("uid") or "")) is None and ref.get("name"):
            found = named(namespace, str(ref["name"]))
            if found is not None and is_public_workload(found):
                return found
    return None


def derive_queued_event(
    previous: Obj | None,
    observed: ObservedObjectV1,
    *,
    workload: Obj | None,
    queues: QueueObjects,
    observed_at: datetime,
    default_queue: str | None = None,
) -> PublicEvent | None:
    """``queued`` for ``workload`` when ``observed`` (its Kueue Workload) started waiting."""
    kueue_workload = observed.object
    if (
        workload is None
        or observed.event_type == "DELETED"
        or not is_kueue_workload(observed)
        or not is_waiting(kueue_workload)
        or (previous is not None and is_waiting(previous))
    ):
        return None
    # Only the ClusterQueue it waits in is replayed (the others cannot hold it up).
    to_cluster_queue = {
        (str(_meta(q).get("namespace") or ""), str(_meta(q).get("name") or "")): str(
            (q.get("spec") or {}).get("clusterQueue") or ""
        )
        for q in queues.local_queues
    }
    waits_in = cluster_queue_of(kueue_workload, to_cluster_queue)
    estimates = cluster_estimates(
        cluster_queues=[q for q in queues.cluster_queues if _meta(q).get("name") == waits_in],
        local_queues=queues.local_queues,
        kueue_workloads=queues.kueue_workloads,
        declared=declared_durations(queues.workloads),
        now=observed_at,
    )
    placed = estimates.get(observed.uid)
    # Evicted after an admission (its Evicted condition holds until Kueue admits it again):
    # Kueue's reason and words, so a subscriber tells a stopped queue from a preemption
    # (decision 0171); none when it waits for the first time.
    # A service's pod made to replace an evicted one has a fresh Workload that says nothing
    # of the eviction; the service's own Evicted condition still does (decision 0180).
    eviction = eviction_told(kueue_workload.get("status") or {}) or eviction_told(
        workload.get("status") or {}
    )
    metadata = workload.get("metadata") or {}
    spec = workload.get("spec") or {}
    namespace = str(metadata.get("namespace") or "")
    uid = str(metadata.get("uid") or "")
    kind = str(workload.get("kind") or "")
    payload = WorkloadEventV2(
        transition=WorkloadTransitionV2.QUEUED,
        workload=WorkloadRef(
            kind=kind, namespace=namespace, name=str(metadata.get("name") or ""), uid=uid
        ),
        user=optional_text(spec.get("user")),
        queue=optional_text(spec.get("clusterQueue")) or default_queue,
        phase=str((workload.get("status") or {}).get("status") or ""),
        observed_at=observed_at,
        created_at=aware_timestamp(metadata.get("creationTimestamp")),
        resource_version=str(metadata.get("resourceVersion") or observed.resource_version),
        reason=eviction[0] if eviction is not None else None,
        message=optional_text(eviction[1][:MESSAGE_MAX_CHARS]) if eviction is not None else None,
        estimate=None if placed is None else start_estimate(placed),
    )
    return PublicEvent(
        id=public_queued_id(uid=uid, kueue_resource_version=observed.resource_version),
        subject=public_workload_subject(namespace=namespace, kind=kind, uid=uid),
        payload=payload,
    )


def start_estimate(placed: Placed) -> StartEstimate:
    eta = placed.eta
    return StartEstimate(
        cluster_queue=placed.queue,
        resource=placed.resource,
        gpus=placed.gpus,
        position=eta.position,
        start=eta.start,
        earliest=eta.earliest,
        latest=eta.latest,
        method=eta.basis.method,
        recorded_runs=eta.basis.recorded_runs,
        declared=eta.basis.declared,
        admissions_per_hour=eta.basis.admissions_per_hour,
        capacity_gpus=eta.basis.capacity_gpus,
    )


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


__all__ = [
    "QueueObjects",
    "derive_queued_event",
    "is_kueue_workload",
    "owning_workload",
    "start_estimate",
]
