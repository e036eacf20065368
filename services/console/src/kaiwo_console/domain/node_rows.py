"""The GPU nodes page's rows: capacity and what running Pods on each node request."""

from __future__ import annotations

from dataclasses import dataclass

from kaiwo_contracts.queue_estimates.kueue import (
    GPU_RESOURCES,
    is_true,
)

from kaiwo_console.domain.cluster import (
    NODE,
    POD,
    ClusterState,
    Obj,
    as_int,
    meta,
    spec,
    status,
)


@dataclass(frozen=True, slots=True)
class NodeRow:
    name: str
    vendor: str
    product: str
    gpus: int
    allocated: int
    ready: bool


def pod_gpus(pod: Obj) -> int:
    """GPUs a Pod's containers request (their limits where no request is set)."""
    total = 0
    for container in spec(pod).get("containers") or ():
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for resource in GPU_RESOURCES:
            total += as_int(requests.get(resource, limits.get(resource)))
    return total


def node_rows(state: ClusterState) -> list[NodeRow]:
    """GPU nodes: capacity and what running Pods on each request."""
    allocated: dict[str, int] = {}
    for pod in state.of(POD):
        on = str(spec(pod).get("nodeName") or "")
        if not on or status(pod).get("phase") in ("Succeeded", "Failed"):
            continue
        allocated[on] = allocated.get(on, 0) + pod_gpus(pod)
    rows = []
    for node in state.of(NODE):
        capacity = status(node).get("capacity") or {}
        labels = meta(node).get("labels") or {}
        for resource in GPU_RESOURCES:
            gpus = as_int(capacity.get(resource))
            if not gpus:
                continue
            name = str(meta(node).get("name") or "")
            rows.append(
                NodeRow(
                    name=name,
                    vendor=resource.split(".")[0],
                    product=str(
                        labels.get("amd.com/gpu.product-name")
                        or labels.get("nvidia.com/gpu.product")
                        or ""
                    ),
                    gpus=gpus,
                    allocated=allocated.get(name, 0),
                    ready=is_true(node, "Ready"),
                )
            )
    return sorted(rows, key=lambda r: r.name)
