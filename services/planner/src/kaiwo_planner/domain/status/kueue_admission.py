"""Kueue's admission of a workload's children, read from its Workloads.

A child is admitted when every Kueue Workload made for it is admitted and not being evicted;
with no Workload at all (a namespace Kueue does not manage) the child is believed once it
visibly runs. While Kueue keeps the child waiting, :func:`kueue_waiting_reason` gives Kueue's
own words, and :func:`kueue_preemption` mirrors its ``Preempted`` condition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwojob import on_existing_ray_cluster

from kaiwo_planner.domain.settings.cluster_settings import parse_time
from kaiwo_planner.domain.status.child_phase import ObservedChildren, child_phase
from kaiwo_planner.domain.status.conditions import ConditionSpec, condition_of, has_condition

ADMITTED = "Admitted"
PREEMPTED = "Preempted"
"""Kueue's Workload condition of that name, mirrored on the workload."""
KUEUE_QUOTA_RESERVED = "QuotaReserved"
KUEUE_EVICTED = "Evicted"

_ACTIVE_CHILD_PHASES = frozenset(
    {WorkloadStatus.RUNNING, WorkloadStatus.READY, WorkloadStatus.COMPLETE, WorkloadStatus.FAILED}
)


def kueue_waiting_reason(workloads: Sequence[Mapping[str, Any]]) -> str:
    """Why Kueue keeps a Workload of the child waiting, in Kueue's words: the message of its
    ``Evicted`` condition (a preemption, a stop) while that holds, else of ``QuotaReserved``
    when False (no quota, no such queue); "" when none says."""
    for workload in workloads:
        status = workload.get("status") or {}
        if kueue_admitted(status):
            continue
        conditions = {c.get("type"): c for c in status.get("conditions") or ()}
        evicted = conditions.get(KUEUE_EVICTED) or {}
        reserved = conditions.get(KUEUE_QUOTA_RESERVED) or {}
        if evicted.get("status") == "True" and evicted.get("message"):
            return str(evicted["message"])
        if reserved.get("status") == "False" and reserved.get("message"):
            return str(reserved["message"])
    return ""


def kueue_eviction(workloads: Sequence[Mapping[str, Any]]) -> tuple[str, str] | None:
    """The reason and message of Kueue's ``Evicted`` condition on a Workload of the child
    while it holds (True until Kueue admits the Workload again): ``Preempted``,
    ``ClusterQueueStopped``, ``LocalQueueStopped``, ``PodsReadyTimeout``...; None when Kueue
    is not evicting any."""
    for workload in workloads:
        found = eviction_told(workload.get("status") or {})
        if found is not None:
            return found
    return None


def eviction_told(status: Mapping[str, Any]) -> tuple[str, str] | None:
    """The reason and message of a True ``Evicted`` condition in ``status``: a Kueue
    Workload's, or a Kaiwo workload's own, which mirrors it (decision 0180); None otherwise."""
    for c in status.get("conditions") or ():
        if c.get("type") == KUEUE_EVICTED and c.get("status") == "True":
            return str(c.get("reason") or KUEUE_EVICTED), str(c.get("message") or "")
    return None


def kueue_preemption(workloads: Sequence[Mapping[str, Any]]) -> ConditionSpec | None:
    """Kueue's ``Preempted`` condition of the child's Workloads (a True one first), as the
    workload's own; None when Kueue has never preempted them."""
    found = [
        c
        for workload in workloads
        for c in (workload.get("status") or {}).get("conditions") or ()
        if c.get("type") == PREEMPTED and c.get("status") in ("True", "False")
    ]
    if not found:
        return None
    chosen = next((c for c in found if c.get("status") == "True"), found[0])
    return ConditionSpec(
        PREEMPTED,
        "True" if chosen.get("status") == "True" else "False",
        str(chosen.get("reason") or "Preempted"),
        str(chosen.get("message") or ""),
    )


def pending_since(status: Mapping[str, Any]) -> datetime | None:
    """When the workload's current wait for admission began, from its own status: the moment
    its ``Admitted`` condition last turned False. That is when it became PENDING after its
    downloads (the condition is written from then), or when Kueue evicted it after a run.
    None without such a condition (a status written before it, or not waiting)."""
    admitted = condition_of(status, ADMITTED)
    if admitted is None or admitted.get("status") != "False":
        return None
    return parse_time(admitted.get("lastTransitionTime"))


def run_start(status: Mapping[str, Any]) -> datetime | None:
    """When the workload's current run started, from its own status: its ``startTime`` (the
    first run), or the moment its ``Admitted`` condition last turned True when that is later:
    Kueue admitted it again after evicting it (a preemption, a stopped queue), and its pods
    started over (decision 0169). None before it first ran."""
    started = parse_time(status.get("startTime"))
    admitted = condition_of(status, ADMITTED)
    if started is None or admitted is None or admitted.get("status") != "True":
        return started
    readmitted = parse_time(admitted.get("lastTransitionTime"))
    return started if readmitted is None else max(started, readmitted)


def is_admitted(observed: ObservedChildren) -> bool:
    if observed.kueue_workloads:
        return every_one_admitted(observed.kueue_workloads)
    child = observed.child
    if child is not None and runs_on_existing_ray_cluster(child):
        return True
    if child is None or (child.get("spec") or {}).get("suspend") is True:
        return False
    if any(_held_at_kueues_gate(pod) for pod in observed.pods):
        # A Deployment's pods that Kueue has gated but not yet made a Workload for (its new
        # pods, after Kueue drained the old ones from a stopped queue): they wait, whatever
        # the Deployment's stale counts of ready replicas say.
        return False
    # No Workload: Kueue does not manage this namespace; believe the child once it runs.
    return child_phase(observed, previous_phase=WorkloadStatus.NEW) in _ACTIVE_CHILD_PHASES


KUEUE_ADMISSION_GATE = "kueue.x-k8s.io/admission"
"""The scheduling gate Kueue's webhook puts on each pod it manages on its own (a serving
Deployment's), and lifts once it admits the pod's Workload."""


def _held_at_kueues_gate(pod: Mapping[str, Any]) -> bool:
    gates = _mapping(pod.get("spec")).get("schedulingGates") or ()
    return any(_mapping(gate).get("name") == KUEUE_ADMISSION_GATE for gate in gates)


def every_one_admitted(workloads: Sequence[Mapping[str, Any]]) -> bool:
    """There are Kueue Workloads, and Kueue admitted each and is not taking any back."""
    return bool(workloads) and all(kueue_admitted(w.get("status") or {}) for w in workloads)


def runs_on_existing_ray_cluster(child: Mapping[str, Any]) -> bool:
    """A RayJob sent to a Ray cluster that exists (``clusterSelector``): Kueue does not queue
    it (the cluster's pods are queued with the cluster), so nothing admits it and it waits for
    nothing of Kueue's; its phase is KubeRay's from the start (decision 0156)."""
    return child.get("kind") == "RayJob" and on_existing_ray_cluster(child)


NOT_QUEUED_MESSAGE = (
    "Kueue does not queue a RayJob sent to an existing Ray cluster "
    "(spec.rayJob.spec.clusterSelector): it runs on that cluster's pods, queued with the cluster"
)


def pods_still_waiting(observed: ObservedChildren) -> tuple[int, int] | None:
    """``(waiting, all)`` of a Deployment's pod Workloads when Kueue has admitted some of them
    and not all: pods of a rolling update or a scale-up wait for admission, while the admitted
    ones serve. None otherwise (every one admitted, none, or a child of another kind: a Job,
    RayJob or AppWrapper has one Workload, so it is admitted or waits whole)."""
    if observed.child_kind != "Deployment" or not observed.kueue_workloads:
        return None
    admitted = sum(kueue_admitted(w.get("status") or {}) for w in observed.kueue_workloads)
    total = len(observed.kueue_workloads)
    return (total - admitted, total) if 0 < admitted < total else None


def partially_admitted_pods(workloads: Sequence[Mapping[str, Any]]) -> tuple[int, int] | None:
    """``(admitted, asked)`` pods of a Job that Kueue admitted partially (decision 0153): its
    one Workload's one pod set may shrink (``minCount``, which Kueue takes from the Job's
    ``kueue.x-k8s.io/job-min-parallelism``) and the admission assigned fewer pods than the
    pod set's ``count``. None otherwise (admitted whole, not admitted, another shape)."""
    workload = _only(workloads)
    if workload is None or not kueue_admitted(_mapping(workload.get("status"))):
        return None
    pod_set = _only(_mapping(workload.get("spec")).get("podSets"))
    admission = _mapping(_mapping(workload.get("status")).get("admission"))
    assignment = _only(admission.get("podSetAssignments"))
    if pod_set is None or assignment is None or pod_set.get("minCount") is None:
        return None
    asked, admitted = pod_set.get("count"), assignment.get("count")
    if isinstance(asked, int) and isinstance(admitted, int) and 0 < admitted < asked:
        return admitted, asked
    return None


def _only(items: Any) -> Mapping[str, Any] | None:
    """The one mapping of the list ``items``; None for anything else."""
    # The wire's lists and dicts are told apart first: an isinstance against an abstract
    # class runs Python code (ABCMeta.__instancecheck__), and this is asked every plan.
    if isinstance(items, list | tuple) and len(items) == 1:
        return _mapping_or_none(items[0])
    return None


def _mapping_or_none(value: Any) -> Mapping[str, Any] | None:
    if type(value) is dict or isinstance(value, Mapping):
        return value
    return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return _mapping_or_none(value) or {}


def assigned_flavors(workload: Mapping[str, Any], *, resource: str | None = None) -> set[str]:
    """The flavors Kueue's admission of the Workload assigns, over its pod sets: to
    ``resource`` only, when given (a GPU's flavor, not the CPU's of another resource group)."""
    admission = _mapping(_mapping(workload.get("status")).get("admission"))
    flavors: set[str] = set()
    for assignment in admission.get("podSetAssignments") or ():
        if isinstance(assignment, Mapping):
            assigned = _mapping(assignment.get("flavors"))
            flavors.update(str(f) for r, f in assigned.items() if resource in (None, r))
    return flavors


def kueue_admitted(status: Mapping[str, Any]) -> bool:
    """Kueue admitted the Workload and is not taking it back: while Kueue evicts (a
    preemption), the Workload stays Admitted until the child has stopped, but the child is
    already suspended and waiting again (Kueue resets ``Evicted`` when it admits anew)."""
    return has_condition(status, "Admitted") and not has_condition(status, KUEUE_EVICTED)
