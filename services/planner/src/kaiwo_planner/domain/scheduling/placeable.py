"""Whether a waiting GPU workload's pods could be placed at all once GPUs are freed, pure
(decision 0256).

GPU idle preemption (``OnPressure``) stops an idle workload for one that waits for GPUs. If no
node could ever hold a pod of the waiting workload, stopping anybody frees nothing it can use:
a pod asking more GPUs of a resource than any node has, or a node selector or required node
affinity no node matches. Judged per pod template that asks for GPUs, against the observed
nodes that are not cordoned: a node fits when it has at least the pod's count of each GPU
resource the pod asks for (``allocatable``, as the scheduler counts) and its labels (and name)
match the pod's ``nodeSelector`` and ``requiredDuringSchedulingIgnoredDuringExecution`` node
affinity.

Not judged (they may change, or the planner does not see them all): taints and tolerations,
CPU and memory, pod (anti-)affinity, topology spread. When no observed node has the GPU
resource at all the planner cannot judge (the nodes are not observed yet): it counts as
placeable, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kaiwo_contracts.gpu_workloads import pod_gpus, pod_templates

from kaiwo_planner.domain.state.nodes import NodeInfo


def could_be_placed(root: Mapping[str, Any], nodes: Iterable[NodeInfo]) -> bool:
    """Whether every pod template of ``root`` that asks for GPUs fits some node of ``nodes``
    (module docstring)."""
    open_nodes = [node for node in nodes if not node.unschedulable]
    for spec, _ in pod_templates(root):
        wanted = pod_gpus(spec)
        if not wanted:
            continue
        if not any(node.gpu_allocatable.get(name, 0) > 0 for node in open_nodes for name in wanted):
            continue  # nothing to judge by
        if not any(_fits(spec, wanted, node) for node in open_nodes):
            return False
    return True


def _fits(spec: Mapping[str, Any], wanted: Mapping[str, int], node: NodeInfo) -> bool:
    if any(node.gpu_allocatable.get(name, 0) < count for name, count in wanted.items()):
        return False
    selector = spec.get("nodeSelector")
    if isinstance(selector, Mapping) and any(
        node.labels.get(str(key)) != str(value) for key, value in selector.items()
    ):
        return False
    return _affinity_matches(spec, node)


def _affinity_matches(spec: Mapping[str, Any], node: NodeInfo) -> bool:
    """The required node affinity: its terms are ORed, a term's expressions ANDed; no terms
    (or none given) matches every node."""
    affinity = _mapping(_mapping(spec.get("affinity")).get("nodeAffinity"))
    required = _mapping(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    terms = required.get("nodeSelectorTerms")
    if not isinstance(terms, list) or not terms:
        return True
    return any(_term_matches(_mapping(term), node) for term in terms)


def _term_matches(term: Mapping[str, Any], node: NodeInfo) -> bool:
    expressions = _sequence(term.get("matchExpressions"))
    fields = _sequence(term.get("matchFields"))
    if not expressions and not fields:
        return False  # the scheduler: an empty term matches no node
    fields_of_node = {"metadata.name": node.name}
    return all(requirement_holds(_mapping(e), node.labels) for e in expressions) and all(
        requirement_holds(_mapping(f), fields_of_node) for f in fields
    )


def requirement_holds(requirement: Mapping[str, Any], values_of: Mapping[str, str]) -> bool:
    """A node selector requirement (``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``,
    ``Lt``) against ``values_of`` (a node's labels, or its fields), as the scheduler reads it."""
    key = str(requirement.get("key") or "")
    operator = str(requirement.get("operator") or "")
    values = [str(v) for v in _sequence(requirement.get("values"))]
    present = key in values_of
    value = values_of.get(key, "")
    match operator:
        case "In":
            return present and value in values
        case "NotIn":
            return not present or value not in values
        case "Exists" | "DoesNotExist":
            return present == (operator == "Exists")
        case "Gt" | "Lt" if present and len(values) == 1:
            return _compares(value, values[0], greater=operator == "Gt")
    return False


def _compares(value: str, bound: str, *, greater: bool) -> bool:
    """``Gt``/``Lt``: both sides whole numbers, else no match (as the scheduler)."""
    try:
        found, limit = int(value), int(bound)
    except ValueError:
        return False
    return found > limit if greater else found < limit


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _sequence(value: object) -> Sequence[Any]:
    return value if isinstance(value, list) else ()
