"""The cluster as the watcher observed it, and what each page shows of it: pure.

:class:`ClusterState` keeps the last observed state of every object by kind (the observation
is level-triggered: each carries the whole object). The rows of each page are
built from it in ``workload_rows``, ``quota``, ``node_rows`` and ``model_rows``; ``now`` and
the namespaces the caller may see are passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kaiwo_contracts.queue_estimates.kueue import (
    GPU_RESOURCES,
    admitted_at,
    condition,
    is_admitted,
    is_finished,
    is_true,
    kueue_gpus,
    parse_time,
)

WORKLOAD_KINDS: Final = ("KaiwoJob", "KaiwoService")
MODEL_KIND: Final = "Model"
KUEUE_WORKLOAD: Final = "Workload"
CLUSTER_QUEUE: Final = "ClusterQueue"
LOCAL_QUEUE: Final = "LocalQueue"
NODE: Final = "Node"
POD: Final = "Pod"
DEFAULT_QUEUE: Final = "kaiwo"
FINAL_PHASES: Final = frozenset({"COMPLETE", "FAILED", "TERMINATED"})

Obj = Mapping[str, Any]
Visible = Callable[[str], bool]
"""Whether the caller may see a namespace."""

__all__ = [
    "GPU_RESOURCES",
    "admitted_at",
    "condition",
    "is_admitted",
    "is_finished",
    "is_true",
    "kueue_gpus",
    "parse_time",
]


def meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def spec(obj: Obj) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def status(obj: Obj) -> Mapping[str, Any]:
    return obj.get("status") or {}


@dataclass
class ClusterState:
    """The last observed state of every object, by kind, then (namespace, name)."""

    objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = field(default_factory=dict)
    version: int = 0
    """Counts changes: a page showing version N is current until it grows."""

    def apply(self, *, kind: str, event: str, obj: dict[str, Any]) -> bool:
        """Take one observation in; True when it changed what the pages show."""
        key = (str(meta(obj).get("namespace") or ""), str(meta(obj).get("name") or ""))
        of_kind = self.objects.setdefault(kind, {})
        if event == "DELETED":
            changed = of_kind.pop(key, None) is not None
        else:
            known = of_kind.get(key)
            same = known is not None and meta(known).get("resourceVersion") == meta(obj).get(
                "resourceVersion"
            )
            changed = not same
            if changed:
                of_kind[key] = obj
        if changed:
            self.version += 1
        return changed

    def of(self, kind: str) -> list[dict[str, Any]]:
        return list(self.objects.get(kind, {}).values())

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(kind, {}).get((namespace, name))

    def namespaces(self) -> list[str]:
        """Every namespace an observed workload or Model is in."""
        return sorted(
            {ns for kind in (*WORKLOAD_KINDS, MODEL_KIND) for ns, _ in self.objects.get(kind, {})}
        )


def as_int(value: object) -> int:
    try:
        return int(str(value)) if value is not None else 0
    except ValueError:
        return 0


SUFFIXES: Final = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "m": 1e-3,
}


def quantity(value: object) -> float:
    """A Kubernetes quantity as a number (0 when unreadable)."""
    text = str(value if value is not None else "").strip()
    for suffix, scale in SUFFIXES.items():
        if text.endswith(suffix):
            try:
                return float(text[: -len(suffix)]) * scale
            except ValueError:
                return 0.0
    try:
        return float(text)
    except ValueError:
        return 0.0


def everything(_namespace: str) -> bool:
    return True


def only(namespaces: Iterable[str]) -> Visible:
    allowed = frozenset(namespaces)
    return lambda namespace: namespace in allowed
