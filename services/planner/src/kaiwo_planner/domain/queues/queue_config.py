"""KaiwoQueueConfig -> the Kueue objects it describes, node labels, and its status (upstream §8).

:func:`plan_queue_config` turns the singleton ``kaiwo`` KaiwoQueueConfig, the KaiwoConfig and
the cluster's nodes and namespaces into one :class:`~kaiwo_contracts.plans.Plan`:

* Kueue ``v1beta1`` Topologies, ResourceFlavors, ClusterQueues, LocalQueues (named like the
  ClusterQueue, one per listed namespace and, for a ClusterQueue that lists none, one per
  namespace whose KaiwoJobs or KaiwoServices use it) and WorkloadPriorityClasses
  (:mod:`~kaiwo_planner.domain.queues.kueue_objects`);
* partial Node objects carrying the node-pool labels and, optionally, the GPU taint
  (:mod:`kaiwo_planner.domain.queues.node_pools`);
* the status (:mod:`~kaiwo_planner.domain.queues.queue_config_status`), from the Kueue objects
  as observed (:mod:`~kaiwo_planner.domain.queues.kueue_sync`, decision 0048): READY only when
  each is as desired, and then the Ready condition's message names what the operator added to
  the user's spec (discovered flavors, the default ClusterQueue); PENDING while one is missing,
  not yet updated, being replaced, or kept because admitted workloads use it (reason
  ``KueueObjectInUse``); FAILED with a condition saying what is wrong with the spec. A change
  Kueue's CRDs refuse in place is planned as a delete (``Plan.delete``, by uid) and a create,
  with an Event.

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
from typing import Any

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoConfig
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import (
    KAIWO_QUEUE_CONFIG_NAME,
    KaiwoQueueConfig,
    KaiwoQueueConfigSpec,
)
from kaiwo_contracts.plans import (
    FinalizerRelease,
    ObjectRef,
    Plan,
    sort_objects,
)

from kaiwo_planner.domain.queues.kueue_objects import (
    MANAGED_LABELS,
    PRUNE_RULES,
    controller_reference_to,
    kueue_objects_for,
)
from kaiwo_planner.domain.queues.kueue_sync import judge_kueue_objects
from kaiwo_planner.domain.queues.node_pools import (
    NodePool,
    default_cluster_queue,
    default_resource_flavors,
    default_topology,
    discover_node_pools,
    node_changes,
)
from kaiwo_planner.domain.queues.queue_config_status import (
    READY_CONDITION,
    generated_note,
    queue_config_status,
    ready_condition,
    recreate_events,
)
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.status.conditions import ConditionSpec

KQC_API_VERSION = "kaiwo.silogen.ai/v1alpha1"


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
        status, events = queue_config_status(
            previous_status, problem, generation=meta.generation, now=now
        )
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
    owner_reference = controller_reference_to(owner)
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
    verdict = ready_condition(
        spec, missing_namespaces, judged, generated=generated_note(spec, queue_config.spec)
    )
    status, events = queue_config_status(
        previous_status, verdict, generation=meta.generation, now=now
    )
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
        events=(*events, *recreate_events(judged)),
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
