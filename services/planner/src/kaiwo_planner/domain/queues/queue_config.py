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
  each is as desired and Kueue admits workloads to each ClusterQueue, and then the Ready
  condition's message names what the operator added to the user's spec (discovered flavors,
  the default ClusterQueue); FAILED (``ClusterQueueInactive``, decision 0121) with Kueue's
  reason when it admits none to one; PENDING while one is missing,
  not yet updated, being replaced, or kept because admitted workloads use it (reason
  ``KueueObjectInUse``); FAILED with a condition saying what is wrong with the spec. A change
  Kueue's CRDs refuse in place is planned as a delete (``Plan.delete``, by uid) and a create,
  with an Event.

The KaiwoQueueConfig's spec belongs to the user and is never written: with
``dynamicallyUpdateDefaultClusterQueue`` the discovered flavors, the default ClusterQueue and
the default Topology are merged into the spec *in force* (:func:`effective_spec`), which only
the Kueue objects carry. So they follow the nodes as they come and go, and the user can
re-apply their own manifest at any time (decision 0014). Without that setting (the default)
a spec listing no ClusterQueues gets the default ClusterQueue made from the nodes once: the
one the cluster holds keeps its quotas as nodes come and go (decision 0110).
While a ClusterQueue the plan no longer wants (a renamed default queue, a removed one) still
holds quota Kueue reports, the generated default queue's quota of the same flavors is lowered
by that much until Kueue lets it go
(:mod:`~kaiwo_planner.domain.queues.quota_held_back`, decision 0142).

Flavors come from the spec, or from node-pool discovery when the spec lists none. The limits
of the API reference apply to what the user writes; what the operator adds is held only to
Kueue's own. A spec in force that cannot be built is FAILED (``InvalidSpecInForce``) and the
plan then leaves the Kueue objects as they are.

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

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoConfig
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import (
    KAIWO_QUEUE_CONFIG_NAME,
    KUEUE_MAX_FLAVORS_PER_GROUP,
    KUEUE_MAX_NODE_LABELS,
    ClusterQueue,
    FlavorQuotas,
    KaiwoQueueConfig,
    KaiwoQueueConfigSpec,
    ResourceFlavorSpec,
    ResourceGroup,
    Topology,
)
from kaiwo_contracts.plans import (
    FinalizerRelease,
    ObjectRef,
    Plan,
    sort_objects,
)
from pydantic import ValidationError

from kaiwo_planner.domain.queues.kueue_objects import (
    MANAGED_LABELS,
    PRUNE_RULES,
    controller_reference_to,
    kueue_objects_for,
)
from kaiwo_planner.domain.queues.kueue_sync import (
    KUEUE_GROUP,
    cohorts_set_elsewhere,
    inactive_queues,
    judge_kueue_objects,
    leaving_objects,
)
from kaiwo_planner.domain.queues.node_pools import (
    NodePool,
    default_cluster_queue,
    default_resource_flavors,
    default_resource_flavors_named,
    default_topology,
    discover_node_pools,
    node_changes,
    nodes_labelled_elsewhere,
)
from kaiwo_planner.domain.queues.queue_config_status import (
    READY_CONDITION,
    generated_note,
    queue_config_status,
    ready_condition,
    recreate_events,
    set_elsewhere_note,
)
from kaiwo_planner.domain.queues.quota_held_back import (
    HeldBack,
    give_back,
    hold_back,
    leaving_queue_usage,
)
from kaiwo_planner.domain.state.cluster import ClusterState, api_group_of
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
    settings = kaiwo_config.spec
    pools = discover_node_pools(
        cluster.nodes, exclude_control_plane=settings.nodes.exclude_master_nodes_from_node_pools
    )
    problem: ConditionSpec | None = None
    if meta.name != KAIWO_QUEUE_CONFIG_NAME:
        problem = ConditionSpec(
            READY_CONDITION,
            "False",
            "UnsupportedName",
            f"only a KaiwoQueueConfig named '{KAIWO_QUEUE_CONFIG_NAME}' is acted on",
        )
    else:
        try:
            spec = effective_spec(
                queue_config.spec,
                kaiwo_config=kaiwo_config,
                pools=pools,
                standing_default_queue=standing_default_queue(
                    cluster, name=settings.default_cluster_queue_name, owner_uid=owner.uid
                ),
            )
        except SpecInForceError as error:
            # Nothing is planned, so nothing is pruned: the Kueue objects stay as they are.
            problem = ConditionSpec(READY_CONDITION, "False", "InvalidSpecInForce", str(error))
    if problem is not None:
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

    owner_reference = controller_reference_to(owner)
    kueue_objects, missing_namespaces = kueue_objects_for(
        spec,
        default_topology_name=settings.default_topology_name,
        namespaces=cluster.namespaces,
        owner_reference=owner_reference,
        workload_namespaces=workload_namespaces,
    )
    held_back: HeldBack | None = None
    if _default_queue_is_generated(queue_config.spec, kaiwo_config):
        kueue_objects, held_back = _hold_back_leaving_usage(
            kueue_objects,
            queue=settings.default_cluster_queue_name,
            cluster=cluster,
            owner_uid=owner.uid,
        )
    judged = judge_kueue_objects(kueue_objects, cluster=cluster, owner_uid=owner.uid)
    desired = [
        *(verdict.manifest for verdict in judged),
        *node_changes(
            cluster.nodes,
            exclude_control_plane=settings.nodes.exclude_master_nodes_from_node_pools,
            add_gpu_taint=settings.nodes.add_taints_to_gpu_nodes,
            gpu_taint_key=settings.nodes.default_gpu_taint_key,
            pools_in_force=_discovered_in_force(spec, queue_config.spec, pools),
        ),
    ]
    set_elsewhere = set_elsewhere_note(cohorts_set_elsewhere(judged, cluster=cluster))
    verdict = ready_condition(
        spec,
        missing_namespaces,
        judged,
        generated=generated_note(
            spec,
            queue_config.spec,
            left_out=nodes_labelled_elsewhere(
                cluster.nodes,
                exclude_control_plane=settings.nodes.exclude_master_nodes_from_node_pools,
            ),
        ),
        inactive=inactive_queues(spec, cluster=cluster),
        leaving=leaving_objects(kueue_objects, cluster=cluster, owner_uid=owner.uid),
        held_back=held_back,
        set_elsewhere=set_elsewhere,
    )
    status, events = queue_config_status(
        previous_status, verdict, generation=meta.generation, now=now, set_elsewhere=set_elsewhere
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


def _default_queue_is_generated(written: KaiwoQueueConfigSpec, kaiwo_config: KaiwoConfig) -> bool:
    """The spec in force holds the default ClusterQueue the operator computes (its quota from
    the nodes), as :func:`effective_spec` builds it."""
    settings = kaiwo_config.spec
    return settings.dynamically_update_default_cluster_queue or not written.cluster_queues


def _hold_back_leaving_usage(
    kueue_objects: Sequence[dict[str, Any]],
    *,
    queue: str,
    cluster: ClusterState,
    owner_uid: str | None,
) -> tuple[list[dict[str, Any]], HeldBack | None]:
    """``kueue_objects`` with the generated default ClusterQueue ``queue`` lowered by what
    this KaiwoQueueConfig's ClusterQueues that are no longer wanted still hold (decision 0142)."""
    if not owner_uid:
        return list(kueue_objects), None
    wanted = [o["metadata"]["name"] for o in kueue_objects if o.get("kind") == "ClusterQueue"]
    leaving = leaving_queue_usage(
        (q for q in cluster.children_of(owner_uid) if _our_cluster_queue(q, owner_uid)),
        wanted=wanted,
    )
    if not leaving:
        return list(kueue_objects), None
    lowered: list[dict[str, Any]] = []
    held_back = None
    for manifest in kueue_objects:
        if manifest.get("kind") == "ClusterQueue" and manifest["metadata"]["name"] == queue:
            lowered_queue, held_back = hold_back(manifest, leaving)
            lowered.append(lowered_queue)
        else:
            lowered.append(manifest)
    return lowered, held_back


def _our_cluster_queue(found: Mapping[str, Any], owner_uid: str) -> bool:
    """A ClusterQueue this KaiwoQueueConfig made: the operator's labels, controlled by it."""
    if found.get("kind") != "ClusterQueue" or api_group_of(str(found.get("apiVersion"))) != (
        KUEUE_GROUP
    ):
        return False
    metadata = found.get("metadata") or {}
    labels = metadata.get("labels") or {}
    return all(labels.get(key) == value for key, value in MANAGED_LABELS.items()) and any(
        ref.get("uid") == owner_uid and ref.get("controller")
        for ref in metadata.get("ownerReferences") or ()
    )


def standing_default_queue(
    cluster: ClusterState, *, name: str, owner_uid: str | None
) -> list[ResourceGroup] | None:
    """The ``resourceGroups`` of the default ClusterQueue this KaiwoQueueConfig made, as the
    cluster holds it, validated once here as a generated queue's are (None: there is none,
    it is being deleted, it is not ours, or it holds no quota or one that is no longer a
    valid resource group: then it is made again from the nodes, so a queue made before any
    node reported its capacity does not stay empty)."""
    found = cluster.find_object(group=KUEUE_GROUP, kind="ClusterQueue", name=name)
    if found is None or not owner_uid:
        return None
    metadata = found.get("metadata") or {}
    if not _our_cluster_queue(found, owner_uid) or metadata.get("deletionTimestamp"):
        return None
    groups = (found.get("spec") or {}).get("resourceGroups")
    if not isinstance(groups, list) or not groups:
        return None
    try:
        # At its full quota: what a leaving queue's usage took off is added back (0142).
        full = give_back(groups, metadata.get("annotations") or {})
        return [_resource_group(group) for group in full]
    except (AttributeError, ValidationError):
        return None


def _discovered_in_force(
    effective: KaiwoQueueConfigSpec, written: KaiwoQueueConfigSpec, pools: Sequence[NodePool]
) -> frozenset[str]:
    """The discovered pools whose flavors the spec in force holds and the user's does not:
    only their nodes get the operator's pool labels."""
    user_flavors = {f.name for f in written.resource_flavors or ()}
    in_force = {f.name for f in effective.resource_flavors or ()} - user_flavors
    return frozenset(pool.name for pool in pools if pool.name in in_force)


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


class SpecInForceError(ValueError):
    """The spec in force cannot be built; the message says why, for the Ready condition."""


def effective_spec(
    spec: KaiwoQueueConfigSpec,
    *,
    kaiwo_config: KaiwoConfig,
    pools: Sequence[NodePool],
    standing_default_queue: Sequence[ResourceGroup] | None = None,
) -> KaiwoQueueConfigSpec:
    """The spec in force (decisions 0014, 0110).

    * No flavors listed: the discovered ones (the API reference's rule).
    * No ClusterQueues listed (the KaiwoQueueConfig the operator creates has an empty spec):
      the default ClusterQueue, and the default Topology. Without
      ``dynamicallyUpdateDefaultClusterQueue`` it is made from the nodes once: while the
      cluster holds it (``standing_default_queue``: its observed ``resourceGroups``,
      validated) its quotas stay as they are, whatever nodes come or go.
    * ``dynamicallyUpdateDefaultClusterQueue``: the discovered flavors, the default
      ClusterQueue over the current nodes and the default Topology merged into the user's
      lists by name.
    * The generated default ClusterQueue brings along each flavor it names that the spec
      lacks, so it never names a flavor that is not created.

    The user's spec was validated against the API reference's limits (10 ClusterQueues...);
    the generated entries are not held to them, only to Kueue's own, since the operator adds
    them (:class:`SpecInForceError` otherwise). A flavor with more node labels than Kueue takes
    (the API reference allows 10, Kueue 8) is a :class:`SpecInForceError` too.
    """
    settings = kaiwo_config.spec
    discovered = default_resource_flavors(pools, topology_name=settings.default_topology_name)
    default_queue = default_cluster_queue(
        pools,
        name=settings.default_cluster_queue_name,
        cohort=settings.default_cluster_queue_cohort_name,
    )
    topology = default_topology(settings.default_topology_name)
    # The user's entries stay the models they were validated as; what the operator generates
    # is a wire form (a Mapping), validated on its own below.
    flavors: list[ResourceFlavorSpec | dict[str, Any]] = list(spec.resource_flavors or ())
    queues: list[ClusterQueue | dict[str, Any]] = list(spec.cluster_queues or ())
    topologies: list[Topology | dict[str, Any]] = list(spec.topologies or ())
    standing_groups: Sequence[ResourceGroup] | None = None
    if settings.dynamically_update_default_cluster_queue:
        flavors = _merge_by_name(flavors, discovered, key=_entry_name)
        queues = _merge_by_name(queues, [default_queue], key=_entry_name)
        topologies = _merge_by_name(topologies, [topology], key=_metadata_name, replace=False)
    else:
        if not flavors:
            flavors = list(discovered)
        if not queues:
            if standing_default_queue is not None:
                standing_groups = standing_default_queue
                default_queue["spec"]["resourceGroups"] = [g.to_wire() for g in standing_groups]
            queues = [default_queue]
            topologies = _merge_by_name(topologies, [topology], key=_metadata_name, replace=False)
    if any(queue is default_queue for queue in queues):
        flavors = _merge_by_name(
            flavors,
            default_resource_flavors_named(
                _flavor_names(default_queue), topology_name=settings.default_topology_name
            ),
            key=_entry_name,
            replace=False,
        )
    try:
        in_force = spec.model_copy(
            update={
                "resource_flavors": [
                    ResourceFlavorSpec.model_validate(f) if isinstance(f, Mapping) else f
                    for f in flavors
                ],
                "cluster_queues": [
                    _generated_queue(q, groups=standing_groups if q is default_queue else None)
                    if isinstance(q, Mapping)
                    else q
                    for q in queues
                ],
                "topologies": [
                    Topology.model_validate(t) if isinstance(t, Mapping) else t for t in topologies
                ],
            }
        )
    except ValidationError as error:
        raise SpecInForceError(_generated_problem(error)) from error
    _require_flavors_kueue_takes(in_force)
    return in_force


def _require_flavors_kueue_takes(spec: KaiwoQueueConfigSpec) -> None:
    """A flavor with more node labels than Kueue's ResourceFlavor takes can never be created:
    the API reference lets a flavor list 10, Kueue takes 8 (decision 0227). Said here, naming
    the flavor and the field, rather than as a refusal of every apply."""
    too_many = [
        f"resourceFlavors[{number}] ({flavor.name!r}).nodeLabels lists "
        f"{len(flavor.node_labels or {})} labels"
        for number, flavor in enumerate(spec.resource_flavors or ())
        if len(flavor.node_labels or {}) > KUEUE_MAX_NODE_LABELS
    ]
    if too_many:
        raise SpecInForceError(
            f"{'; '.join(too_many)}: Kueue's ResourceFlavor takes at most "
            f"{KUEUE_MAX_NODE_LABELS} nodeLabels, so it cannot be created; list at most "
            f"{KUEUE_MAX_NODE_LABELS} (the labels that tell its nodes apart)"
        )


def _flavor_names(queue: Mapping[str, Any]) -> list[str]:
    return [
        str(flavor.get("name", ""))
        for group in (queue.get("spec") or {}).get("resourceGroups") or ()
        for flavor in group.get("flavors") or ()
    ]


def _generated_queue(
    entry: Mapping[str, Any], *, groups: Sequence[ResourceGroup] | None = None
) -> ClusterQueue:
    """The generated default ClusterQueue as a model: validated field by field, except that
    a resource group may list as many flavors as Kueue takes (one per node pool). ``groups``:
    its resource groups as :func:`standing_default_queue` validated them, not validated again."""
    queue_spec = dict(entry.get("spec") or {})
    wire_groups = queue_spec.pop("resourceGroups", None)
    queue = ClusterQueue.model_validate({**entry, "spec": queue_spec})
    if wire_groups is None:
        return queue
    built = []
    for number, group in enumerate(wire_groups):
        flavors = group.get("flavors") or ()
        if len(flavors) > KUEUE_MAX_FLAVORS_PER_GROUP:
            raise SpecInForceError(
                f"the default ClusterQueue {queue.name!r} would need {len(flavors)} flavors in "
                f"resourceGroups[{number}] (one per node pool); Kueue allows "
                f"{KUEUE_MAX_FLAVORS_PER_GROUP}"
            )
        built.append(groups[number] if groups is not None else _resource_group(group))
    return queue.model_copy(
        update={"spec": queue.spec.model_copy(update={"resource_groups": built})}
    )


def _resource_group(group: Mapping[str, Any]) -> ResourceGroup:
    """A generated resource group as a model: each flavor's quotas validated, the group's own
    list limits not applied (Kueue's are, by :func:`_generated_queue`)."""
    return ResourceGroup.model_construct(
        covered_resources=list(group.get("coveredResources") or ()),
        flavors=[FlavorQuotas.model_validate(f) for f in group.get("flavors") or ()],
    )


def _generated_problem(error: ValidationError) -> str:
    """A ValidationError of a generated entry, in one line that names the field."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return f"an entry the operator generates is invalid: {where}: {first.get('msg', error)}"


def _entry_name(entry: Any) -> str:
    """A flavor's or ClusterQueue's name: the user's model or a generated wire form."""
    if isinstance(entry, Mapping):
        return str(entry.get("name", ""))
    return str(entry.name)


def _metadata_name(entry: Any) -> str:
    """A Topology's name: the user's model or a generated wire form."""
    if isinstance(entry, Mapping):
        return str((entry.get("metadata") or {}).get("name", ""))
    return str(entry.metadata.name or "")


def _merge_by_name(
    current: Sequence[Any],
    generated: Sequence[dict[str, Any]],
    *,
    key: Callable[[Any], str],
    replace: bool = True,
) -> list[Any]:
    """``current`` with same-named entries replaced by ``generated`` ones (in place), and the
    other generated entries appended in their order."""
    fresh = {key(entry): entry for entry in generated}
    merged = [
        fresh.pop(key(entry)) if replace and key(entry) in fresh else entry for entry in current
    ]
    present = {key(entry) for entry in merged}
    merged.extend(entry for name, entry in fresh.items() if name not in present)
    return merged
