"""The Kueue objects a KaiwoQueueConfig's spec in force describes.

Topologies (the default one too when a flavor names it), ResourceFlavors, ClusterQueues,
their LocalQueues, and WorkloadPriorityClasses; each labelled as the operator's
(:data:`MANAGED_LABELS`) and, when the KaiwoQueueConfig has a uid, controlled by it. The
plan prunes these kinds (:data:`PRUNE_RULES`), only among objects with those labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import (
    KAIWO_QUEUE_CONFIG_NAME,
    KUEUE_MAX_NODE_LABELS,
    KaiwoQueueConfigSpec,
    ResourceFlavorSpec,
)
from kaiwo_contracts.plans import ObjectRef, PruneRule

from kaiwo_planner.domain.queues.node_pools import WORKER_LABEL, default_topology

KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta1"
TOPOLOGY_API_VERSION = KUEUE_API_VERSION
"""Topology is v1beta1 since Kueue v0.14, like the other Kueue kinds (earlier releases served
it as v1alpha1 only; current ones no longer serve v1alpha1)."""
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
QUEUE_CONFIG_LABEL = "kaiwo.silogen.ai/queue-config"
MANAGED_LABELS: Mapping[str, str] = MappingProxyType(
    {
        MANAGED_BY_LABEL: "kaiwo",
        QUEUE_CONFIG_LABEL: KAIWO_QUEUE_CONFIG_NAME,
    }
)

PRUNE_RULES = (
    PruneRule(api_version=KUEUE_API_VERSION, kind="ClusterQueue", namespaced=False),
    PruneRule(api_version=KUEUE_API_VERSION, kind="LocalQueue", namespaced=True),
    PruneRule(api_version=KUEUE_API_VERSION, kind="ResourceFlavor", namespaced=False),
    PruneRule(api_version=TOPOLOGY_API_VERSION, kind="Topology", namespaced=False),
    PruneRule(api_version=KUEUE_API_VERSION, kind="WorkloadPriorityClass", namespaced=False),
)


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
        queue_spec = _quotas_in_covered_order(
            _admission_checks_as_kueue_stores_them(queue.spec.to_wire())
        )
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


def _admission_checks_as_kueue_stores_them(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with ``admissionChecks: [a, b]`` written as ``admissionChecksStrategy:
    {admissionChecks: [{name: a}, {name: b}]}``.

    The same meaning in every Kueue that has both fields (a rule naming no flavors applies to
    all of them). But Kueue 0.15 and later keep only the second (their v1beta2 has no
    ``admissionChecks``) and serve it back at v1beta1 too, so a queue asked for in the first
    form never looked as asked: its KaiwoQueueConfig stayed PENDING and every plan applied
    it again (found on the real Kueue, decision 0121)."""
    checks = spec.pop("admissionChecks", None)
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": n} for n in checks]}
    return spec


def _flavor(flavor: ResourceFlavorSpec) -> dict[str, Any]:
    """A ResourceFlavor's spec: its node labels (only Kaiwo's worker nodes without a
    Topology), taints and tolerations.

    ``kaiwo/worker=true`` keeps a flavor's pods on the nodes the operator labelled (its node
    pools, as upstream); it is left out when the flavor's own labels already fill Kueue's
    limit (decision 0227): those select the nodes on their own, and with it Kueue would refuse
    the ResourceFlavor. More labels than Kueue takes never get here (the spec in force is
    FAILED)."""
    labels = dict(flavor.node_labels or {})
    spec: dict[str, Any] = {}
    if flavor.topology_name:
        spec["topologyName"] = flavor.topology_name
    else:
        with_worker = {**labels, WORKER_LABEL: "true"}
        if len(with_worker) <= KUEUE_MAX_NODE_LABELS:
            labels = with_worker
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
    """A Kueue object of ``kind``, labelled as the operator's."""
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    metadata["labels"] = dict(MANAGED_LABELS)
    if owner_reference is not None:
        metadata["ownerReferences"] = [owner_reference]
    api_version = TOPOLOGY_API_VERSION if kind == "Topology" else KUEUE_API_VERSION
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **body}


def controller_reference_to(owner: ObjectRef) -> dict[str, Any] | None:
    """The controller reference to the KaiwoQueueConfig (None: it has no uid yet)."""
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


def _quotas_in_covered_order(queue_spec: dict[str, Any]) -> dict[str, Any]:
    """Each flavor's quotas in its group's ``coveredResources`` order, which Kueue requires;
    the KaiwoQueueConfig may list them in any order (upstream reorders them too)."""
    for group in queue_spec.get("resourceGroups") or ():
        order = {name: index for index, name in enumerate(group.get("coveredResources") or ())}
        for flavor in group.get("flavors") or ():
            flavor["resources"] = sorted(
                flavor.get("resources") or (), key=lambda quota: order.get(quota.get("name"), 0)
            )
    return queue_spec
