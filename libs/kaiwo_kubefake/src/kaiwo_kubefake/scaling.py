"""The scale subresource: an ``autoscaling/v1`` Scale view of an object's replicas.

As a real API server: a custom object without its spec replicas field cannot be read through
the subresource (500, "the spec replicas field ... does not exist"), while an update may set
the field (the Scale it patches then has no ``spec.replicas``, so a JSON patch's ``test`` of
them fails). A Scale at 0 replicas has no ``spec.replicas`` either: autoscaling/v1 omits a
zero.
"""

from __future__ import annotations

import copy
from typing import Any

from kaiwo_kubefake.errors import bad_request, internal_error
from kaiwo_kubefake.kinds import ResourceKind, ScalePaths


def _path(dotted: str) -> list[str]:
    return [part for part in dotted.split(".") if part]


def _read(obj: dict[str, Any], dotted: str) -> Any:
    current: Any = obj
    for part in _path(dotted):
        if not isinstance(current, dict):
            return None
        current = current.get(part)
    return current


def scale_view(
    kind: ResourceKind, obj: dict[str, Any], *, for_update: bool = False
) -> dict[str, Any]:
    """The Scale of ``obj``; ``for_update``: the one a patch applies to."""
    paths = kind.scale or ScalePaths()
    metadata = obj["metadata"]
    replicas = _read(obj, paths.spec_replicas_path)
    if replicas is None and not for_update:
        raise internal_error(f'the spec replicas field "{paths.spec_replicas_path}" does not exist')
    status: dict[str, Any] = {"replicas": _read(obj, paths.status_replicas_path) or 0}
    if paths.label_selector_path and (selector := _read(obj, paths.label_selector_path)):
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            key: metadata[key]
            for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if key in metadata
        },
        "spec": _scale_spec(replicas),
        "status": status,
    }


def _scale_spec(replicas: Any) -> dict[str, Any]:
    """A Scale's spec as a real API server shows it: autoscaling/v1 omits replicas of 0
    (``omitempty``), so at 0 it is ``{}``. A custom object without the field (only ever seen
    by a patch) is neither 0 nor any number to a ``test`` (measured: a test of ``/spec``
    against ``{}`` fails too, while an ``add`` sets it)."""
    if replicas is None:
        return {"replicas": None}
    return {"replicas": replicas} if replicas else {}


def with_replicas(kind: ResourceKind, obj: dict[str, Any], scale: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with spec replicas taken from a Scale body."""
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or replicas < 0:
        raise bad_request("a Scale needs spec.replicas, a non-negative integer")
    paths = kind.scale or ScalePaths()
    result = copy.deepcopy(obj)
    current = result
    parts = _path(paths.spec_replicas_path)
    for part in parts[:-1]:
        current = current.setdefault(part, {})
    current[parts[-1]] = replicas
    metadata = scale.get("metadata") or {}
    if metadata.get("resourceVersion"):
        result["metadata"]["resourceVersion"] = metadata["resourceVersion"]
    return result
