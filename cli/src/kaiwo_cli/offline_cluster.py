"""The cluster ``kaiwo plan`` plans against, read from files (:class:`OfflineCluster`), and
how the gaps the files leave are filled the way a cluster would fill them: uids, namespaces,
nodes, the KaiwoQueueConfig, PriorityClasses, owner references. Every filling is said, so the
output can print it (see :mod:`kaiwo_cli.commands.plan`)."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kaiwo_contracts.crds.config_v1alpha1 import KaiwoConfig
from kaiwo_contracts.validation import validate_manifest
from kaiwo_planner.domain.queues.queue_config import default_queue_config
from kaiwo_planner.domain.scheduling.gpu_allocation import allocated_gpus, no_nodes
from kaiwo_planner.domain.settings.cluster_settings import workload_queue
from kaiwo_planner.domain.state.cluster import ClusterState

WORKLOAD_KINDS = frozenset({"KaiwoJob", "KaiwoService"})
NAMESPACED_SERVED_KINDS = frozenset({"KaiwoJob", "KaiwoService", "AIMNamespaceConfig", "Model"})
GPUS_PER_ASSUMED_NODE = 8
MAX_ASSUMED_NODES = 128
"""More GPUs than these nodes hold are planned as not fitting, like on a real cluster."""
UID_NAMESPACE = uuid.UUID("9a7c1f4e-2b1d-4a57-9d4e-6f1c0e8b5a31")


@dataclass(frozen=True, slots=True)
class Document:
    """One object read from a file, and where it came from (``source`` for messages)."""

    source: str
    content: dict[str, Any]


@dataclass(slots=True)
class OfflineCluster:
    """Everything read from the files, and what was assumed to fill the gaps."""

    manifests: list[Document]
    nodes: list[dict[str, Any]] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)
    kueue_workloads: list[dict[str, Any]] = field(default_factory=list)
    namespaces: set[str] = field(default_factory=set)
    assumptions: list[str] = field(default_factory=list)
    filled: dict[str, list[str]] = field(default_factory=dict)

    def state(self) -> ClusterState:
        return ClusterState.from_wire(
            nodes=self.nodes,
            objects=self.objects,
            kueue_workloads=self.kueue_workloads,
            namespaces=self.namespaces,
        )


def by_identity(objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One object per kind, namespace and name; a later one replaces an earlier one."""
    unique: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for obj in objects:
        meta = obj.get("metadata") or {}
        key = (
            str(obj.get("apiVersion")),
            str(obj.get("kind")),
            str(meta.get("namespace") or ""),
            str(meta.get("name")),
        )
        unique[key] = obj
    return list(unique.values())


def derived_uid(obj: Mapping[str, Any]) -> str:
    """A repeatable uid for an object that has none (from its kind, namespace and name)."""
    meta = obj.get("metadata") or {}
    key = f"{obj.get('apiVersion')}/{obj.get('kind')}/{meta.get('namespace') or ''}/{meta['name']}"
    return str(uuid.uuid5(UID_NAMESPACE, key))


def fill_manifest(content: dict[str, Any], *, now: datetime) -> list[str]:
    """Give a manifest what the API server would on creation; say what was given."""
    meta = content.setdefault("metadata", {})
    notes = []
    if content.get("kind") in NAMESPACED_SERVED_KINDS and not meta.get("namespace"):
        meta["namespace"] = "default"
        notes.append("metadata.namespace: default (the manifest names none)")
    if not meta.get("uid"):
        meta["uid"] = derived_uid(content)
        notes.append(
            f"metadata.uid: {meta['uid']} (derived from kind, namespace and name; "
            "the manifest has none)"
        )
    if "generation" not in meta:
        meta["generation"] = 1
    if not meta.get("creationTimestamp"):
        meta["creationTimestamp"] = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return notes


def place_observed(obj: dict[str, Any], cluster: OfflineCluster) -> None:
    meta = obj.setdefault("metadata", {})
    if not meta.get("uid"):
        meta["uid"] = derived_uid(obj)
    kind = obj.get("kind")
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    if kind == "Node" and group == "":
        cluster.nodes.append(obj)
    elif kind == "Namespace" and group == "":
        cluster.namespaces.add(str(meta["name"]))
    elif kind == "Workload" and group == "kueue.x-k8s.io":
        cluster.kueue_workloads.append(obj)
    else:
        if "ownerReferences" not in meta:
            owner = _only_workload_in(cluster, meta.get("namespace"))
            if owner is not None and kind not in WORKLOAD_KINDS:
                meta["ownerReferences"] = [_reference_to(owner)]
        cluster.objects = by_identity([*cluster.objects, obj])


def _only_workload_in(cluster: OfflineCluster, namespace: object) -> dict[str, Any] | None:
    found = [
        d.content
        for d in cluster.manifests
        if d.content.get("kind") in WORKLOAD_KINDS
        and d.content["metadata"].get("namespace") == namespace
    ]
    return found[0] if len(found) == 1 else None


def _reference_to(owner: Mapping[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def resolve_owner_references(cluster: OfflineCluster) -> None:
    """Owner references written as kind and name get the uid of that object."""
    everything = [*cluster.objects, *cluster.kueue_workloads]
    by_name = {
        (
            str(o.get("kind")),
            str(o["metadata"].get("namespace") or ""),
            str(o["metadata"]["name"]),
        ): o
        for o in everything
    }
    for obj in everything:
        meta = obj["metadata"]
        for reference in meta.get("ownerReferences") or []:
            if isinstance(reference, dict) and not reference.get("uid"):
                key = (
                    str(reference.get("kind")),
                    str(meta.get("namespace") or ""),
                    str(reference.get("name")),
                )
                target = by_name.get(key)
                if target is not None:
                    reference["uid"] = target["metadata"]["uid"]


def _workloads(cluster: OfflineCluster) -> list[dict[str, Any]]:
    return [o for o in cluster.objects if o.get("kind") in WORKLOAD_KINDS]


def assume_nodes(cluster: OfflineCluster, *, given: bool) -> None:
    if given or cluster.nodes:
        return
    needed: dict[str, int] = {}
    for workload in _workloads(cluster):
        if validate_manifest(workload):
            continue  # planned as invalid; its GPU count may be anything at all
        spec = workload.get("spec") or {}
        vendor = str(spec.get("gpuVendor") or "amd").lower()
        gpus = allocated_gpus(workload, no_nodes)
        if gpus > 0 and vendor in {"amd", "nvidia"}:
            count = min(math.ceil(gpus / GPUS_PER_ASSUMED_NODE), MAX_ASSUMED_NODES)
            needed[vendor] = max(needed.get(vendor, 0), count)
    for vendor, count in sorted(needed.items()):
        cluster.nodes.extend(_assumed_node(vendor, index) for index in range(count))
    if needed:
        listed = ", ".join(f"{count} x {vendor}" for vendor, count in sorted(needed.items()))
        cluster.assumptions.append(
            f"nodes: none given (--nodes); assumed {GPUS_PER_ASSUMED_NODE}-GPU nodes: {listed}"
        )


def _assumed_node(vendor: str, index: int) -> dict[str, Any]:
    gpus = str(GPUS_PER_ASSUMED_NODE)
    if vendor == "amd":
        labels = {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"}
        labels["beta.amd.com/gpu.family.AI"] = gpus
        resource = "amd.com/gpu"
    else:
        labels = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": gpus}
        resource = "nvidia.com/gpu"
    capacity = {"cpu": "128", "memory": "1Ti", resource: gpus}
    name = f"assumed-{vendor}-{index}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _kaiwo_config(cluster: OfflineCluster) -> KaiwoConfig:
    for obj in cluster.objects:
        if obj.get("kind") == "KaiwoConfig" and obj["metadata"].get("name") == "kaiwo":
            return KaiwoConfig.model_validate(obj)
    return KaiwoConfig.default()


def assume_queue_config(cluster: OfflineCluster) -> None:
    if any(
        o.get("kind") == "KaiwoQueueConfig" and o["metadata"].get("name") == "kaiwo"
        for o in cluster.objects
    ):
        return
    kaiwo_config = _kaiwo_config(cluster)
    assumed = default_queue_config(
        kaiwo_config=kaiwo_config, cluster=ClusterState.from_wire(nodes=cluster.nodes)
    )
    template = assumed["spec"]["clusterQueues"][0]
    queues = {template["name"]}
    for workload in _workloads(cluster):
        name = workload_queue(workload.get("spec") or {}, kaiwo_config)
        if name not in queues:
            queues.add(name)
            assumed["spec"]["clusterQueues"].append({**template, "name": name})
    assumed["metadata"]["uid"] = derived_uid(assumed)
    assumed["metadata"]["generation"] = 1
    cluster.objects.append(assumed)
    cluster.assumptions.append(
        "queue config: none given (--queue-config); assumed the default KaiwoQueueConfig "
        f"with open cluster queues {', '.join(sorted(queues))}"
    )


def assume_priority_classes(cluster: OfflineCluster) -> None:
    """A PriorityClass for each ``priorityClass`` a workload names that nothing given defines
    (neither a PriorityClass nor a WorkloadPriorityClass, of the queue config or observed): on
    a cluster such a workload would wait for one (decision 0045)."""
    defined = {
        str(o["metadata"].get("name"))
        for o in cluster.objects
        if o.get("kind") in ("PriorityClass", "WorkloadPriorityClass")
    }
    for queue_config in (o for o in cluster.objects if o.get("kind") == "KaiwoQueueConfig"):
        for priority in (queue_config.get("spec") or {}).get("workloadPriorityClasses") or ():
            defined.add(str((priority.get("metadata") or {}).get("name")))
    named = {
        str(spec["priorityClass"])
        for workload in _workloads(cluster)
        if (spec := workload.get("spec") or {}).get("priorityClass")
    }
    for name in sorted(named - defined):
        assumed: dict[str, Any] = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": 0,
        }
        assumed["metadata"]["uid"] = derived_uid(assumed)
        cluster.objects.append(assumed)
        cluster.assumptions.append(
            f"priority class: {name} is named but not given (--observed); assumed a "
            "PriorityClass of that name exists"
        )


def assume_namespaces(cluster: OfflineCluster) -> None:
    if cluster.namespaces:
        return
    mentioned = {
        str(o["metadata"]["namespace"])
        for o in [*cluster.objects, *cluster.kueue_workloads]
        if o["metadata"].get("namespace")
    }
    for obj in cluster.objects:
        if obj.get("kind") == "KaiwoQueueConfig":
            for queue in (obj.get("spec") or {}).get("clusterQueues") or []:
                mentioned.update(str(n) for n in queue.get("namespaces") or [])
    cluster.namespaces = mentioned
    if mentioned:
        cluster.assumptions.append(
            "namespaces: no Namespace objects given (--observed); assumed to exist: "
            + ", ".join(sorted(mentioned))
        )
