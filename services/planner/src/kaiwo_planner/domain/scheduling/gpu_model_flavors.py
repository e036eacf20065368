"""The flavors of a workload's queue whose nodes hold one of its ``gpuModels`` (decision 0237).

A workload's ``gpuModels`` is a required node affinity on ``kaiwo/gpu-model``. Kueue chooses
a flavor by the node labels its flavors declare, and no flavor declares ``kaiwo/gpu-model``:
Kueue ignores that affinity and admits the workload into the first flavor with quota. In a
queue of two GPU models that can be the other model's flavor; the pod then asks for that
flavor's nodes and for a model none of them has, and waits for ever while the right flavor's
quota is free (seen on the real stack).

So the pods' affinity also names the flavors that can run them: one node-selector term per
flavor of the queue whose nodes hold one of the models, each that flavor's node labels with
the model. Kueue reads the labels its flavors declare and chooses among those flavors only;
the scheduler reads the terms as one choice among them.

Pure: the queue's observed ClusterQueue and ResourceFlavors, and the nodes, are passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kaiwo_planner.domain.children.pod_template import GPU_MODEL_LABEL
from kaiwo_planner.domain.settings.cluster_settings import NODE_KIND
from kaiwo_planner.domain.state.index_entry import KUEUE_GROUP
from kaiwo_planner.domain.state.nodes import NodeInfo
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.status.kueue_admission import assigned_flavors

FlavorLabels = tuple[tuple[str, str], ...]
"""A flavor's node labels, sorted by key (hashable: it keys the children's cache)."""


def gpu_model_flavors(
    context: PlanningContext, *, queue: str, gpu_key: str, gpu_models: Sequence[str]
) -> tuple[FlavorLabels, ...]:
    """The node labels of the flavors of ``queue`` whose nodes hold one of ``gpu_models``,
    as observed (:func:`flavors_holding_models`)."""
    if not gpu_models:
        return ()
    flavors = _queue_flavors(context, queue=queue, gpu_key=gpu_key)
    labels = [flavor_labels for _, flavor_labels in flavors]
    return flavors_holding_models(labels, context.cluster.nodes, gpu_models)


def gpu_model_flavor_names(
    context: PlanningContext, *, queue: str, gpu_key: str, gpu_models: Sequence[str]
) -> frozenset[str]:
    """The names of the flavors :func:`gpu_model_flavors` finds: those of ``queue`` Kueue
    may admit a workload of ``gpu_models`` into (none: any of them, as Kueue chooses)."""
    if not gpu_models:
        return frozenset()

    def names() -> frozenset[str]:
        flavors = _queue_flavors(context, queue=queue, gpu_key=gpu_key)
        holding = flavors_holding_models(
            [labels for _, labels in flavors], context.cluster.nodes, gpu_models
        )
        return frozenset(name for name, labels in flavors if _flavor_labels(labels) in holding)

    # Once per state for each queue and models: idle preemption asks it for every waiting
    # workload with models, each time the cluster moves, and each answer walks the nodes.
    return context.derived(
        ("gpu-model-flavor-names", queue, gpu_key, tuple(gpu_models)),
        reads=(NODE_KIND, (KUEUE_GROUP, "ClusterQueue"), (KUEUE_GROUP, "ResourceFlavor")),
        compute=names,
    )


def _queue_flavors(
    context: PlanningContext, *, queue: str, gpu_key: str
) -> list[tuple[str, Mapping[str, Any]]]:
    """The observed ClusterQueue ``queue``'s flavors of ``gpu_key``, in order, each with its
    node labels (:func:`queue_flavor_specs`)."""
    return [
        (name, node_labels(spec))
        for name, spec in queue_flavor_specs(context, queue=queue, gpu_key=gpu_key)
    ]


def queue_flavor_specs(
    context: PlanningContext, *, queue: str, gpu_key: str
) -> list[tuple[str, Mapping[str, Any]]]:
    """The observed ClusterQueue ``queue``'s flavors of ``gpu_key``, in order, each with its
    ResourceFlavor's spec; none while the queue or one of its flavors is not observed (not
    all known: the choice is left to Kueue as it was)."""
    cluster = context.cluster
    cluster_queue = cluster.find_object(group=KUEUE_GROUP, kind="ClusterQueue", name=queue)
    if cluster_queue is None:
        return []
    flavors: list[tuple[str, Mapping[str, Any]]] = []
    for name in gpu_flavor_names(cluster_queue, gpu_key):
        found = cluster.find_object(group=KUEUE_GROUP, kind="ResourceFlavor", name=name)
        if found is None:
            return []
        flavors.append((name, _spec_of(found)))
    return flavors


def _spec_of(flavor: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = flavor.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def node_labels(flavor_spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """A ResourceFlavor's ``spec.nodeLabels`` (none: {})."""
    labels = flavor_spec.get("nodeLabels")
    return labels if isinstance(labels, Mapping) else {}


def gpu_flavor_names(cluster_queue: Mapping[str, Any], gpu_key: str) -> tuple[str, ...]:
    """The flavors, in order, of the ClusterQueue's resource groups that cover ``gpu_key``."""
    spec = cluster_queue.get("spec")
    return flavors_covering(spec if isinstance(spec, Mapping) else {}, gpu_key)


def flavors_covering(spec: Mapping[str, Any], gpu_key: str) -> tuple[str, ...]:
    """The flavors, in order, of the resource groups of a ClusterQueue's ``spec`` that cover
    ``gpu_key`` (what it lists quota of that resource in)."""
    names: list[str] = []
    for group in _mappings(spec.get("resourceGroups")):
        if gpu_key not in _items(group.get("coveredResources")):
            continue
        for flavor in _mappings(group.get("flavors")):
            name = flavor.get("name")
            if isinstance(name, str) and name not in names:
                names.append(name)
    return tuple(names)


def _items(value: object) -> tuple[object, ...]:
    return tuple(value) if isinstance(value, list | tuple) else ()


def _mappings(value: object) -> list[Mapping[str, Any]]:
    return [item for item in _items(value) if isinstance(item, Mapping)]


def flavors_holding_models(
    flavors: Sequence[Mapping[str, str]], nodes: Iterable[NodeInfo], gpu_models: Sequence[str]
) -> tuple[FlavorLabels, ...]:
    """The node labels of the ``flavors`` (in order) some node of which carries
    ``kaiwo/gpu-model`` of one of ``gpu_models``; () when that is every flavor (Kueue's
    choice is right whatever it is: nothing to add) or none (no flavor can run the pods:
    nothing to choose, the pods wait as before)."""
    models = set(gpu_models)
    nodes = tuple(nodes)
    holding = [
        flavor
        for flavor in flavors
        if any(
            node.labels.get(GPU_MODEL_LABEL) in models
            and all(node.labels.get(key) == value for key, value in flavor.items())
            for node in nodes
        )
    ]
    if not holding or len(holding) == len(flavors):
        return ()
    return tuple(_flavor_labels(flavor) for flavor in holding)


def flavors_admitted_without_models(
    context: PlanningContext,
    *,
    kueue_workloads: Iterable[Mapping[str, Any]],
    gpu_key: str,
    holding: Sequence[FlavorLabels],
) -> tuple[str, ...]:
    """The flavors, sorted, that Kueue admitted ``kueue_workloads`` into for ``gpu_key`` and
    whose node labels are none of ``holding`` (:func:`gpu_model_flavors`): no node of them
    holds one of the workload's models, so its pods wait there for ever (decision 0264).

    A child made before the queue's flavors were observed has no flavor terms, and Kueue
    admits it at once into the first flavor with quota: the terms come too late for it.
    Nothing is said without ``holding`` (every flavor, or none, holds a model, or the queue is
    not fully observed) or of a flavor not observed: only what is known counts."""
    if not holding:
        return ()
    names = {name for w in kueue_workloads for name in assigned_flavors(w, resource=gpu_key)}
    outside = []
    for name in sorted(names):
        found = context.cluster.find_object(group=KUEUE_GROUP, kind="ResourceFlavor", name=name)
        if found is None:
            continue
        if _flavor_labels(node_labels(_spec_of(found))) not in holding:
            outside.append(name)
    return tuple(outside)


def _flavor_labels(labels: Mapping[str, Any]) -> FlavorLabels:
    return tuple(sorted((str(key), str(value)) for key, value in labels.items()))
