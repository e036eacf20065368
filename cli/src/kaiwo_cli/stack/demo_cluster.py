"""What ``kaiwo up --fake`` puts in its empty fake cluster so the examples have somewhere to run:
the sandbox's nodes (by default 2 AMD MI300X and 2 NVIDIA H100 nodes with 8 GPUs each and one
CPU-only node, labelled as the GPU operators label them, see :mod:`kaiwo_sandbox.fleet`) and
the namespaces ``examples/`` uses. A real cluster gets none of this."""

from __future__ import annotations

from typing import Final

from kaiwo_sandbox import Sandbox, SandboxOptions
from kaiwo_sandbox.cluster_port import SandboxCluster

DEMO_NAMESPACES: Final = (
    "ml-team",
    "nlp-research",
    "vision",
    "ml-prod",
    "kubeai",
    "gateway-system",
)


async def seed_demo_cluster(kube: SandboxCluster, options: SandboxOptions | None = None) -> None:
    """Create the fleet's nodes and the demo namespaces; existing ones are left as they are."""
    chosen = options or SandboxOptions()
    sandbox = Sandbox(kube, SandboxOptions(fleet=chosen.fleet, namespaces=DEMO_NAMESPACES))
    await sandbox.register_nodes()
