"""The sandbox's nodes: names, labels and capacity as the kubelet and the GPU operators set them.

AMD nodes carry what the AMD GPU operator's node labeller writes (``amd.com/gpu.product-name``,
``beta.amd.com/gpu.family.AI`` with the GPU count, which is where the operator reads it) and
capacity ``amd.com/gpu``; NVIDIA nodes what GPU feature discovery writes
(``nvidia.com/gpu.product``, ``nvidia.com/gpu.count``, ``nvidia.com/gpu.present``) and capacity
``nvidia.com/gpu``. A fleet is given as ``TYPE=COUNT,...`` (see :data:`NODE_TYPES`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

Vendor = Literal["amd", "nvidia", "none"]
SIMULATED_LABEL: Final = "sandbox.kaiwo.silogen.ai/simulated"
GPU_RESOURCE: Final[dict[Vendor, str]] = {"amd": "amd.com/gpu", "nvidia": "nvidia.com/gpu"}


@dataclass(frozen=True, slots=True)
class NodeType:
    """A kind of machine: its GPUs and the rest of its capacity."""

    vendor: Vendor
    product: str
    gpus: int
    cpu: str
    memory: str


NODE_TYPES: Final[dict[str, NodeType]] = {
    "amd-mi300x": NodeType("amd", "AMD_Instinct_MI300X_OAM", 8, "192", "2Ti"),
    "amd-mi250x": NodeType("amd", "AMD_Instinct_MI250X", 8, "128", "1Ti"),
    "nvidia-h100": NodeType("nvidia", "NVIDIA-H100-80GB-HBM3", 8, "192", "2Ti"),
    "nvidia-a100": NodeType("nvidia", "NVIDIA-A100-SXM4-80GB", 8, "128", "1Ti"),
    "cpu": NodeType("none", "", 0, "64", "256Gi"),
}


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node of the fleet."""

    name: str
    type: NodeType

    @property
    def gpu_resource(self) -> str | None:
        return GPU_RESOURCE.get(self.type.vendor) if self.type.vendor != "none" else None

    def labels(self) -> dict[str, str]:
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            SIMULATED_LABEL: "true",
        }
        count = str(self.type.gpus)
        if self.type.vendor == "amd":
            labels["amd.com/gpu.product-name"] = self.type.product
            labels["beta.amd.com/gpu.family.AI"] = count
        elif self.type.vendor == "nvidia":
            labels["nvidia.com/gpu.product"] = self.type.product
            labels["nvidia.com/gpu.count"] = count
            labels["nvidia.com/gpu.present"] = "true"
        return labels

    def capacity(self) -> dict[str, str]:
        capacity = {
            "cpu": self.type.cpu,
            "memory": self.type.memory,
            "pods": "110",
            "ephemeral-storage": "3Ti",
        }
        if self.gpu_resource is not None:
            capacity[self.gpu_resource] = str(self.type.gpus)
        return capacity

    def manifest(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": self.labels()},
        }

    def status(self, *, now: str, kubelet: dict[str, Any] | None = None) -> dict[str, Any]:
        """The node's status; ``kubelet`` (:func:`kubelet_endpoint_status`) says where its
        kubelet answers."""
        return {
            **(kubelet or {}),
            "capacity": self.capacity(),
            "allocatable": self.capacity(),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status (simulated)",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "nodeInfo": {"kubeletVersion": "v1.33.0-sandbox", "operatingSystem": "linux"},
        }


def kubelet_endpoint_status(host: str, port: int) -> dict[str, Any]:
    """Where an API server finds a node's kubelet (for ``pods/log``): the address and port.

    Only an InternalIP: API servers prefer a Hostname address by default, and the sandbox's
    node names resolve nowhere.
    """
    return {
        "addresses": [{"type": "InternalIP", "address": host}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
    }


def parse_fleet(text: str) -> tuple[NodeSpec, ...]:
    """``"amd-mi300x=2,cpu=1"`` as nodes named ``<type>-<n>``; ValueError naming the bad part."""
    nodes: list[NodeSpec] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        type_name, _, count_text = part.partition("=")
        node_type = NODE_TYPES.get(type_name.strip())
        if node_type is None:
            known = ", ".join(NODE_TYPES)
            raise ValueError(f"unknown node type {type_name.strip()!r} (known: {known})")
        try:
            count = int(count_text or "1")
        except ValueError:
            raise ValueError(f"node count in {part!r} is not a whole number") from None
        if count < 0:
            raise ValueError(f"node count in {part!r} is negative")
        nodes.extend(NodeSpec(f"{type_name.strip()}-{i}", node_type) for i in range(1, count + 1))
    if not nodes:
        raise ValueError(f"the fleet {text!r} has no nodes")
    return tuple(nodes)


DEFAULT_FLEET_TEXT: Final = "amd-mi300x=2,nvidia-h100=2,cpu=1"
DEFAULT_FLEET: Final = parse_fleet(DEFAULT_FLEET_TEXT)
