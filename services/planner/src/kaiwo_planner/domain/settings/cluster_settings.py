"""The configuration objects a plan reads from the cluster state, parsed once per context.

KaiwoConfig ``kaiwo``, KaiwoQueueConfig ``kaiwo`` and the AIMNamespaceConfigs are observed
objects like any other (the projection files them in the cluster state's index). Parsing
them is the costly part of planning, so each is parsed once per
:class:`~kaiwo_planner.domain.state.planning_context.PlanningContext` and shared by every
plan made with it.

Choices:

* A KaiwoConfig that is missing or fails validation counts as ``KaiwoConfig.default()``: the
  operator keeps working with the documented defaults rather than stopping every workload
  (an invalid one's own plan is a Warning Event on it saying so, decision 0206).
* A KaiwoQueueConfig that fails validation counts as missing; workloads waiting for a queue
  then report ``QueueConfigInvalid``, naming it (:func:`queue_config_invalid`), and its own
  plan says what is wrong with it.
* Several AIMNamespaceConfigs in one namespace: the first valid one by name applies (each
  other valid one's own plan is a Warning Event on it saying so, decision 0209).

Across states. Nearly every observation makes a new state, but few change what these
values come from. Each is declared with the kinds it reads (the KaiwoConfig, the
KaiwoQueueConfig, the nodes, the AIMNamespaceConfigs), so a context carried to the next
state keeps it until an object of one of those kinds changes; and even then, when the very
objects it came from are unchanged (``inputs``), the value is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from kaiwo_contracts.confinement import GPU_TAINT_EFFECT
from kaiwo_contracts.crds.config_v1alpha1 import AIMNamespaceConfig, KaiwoConfig
from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KAIWO_CONFIG_NAME
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import (
    KAIWO_QUEUE_CONFIG_NAME,
    KaiwoQueueConfig,
)
from pydantic import ValidationError

from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.durations import parse_duration
from kaiwo_planner.domain.state.nodes import NODEPOOL_LABEL
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.state.priority_classes import KnownPriorityClasses

KAIWO_GROUP = "kaiwo.silogen.ai"
CONFIG_GROUP = "config.kaiwo.silogen.ai"
WORKLOAD_KINDS = ("KaiwoJob", "KaiwoService")
KAIWO_CONFIG_KIND = (CONFIG_GROUP, "KaiwoConfig")
QUEUE_CONFIG_KIND = (KAIWO_GROUP, "KaiwoQueueConfig")
NAMESPACE_CONFIG_KIND = (CONFIG_GROUP, "AIMNamespaceConfig")
NODE_KIND = ("", "Node")
NAMESPACE_KIND = ("", "Namespace")
PRIORITY_CLASS_KIND = ("scheduling.k8s.io", "PriorityClass")
WORKLOAD_PRIORITY_CLASS_KIND = ("kueue.x-k8s.io", "WorkloadPriorityClass")
WORKLOAD_KIND_PAIRS = tuple((KAIWO_GROUP, kind) for kind in WORKLOAD_KINDS)


def kaiwo_config(context: PlanningContext) -> KaiwoConfig:
    """The KaiwoConfig in force (see the module docstring)."""
    cluster = context.cluster
    return context.derived(
        ("kaiwo-config",),
        reads=(KAIWO_CONFIG_KIND,),
        inputs=lambda: (kaiwo_config_object(cluster),),
        compute=lambda: _kaiwo_config_of(kaiwo_config_object(cluster)),
    )


def kaiwo_config_object(cluster: ClusterState) -> Mapping[str, Any] | None:
    """The observed KaiwoConfig ``kaiwo`` (wire form), or None."""
    return cluster.find_object(group=CONFIG_GROUP, kind="KaiwoConfig", name=KAIWO_CONFIG_NAME)


def _kaiwo_config_of(found: Mapping[str, Any] | None) -> KaiwoConfig:
    if found is None:
        return KaiwoConfig.default()
    try:
        return KaiwoConfig.model_validate(found)
    except (ValidationError, TypeError, ValueError):
        return KaiwoConfig.default()


def gpu_taint_on_nodes(context: PlanningContext, key: str) -> bool:
    """Some Node carries a ``NoSchedule`` taint of ``key`` (KaiwoConfig's
    ``nodes.defaultGpuTaintKey``), whoever put it there: the operator, while
    ``addTaintsToGpuNodes`` was on (turning it off leaves the taint, decision 0132), or an
    administrator."""
    nodes = context.cluster.nodes
    return context.derived(
        ("gpu-taint-on-nodes", key),
        reads=(NODE_KIND,),
        inputs=lambda: (nodes,),
        compute=lambda: any(
            taint.key == key and taint.effect == GPU_TAINT_EFFECT
            for node in nodes
            for taint in node.taints
        ),
    )


def pools_with_nodes(context: PlanningContext) -> frozenset[str]:
    """The node pools (``kaiwo/nodepool`` values) some Node is in now."""
    nodes = context.cluster.nodes
    return context.derived(
        ("pools-with-nodes",),
        reads=(NODE_KIND,),
        inputs=lambda: (nodes,),
        compute=lambda: frozenset(
            pool for node in nodes if (pool := node.labels.get(NODEPOOL_LABEL))
        ),
    )


def recorded_gpu_taint_keys(context: PlanningContext) -> tuple[str, ...]:
    """The keys, sorted, of the GPU taints the operator recorded on Nodes that still carry
    them (:attr:`~kaiwo_planner.domain.state.nodes.NodeInfo.recorded_gpu_taint_key`): the
    operator's own taints, whatever ``defaultGpuTaintKey`` and ``addTaintsToGpuNodes`` say
    now (decision 0149)."""
    nodes = context.cluster.nodes
    return context.derived(
        ("recorded-gpu-taint-keys",),
        reads=(NODE_KIND,),
        inputs=lambda: (nodes,),
        compute=lambda: tuple(
            sorted({key for node in nodes if (key := node.recorded_gpu_taint_key) is not None})
        ),
    )


def queue_config(context: PlanningContext) -> KaiwoQueueConfig | None:
    """The KaiwoQueueConfig ``kaiwo``, or None when it is missing or invalid."""
    cluster = context.cluster
    return context.derived(
        ("queue-config",),
        reads=(QUEUE_CONFIG_KIND,),
        inputs=lambda: (queue_config_object(cluster),),
        compute=lambda: _queue_config_of(queue_config_object(cluster)),
    )


def queue_config_invalid(context: PlanningContext) -> bool:
    """Whether the KaiwoQueueConfig ``kaiwo`` exists and fails validation (so none of its
    queues is in force)."""
    return queue_config_object(context.cluster) is not None and queue_config(context) is None


def queue_config_object(cluster: ClusterState) -> Mapping[str, Any] | None:
    return cluster.find_object(
        group=KAIWO_GROUP, kind="KaiwoQueueConfig", name=KAIWO_QUEUE_CONFIG_NAME
    )


def _queue_config_of(found: Mapping[str, Any] | None) -> KaiwoQueueConfig | None:
    if found is None:
        return None
    try:
        return KaiwoQueueConfig.model_validate(found)
    except (ValidationError, TypeError, ValueError):
        return None


def known_priority_classes(context: PlanningContext) -> KnownPriorityClasses:
    """The names a workload's ``priorityClass`` may resolve to: the observed PriorityClasses,
    and the WorkloadPriorityClasses observed or declared by the KaiwoQueueConfig (which the
    planner creates, so a workload naming one need not wait for it to be observed)."""
    cluster = context.cluster
    return context.derived(
        ("priority-classes",),
        reads=(PRIORITY_CLASS_KIND, WORKLOAD_PRIORITY_CLASS_KIND, QUEUE_CONFIG_KIND),
        inputs=lambda: (
            _objects(cluster, PRIORITY_CLASS_KIND),
            _objects(cluster, WORKLOAD_PRIORITY_CLASS_KIND),
            queue_config_object(cluster),
        ),
        compute=lambda: _known_priority_classes(context),
    )


def _known_priority_classes(context: PlanningContext) -> KnownPriorityClasses:
    cluster = context.cluster
    found = queue_config(context)
    declared = {
        str(priority.metadata.name)
        for priority in (found.spec.workload_priority_classes if found is not None else None) or ()
    }
    return KnownPriorityClasses(
        kubernetes=frozenset(_names(_objects(cluster, PRIORITY_CLASS_KIND))),
        kueue=frozenset(declared | set(_names(_objects(cluster, WORKLOAD_PRIORITY_CLASS_KIND)))),
    )


def _objects(cluster: ClusterState, kind: tuple[str, str]) -> tuple[Mapping[str, Any], ...]:
    group, name = kind
    return cluster.objects_of_kind(group=group, kind=name)


def _names(objects: tuple[Mapping[str, Any], ...]) -> list[str]:
    return [str((obj.get("metadata") or {}).get("name") or "") for obj in objects]


def namespace_config(context: PlanningContext, namespace: str) -> AIMNamespaceConfig | None:
    """The AIMNamespaceConfig of ``namespace`` (the first valid one by name), or None."""
    found = _namespace_config_in_force(context, namespace)
    return found[1] if found is not None else None


def namespace_config_object(context: PlanningContext, namespace: str) -> Mapping[str, Any] | None:
    """The observed AIMNamespaceConfig in force in ``namespace`` (wire form), or None."""
    found = _namespace_config_in_force(context, namespace)
    return found[0] if found is not None else None


def _namespace_config_in_force(
    context: PlanningContext, namespace: str
) -> tuple[Mapping[str, Any], AIMNamespaceConfig] | None:
    cluster = context.cluster
    return context.derived(
        ("namespace-config", namespace),
        reads=(NAMESPACE_CONFIG_KIND,),
        inputs=lambda: _namespace_configs(cluster, namespace),
        compute=lambda: _first_valid(_namespace_configs(cluster, namespace)),
    )


def _namespace_configs(cluster: ClusterState, namespace: str) -> tuple[Mapping[str, Any], ...]:
    return tuple(
        obj
        for obj in cluster.objects_of_kind(group=CONFIG_GROUP, kind="AIMNamespaceConfig")
        if (obj.get("metadata") or {}).get("namespace") == namespace
    )


def _first_valid(
    found: tuple[Mapping[str, Any], ...],
) -> tuple[Mapping[str, Any], AIMNamespaceConfig] | None:
    for obj in found:
        try:
            return obj, AIMNamespaceConfig.model_validate(obj)
        except (ValidationError, TypeError, ValueError):
            continue
    return None


def pending_threshold(context: PlanningContext) -> timedelta:
    """How long a workload waits for GPUs before others may be preempted for it
    (KaiwoConfig's ``pendingThresholdForPreemption``)."""
    return context.derived(
        ("pending-threshold",),
        reads=(KAIWO_CONFIG_KIND,),
        compute=lambda: parse_duration(
            kaiwo_config(context).spec.scheduling.pending_threshold_for_preemption
        ),
    )


def workloads(cluster: ClusterState) -> tuple[Mapping[str, Any], ...]:
    """Every observed KaiwoJob and KaiwoService (wire form), KaiwoJobs first."""
    return tuple(
        obj
        for kind in WORKLOAD_KINDS
        for obj in cluster.objects_of_kind(group=KAIWO_GROUP, kind=kind)
    )


def waits_for_nothing(workload: Mapping[str, Any], cluster: ClusterState) -> bool:
    """The workload (wire form), or its Namespace, is being deleted: waiting, it is no GPU
    demand, as it goes within seconds (decision 0130; a foreground deletion keeps it PENDING
    until its Job is gone, another controller's finalizer for longer)."""
    metadata = workload.get("metadata") or {}
    return bool(metadata.get("deletionTimestamp")) or namespace_being_deleted(
        cluster, str(metadata.get("namespace") or "")
    )


def namespace_being_deleted(cluster: ClusterState, namespace: str) -> bool:
    """The Namespace has a ``deletionTimestamp``: the namespace controller is removing what it
    holds, workloads and their children, in no set order (decision 0130)."""
    found = cluster.find_object(group="", kind="Namespace", name=namespace)
    return bool(((found or {}).get("metadata") or {}).get("deletionTimestamp"))


def workload_queue(spec: Mapping[str, Any], config: KaiwoConfig) -> str:
    """The cluster queue a workload (wire ``spec``) uses: its own, else KaiwoConfig's default."""
    queue = spec.get("clusterQueue")
    return queue if isinstance(queue, str) and queue else config.spec.default_cluster_queue_name


def namespaces_by_queue(context: PlanningContext) -> Mapping[str, tuple[str, ...]]:
    """For each cluster queue, the namespaces of the workloads that use it (sorted)."""
    return context.derived(
        ("namespaces-by-queue",),
        reads=(*WORKLOAD_KIND_PAIRS, KAIWO_CONFIG_KIND),
        compute=lambda: _namespaces_by_queue(context),
    )


def _namespaces_by_queue(context: PlanningContext) -> dict[str, tuple[str, ...]]:
    default = kaiwo_config(context).spec.default_cluster_queue_name
    found: dict[str, set[str]] = {}
    # The index counts the (declared queue, namespace) pairs as workloads come and go.
    for declared, used_in in context.cluster.workload_queue_uses():
        found.setdefault(declared or default, set()).add(used_in)
    return {queue: tuple(sorted(names)) for queue, names in sorted(found.items())}


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 timestamp from the wire (None when absent or unreadable)."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def parse_optional_duration(value: object) -> timedelta | None:
    """A Go duration from the wire (None when absent or unreadable)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_duration(value)
    except ValueError:
        return None
