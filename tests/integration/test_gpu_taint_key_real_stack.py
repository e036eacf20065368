"""A renamed ``defaultGpuTaintKey`` moves the operator's taint (decision 0145): the whole
operator on the whole real stack (the real kube-scheduler and Kueue's topology-aware admission
honour taints; kwok's nodes run the pods).

Two MI300X nodes, ``addTaintsToGpuNodes`` on with the default key, so both nodes carry
``kaiwo.silogen.ai/gpu=true:NoSchedule``; an administrator taints one node for themselves;
then the key is renamed. The nodes must end with the new key's taint only, the admin's taint
untouched, and a GPU job created after the rename must complete. Before, the old key's taint
stayed on both nodes next to the new one, the job's pod tolerated only the new key, and Kueue
kept it pending for good.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import resources
from kaiwo_sandbox.fleet import NODE_TYPES, NodeSpec

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import (
    Pending,
    Pipeline,
    eventually,
    pipeline_on_kwok_nodes,
)
from tests.real_cluster import RealCluster

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(600),
]

MI300X: Final = NODE_TYPES["amd-mi300x"]
FLEET: Final = tuple(NodeSpec(name, MI300X) for name in ("rk-1", "rk-2"))
OLD_KEY: Final = "kaiwo.silogen.ai/gpu"
NEW_KEY: Final = "example.com/gpu-node"
OLD_TAINT: Final = {"key": OLD_KEY, "value": "true", "effect": "NoSchedule"}
NEW_TAINT: Final = {"key": NEW_KEY, "value": "true", "effect": "NoSchedule"}
ADMINS_TAINT: Final = {
    "key": "example.com/maintenance",
    "value": "sunday",
    "effect": "PreferNoSchedule",
}
RUN_SECONDS: Final = "sandbox.kaiwo.silogen.ai/run-seconds"
STEP: Final = 90.0


def kaiwo_config(*, taint_key: str) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": actors.KAIWO_CONFIG},
        "spec": {
            "dynamicallyUpdateDefaultClusterQueue": True,
            "nodes": {"addTaintsToGpuNodes": True, "defaultGpuTaintKey": taint_key},
        },
    }


def eight_gpu_job(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoJob",
        "metadata": {"name": name, "namespace": namespace, "annotations": {RUN_SECONDS: "5"}},
        "spec": {
            "user": "alice@example.com",
            "image": "ghcr.io/silogen/rocm-ray:6.4",
            "entrypoint": "python train.py",
            "gpus": 8,
            "gpuVendor": "amd",
        },
    }


def without_time(taints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in t.items() if k != "timeAdded"} for t in taints]


def owns_taints(node: dict[str, Any], manager: str) -> bool:
    return any(
        entry["manager"] == manager and "f:taints" in entry["fieldsV1"].get("f:spec", {})
        for entry in node["metadata"]["managedFields"]
    )


async def node_taints(pipeline: Pipeline, name: str) -> list[dict[str, Any]]:
    node = await pipeline.kube.get(resources.NODE, name)
    return without_time((node.get("spec") or {}).get("taints") or [])


async def every_node_carries(pipeline: Pipeline, wanted: dict[str, list[dict[str, Any]]]) -> None:
    async def check() -> bool | Pending:
        for name, taints in wanted.items():
            found = await node_taints(pipeline, name)
            if sorted(found, key=str) != sorted(taints, key=str):
                return Pending(f"{name} has {found}")
        return True

    await eventually(check, what=f"the taints {wanted}", within=STEP)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    real_stack: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pipeline]:
    async with pipeline_on_kwok_nodes(
        real_stack, FLEET, tmp_path_factory.mktemp("kaiwo")
    ) as pipeline:
        yield pipeline


async def test_a_renamed_taint_key_moves_the_operators_taint_and_gpu_jobs_run(
    stack: Pipeline,
) -> None:
    pipeline, kube = stack, stack.kube
    first, second = (spec.name for spec in FLEET)
    await kube.apply(kaiwo_config(taint_key=OLD_KEY), field_manager="cluster-admin", force=True)
    await every_node_carries(pipeline, {first: [OLD_TAINT], second: [OLD_TAINT]})

    # The admin adds a taint of their own, as `kubectl taint` does: the whole list is sent
    # back, so the admin's manager now owns spec.taints (an atomic list).
    await kube.merge_patch(
        resources.NODE,
        first,
        {"spec": {"taints": [OLD_TAINT, ADMINS_TAINT]}},
        field_manager="kubectl-taint",
    )
    # So managedFields cannot tell who added which taint: the operator's record can.
    node = await kube.get(resources.NODE, first)
    assert owns_taints(node, "kubectl-taint")
    assert not owns_taints(node, "kaiwo")

    await kube.apply(kaiwo_config(taint_key=NEW_KEY), field_manager="cluster-admin", force=True)
    await every_node_carries(pipeline, {first: [ADMINS_TAINT, NEW_TAINT], second: [NEW_TAINT]})

    await kube.create(eight_gpu_job("after-rename", pipeline.namespace))
    await pipeline.reaches("after-rename", "COMPLETE", within=STEP)
    await pipeline.settled(within=STEP)
    assert await node_taints(pipeline, first) == [ADMINS_TAINT, NEW_TAINT]
    assert await node_taints(pipeline, second) == [NEW_TAINT]
