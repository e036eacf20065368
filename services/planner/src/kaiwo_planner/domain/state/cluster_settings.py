"""The configuration objects a plan reads from the cluster state, parsed once per snapshot.

KaiwoConfig ``kaiwo``, KaiwoQueueConfig ``kaiwo`` and the AIMNamespaceConfigs are observed
objects like any other (the projection keeps them in :attr:`ClusterState.objects`). Parsing
them is the costly part of planning, so each is parsed once per :class:`ClusterState` and
shared by every plan made from it (:meth:`ClusterState.derived`).

Choices:

* A KaiwoConfig that is missing or fails validation counts as ``KaiwoConfig.default()``: the
  operator keeps working with the documented defaults rather than stopping every workload.
* A KaiwoQueueConfig that fails validation counts as missing (workloads then report
  ``ClusterQueueNotFound``); its own plan says what is wrong with it.
* Several AIMNamespaceConfigs in one namespace: the first by name applies.

Across snapshots. Nearly every observation makes a new snapshot, but few change what these
values come from. A state taken from the projection keeps each of them until an object of
a kind it reads changes (:meth:`ClusterState.across_snapshots`: the KaiwoConfig, the
KaiwoQueueConfig, the nodes, the AIMNamespaceConfigs). Where that changed, the value is
still reused if the very objects it came from are unchanged, by *identity*: the projection
replaces an object when it changes and never edits one in place, so the same object means
the same value (:mod:`kaiwo_planner.domain.state.kept_values`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from kaiwo_contracts.crds.config_v1alpha1 import AIMNamespaceConfig, KaiwoConfig
from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KAIWO_CONFIG_NAME
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import (
    KAIWO_QUEUE_CONFIG_NAME,
    KaiwoQueueConfig,
)
from pydantic import ValidationError

from kaiwo_planner.domain.queues.node_pools import discover_node_pools
from kaiwo_planner.domain.queues.queue_config import effective_spec
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuStats, gpu_stats
from kaiwo_planner.domain.scheduling.schedulable import queue_namespaces
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.durations import parse_duration
from kaiwo_planner.domain.state.kept_values import kept

KAIWO_GROUP = "kaiwo.silogen.ai"
CONFIG_GROUP = "config.kaiwo.silogen.ai"
WORKLOAD_KINDS = ("KaiwoJob", "KaiwoService")
KAIWO_CONFIG_KIND = (CONFIG_GROUP, "KaiwoConfig")
QUEUE_CONFIG_KIND = (KAIWO_GROUP, "KaiwoQueueConfig")
NAMESPACE_CONFIG_KIND = (CONFIG_GROUP, "AIMNamespaceConfig")
NODE_KIND = ("", "Node")


def kaiwo_config(cluster: ClusterState) -> KaiwoConfig:
    """The KaiwoConfig in force (see the module docstring)."""
    return cluster.across_snapshots(
        ("kaiwo-config",), (KAIWO_CONFIG_KIND,), lambda: _parse_kaiwo_config(cluster)
    )


def _parse_kaiwo_config(cluster: ClusterState) -> KaiwoConfig:
    found = _kaiwo_config_object(cluster)
    return kept(("kaiwo-config",), (found,), lambda: _kaiwo_config_of(found))


def _kaiwo_config_object(cluster: ClusterState) -> dict[str, Any] | None:
    return cluster.find_object(group=CONFIG_GROUP, kind="KaiwoConfig", name=KAIWO_CONFIG_NAME)


def _kaiwo_config_of(found: Mapping[str, Any] | None) -> KaiwoConfig:
    if found is None:
        return KaiwoConfig.default()
    try:
        return KaiwoConfig.model_validate(found)
    except (ValidationError, TypeError, ValueError):
        return KaiwoConfig.default()


def queue_config(cluster: ClusterState) -> KaiwoQueueConfig | None:
    """The KaiwoQueueConfig ``kaiwo``, or None when it is missing or invalid."""
    return cluster.across_snapshots(
        ("queue-config",), (QUEUE_CONFIG_KIND,), lambda: _parse_queue_config(cluster)
    )


def _parse_queue_config(cluster: ClusterState) -> KaiwoQueueConfig | None:
    found = _queue_config_object(cluster)
    return kept(("queue-config",), (found,), lambda: _queue_config_of(found))


def _queue_config_object(cluster: ClusterState) -> dict[str, Any] | None:
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


def cluster_queue_namespaces(cluster: ClusterState) -> Mapping[str, tuple[str, ...]]:
    """Each cluster queue in force and the namespaces it is limited to (for Schedulable).

    The queues in force are those of the KaiwoQueueConfig's effective spec: with
    ``dynamicallyUpdateDefaultClusterQueue`` the default queue counts before it is written back.
    """
    return cluster.across_snapshots(
        ("queue-namespaces",),
        (QUEUE_CONFIG_KIND, KAIWO_CONFIG_KIND, NODE_KIND),
        lambda: _queue_namespaces(cluster),
    )


def _queue_namespaces(cluster: ClusterState) -> dict[str, tuple[str, ...]]:
    # From the queue config, the KaiwoConfig and the nodes only (see the module docstring).
    inputs = (_queue_config_object(cluster), _kaiwo_config_object(cluster), cluster.nodes)
    return kept(("queue-namespaces",), inputs, lambda: _queue_namespaces_of(cluster))


def _queue_namespaces_of(cluster: ClusterState) -> dict[str, tuple[str, ...]]:
    found = queue_config(cluster)
    if found is None:
        return {}
    config = kaiwo_config(cluster)
    pools = discover_node_pools(
        cluster.nodes,
        exclude_control_plane=config.spec.nodes.exclude_master_nodes_from_node_pools,
    )
    try:
        spec = effective_spec(found.spec, kaiwo_config=config, pools=pools)
    except (ValidationError, ValueError):
        spec = found.spec
    return queue_namespaces(spec)


def namespace_config(cluster: ClusterState, namespace: str) -> AIMNamespaceConfig | None:
    """The AIMNamespaceConfig of ``namespace`` (the first valid one by name), or None."""
    return cluster.across_snapshots(
        ("namespace-config", namespace),
        (NAMESPACE_CONFIG_KIND,),
        lambda: _parse_namespace_config(cluster, namespace),
    )


def _parse_namespace_config(cluster: ClusterState, namespace: str) -> AIMNamespaceConfig | None:
    found = tuple(
        obj
        for obj in cluster.objects_of_kind(group=CONFIG_GROUP, kind="AIMNamespaceConfig")
        if (obj.get("metadata") or {}).get("namespace") == namespace
    )
    return kept(("namespace-config", namespace), found, lambda: _first_valid(found))


def _first_valid(found: tuple[dict[str, Any], ...]) -> AIMNamespaceConfig | None:
    for obj in found:
        try:
            return AIMNamespaceConfig.model_validate(obj)
        except (ValidationError, TypeError, ValueError):
            continue
    return None


def vendor_gpu_stats(cluster: ClusterState, vendor: str) -> GpuStats:
    """GPU totals of ``vendor`` over the cluster's nodes."""
    wanted = vendor.lower()
    return cluster.across_snapshots(
        ("gpu-stats", wanted),
        (NODE_KIND,),
        lambda: kept(
            ("gpu-stats", wanted), (cluster.nodes,), lambda: gpu_stats(cluster.nodes, wanted)
        ),
    )


def workloads(cluster: ClusterState) -> tuple[dict[str, Any], ...]:
    """Every observed KaiwoJob and KaiwoService (wire form), KaiwoJobs first."""
    return tuple(
        obj
        for kind in WORKLOAD_KINDS
        for obj in cluster.objects_of_kind(group=KAIWO_GROUP, kind=kind)
    )


def workload_queue(spec: Mapping[str, Any], config: KaiwoConfig) -> str:
    """The cluster queue a workload (wire ``spec``) uses: its own, else KaiwoConfig's default."""
    queue = spec.get("clusterQueue")
    return queue if isinstance(queue, str) and queue else config.spec.default_cluster_queue_name


def namespaces_by_queue(cluster: ClusterState) -> Mapping[str, tuple[str, ...]]:
    """For each cluster queue, the namespaces of the workloads that use it (sorted)."""
    return cluster.derived(("namespaces-by-queue",), lambda: _namespaces_by_queue(cluster))


def _namespaces_by_queue(cluster: ClusterState) -> dict[str, tuple[str, ...]]:
    config = kaiwo_config(cluster)
    found: dict[str, set[str]] = {}
    uses = cluster.workload_queue_uses()
    if uses is not None:  # the projection counts them as workloads come and go
        default = config.spec.default_cluster_queue_name
        for declared, used_in in uses:
            found.setdefault(declared or default, set()).add(used_in)
        return {queue: tuple(sorted(names)) for queue, names in sorted(found.items())}
    for obj in workloads(cluster):
        namespace = (obj.get("metadata") or {}).get("namespace")
        spec = obj.get("spec")
        if isinstance(namespace, str) and namespace and isinstance(spec, Mapping):
            found.setdefault(workload_queue(spec, config), set()).add(namespace)
    return {queue: tuple(sorted(names)) for queue, names in sorted(found.items())}


def requested_gpus(spec: Mapping[str, Any]) -> int:
    """The GPUs a workload (wire ``spec``) holds: ``replicas x gpusPerReplica`` or ``gpus``."""
    replicas = _whole_number(spec.get("replicas"), default=1)
    per_replica = _whole_number(spec.get("gpusPerReplica"), default=0)
    if replicas > 0 and per_replica > 0:
        return replicas * per_replica
    return _whole_number(spec.get("gpus"), default=0)


def _whole_number(value: object, *, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return max(value, 0)


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
