"""What the sandbox's scheduler decides, with no I/O: the node with room for a pod's requests
(and the GPUs it gets there), or why none has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from kaiwo_sandbox.lifecycle import GPU_IDS, node_of
from kaiwo_sandbox.quantities import Requests, add, pod_requests, quantity


@dataclass(frozen=True, slots=True)
class NodeRoom:
    """A node's allocatable resources and its GPU resource name (None: no GPUs)."""

    name: str
    allocatable: Requests
    gpu_resource: str | None
    gpus: int


@dataclass(frozen=True, slots=True)
class Placement:
    node: str
    gpu_ids: tuple[int, ...]


def is_active(pod: Mapping[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    return phase not in ("Succeeded", "Failed") and not (pod.get("metadata") or {}).get(
        "deletionTimestamp"
    )


def place(
    requests: Requests, *, nodes: Sequence[NodeRoom], pods: Sequence[Mapping[str, Any]]
) -> Placement | None:
    """The first node (in the given order) where ``requests`` fit beside the active pods bound
    to it, with the lowest free GPU ids; None when no node has room."""
    for node in nodes:
        bound = [p for p in pods if node_of(p) == node.name]
        used: dict[str, Decimal] = {}
        taken: set[int] = set()
        for pod in filter(is_active, bound):
            used = add(used, pod_requests(pod.get("spec") or {}))
            taken |= set(gpu_ids(pod))
        fits = all(
            used.get(name, Decimal(0)) + amount <= node.allocatable.get(name, Decimal(0))
            for name, amount in requests.items()
            if amount > 0
        )
        if not fits:
            continue
        wanted = int(requests.get(node.gpu_resource, 0)) if node.gpu_resource else 0
        free = [i for i in range(node.gpus) if i not in taken]
        return Placement(node.name, tuple(free[:wanted]))
    return None


def gpu_ids(pod: Mapping[str, Any]) -> tuple[int, ...]:
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(GPU_IDS) or ""
    return tuple(int(part) for part in text.split(",") if part.strip().isdigit())


GPU_RESOURCES: Final = ("amd.com/gpu", "nvidia.com/gpu")


def held_gpus(pods: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, ...]]:
    """The GPU ids each active bound pod holds, by ``namespace/name``: those the sandbox's
    scheduler noted on it, else (a real scheduler notes none; the device plugin would choose)
    the lowest ids its node has left, pods taken in order of creation."""
    held: dict[str, tuple[int, ...]] = {}
    taken: dict[str, set[int]] = {}
    active = [p for p in pods if is_active(p) and node_of(p)]
    for pod in active:
        if noted := gpu_ids(pod):
            held[_key(pod)] = noted
            taken.setdefault(node_of(pod), set()).update(noted)
    for pod in sorted(active, key=_created):
        if _key(pod) in held:
            continue
        requests = pod_requests(pod.get("spec") or {})
        wanted = int(sum(requests.get(name, Decimal(0)) for name in GPU_RESOURCES))
        used = taken.setdefault(node_of(pod), set())
        ids: list[int] = []
        candidate = 0
        while len(ids) < wanted:
            if candidate not in used:
                ids.append(candidate)
            candidate += 1
        used.update(ids)
        held[_key(pod)] = tuple(ids)
    return held


def _key(pod: Mapping[str, Any]) -> str:
    metadata = pod.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def _created(pod: Mapping[str, Any]) -> tuple[str, str]:
    return (str((pod.get("metadata") or {}).get("creationTimestamp") or ""), _key(pod))


def node_room(node: Mapping[str, Any]) -> NodeRoom:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    gpu_resource = next((r for r in ("amd.com/gpu", "nvidia.com/gpu") if r in allocatable), None)
    return NodeRoom(
        name=(node.get("metadata") or {}).get("name", ""),
        allocatable={name: quantity(value) for name, value in allocatable.items()},
        gpu_resource=gpu_resource,
        gpus=int(quantity(allocatable[gpu_resource])) if gpu_resource else 0,
    )


def unschedulable_message(requests: Requests, node_count: int) -> str:
    biggest = max(
        (name for name in requests if requests[name] > 0 and "gpu" in name),
        default="cpu",
    )
    return f"0/{node_count} nodes are available: {node_count} Insufficient {biggest}."
