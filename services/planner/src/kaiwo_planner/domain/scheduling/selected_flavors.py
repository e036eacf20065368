"""The flavors of a queue Kueue may admit a pod into by its own node constraints, pure
(decision 0283).

Kueue's flavor assigner skips a flavor whose node labels the pod's ``nodeSelector`` or required
node affinity rules out, or whose NoSchedule or NoExecute taints the pod does not tolerate. It
reads only the label keys the queue's flavors of the resource declare: a selector on any
other key (the scheduler's business) leaves every flavor open, and a node-selector term left
with no expression matches every flavor. So a GPU workload no Kaiwo kind owns that selects
one GPU product waits only for quota of the flavors of that product, as a Kaiwo workload's
``gpuModels`` does (decision 0237).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kaiwo_contracts.gpu_workloads import pod_gpus, pod_templates

from kaiwo_planner.domain.scheduling.gpu_model_flavors import node_labels, queue_flavor_specs
from kaiwo_planner.domain.scheduling.placeable import requirement_holds
from kaiwo_planner.domain.state.planning_context import PlanningContext

_REFUSING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def selected_flavor_names(
    context: PlanningContext, root: Mapping[str, Any], *, queue: str
) -> frozenset[str]:
    """The flavors of ``queue`` Kueue may admit some GPU pod of ``root`` into (module
    docstring); none: any of them (all may, none may, or the queue or a flavor is not
    observed), as for ``gpuModels`` (decision 0280)."""
    found: set[str] = set()
    every: set[str] = set()
    for spec, _ in pod_templates(root):
        for gpu_key in pod_gpus(spec):
            flavors = queue_flavor_specs(context, queue=queue, gpu_key=gpu_key)
            every |= {name for name, _ in flavors}
            found |= set(admitting(spec, flavors))
    if not found or found == every:
        return frozenset()
    return frozenset(found)


def admitting(
    pod_spec: Mapping[str, Any], flavors: Sequence[tuple[str, Mapping[str, Any]]]
) -> list[str]:
    """The names of ``flavors`` (name, ResourceFlavor spec) Kueue may admit the pod into."""
    keys = {str(key) for _, spec in flavors for key in node_labels(spec)}
    return [
        name
        for name, spec in flavors
        if _selected(pod_spec, node_labels(spec), keys)
        and _tolerated(pod_spec, _mappings(spec.get("nodeTaints")))
    ]


def _selected(pod_spec: Mapping[str, Any], labels: Mapping[str, Any], keys: set[str]) -> bool:
    values = {str(key): str(value) for key, value in labels.items()}
    selector = _mapping(pod_spec.get("nodeSelector"))
    if any(values.get(str(key)) != str(value) for key, value in selector.items() if key in keys):
        return False
    affinity = _mapping(_mapping(pod_spec.get("affinity")).get("nodeAffinity"))
    required = _mapping(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    terms = _mappings(required.get("nodeSelectorTerms"))
    if not terms:
        return True
    return any(
        all(requirement_holds(expression, values) for expression in _kept(term, keys))
        for term in terms
    )


def _kept(term: Mapping[str, Any], keys: set[str]) -> list[Mapping[str, Any]]:
    """A term's expressions on the flavors' label keys (none left: it matches any flavor)."""
    return [e for e in _mappings(term.get("matchExpressions")) if str(e.get("key")) in keys]


def _tolerated(pod_spec: Mapping[str, Any], taints: Iterable[Mapping[str, Any]]) -> bool:
    tolerations = _mappings(pod_spec.get("tolerations"))
    return all(
        any(_tolerates(toleration, taint) for toleration in tolerations)
        for taint in taints
        if taint.get("effect") in _REFUSING_EFFECTS
    )


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' rule: an empty effect tolerates every effect, an empty key with
    ``Exists`` every taint, ``Exists`` any value, ``Equal`` (the default) the same value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key, operator = toleration.get("key") or "", toleration.get("operator") or "Equal"
    if not key:
        return operator == "Exists"
    if key != taint.get("key"):
        return False
    return operator == "Exists" or (toleration.get("value") or "") == (taint.get("value") or "")


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _mappings(value: object) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []
