"""How many replicas a workload gets and how many GPUs each (upstream Kaiwo §6).

The same calculation serves Ray and non-Ray workloads, KaiwoJobs and KaiwoServices; where the
numbers go differs (Ray worker groups and Deployments use ``replicas``, a batch Job's single pod
gets ``gpus_per_replica``) and is the children planners' business.

Choices that differ from upstream, on purpose:

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
    )


@dataclass(frozen=True, slots=True)
class GpuAllocation:
    """The split of a workload's GPUs.

    ``gpus`` is the requested total (what ``NUM_GPUS`` reports); ``replicas * gpus_per_replica``
    can be smaller when the total does not divide evenly over the nodes (30 GPUs on 8-GPU
    nodes -> 4 x 7), see :attr:`allocated_gpus`.
    """

    gpus: int
    gpus_per_replica: int
    replicas: int
    vendor: str

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


def calculate_gpu_allocation(
    *,
    gpus: int,
    replicas: int | None,
    gpus_per_replica: int | None,
    vendor: str,
    stats: GpuStats,
) -> GpuAllocation:
    """Decide replicas and GPUs per replica from the spec and the cluster's GPU statistics."""
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
