"""KaiwoQueueConfig -> the Kueue objects it describes, node labels, and its status (upstream §8).

:func:`plan_queue_config` turns the singleton ``kaiwo`` KaiwoQueueConfig, the KaiwoConfig and
the cluster's nodes and namespaces into one :class:`~kaiwo_contracts.plans.Plan`:

* Kueue ``v1beta1`` Topologies, ResourceFlavors, ClusterQueues, LocalQueues (named like the
  ClusterQueue, one per listed namespace and, for a ClusterQueue that lists none, one per
  namespace whose KaiwoJobs or KaiwoServices use it) and WorkloadPriorityClasses;
* partial Node objects carrying the node-pool labels and, optionally, the GPU taint
  (:mod:`kaiwo_planner.domain.queues.node_pools`);
* the status, from the Kueue objects as observed (:mod:`~kaiwo_planner.domain.queues.kueue_sync`,
  decision 0048): READY only when each is as desired, and then the Ready condition's message
  names what the operator added to the user's spec (discovered flavors, the default
  ClusterQueue); PENDING while one is missing, not yet updated, being replaced, or kept
  because admitted workloads use it (reason ``KueueObjectInUse``); FAILED with a condition
  saying what is wrong with the spec. A change Kueue's CRDs refuse in place is planned as a
  delete (``Plan.delete``, by uid) and a create, with an Event.

The KaiwoQueueConfig's spec belongs to the user and is never written: with
``dynamicallyUpdateDefaultClusterQueue`` the discovered flavors, the default ClusterQueue and
the default Topology are merged into the spec *in force* (:func:`effective_spec`), which only
the Kueue objects carry. So they follow the nodes as they come and go, and the user can
re-apply their own manifest at any time (decision 0014).

Flavors come from the spec, or from node-pool discovery when the spec lists none.

Every Kueue object carries ``app.kubernetes.io/managed-by: kaiwo`` and
``kaiwo.silogen.ai/queue-config: kaiwo`` and a controller reference to the KaiwoQueueConfig;
the plan prunes only objects with those labels. Upstream deletes *every* ResourceFlavor,
ClusterQueue, WorkloadPriorityClass and Topology in the cluster that the spec does not list,
including ones other tools created; we leave those alone.

Other choices that differ from upstream:

* A ClusterQueue without ``namespaceSelector`` gets ``{}`` (every namespace), since its
  LocalQueues are the access control a KaiwoQueueConfig offers; Kueue's own default (null)
  would admit nothing.
* A flavor's ``taints`` and ``tolerations`` become the ResourceFlavor's ``nodeTaints`` and
  ``tolerations``; upstream accepts and ignores them.
* A LocalQueue whose namespace does not exist is left out and the status is FAILED (upstream
  fails the same way, after trying); the rest of the plan still applies.
* A flavor that names the default Topology brings that Topology along even when the spec does
  not list it, so discovered flavors are valid without ``dynamicallyUpdateDefaultClusterQueue``.
* Upstream creates the LocalQueue a workload needs from the workload's reconcile (§4.6), with
  an owner reference to the ClusterQueue, so two controllers write LocalQueues. Here the
  KaiwoQueueConfig plan is their one owner: ``workload_namespaces`` tells it which namespaces
  use which queue, and a LocalQueue no workload needs any more is pruned like the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import Any

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoConfig
from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import (
    KAIWO_QUEUE_CONFIG_NAME,
    KaiwoQueueConfig,
    KaiwoQueueConfigSpec,
)
from kaiwo_contracts.plans import (
    EventIntent,
    FinalizerRelease,
    ObjectRef,
    Plan,
    PruneRule,
    sort_objects,
)

from kaiwo_planner.domain.queues.kueue_sync import ObjectVerdict, judge_kueue_objects
from kaiwo_planner.domain.queues.node_pools import (
    WORKER_LABEL,
    NodePool,
    default_cluster_queue,
    default_resource_flavors,
    default_topology,
    discover_node_pools,
    node_changes,
)
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.status.conditions import ConditionSpec, merge_conditions

KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta1"
TOPOLOGY_API_VERSION = KUEUE_API_VERSION
"""Topology is v1beta1 since Kueue v0.14, like the other Kueue kinds (earlier releases served
it as v1alpha1 only; current ones no longer serve v1alpha1)."""
KQC_API_VERSION = "kaiwo.silogen.ai/v1alpha1"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
QUEUE_CONFIG_LABEL = "kaiwo.silogen.ai/queue-config"
MANAGED_LABELS: Mapping[str, str] = MappingProxyType(
    {
        MANAGED_BY_LABEL: "kaiwo",
        QUEUE_CONFIG_LABEL: KAIWO_QUEUE_CONFIG_NAME,
    }
)
READY_CONDITION = "Ready"
PENDING_REASON = "KueueObjectsPending"
"""Some Kueue object is missing, being updated, replaced or held by another owner."""
IN_USE_REASON = "KueueObjectInUse"
"""An immutable change waits: the object it needs replaced is used by admitted workloads."""
MAX_OBJECTS_NAMED = 5
ON_THE_WAY = "Kueue objects are being created or updated to match the KaiwoQueueConfig"

PRUNE_RULES = (
    PruneRule(api_version=KUEUE_API_VERSION, kind="ClusterQueue", namespaced=False),
    PruneRule(api_version=KUEUE_API_VERSION, kind="LocalQueue", namespaced=True),
    PruneRule(api_version=KUEUE_API_VERSION, kind="ResourceFlavor", namespaced=False),
    PruneRule(api_version=TOPOLOGY_API_VERSION, kind="Topology", namespaced=False),
    PruneRule(api_version=KUEUE_API_VERSION, kind="WorkloadPriorityClass", namespaced=False),
)


def plan_queue_config(
    *,
    queue_config: KaiwoQueueConfig,
    kaiwo_config: KaiwoConfig,
    cluster: ClusterState,
    now: datetime,
    workload_namespaces: Mapping[str, Iterable[str]] | None = None,
) -> Plan:
    """Everything that must be true for the KaiwoQueueConfig (see the module docstring).

    ``workload_namespaces``: for each cluster queue, the namespaces of the KaiwoJobs and
    KaiwoServices that use it (they get a LocalQueue when the queue lists no namespaces).
    """
    meta = queue_config.metadata
    owner = ObjectRef(
        api_version=KQC_API_VERSION,
        kind="KaiwoQueueConfig",
        name=meta.name or "",
        uid=meta.uid,
    )
    previous_status = queue_config.status.to_wire()
    if meta.name != KAIWO_QUEUE_CONFIG_NAME:
        problem = ConditionSpec(
            READY_CONDITION,
            "False",
            "UnsupportedName",
            f"only a KaiwoQueueConfig named '{KAIWO_QUEUE_CONFIG_NAME}' is acted on",
        )
        status, events = _status(previous_status, problem, generation=meta.generation, now=now)
        return Plan(
            owner=owner,
            observed_generation=meta.generation,
            observed_resource_version=meta.resource_version,
            status=status,
            events=events,
        )

    settings = kaiwo_config.spec
    pools = discover_node_pools(
        cluster.nodes, exclude_control_plane=settings.nodes.exclude_master_nodes_from_node_pools
    )
    spec = effective_spec(queue_config.spec, kaiwo_config=kaiwo_config, pools=pools)
    owner_reference = _owner_reference(owner)
    kueue_objects, missing_namespaces = kueue_objects_for(
        spec,
        default_topology_name=settings.default_topology_name,
        namespaces=cluster.namespaces,
        owner_reference=owner_reference,
        workload_namespaces=workload_namespaces,
    )
    judged = judge_kueue_objects(kueue_objects, cluster=cluster, owner_uid=owner.uid)
    desired = [
        *(verdict.manifest for verdict in judged),
        *node_changes(
            cluster.nodes,
            exclude_control_plane=settings.nodes.exclude_master_nodes_from_node_pools,
            add_gpu_taint=settings.nodes.add_taints_to_gpu_nodes,
            gpu_taint_key=settings.nodes.default_gpu_taint_key,
        ),
    ]
    verdict = _verdict(
        spec, missing_namespaces, judged, generated=_generated(spec, queue_config.spec)
    )
    status, events = _status(previous_status, verdict, generation=meta.generation, now=now)
    deletions = sorted(
        ((v.delete, v.release) for v in judged if v.delete is not None),
        key=lambda deletion: ObjectRef.sort_key(deletion[0]),
    )
    return Plan(
        owner=owner,
        observed_generation=meta.generation,
        observed_resource_version=meta.resource_version,
        desired=sort_objects(desired),
        status=status,
        events=(*events, *_recreate_events(judged)),
        prune=PRUNE_RULES,
        prune_selector=dict(MANAGED_LABELS),
        delete=tuple(target for target, _ in deletions),
        release_finalizers=tuple(
            FinalizerRelease(target=target, finalizers=release)
            for target, release in deletions
            if release
        ),
    )


def default_queue_config(*, kaiwo_config: KaiwoConfig, cluster: ClusterState) -> dict[str, Any]:
    """The KaiwoQueueConfig to create when none exists: discovered flavors, the default
    ClusterQueue over all of them, and the default Topology."""
    settings = kaiwo_config.spec
    pools = discover_node_pools(
        cluster.nodes, exclude_control_plane=settings.nodes.exclude_master_nodes_from_node_pools
    )
    return {
        "apiVersion": KQC_API_VERSION,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": KAIWO_QUEUE_CONFIG_NAME},
        "spec": {
            "clusterQueues": [
                default_cluster_queue(
                    pools,
                    name=settings.default_cluster_queue_name,
                    cohort=settings.default_cluster_queue_cohort_name,
                )
            ],
            "resourceFlavors": default_resource_flavors(
                pools, topology_name=settings.default_topology_name
            ),
            "topologies": [default_topology(settings.default_topology_name)],
        },
    }


def effective_spec(
    spec: KaiwoQueueConfigSpec, *, kaiwo_config: KaiwoConfig, pools: Sequence[NodePool]
) -> KaiwoQueueConfigSpec:
    """The spec in force.

    * No flavors listed: the discovered ones (the API reference's rule).
    * No ClusterQueues listed (the KaiwoQueueConfig the operator creates has an empty spec):
      the default ClusterQueue over the discovered flavors, and the default Topology.
    * ``dynamicallyUpdateDefaultClusterQueue``: the discovered flavors, the default
      ClusterQueue and the default Topology merged into the user's lists by name.
    """
    settings = kaiwo_config.spec
    wire = spec.to_wire()
    discovered = default_resource_flavors(pools, topology_name=settings.default_topology_name)
    default_queue = default_cluster_queue(
        pools,
        name=settings.default_cluster_queue_name,
        cohort=settings.default_cluster_queue_cohort_name,
    )
    topology = default_topology(settings.default_topology_name)
    if settings.dynamically_update_default_cluster_queue:
        wire["resourceFlavors"] = _merge_by_name(
            wire.get("resourceFlavors") or [], discovered, key=_entry_name
        )
        wire["clusterQueues"] = _merge_by_name(
            wire.get("clusterQueues") or [], [default_queue], key=_entry_name
        )
        wire["topologies"] = _merge_by_name(
            wire.get("topologies") or [], [topology], key=_metadata_name, replace=False
        )
        return KaiwoQueueConfigSpec.model_validate(wire)
    if not wire.get("resourceFlavors"):
        wire["resourceFlavors"] = discovered
    if not wire.get("clusterQueues"):
        wire["clusterQueues"] = [default_queue]
        wire["topologies"] = _merge_by_name(
            wire.get("topologies") or [], [topology], key=_metadata_name, replace=False
        )
    return KaiwoQueueConfigSpec.model_validate(wire)


def kueue_objects_for(
    spec: KaiwoQueueConfigSpec,
    *,
    default_topology_name: str,
    namespaces: Iterable[str],
    owner_reference: dict[str, Any] | None,
    workload_namespaces: Mapping[str, Iterable[str]] | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """The Kueue manifests of a spec, and the LocalQueue namespaces that do not exist.

    A queue listing no namespaces gets a LocalQueue in each of its ``workload_namespaces``;
    those exist (a workload lives there), so they are not checked against ``namespaces``.
    """
    existing_namespaces = set(namespaces)
    objects: list[dict[str, Any]] = []
    topologies = {str(t.metadata.name): t.spec.to_wire() for t in spec.topologies or ()}
    for flavor in spec.resource_flavors or ():
        if flavor.topology_name == default_topology_name and flavor.topology_name not in topologies:
            topologies[flavor.topology_name] = default_topology(default_topology_name)["spec"]
    objects.extend(
        _kueue("Topology", name, owner_reference, spec=topology_spec)
        for name, topology_spec in topologies.items()
    )
    objects.extend(
        _kueue("ResourceFlavor", flavor.name, owner_reference, spec=_flavor(flavor))
        for flavor in spec.resource_flavors or ()
    )
    missing: set[str] = set()
    for queue in spec.cluster_queues or ():
        queue_spec = queue.spec.to_wire()
        queue_spec.setdefault("namespaceSelector", {})
        objects.append(_kueue("ClusterQueue", queue.name, owner_reference, spec=queue_spec))
        listed = set(queue.namespaces or ())
        used = set() if listed else set((workload_namespaces or {}).get(queue.name, ()))
        for namespace in sorted(listed | used):
            if namespace not in used and namespace not in existing_namespaces:
                missing.add(namespace)
                continue
            objects.append(
                _kueue(
                    "LocalQueue",
                    queue.name,
                    owner_reference,
                    namespace=namespace,
                    spec={"clusterQueue": queue.name},
                )
            )
    for priority in spec.workload_priority_classes or ():
        extra: dict[str, Any] = {"value": priority.value}
        if priority.description is not None:
            extra["description"] = priority.description
        objects.append(
            _kueue("WorkloadPriorityClass", str(priority.metadata.name), owner_reference, **extra)
        )
    return objects, sorted(missing)


def _flavor(flavor: Any) -> dict[str, Any]:
    labels = dict(flavor.node_labels or {})
    spec: dict[str, Any] = {}
    if flavor.topology_name:
        spec["topologyName"] = flavor.topology_name
    else:
        labels[WORKER_LABEL] = "true"  # only Kaiwo-labelled nodes, as upstream
    spec["nodeLabels"] = dict(sorted(labels.items()))
    if flavor.taints:
        spec["nodeTaints"] = [t.to_wire() for t in flavor.taints]
    if flavor.tolerations:
        spec["tolerations"] = [t.to_wire() for t in flavor.tolerations]
    return spec


def _kueue(
    kind: str,
    name: str,
    owner_reference: dict[str, Any] | None,
    *,
    namespace: str | None = None,
    **body: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    metadata["labels"] = dict(MANAGED_LABELS)
    if owner_reference is not None:
        metadata["ownerReferences"] = [owner_reference]
    api_version = TOPOLOGY_API_VERSION if kind == "Topology" else KUEUE_API_VERSION
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **body}


def _owner_reference(owner: ObjectRef) -> dict[str, Any] | None:
    if not owner.uid:
        return None
    return {
        "apiVersion": owner.api_version,
        "kind": owner.kind,
        "name": owner.name,
        "uid": owner.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _generated(effective: KaiwoQueueConfigSpec, written: KaiwoQueueConfigSpec) -> str:
    """What the spec in force adds to or changes in the user's spec, for the Ready message."""
    user_flavors = {f.name: f for f in written.resource_flavors or ()}
    user_queues = {q.name: q for q in written.cluster_queues or ()}
    flavors = [f.name for f in effective.resource_flavors or () if user_flavors.get(f.name) != f]
    queues = [q.name for q in effective.cluster_queues or () if user_queues.get(q.name) != q]
    parts = []
    if queues:
        parts.append("ClusterQueues " + ", ".join(queues))
    if flavors:
        parts.append("ResourceFlavors " + ", ".join(flavors))
    return f" (generated from the nodes: {'; '.join(parts)})" if parts else ""


def _verdict(
    spec: KaiwoQueueConfigSpec,
    missing_namespaces: Sequence[str],
    judged: Sequence[ObjectVerdict],
    *,
    generated: str,
) -> ConditionSpec:
    flavors = {f.name for f in spec.resource_flavors or ()}
    unknown = sorted(
        {
            f"{queue.name}/{flavor.name}"
            for queue in spec.cluster_queues or ()
            for group in queue.spec.resource_groups or ()
            for flavor in group.flavors
            if flavor.name not in flavors
        }
    )
    if missing_namespaces:
        return ConditionSpec(
            READY_CONDITION,
            "False",
            "NamespaceNotFound",
            "LocalQueues cannot be created in missing namespaces: " + ", ".join(missing_namespaces),
        )
    if unknown:
        return ConditionSpec(
            READY_CONDITION,
            "False",
            "ResourceFlavorNotFound",
            "ClusterQueues refer to ResourceFlavors that are not defined: " + ", ".join(unknown),
        )
    held = [v for v in judged if v.state == "held"]
    if held:
        return ConditionSpec(READY_CONDITION, "False", IN_USE_REASON, _named(held))
    # Objects on their way (created or updated, not yet observed) are not named: each one
    # coming back would change the message, and so publish a plan and write a status, for
    # every object of a new KaiwoQueueConfig. A refused apply is named by the executor.
    named = [v for v in judged if v.state in ("foreign", "replaced", "deleting")]
    on_the_way = any(v.state in ("missing", "updating") for v in judged)
    if named:
        message = "Kueue objects are not yet as the KaiwoQueueConfig describes: " + _named(named)
        if on_the_way:
            message += "; other Kueue objects are being created or updated"
        return ConditionSpec(READY_CONDITION, "False", PENDING_REASON, message)
    if on_the_way:
        return ConditionSpec(READY_CONDITION, "False", PENDING_REASON, ON_THE_WAY)
    return ConditionSpec(
        READY_CONDITION,
        "True",
        "KueueObjectsMatch",
        "Kueue objects match the KaiwoQueueConfig" + generated,
    )


def _named(verdicts: Sequence[ObjectVerdict]) -> str:
    named = "; ".join(v.describe() for v in verdicts[:MAX_OBJECTS_NAMED])
    more = len(verdicts) - MAX_OBJECTS_NAMED
    return named + (f"; and {more} more" if more > 0 else "")


def _recreate_events(judged: Sequence[ObjectVerdict]) -> list[EventIntent]:
    """Upstream's ``KaiwoQueueConfig<Kind>Recreated``, once per object the plan replaces."""
    return [
        EventIntent(
            type="Normal",
            reason=f"KaiwoQueueConfig{v.manifest.get('kind')}Recreated",
            message=v.describe(),
        )
        for v in judged
        if v.state == "replaced"
    ]


def _status(
    previous: Mapping[str, Any],
    verdict: ConditionSpec,
    *,
    generation: int | None,
    now: datetime,
) -> tuple[dict[str, Any], tuple[EventIntent, ...]]:
    if verdict.status == "True":
        phase = WorkloadStatus.READY
    elif verdict.reason in (PENDING_REASON, IN_USE_REASON):
        phase = WorkloadStatus.PENDING
    else:
        phase = WorkloadStatus.FAILED
    status = {
        "status": phase.value,
        "conditions": merge_conditions(
            previous.get("conditions") or (), [verdict], generation=generation or 0, now=now
        ),
    }
    before = next(
        (
            c
            for c in previous.get("conditions") or ()
            if isinstance(c, Mapping) and c.get("type") == READY_CONDITION
        ),
        {},
    )
    if verdict.reason == IN_USE_REASON:
        if before.get("reason") == IN_USE_REASON and before.get("message") == verdict.message:
            return status, ()
        return status, (EventIntent(type="Warning", reason=IN_USE_REASON, message=verdict.message),)
    if previous.get("status") == phase.value or phase is WorkloadStatus.PENDING:
        return status, ()
    if phase is WorkloadStatus.READY:
        return status, (
            EventIntent(type="Normal", reason="KaiwoQueueConfigReady", message=verdict.message),
        )
    return status, (
        EventIntent(type="Warning", reason="KaiwoQueueConfigFailed", message=verdict.message),
    )


def _entry_name(entry: Mapping[str, Any]) -> str:
    return str(entry.get("name", ""))


def _metadata_name(entry: Mapping[str, Any]) -> str:
    return str((entry.get("metadata") or {}).get("name", ""))


def _merge_by_name(
    current: Sequence[dict[str, Any]],
    generated: Sequence[dict[str, Any]],
    *,
    key: Any,
    replace: bool = True,
) -> list[dict[str, Any]]:
    """``current`` with same-named entries replaced by ``generated`` ones (in place), and the
    other generated entries appended in their order."""
    fresh = {key(entry): entry for entry in generated}
    merged = [
        fresh.pop(key(entry)) if replace and key(entry) in fresh else entry for entry in current
    ]
    present = {key(entry) for entry in merged}
    merged.extend(entry for name, entry in fresh.items() if name not in present)
    return merged
