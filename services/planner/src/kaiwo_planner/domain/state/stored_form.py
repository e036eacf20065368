"""How the projection keeps an observed object: without what no decision reads
(:func:`projected_form`: ``metadata.managedFields``, a Kueue Workload's copies of its pod
templates but their containers' resources, a Node's list of images), with its keys and short
strings interned (shared between objects), and shared with the previous version when only
the ``resourceVersion`` moved."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final

from kaiwo_planner.domain.state.index_entry import (
    KUEUE_WORKLOAD,
    NODE,
    api_group_of,
    category_of,
)

INTERNED_UP_TO: Final = 64
"""Strings this short are shared between stored objects (keys, kinds, labels, phases...)."""


def with_shared_strings(projected: dict[str, Any]) -> dict[str, Any]:
    """An object's :func:`projected_form` as the projection keeps it: with its keys and
    short strings interned. Every object decoded from JSON has its own copy of each key;
    shared, they take 44% less memory per tracked workload."""
    return _interned(projected)  # type: ignore[no-any-return]


def projected_form(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without what no decision reads: ``metadata.managedFields``; of a Kueue
    Workload, each pod set's template but its containers' names and resources; of a Node,
    ``status.images``.

    Kueue copies the whole pod template of its job into the Workload's pod sets: about half
    of a Workload, and a copy of the child the projection holds already. The planner reads a
    Workload's pod sets only for the GPUs they ask for
    (:func:`~kaiwo_contracts.queue_estimates.kueue.kueue_gpus`). A kubelet lists up to 50 of
    its node's images, two names and a size each: most of a Node, and read by no decision
    (:class:`~kaiwo_planner.domain.state.nodes.NodeInfo` is what planning reads of a node).
    Neither kind is a plan's source (the executor never hashes them), so holding them in part
    changes no digest."""
    obj = without_managed_fields(obj)
    category = category_of(api_group_of(str(obj.get("apiVersion", ""))), str(obj.get("kind")))
    if category == KUEUE_WORKLOAD:
        return _with_pod_sets_reduced(obj)
    if category == NODE:
        return _without(obj, "status", "images")
    return obj


_POD_SET_CONTAINERS: Final = ("containers", "initContainers")
_CONTAINER_PARTS_READ: Final = ("name", "resources")


def without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    return _without(obj, "metadata", "managedFields")


def _without(obj: dict[str, Any], part: str, key: str) -> dict[str, Any]:
    """``obj`` without ``obj[part][key]``; ``obj`` itself when it has none."""
    found = obj.get(part)
    if isinstance(found, dict) and key in found:
        return {**obj, part: {k: v for k, v in found.items() if k != key}}
    return obj


def _with_pod_sets_reduced(workload: dict[str, Any]) -> dict[str, Any]:
    spec = workload.get("spec")
    pod_sets = spec.get("podSets") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(pod_sets, list):
        return workload
    reduced = [_pod_set_reduced(pod_set) for pod_set in pod_sets]
    return {**workload, "spec": {**spec, "podSets": reduced}}


def _pod_set_reduced(pod_set: Any) -> Any:
    template = pod_set.get("template") if isinstance(pod_set, dict) else None
    if not isinstance(template, dict):
        return pod_set
    pod_spec = template.get("spec")
    kept: dict[str, Any] = {}
    if isinstance(pod_spec, dict):
        for key in _POD_SET_CONTAINERS:
            containers = pod_spec.get(key)
            if isinstance(containers, list):
                kept[key] = [_container_reduced(container) for container in containers]
    return {**pod_set, "template": {"spec": kept}}


def _container_reduced(container: Any) -> Any:
    if not isinstance(container, dict):
        return container
    return {key: container[key] for key in _CONTAINER_PARTS_READ if key in container}


def _interned(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            (sys.intern(key) if type(key) is str else key): _interned(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_interned(item) for item in value]
    if type(value) is str and len(value) <= INTERNED_UP_TO:
        return sys.intern(value)
    return value


def at_version(stored: Mapping[str, Any], version: str) -> dict[str, Any]:
    """A stored object at another resourceVersion, everything else shared with it."""
    if len(version) <= INTERNED_UP_TO:
        version = sys.intern(version)
    return {**stored, "metadata": {**stored["metadata"], "resourceVersion": version}}


def same_content(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """``new`` is ``old`` but for ``metadata.resourceVersion`` (both without
    ``managedFields``)."""
    if old.keys() != new.keys():
        return False
    for key, value in old.items():
        if key == "metadata" and isinstance(value, Mapping):
            other = new[key]
            if not isinstance(other, Mapping) or not _same_but_key(value, other, "resourceVersion"):
                return False
        elif value != new[key]:
            return False
    return True


def _same_but_key(old: Mapping[str, Any], new: Mapping[str, Any], ignored: str) -> bool:
    if old.keys() != new.keys():
        return False
    return all(key == ignored or value == new[key] for key, value in old.items())
