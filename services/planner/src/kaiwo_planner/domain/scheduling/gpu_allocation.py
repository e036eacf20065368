"""How many replicas a workload gets and how many GPUs each (upstream Kaiwo §6).

:func:`allocate_workload_gpus` is the entry point: it picks the rule for the workload's shape
(decision 0113). Ray workloads, and the rest when ``gpusPerReplica`` is given or no ``gpus``
are asked for, use upstream's calculation (:func:`calculate_gpu_allocation`): Ray worker groups
and Deployments use ``replicas``, every pod gets ``gpus_per_replica``. Where the numbers go is
the children planners' business.

Choices that differ from upstream, on purpose:

* A non-Ray KaiwoJob runs one pod, so that pod gets every GPU of ``gpus`` (one replica).
  Upstream split ``gpus`` by node size and gave the single pod one share (16 GPUs on 8-GPU
  nodes ran on 8); a pod larger than every node is refused by the Schedulable check instead.
* A non-Ray KaiwoService with ``replicas`` above 1 and no ``gpusPerReplica`` keeps its
  replicas, each pod getting ``gpus / replicas`` (the reference: ``replicas`` sets the
  Deployment's replicas). Upstream replaced the replicas by its node-size split. ``gpus`` that
  does not divide evenly is refused by the Schedulable check, not rounded down. ``replicas: 1``
  (also the default) keeps the node-size split, as upstream.
* When both ``replicas`` and ``gpusPerReplica`` are set, they are taken as given and the total
  is their product, as the API reference says ("gpus is recalculated based on those values").
  Upstream keeps ``max(gpus, replicas * gpusPerReplica)`` as the total and falls back to the
  automatic split when the product exceeds the cluster, which only changes workloads that the
  Schedulable check rejects anyway.
* The vendor is compared case-insensitively (the docs spell it "AMD"/"NVIDIA").
* Cluster statistics come from each node's device-plugin labels, not from the
  ``kaiwo/nodepool`` label the queue-config planner writes from those same labels; the numbers
  are identical once nodes are labelled, and correct before that too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from kaiwo_planner.domain.settings.cluster_settings import NODE_KIND
from kaiwo_planner.domain.state.nodes import GPU_RESOURCE_BY_VENDOR, NodeInfo
from kaiwo_planner.domain.state.planning_context import PlanningContext


@dataclass(frozen=True, slots=True)
class GpuStats:
    """GPU totals of one vendor across the cluster (cordoned nodes included, as upstream)."""

    vendor: str
    total_gpus: int = 0
    min_gpus_per_node: int | None = None
    total_allocatable_gpus: int = 0
    min_allocatable_gpus_per_node: int | None = None
    max_gpus_per_node: int | None = None
    """The largest node: a pod asking for more GPUs can never be scheduled."""


def gpu_stats(nodes: Iterable[NodeInfo], vendor: str) -> GpuStats:
    """Sum the GPUs of ``vendor`` (``amd``/``nvidia``) over the nodes that have them."""
    wanted = vendor.lower()
    counts: list[int] = []
    allocatable: list[int] = []
    for node in nodes:
        if node.gpu_vendor != wanted or node.gpu_count <= 0:
            continue
        counts.append(node.gpu_count)
        free = node.allocatable_gpus(wanted)
        if free > 0:
            allocatable.append(free)
    return GpuStats(
        vendor=wanted,
        total_gpus=sum(counts),
        min_gpus_per_node=min(counts) if counts else None,
        total_allocatable_gpus=sum(allocatable),
        min_allocatable_gpus_per_node=min(allocatable) if allocatable else None,
        max_gpus_per_node=max(counts) if counts else None,
    )


WorkloadShape = Literal["ray", "batch-job", "deployment"]
"""How a workload runs its GPUs: Ray worker groups, the single pod of a Job, a Deployment."""

SplitRule = Literal["automatic", "one-pod", "over-replicas"]
"""Which rule set ``gpus_per_replica`` (what the Schedulable check names when it cannot fit):
``automatic`` upstream's calculation (``gpusPerReplica`` when given, else by node size),
``one-pod`` every GPU in a batch Job's pod, ``over-replicas`` ``gpus`` shared by a
Deployment's given replicas."""


@dataclass(frozen=True, slots=True)
class GpuAllocation:
    """The split of a workload's GPUs.

    ``gpus`` is the requested total (what ``NUM_GPUS`` reports); ``replicas * gpus_per_replica``
    can be smaller when the total does not divide evenly over the nodes (30 GPUs on 8-GPU
    nodes -> 4 x 7), see :attr:`allocated_gpus`. ``rule`` says what set ``gpus_per_replica``.
    """

    gpus: int
    gpus_per_replica: int
    replicas: int
    vendor: str
    rule: SplitRule = "automatic"

    @property
    def resource_key(self) -> str:
        """The extended resource to request: ``amd.com/gpu`` or ``nvidia.com/gpu``."""
        return GPU_RESOURCE_BY_VENDOR.get(self.vendor, f"{self.vendor}.com/gpu")

    @property
    def allocated_gpus(self) -> int:
        return self.replicas * self.gpus_per_replica


def vendor_gpu_stats(context: PlanningContext, vendor: str) -> GpuStats:
    """GPU totals of ``vendor`` over the cluster's nodes."""
    wanted = vendor.lower()
    nodes = context.cluster.nodes
    return context.derived(
        ("gpu-stats", wanted),
        reads=(NODE_KIND,),
        inputs=lambda: (nodes,),
        compute=lambda: gpu_stats(nodes, wanted),
    )


def allocate_workload_gpus(
    *,
    shape: WorkloadShape,
    gpus: int,
    replicas: int | None,
    gpus_per_replica: int | None,
    vendor: str,
    stats: GpuStats,
) -> GpuAllocation:
    """The allocation of a workload of ``shape`` (the module docstring: one pod for a batch
    Job, ``gpus`` over the given replicas of a Deployment, otherwise upstream's calculation).
    A batch Job ignores ``replicas: 0``: its one pod runs as with the default 1 (the API
    reference: replicas is ignored for a batch KaiwoJob, decision 0111)."""
    if shape == "batch-job" and replicas == 0:
        replicas = 1
    if gpus > 0 and not gpus_per_replica:
        wanted = vendor.lower()
        if shape == "batch-job":
            return GpuAllocation(
                gpus=gpus, gpus_per_replica=gpus, replicas=1, vendor=wanted, rule="one-pod"
            )
        if shape == "deployment" and replicas is not None and replicas > 1:
            # Rounded down here; Schedulable refuses a total that does not divide evenly.
            return GpuAllocation(
                gpus=gpus,
                gpus_per_replica=gpus // replicas,
                replicas=replicas,
                vendor=wanted,
                rule="over-replicas",
            )
    return calculate_gpu_allocation(
        gpus=gpus,
        replicas=replicas,
        gpus_per_replica=gpus_per_replica,
        vendor=vendor,
        stats=stats,
    )


def calculate_gpu_allocation(
    *,
    gpus: int,
    replicas: int | None,
    gpus_per_replica: int | None,
    vendor: str,
    stats: GpuStats,
) -> GpuAllocation:
    """Decide replicas and GPUs per replica from the spec and the cluster's GPU statistics
    (upstream's calculation, for every shape that :func:`allocate_workload_gpus` does not
    decide itself)."""
    wanted = vendor.lower()
    if replicas == 0:
        # An explicit 0 pauses the Deployment or the Ray worker group (decision 0111): no
        # pods, so no GPUs held; each replica's share stays what a scale-up would get.
        return GpuAllocation(
            gpus=0, gpus_per_replica=gpus_per_replica or 0, replicas=0, vendor=wanted
        )
    if replicas and gpus_per_replica and replicas > 0 and gpus_per_replica > 0:
        return GpuAllocation(
            gpus=replicas * gpus_per_replica,
            gpus_per_replica=gpus_per_replica,
            replicas=replicas,
            vendor=wanted,
        )
    total = max(gpus, 0)
    if total == 0:
        return GpuAllocation(gpus=0, gpus_per_replica=0, replicas=replicas or 1, vendor=wanted)
    per_node = _gpus_per_node(stats, total)
    if per_node is None:
        # No node has this vendor's GPUs: one replica with everything; Schedulable says NoGPUs.
        return GpuAllocation(gpus=total, gpus_per_replica=total, replicas=1, vendor=wanted)
    count = math.ceil(total / per_node)
    return GpuAllocation(gpus=total, gpus_per_replica=total // count, replicas=count, vendor=wanted)


def _gpus_per_node(stats: GpuStats, total: int) -> int | None:
    """The smallest node size: of allocatable GPUs when they cover the request, else of all."""
    if stats.total_allocatable_gpus >= total and stats.min_allocatable_gpus_per_node:
        return stats.min_allocatable_gpus_per_node
    return stats.min_gpus_per_node
