"""How many replicas a workload gets and how many GPUs each (upstream Kaiwo §6).

:func:`allocate_workload_gpus` is the entry point: it picks the rule for the workload's shape
(decision 0113). Ray workloads, and the rest when ``gpusPerReplica`` is given or no ``gpus``
are asked for, use upstream's calculation (:func:`calculate_gpu_allocation`): Ray worker groups
and Deployments use ``replicas``, every pod gets ``gpus_per_replica``. Where the numbers go is
the children planners' business.

Choices that differ from upstream, on purpose:

* A non-Ray KaiwoJob runs one pod, so that pod gets every GPU of ``gpus`` (one replica), or
  ``gpusPerReplica`` when given; the allocation is one replica either way, so ``NUM_REPLICAS``
  and ``NUM_GPUS`` describe the one pod (decision 0118). Upstream split ``gpus`` by node size
  and gave the single pod one share (16 GPUs on 8-GPU nodes ran on 8); a pod larger than
  every node is refused by the Schedulable check instead.
* A non-Ray KaiwoService with ``replicas`` above 1 and no ``gpusPerReplica`` keeps its
  replicas, each pod getting ``gpus / replicas`` (the reference: ``replicas`` sets the
  Deployment's replicas). Upstream replaced the replicas by its node-size split. ``gpus`` that
  does not divide evenly is refused by the Schedulable check, not rounded down. ``replicas: 1``
  (also the default) keeps the node-size split, as upstream.
* When both ``replicas`` and ``gpusPerReplica`` are set, they are taken as given and the total
  is their product, as the API reference says ("gpus is recalculated based on those values").
* The total is what the pods hold: the split by node size rounds down (30 GPUs on 8-GPU nodes
  are 4 x 7 = 28), and ``NUM_GPUS`` says 28 where upstream said 30. ``adjusted_from`` keeps
  the 30 so that the Schedulable condition can tell the user (decision 0118).
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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

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

SplitRule = Literal["automatic", "per-replica", "one-pod", "one-pod-per-replica", "over-replicas"]
"""Which rule set ``gpus_per_replica`` (what the Schedulable check names, when the pod cannot
fit or the total is not ``spec.gpus``): ``automatic`` upstream's split by node size,
``per-replica`` the given ``replicas x gpusPerReplica``, ``one-pod`` every GPU of ``gpus`` in
a batch Job's pod, ``one-pod-per-replica`` the given ``gpusPerReplica`` in a batch Job's pod,
``over-replicas`` ``gpus`` shared by a Deployment's given replicas."""


@dataclass(frozen=True, slots=True)
class GpuAllocation:
    """The split of a workload's GPUs.

    ``gpus`` is the total the pods hold, ``replicas x gpus_per_replica`` (what ``NUM_GPUS``
    reports and preemption counts, decision 0118); ``gpus_per_replica`` is what one pod gets
    (kept for a paused workload, whose ``replicas`` is 0). ``adjusted_from`` is ``spec.gpus``
    when the pods hold another number than it asked for: the split by node size rounded down
    (30 GPUs on 8-GPU nodes -> 4 x 7 = 28), or ``gpusPerReplica`` recalculated it.
    ``rule`` says what set ``gpus_per_replica``.
    """

    gpus: int
    gpus_per_replica: int
    replicas: int
    vendor: str
    rule: SplitRule = "automatic"
    adjusted_from: int | None = None

    @property
    def resource_key(self) -> str:
        """The extended resource to request: ``amd.com/gpu`` or ``nvidia.com/gpu``."""
        return GPU_RESOURCE_BY_VENDOR.get(self.vendor, f"{self.vendor}.com/gpu")


def _split(
    *, asked: int, replicas: int, gpus_per_replica: int, vendor: str, rule: SplitRule
) -> GpuAllocation:
    """``replicas`` pods of ``gpus_per_replica``; ``asked`` (``spec.gpus``, 0 when not given)
    is remembered when the pods hold another number."""
    held = replicas * gpus_per_replica
    return GpuAllocation(
        gpus=held,
        gpus_per_replica=gpus_per_replica,
        replicas=replicas,
        vendor=vendor,
        rule=rule,
        adjusted_from=asked if asked > 0 and asked != held else None,
    )


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
    A batch Job runs one pod whatever ``replicas`` says, ``0`` included (the API reference:
    replicas is ignored for a batch KaiwoJob, decisions 0111 and 0118)."""
    wanted = vendor.lower()
    asked = max(gpus, 0)
    if shape == "batch-job":
        if gpus_per_replica:
            return _split(
                asked=asked,
                replicas=1,
                gpus_per_replica=gpus_per_replica,
                vendor=wanted,
                rule="one-pod-per-replica",
            )
        return _split(
            asked=asked, replicas=1, gpus_per_replica=asked, vendor=wanted, rule="one-pod"
        )
    deployment_replicas = replicas if shape == "deployment" and replicas is not None else 0
    if asked > 0 and not gpus_per_replica and deployment_replicas > 1:
        # Rounded down here; Schedulable refuses a total that does not divide evenly.
        return _split(
            asked=asked,
            replicas=deployment_replicas,
            gpus_per_replica=asked // deployment_replicas,
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
    asked = max(gpus, 0)
    if replicas == 0:
        # An explicit 0 pauses the Deployment or the Ray worker group (decision 0111): no
        # pods, so no GPUs held (not an adjustment to tell); each replica's share stays what
        # a scale-up would get.
        return GpuAllocation(
            gpus=0,
            gpus_per_replica=gpus_per_replica or 0,
            replicas=0,
            vendor=wanted,
        )
    if replicas and gpus_per_replica and replicas > 0 and gpus_per_replica > 0:
        # The API reference: "If replicas and gpusPerReplica are also specified, gpus is
        # recalculated based on those values."
        return _split(
            asked=asked,
            replicas=replicas,
            gpus_per_replica=gpus_per_replica,
            vendor=wanted,
            rule="per-replica",
        )
    if asked == 0:
        return GpuAllocation(gpus=0, gpus_per_replica=0, replicas=replicas or 1, vendor=wanted)
    per_node = _gpus_per_node(stats, asked)
    if per_node is None:
        # No node has this vendor's GPUs: one replica with everything; Schedulable says NoGPUs.
        return GpuAllocation(gpus=asked, gpus_per_replica=asked, replicas=1, vendor=wanted)
    count = math.ceil(asked / per_node)
    return _split(
        asked=asked,
        replicas=count,
        gpus_per_replica=asked // count,
        vendor=wanted,
        rule="automatic",
    )


StatsOf = Callable[[str], GpuStats]
"""The GPU statistics of a vendor (``amd``/``nvidia``), e.g. :func:`vendor_gpu_stats` of a
context; :func:`no_nodes` where no nodes are known."""


def no_nodes(vendor: str) -> GpuStats:
    """The statistics of a cluster without nodes: the split puts every GPU in one replica."""
    return GpuStats(vendor=vendor.lower())


def allocated_gpus(workload: Mapping[str, Any], stats_of: StatsOf) -> int:
    """The GPUs a KaiwoJob or KaiwoService (wire form, read defensively) holds while all its
    pods run: the total of the allocation its pods get (:func:`allocate_workload_gpus`, the
    planner's own rule, decision 0118), so 28 for ``gpus: 30`` on 8-GPU nodes, a batch Job's
    one pod, none for a paused workload. What the wire does not say as a whole number
    counts as absent."""
    spec = workload.get("spec")
    if not isinstance(spec, Mapping):
        return 0
    vendor = str(spec.get("gpuVendor") or "amd")
    allocation = allocate_workload_gpus(
        shape=wire_workload_shape(str(workload.get("kind") or ""), spec),
        gpus=_whole_number(spec.get("gpus"), default=0),
        replicas=_whole_number(spec.get("replicas"), default=1),
        gpus_per_replica=_whole_number(spec.get("gpusPerReplica"), default=0) or None,
        vendor=vendor,
        stats=stats_of(vendor.lower()),
    )
    return allocation.gpus


def wire_workload_shape(kind: str, spec: Mapping[str, Any]) -> WorkloadShape:
    """The shape of a KaiwoJob or KaiwoService from its wire ``spec``, as the API models'
    ``is_ray_job``/``is_ray_service`` read it: ``ray: true``, or the Ray child given."""
    ray_child = "rayJob" if kind == "KaiwoJob" else "rayService"
    if spec.get("ray") is True or spec.get(ray_child) is not None:
        return "ray"
    return "batch-job" if kind == "KaiwoJob" else "deployment"


def _whole_number(value: object, *, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return max(value, 0)


def _gpus_per_node(stats: GpuStats, total: int) -> int | None:
    """The smallest node size: of allocatable GPUs when they cover the request, else of all."""
    if stats.total_allocatable_gpus >= total and stats.min_allocatable_gpus_per_node:
        return stats.min_allocatable_gpus_per_node
    return stats.min_gpus_per_node
