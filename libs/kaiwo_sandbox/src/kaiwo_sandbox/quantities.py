"""Kubernetes resource quantities ("16Gi", "500m", 8) as exact numbers, and pod requests."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Final

_SUFFIXES: Final = {
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "m": Decimal("0.001"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
}

Requests = Mapping[str, Decimal]


def quantity(value: object) -> Decimal:
    """The number a quantity stands for; ValueError for anything else."""
    text = str(value).strip()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix):
            return _number(text[: -len(suffix)], value) * _SUFFIXES[suffix]
    return _number(text, value)


def _number(text: str, original: object) -> Decimal:
    try:
        parsed = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"not a Kubernetes quantity: {original!r}") from None
    if not parsed.is_finite():
        raise ValueError(f"not a Kubernetes quantity: {original!r}")
    return parsed


def add(left: Requests, right: Requests, *, times: int = 1) -> dict[str, Decimal]:
    total = dict(left)
    for name, amount in right.items():
        total[name] = total.get(name, Decimal(0)) + amount * times
    return total


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """What one pod asks for: its containers' requests (a limit stands in for a missing
    request, as the API server defaults it)."""
    total: dict[str, Decimal] = {}
    for container in pod_spec.get("containers") or ():
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        total = add(total, {name: quantity(value) for name, value in asked.items()})
    return total


def templates_requests(spec: Any, *, replicas: int = 1) -> dict[str, Decimal]:
    """Everything the pod templates anywhere under ``spec`` ask for, each times the
    ``replicas`` (or ``parallelism``) beside it: a Job, a RayJob's head and worker groups,
    an AppWrapper's components."""
    total: dict[str, Decimal] = {}
    if isinstance(spec, Mapping):
        count = replicas
        for key in ("replicas", "parallelism"):
            if isinstance(spec.get(key), int):
                count = replicas * int(spec[key])
        template = spec.get("template")
        if isinstance(template, Mapping) and isinstance(template.get("spec"), Mapping):
            total = add(total, pod_requests(template["spec"]), times=count)
        for key, value in spec.items():
            if key != "template":
                total = add(total, templates_requests(value, replicas=replicas))
    elif isinstance(spec, list):
        for item in spec:
            total = add(total, templates_requests(item, replicas=replicas))
    return total
