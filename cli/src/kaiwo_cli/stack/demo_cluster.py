"""What ``kaiwo up --fake`` puts in its empty fake cluster so the examples have somewhere to run:
two AMD MI300X nodes with 8 GPUs each (the labels and capacity the device plugin and node
labeller would set) and the namespaces ``examples/`` uses. A real cluster gets none of this."""

from __future__ import annotations

from typing import Any, Final

from kaiwo_kube import AlreadyExists, KubernetesPort, resources

FIELD_MANAGER: Final = "kaiwo-demo"
DEMO_NODES: Final = ("mi300x-node-1", "mi300x-node-2")
GPUS_PER_NODE: Final = 8
DEMO_NAMESPACES: Final = (
    "ml-team",
    "nlp-research",
    "vision",
    "ml-prod",
    "kubeai",
    "gateway-system",
)


def gpu_node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM",
                "beta.amd.com/gpu.family.AI": str(GPUS_PER_NODE),
            },
        },
    }


def node_status() -> dict[str, Any]:
    capacity = {"cpu": "192", "memory": "2Ti", "amd.com/gpu": str(GPUS_PER_NODE)}
    return {
        "capacity": capacity,
        "allocatable": capacity,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    }


async def seed_demo_cluster(kube: KubernetesPort) -> None:
    """Create the demo nodes and namespaces; those that exist already are left as they are."""
    for namespace in DEMO_NAMESPACES:
        await _create(
            kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
    for name in DEMO_NODES:
        if await _create(kube, gpu_node(name)):
            await kube.patch_status(
                resources.NODE, name, node_status(), field_manager=FIELD_MANAGER, method="merge"
            )


async def _create(kube: KubernetesPort, obj: dict[str, Any]) -> bool:
    try:
        await kube.create(obj, field_manager=FIELD_MANAGER)
    except AlreadyExists:
        return False
    return True
