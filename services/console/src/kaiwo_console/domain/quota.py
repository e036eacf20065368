"""A ClusterQueue's quota against what its admitted workloads use."""

from __future__ import annotations

from dataclasses import dataclass

from kaiwo_contracts.queue_estimates.kueue import (
    GPU_RESOURCES,
    is_finished,
)

from kaiwo_console.domain.cluster import (
    CLUSTER_QUEUE,
    KUEUE_WORKLOAD,
    LOCAL_QUEUE,
    ClusterState,
    Obj,
    meta,
    quantity,
    spec,
    status,
)


@dataclass(frozen=True, slots=True)
class QuotaUse:
    flavor: str
    resource: str
    quota: float
    used: float


def cluster_queue_of(state: ClusterState, kueue_workload: Obj) -> str:
    """The ClusterQueue a Kueue Workload is admitted to, else its LocalQueue's."""
    admission = status(kueue_workload).get("admission") or {}
    if admission.get("clusterQueue"):
        return str(admission["clusterQueue"])
    local = state.get(
        LOCAL_QUEUE,
        str(meta(kueue_workload).get("namespace") or ""),
        str(spec(kueue_workload).get("queueName") or ""),
    )
    if local is not None and spec(local).get("clusterQueue"):
        return str(spec(local)["clusterQueue"])
    return str(spec(kueue_workload).get("queueName") or "")


def quota_use(state: ClusterState, queue: Obj) -> list[QuotaUse]:
    """Per flavor and resource of a ClusterQueue: nominal quota against what its admitted,
    unfinished Workloads use."""
    name = str(meta(queue).get("name") or "")
    used: dict[tuple[str, str], float] = {}
    for kueue_workload in state.of(KUEUE_WORKLOAD):
        admission = status(kueue_workload).get("admission") or {}
        if admission.get("clusterQueue") != name or is_finished(kueue_workload):
            continue
        for assignment in admission.get("podSetAssignments") or ():
            flavors = assignment.get("flavors") or {}
            for resource, amount in (assignment.get("resourceUsage") or {}).items():
                key = (str(flavors.get(resource, "")), str(resource))
                used[key] = used.get(key, 0.0) + quantity(amount)
    rows = []
    for group in spec(queue).get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            for resource in flavor.get("resources") or ():
                key = (str(flavor.get("name", "")), str(resource.get("name", "")))
                rows.append(
                    QuotaUse(
                        key[0], key[1], quantity(resource.get("nominalQuota")), used.get(key, 0.0)
                    )
                )
    return rows


def gpu_quota(state: ClusterState, queue_name: str) -> dict[str, int]:
    """GPU resource -> the ClusterQueue's nominal quota of it over its flavors."""
    queue = state.get(CLUSTER_QUEUE, "", queue_name)
    totals: dict[str, int] = {}
    if queue is None:
        return totals
    for row in quota_use(state, queue):
        if row.resource in GPU_RESOURCES:
            totals[row.resource] = totals.get(row.resource, 0) + int(row.quota)
    return totals
