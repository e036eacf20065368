"""Node pools: nodes grouped by GPU vendor, model, count, CPU and memory (upstream Kaiwo §8.2).

A pool becomes a default Kueue ResourceFlavor named like ``amd-mi300x-8gpu-115core-1843gi``
(vendor, model, GPUs per node, 90 % of the node's cores, 90 % of its memory in GiB; CPU-only
nodes are ``cpu-only-0gpu-...``). Its nodes are labelled ``kaiwo/nodepool=<pool>``,
``kaiwo/worker=true`` and, for GPU pools, ``kaiwo/gpu-model=<model>``; with
``addTaintsToGpuNodes`` GPU nodes also get the ``<defaultGpuTaintKey>=true:NoSchedule`` taint.

Cordoned nodes are left out (their capacity leaves the default queue), and so are
control-plane nodes when ``excludeMasterNodesFromNodePools`` is set, and nodes whose kubelet has
not reported their capacity yet: a kubelet registers the Node first and fills its status a
moment later, and such a node would otherwise form a transient ``...-0core-0gi`` pool.

Choices that differ from upstream:

* Memory quotas are whole GiB (90 % of the node's GiB, rounded down), the same number the pool
  name shows; upstream counts bytes, a fraction of a GiB more per node.
* The default ClusterQueue lists its resources in a fixed order (cpu, memory, then GPU keys
  alphabetically) and its flavors by GPUs per node, cores, memory, then name; upstream's order
  depends on Go map iteration.
* Node changes are partial Node objects carrying only what Kaiwo owns: its labels and, while
  ``addTaintsToGpuNodes`` is on, its one taint. The pool labels go only to nodes whose
  discovered flavor is in force (decision 0110); upstream labels every node whatever the
  spec lists, overwriting an admin's ``kaiwo/nodepool``. The executor merges them into the
  node as it is at that moment (``kaiwo_executor.node_merge``), so labels and taints set by
  others (the node lifecycle controller's ``not-ready``, an admin's) are never removed, and a
  label value another field manager wrote is never replaced. The GPU taint goes with the
  ``kaiwo/gpu-taint`` annotation naming its key: the node's record of the taint the operator
  itself added, so a renamed ``defaultGpuTaintKey`` moves that taint to the new key (decision
  0145). Turning ``addTaintsToGpuNodes`` off leaves the taint where it is (as upstream,
  decision 0132).
* A node whose ``kaiwo/nodepool`` holds a value someone else set is left out of the
  discovered pools and their quota, and is not asked for the operator's value (decision
  0229): a discovered flavor selects ``kaiwo/nodepool=<pool>``, the executor never replaces an
  admin's value, so the node would never carry it and the default ClusterQueue would admit
  pods that never schedule. Whose value it is the planner reads from the value alone (the
  projection holds no ``managedFields``): a value the operator generates, a pool name
  (:func:`is_generated_pool_name`), is taken as the operator's own from the node's earlier
  shape, which the executor moves to the new pool. Upstream counts every node.
* A control-plane node that ``excludeMasterNodesFromNodePools`` leaves out loses the pool
  labels (:data:`POOL_LABELS`) it carries, as a partial Node naming each with ``None`` (a
  merge-patch removal): labelled while the setting was off, it stayed in every flavor that
  selects ``kaiwo/nodepool`` and every ``gpuModels`` choice. The executor removes only the
  values the operator itself wrote (decision 0224); upstream never removes a label.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from kaiwo_contracts.confinement import GPU_TAINT_RECORD_ANNOTATION
from kaiwo_contracts.crds.quantity import MAX_QUANTITY

from kaiwo_planner.domain.children.naming import child_name, label_value
from kaiwo_planner.domain.state.nodes import (
    GPU_RESOURCE_BY_VENDOR,
    NODEPOOL_LABEL,
    NodeInfo,
    gpu_taint,
)

WORKER_LABEL = "kaiwo/worker"
GPU_MODEL_LABEL = "kaiwo/gpu-model"
POOL_LABELS = (NODEPOOL_LABEL, WORKER_LABEL, GPU_MODEL_LABEL)
"""The labels that put a node in Kaiwo's pools. The topology labels are not among them: they
place a node, in a pool or not (upstream gives them to every node)."""
TOPOLOGY_BLOCK_LABEL = "kaiwo/topology-block"
TOPOLOGY_RACK_LABEL = "kaiwo/topology-rack"
HOSTNAME_LABEL = "kubernetes.io/hostname"
DEFAULT_TOPOLOGY_LEVELS = (TOPOLOGY_BLOCK_LABEL, TOPOLOGY_RACK_LABEL, HOSTNAME_LABEL)
_DEFAULT_TOPOLOGY_VALUES = MappingProxyType(
    {TOPOLOGY_BLOCK_LABEL: "block-a", TOPOLOGY_RACK_LABEL: "rack-a"}
)

_NOMINAL_SHARE = 0.9  # leave 10 % of each node to the system and daemons
_GENERATED_POOL_NAME = re.compile(r"(?:amd|nvidia|cpu)-[a-z0-9.-]+-[0-9]+gpu-[0-9]+core-[0-9]+gi")
"""What :attr:`NodeShape.pool_name` gives, shortened with a hash or not (upstream's names have
the same form)."""


@dataclass(frozen=True, slots=True)
class NodeShape:
    """What puts a node in a pool."""

    vendor: str  # "amd", "nvidia" or "cpu"
    gpu_model: str  # "mi300x", ..., or "only" for CPU nodes
    gpus: int
    cores: int  # nominal: 90 % of capacity, rounded down
    memory_gib: int  # nominal: 90 % of capacity in GiB, rounded down

    @property
    def pool_name(self) -> str:
        """``<vendor>-<model>-<n>gpu-<n>core-<n>gi``: a ResourceFlavor name and the value of
        the ``kaiwo/nodepool`` label, so within RFC 1123 and 63 characters. A product label
        may hold what neither takes (``NVIDIA_A100``, 63 characters of its own): characters
        outside ``[a-z0-9.-]`` become ``-`` and a model too long is cut and hashed."""
        shape = f"{self.gpus}gpu-{self.cores}core-{self.memory_gib}gi"
        return child_name(f"{self.vendor}-{self.gpu_model}", shape)

    @property
    def has_gpus(self) -> bool:
        return self.vendor != "cpu"


def node_shape(node: NodeInfo) -> NodeShape:
    vendor = node.gpu_vendor
    return NodeShape(
        vendor=vendor or "cpu",
        gpu_model=(node.gpu_model or "only") if vendor else "only",
        gpus=node.gpu_count if vendor else 0,
        cores=math.floor(node.cpu_cores * _NOMINAL_SHARE),
        memory_gib=math.floor(node.memory_gib * _NOMINAL_SHARE),
    )


@dataclass(frozen=True, slots=True)
class NodePool:
    """A pool and its nodes (sorted by name); totals are nominal sums over the nodes."""

    shape: NodeShape
    nodes: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.shape.pool_name

    @property
    def cores(self) -> int:
        return self.shape.cores * len(self.nodes)

    @property
    def memory_gib(self) -> int:
        return self.shape.memory_gib * len(self.nodes)

    @property
    def gpus(self) -> int:
        return self.shape.gpus * len(self.nodes)

    @property
    def gpu_resource(self) -> str | None:
        return GPU_RESOURCE_BY_VENDOR.get(self.shape.vendor)

    def quotas(self) -> dict[str, str]:
        """Nominal quota per resource name, each at most the largest quantity Kubernetes holds
        (the sum over many nodes of a huge reported capacity may exceed it)."""
        quotas = {
            "cpu": str(min(self.cores, MAX_QUANTITY)),
            "memory": f"{min(self.memory_gib, MAX_QUANTITY >> 30)}Gi",
        }
        if self.gpu_resource and self.shape.gpus > 0:
            quotas[self.gpu_resource] = str(min(self.gpus, MAX_QUANTITY))
        return quotas


def is_generated_pool_name(value: str) -> bool:
    """``value`` has the form of a pool name the operator generates
    (``amd-mi300x-8gpu-172core-1843gi``, ``cpu-only-0gpu-14core-57gi``). Only a pool of
    numbers too long for 63 characters is named otherwise (cut and hashed whole); such a node
    has no plausible capacity."""
    return _GENERATED_POOL_NAME.fullmatch(value) is not None


def pool_label_set_elsewhere(node: NodeInfo) -> bool:
    """The node's ``kaiwo/nodepool`` holds a value that is neither its pool's name nor a pool
    name the operator generates: someone else's (an admin's ``amd-gpu-nodes``), which the
    executor keeps, so the node never carries its discovered pool's label.

    A generated name other than the node's pool is the operator's own from before the node's
    shape changed (more memory reported, a GPU gone): the executor owns it and moves it, so
    the node stays in its new pool rather than out of every pool for good. An admin who
    copied a generated name onto a node of another shape is taken for the operator: the one
    case this reading of the value alone gets wrong (decision 0229)."""
    value = node.labels.get(NODEPOOL_LABEL)
    return (
        value is not None
        and value != node_shape(node).pool_name
        and not is_generated_pool_name(value)
    )


def pool_members(nodes: Iterable[NodeInfo], *, exclude_control_plane: bool) -> list[NodeInfo]:
    """The nodes that belong to some pool, by name: they get the operator's labels."""
    return sorted(
        (
            n
            for n in nodes
            if n.capacity_reported
            and not n.unschedulable
            and not (exclude_control_plane and n.is_control_plane)
        ),
        key=lambda n: n.name,
    )


def discover_node_pools(
    nodes: Iterable[NodeInfo], *, exclude_control_plane: bool
) -> tuple[NodePool, ...]:
    """Group the schedulable nodes into pools, sorted by pool name: each pool of the nodes
    that carry, or will carry, ``kaiwo/nodepool=<pool>``, the label its discovered flavor
    selects (not those whose label is set elsewhere, :func:`pool_label_set_elsewhere`)."""
    members: dict[NodeShape, list[str]] = {}
    for node in pool_members(nodes, exclude_control_plane=exclude_control_plane):
        if not pool_label_set_elsewhere(node):
            members.setdefault(node_shape(node), []).append(node.name)
    pools = (NodePool(shape=shape, nodes=tuple(names)) for shape, names in members.items())
    return tuple(sorted(pools, key=lambda p: p.name))


def nodes_labelled_elsewhere(
    nodes: Iterable[NodeInfo], *, exclude_control_plane: bool
) -> tuple[str, ...]:
    """The names of the nodes :func:`discover_node_pools` leaves out for their
    ``kaiwo/nodepool`` set elsewhere, sorted: for the status to name."""
    return tuple(
        node.name
        for node in pool_members(nodes, exclude_control_plane=exclude_control_plane)
        if pool_label_set_elsewhere(node)
    )


def default_resource_flavors(
    pools: Sequence[NodePool], *, topology_name: str | None
) -> list[dict[str, Any]]:
    """KaiwoQueueConfig ``resourceFlavors`` entries (wire form) for the discovered pools."""
    return default_resource_flavors_named(
        [pool.name for pool in pools], topology_name=topology_name
    )


def default_resource_flavors_named(
    names: Iterable[str], *, topology_name: str | None
) -> list[dict[str, Any]]:
    """The discovered flavors of these pool names: a discovered flavor is its name alone
    (nodes labelled ``kaiwo/nodepool=<name>``), so one can be made again after its nodes
    are gone, for a default ClusterQueue that still names it."""
    flavors = []
    for name in names:
        flavor: dict[str, Any] = {"name": name, "nodeLabels": {NODEPOOL_LABEL: name}}
        if topology_name:
            flavor["topologyName"] = topology_name
        flavors.append(flavor)
    return flavors


def default_cluster_queue(pools: Sequence[NodePool], *, name: str, cohort: str) -> dict[str, Any]:
    """A KaiwoQueueConfig ``clusterQueues`` entry whose quotas are the pools' capacity."""
    quotas = {pool.name: pool.quotas() for pool in pools}
    gpu_keys = sorted({key for q in quotas.values() for key in q} - {"cpu", "memory"})
    covered = ["cpu", "memory", *gpu_keys]
    ordered = sorted(pools, key=lambda p: (p.shape.gpus, p.shape.cores, p.shape.memory_gib, p.name))
    flavors = [
        {
            "name": pool.name,
            "resources": [
                {"name": key, "nominalQuota": quotas[pool.name].get(key, "0")} for key in covered
            ],
        }
        for pool in ordered
    ]
    spec: dict[str, Any] = {"namespaceSelector": {}, "cohort": cohort}
    if flavors:
        spec["resourceGroups"] = [{"coveredResources": covered, "flavors": flavors}]
    return {"name": name, "spec": spec}


def default_topology(name: str) -> dict[str, Any]:
    """A KaiwoQueueConfig ``topologies`` entry: block, rack, host."""
    return {
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": label} for label in DEFAULT_TOPOLOGY_LEVELS]},
    }


def node_changes(
    nodes: Iterable[NodeInfo],
    *,
    exclude_control_plane: bool,
    add_gpu_taint: bool,
    gpu_taint_key: str,
    pools_in_force: Iterable[str] | None = None,
) -> list[dict[str, Any]]:
    """Partial Node objects with the labels (and taint, with its record) pool members must
    carry, by node name.

    Only Kaiwo's own keys: the executor merges them key by key into the node as it finds it,
    and never replaces a label value that another manager wrote. ``kaiwo/nodepool`` goes only
    to the nodes of ``pools_in_force`` (None: every pool), the pools whose discovered flavors
    are in force: with flavors of the user's own, it is the admin's to set (the API
    reference's example flavor selects ``kaiwo/nodepool: amd-gpu-nodes``), and never to a
    node whose value is set elsewhere (:func:`pool_label_set_elsewhere`). ``kaiwo/gpu-model``
    goes to every GPU node: a workload's ``gpuModels`` selects it whatever flavors the queue
    config lists (decision 0201). With ``exclude_control_plane``, the control-plane nodes
    that carry pool labels get partial Nodes removing them (:func:`pool_label_removals`).
    """
    nodes = tuple(nodes)
    in_force = None if pools_in_force is None else frozenset(pools_in_force)
    taint = gpu_taint(gpu_taint_key)
    changes = []
    for node in pool_members(nodes, exclude_control_plane=exclude_control_plane):
        shape = node_shape(node)
        labels = {
            # Keep an admin's topology placement; give unplaced nodes the default one.
            **{key: node.labels.get(key, value) for key, value in _DEFAULT_TOPOLOGY_VALUES.items()},
            WORKER_LABEL: "true",
        }
        # A value set elsewhere is not asked for: the executor would keep it anyway.
        if (in_force is None or shape.pool_name in in_force) and not pool_label_set_elsewhere(node):
            labels[NODEPOOL_LABEL] = shape.pool_name
        if shape.has_gpus:
            labels[GPU_MODEL_LABEL] = label_value(shape.gpu_model)
        partial: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node.name, "labels": dict(sorted(labels.items()))},
        }
        if add_gpu_taint and shape.has_gpus:
            # With its record: the executor moves a taint the operator recorded under another
            # key (a renamed defaultGpuTaintKey) to this one, and records it when it adds it.
            partial["metadata"]["annotations"] = {GPU_TAINT_RECORD_ANNOTATION: gpu_taint_key}
            partial["spec"] = {"taints": [taint.to_wire()]}
        changes.append(partial)
    if exclude_control_plane:
        changes.extend(pool_label_removals(nodes))
    return changes


def pool_label_removals(nodes: Iterable[NodeInfo]) -> list[dict[str, Any]]:
    """Partial Node objects removing the pool labels (``None``: a merge-patch removal) from
    the control-plane nodes that carry any, by node name: the nodes
    ``excludeMasterNodesFromNodePools`` leaves out of every pool.

    Only the keys a node carries are named, so a node without them gets no intent at all.
    Whose value each is the planner cannot tell (the projection holds no ``managedFields``):
    the executor removes only the values the operator wrote and no one else holds
    (``kaiwo_executor.node_merge``), so an admin's ``kaiwo/nodepool``, which their own flavor
    selects, stays. The GPU taint stays too, as when ``addTaintsToGpuNodes`` goes off
    (decision 0132)."""
    removals = []
    for node in sorted(nodes, key=lambda n: n.name):
        carried = [key for key in POOL_LABELS if key in node.labels]
        if node.is_control_plane and carried:
            removals.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": node.name, "labels": dict.fromkeys(carried)},
                }
            )
    return removals
