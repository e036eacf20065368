"""Can this workload ever be scheduled here? The ``Schedulable`` condition (upstream Kaiwo §6.4).

Checks, first failure wins: the cluster queue exists in the KaiwoQueueConfig; the queue admits
the workload's namespace; its ``priorityClass`` names something that exists
(:mod:`~kaiwo_planner.domain.state.priority_classes`); a Deployment's ``gpus`` divides evenly over
its ``replicas`` (decision 0113); the cluster has GPUs of the vendor; it has enough of them; its
largest node has as many as one pod asks for (upstream does not check this: a pod larger than
every node stayed Pending for ever). A workload
that fails is in ERROR and gets no children until something changes (the verdict is recomputed
on every plan, so a new node or queue fixes it without touching the workload).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import KaiwoQueueConfigSpec

from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation, GpuStats
from kaiwo_planner.domain.state.priority_classes import (
    NO_PRIORITY,
    REASON_NOT_FOUND,
    PriorityChoice,
    not_found_message,
)

SCHEDULABLE = "Schedulable"
QUEUE_CONFIG_NAME = "kaiwo"


@dataclass(frozen=True, slots=True)
class SchedulableVerdict:
    schedulable: bool
    reason: str
    message: str

    @property
    def condition_status(self) -> str:
        return "True" if self.schedulable else "False"


def queue_namespaces(spec: KaiwoQueueConfigSpec | None) -> dict[str, tuple[str, ...]]:
    """Each cluster queue of a KaiwoQueueConfig and the namespaces it is limited to (sorted)."""
    if spec is None:
        return {}
    return {q.name: tuple(sorted(set(q.namespaces or ()))) for q in spec.cluster_queues or ()}


def decide_schedulable(
    *,
    cluster_queue: str,
    namespace: str,
    queue_namespaces: Mapping[str, Sequence[str]],
    allocation: GpuAllocation,
    stats: GpuStats,
    priority_class: str = "",
    priority: PriorityChoice | None = NO_PRIORITY,
) -> SchedulableVerdict:
    """The verdict for one workload.

    ``queue_namespaces`` maps each cluster queue of the KaiwoQueueConfig to its ``namespaces``
    (empty: any namespace may use it). ``priority`` is what ``priority_class`` (the spec's)
    resolved to, None when it names nothing that exists.
    """
    if cluster_queue not in queue_namespaces:
        return SchedulableVerdict(
            schedulable=False,
            reason="ClusterQueueNotFound",
            message=(
                f"Cluster queue '{cluster_queue}' is not defined in "
                f"KaiwoQueueConfig '{QUEUE_CONFIG_NAME}'"
            ),
        )
    allowed = queue_namespaces[cluster_queue]
    if allowed and namespace not in allowed:
        return SchedulableVerdict(
            schedulable=False,
            reason="WrongQueueNamespace",
            message=(
                f"Cluster queue '{cluster_queue}' defines one or more namespaces, but workload "
                f"namespace '{namespace}' is not one of them"
            ),
        )
    if priority is None:
        return SchedulableVerdict(
            schedulable=False,
            reason=REASON_NOT_FOUND,
            message=not_found_message(priority_class),
        )
    return _gpu_verdict(allocation, stats)


def _gpu_verdict(allocation: GpuAllocation, stats: GpuStats) -> SchedulableVerdict:
    if allocation.gpus <= 0:
        return SchedulableVerdict(
            schedulable=True,
            reason=SCHEDULABLE,
            message="Workload does not require GPU resources",
        )
    if allocation.rule == "over-replicas" and allocation.gpus % allocation.replicas:
        return SchedulableVerdict(
            schedulable=False,
            reason="GpusNotDivisibleByReplicas",
            message=(
                f"spec.gpus ({allocation.gpus}) does not divide evenly over spec.replicas "
                f"({allocation.replicas}) of a Deployment: set spec.gpus to a multiple of "
                "spec.replicas, or set spec.gpusPerReplica"
            ),
        )
    if stats.total_gpus == 0:
        return SchedulableVerdict(
            schedulable=False,
            reason="NoGPUs",
            message=f"Cluster has 0 GPUs (vendor: {allocation.vendor})",
        )
    if allocation.gpus > stats.total_gpus:
        return SchedulableVerdict(
            schedulable=False,
            reason="InsufficientGPUs",
            message=(
                f"Cluster has {stats.total_gpus} GPUs, but requested for {allocation.gpus} "
                f"GPUs (vendor: {allocation.vendor})"
            ),
        )
    largest = stats.max_gpus_per_node or 0
    if allocation.gpus_per_replica > largest:
        return SchedulableVerdict(
            schedulable=False,
            reason="InsufficientGPUsPerNode",
            message=_pod_too_large_message(allocation, largest),
        )
    return SchedulableVerdict(
        schedulable=True, reason=SCHEDULABLE, message="Cluster has sufficient GPU resources"
    )


def _pod_too_large_message(allocation: GpuAllocation, largest: int) -> str:
    """Which fields asked for the pod, what the largest node has, and what to change."""
    node = f"the largest node has {largest} GPUs (vendor: {allocation.vendor})"
    if allocation.rule == "one-pod":
        return (
            f"spec.gpus ({allocation.gpus}) asks for {allocation.gpus} GPUs in the single pod "
            f"of a Job, but {node}: set ray: true to spread the GPUs across nodes, or lower "
            "spec.gpus"
        )
    if allocation.rule == "over-replicas":
        return (
            f"spec.gpus ({allocation.gpus}) over spec.replicas ({allocation.replicas}) asks for "
            f"{allocation.gpus_per_replica} GPUs per pod, but {node}: raise spec.replicas or "
            "lower spec.gpus"
        )
    return (
        f"spec.gpusPerReplica ({allocation.gpus_per_replica}) asks for "
        f"{allocation.gpus_per_replica} GPUs per pod, but {node}: lower spec.gpusPerReplica "
        "and raise spec.replicas"
    )
