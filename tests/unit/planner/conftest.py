"""Builders for Node JSON shared by the planner tests (fixtures, since tests/ is no package).

``make_node`` returns a Node as the API server would, with the device plugins' labels for the
chosen GPU kind. Keep additions small; children builders live in their own module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import pytest

MI300X_LABELS = {
    "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM",
    "beta.amd.com/gpu.family.AI": "8",
}
H100_LABELS = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}


class NodeFactory(Protocol):
    def __call__(
        self,
        name: str,
        *,
        gpu: str | None = None,
        gpus: int = 8,
        cpu: str = "64",
        memory: str = "512Gi",
        labels: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
        unschedulable: bool = False,
        ready: bool = True,
        control_plane: bool = False,
    ) -> dict[str, Any]: ...


def build_node(
    name: str,
    *,
    gpu: str | None = None,
    gpus: int = 8,
    cpu: str = "64",
    memory: str = "512Gi",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    control_plane: bool = False,
) -> dict[str, Any]:
    """A Node. ``gpu`` is ``"mi300x"``, ``"h100"`` or None (CPU only)."""
    node_labels = {"kubernetes.io/hostname": name}
    capacity: dict[str, Any] = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpu == "mi300x":
        node_labels |= {**MI300X_LABELS, "beta.amd.com/gpu.family.AI": str(gpus)}
        capacity["amd.com/gpu"] = str(gpus)
    elif gpu == "h100":
        node_labels |= {**H100_LABELS, "nvidia.com/gpu.count": str(gpus)}
        capacity["nvidia.com/gpu"] = str(gpus)
    if control_plane:
        node_labels["node-role.kubernetes.io/control-plane"] = ""
    node_labels |= labels or {}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": node_labels},
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


@pytest.fixture
def make_node() -> NodeFactory:
    return build_node


@pytest.fixture
def mixed_cluster_nodes() -> list[dict[str, Any]]:
    """Two MI300X nodes, one H100 node, a CPU worker and a control-plane node."""
    return [
        build_node("cp-0", cpu="8", memory="32Gi", control_plane=True),
        build_node("cpu-0", cpu="16", memory="64Gi"),
        build_node("mi300x-0", gpu="mi300x", cpu="128", memory="2Ti"),
        build_node("mi300x-1", gpu="mi300x", cpu="128", memory="2Ti"),
        build_node("h100-0", gpu="h100", cpu="96", memory="1Ti"),
    ]


@pytest.fixture
def one_node_cluster_with(make_node: NodeFactory) -> Callable[..., Any]:
    """``build(*objects)``: a cluster of one MI300X node, the namespace ``team-a`` and the
    KaiwoQueueConfig ``kaiwo`` of one queue ``kaiwo``, holding ``objects``."""
    # Imported when used: the queue builder lives in the planning tests' module.
    from kaiwo_planner.domain.state.cluster import ClusterState

    from tests.unit.planner.test_planning import queue_config

    def build(*objects: dict[str, Any]) -> ClusterState:
        return ClusterState.from_wire(
            nodes=[make_node("mi300x-0", gpu="mi300x")],
            objects=[queue_config({"name": "kaiwo"}), *objects],
            namespaces=["team-a"],
        )

    return build
