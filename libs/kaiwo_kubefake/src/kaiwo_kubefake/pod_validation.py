"""The one pod-spec check of the real API server that the operator's output depends on.

A container's request may not exceed its limit for the same resource (``must be less than or
equal to cpu limit of 2``). The fake checks it for Pods and for the pod templates of the
built-in workload kinds, on create and on every update, as the real server does.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from kaiwo_kubefake import errors
from kaiwo_kubefake.kinds import ResourceKind

_POD_SPEC_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "pods"): ("spec",),
    ("batch", "jobs"): ("spec", "template", "spec"),
    ("apps", "deployments"): ("spec", "template", "spec"),
    ("apps", "replicasets"): ("spec", "template", "spec"),
    ("apps", "statefulsets"): ("spec", "template", "spec"),
    ("apps", "daemonsets"): ("spec", "template", "spec"),
}
_SUFFIXES = {
    **{s: Decimal(1024) ** p for s, p in (("Ki", 1), ("Mi", 2), ("Gi", 3), ("Ti", 4), ("Pi", 5))},
    **{s: Decimal(10) ** p for s, p in (("m", -3), ("k", 3), ("M", 6), ("G", 9), ("T", 12))},
}


def check_container_resources(kind: ResourceKind, obj: dict[str, Any]) -> None:
    """Raise 422 Invalid when a container requests more than its limit."""
    path = _POD_SPEC_PATHS.get(kind.key)
    if path is None:
        return
    pod_spec: Any = obj
    for step in path:
        pod_spec = pod_spec.get(step) if isinstance(pod_spec, dict) else None
    if not isinstance(pod_spec, dict):
        return
    causes = [
        cause
        for section in ("initContainers", "containers")
        for index, container in enumerate(pod_spec.get(section) or [])
        for cause in _container_causes(container, field=f"{'.'.join(path)}.{section}[{index}]")
    ]
    if causes:
        name = str((obj.get("metadata") or {}).get("name", ""))
        raise errors.invalid(name=name, group=kind.group, kind=kind.kind, causes=causes)


def _container_causes(container: Any, *, field: str) -> list[tuple[str, str, str]]:
    resources = container.get("resources") if isinstance(container, dict) else None
    requests = (resources or {}).get("requests") or {}
    limits = (resources or {}).get("limits") or {}
    causes = []
    for name in sorted(requests.keys() & limits.keys()):
        request, limit = _value(requests[name]), _value(limits[name])
        if request is not None and limit is not None and request > limit:
            causes.append(
                (
                    "FieldValueInvalid",
                    f"{field}.resources.requests",
                    f'Invalid value: "{requests[name]}": must be less than or equal to '
                    f"{name} limit of {limits[name]}",
                )
            )
    return causes


def _value(quantity: Any) -> Decimal | None:
    text = str(quantity).strip()
    factor = Decimal(1)
    for suffix, multiplier in _SUFFIXES.items():
        if text.endswith(suffix):
            text, factor = text[: -len(suffix)], multiplier
            break
    try:
        return Decimal(text) * factor
    except InvalidOperation:
        return None  # a malformed quantity has its own error elsewhere
