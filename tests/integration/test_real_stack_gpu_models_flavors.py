"""``gpuModels`` in a queue of two GPU models runs on the model asked for (decision 0237): the
real Kueue chooses the flavor, the kube-scheduler binds, kwok runs the pods.

Queue ``two`` has a flavor per model, MI300X first. Kueue ignores the pods' affinity on
``kaiwo/gpu-model`` (no flavor declares that label), so before the fix it admitted an MI250X
job into the MI300X flavor: the pod asked for an MI300X node with an MI250X GPU and stayed
Pending for ever, the MI250X quota free. Now Kueue admits it into the MI250X flavor and it runs
there.

A Job made while no flavor held its model names none, and Kueue admits it into the first
flavor with quota; once a node of its model joins, it is made anew and runs there (decision
0264).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_sandbox.fleet import NODE_TYPES, NodeSpec

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, Pipeline, eventually, running_pipeline
from tests.integration.test_real_stack import flavor, kaiwo_job, queue
from tests.real_cluster import RealCluster
from tests.real_stack import kwok_fleet

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(600),
]

MI300X: Final = NODE_TYPES["amd-mi300x"]
MI250X: Final = NODE_TYPES["amd-mi250x"]
H100: Final = NODE_TYPES["nvidia-h100"]
A100: Final = NODE_TYPES["nvidia-a100"]
FLEET: Final = (
    NodeSpec("models-mi300x-1", MI300X),
    NodeSpec("models-mi250x-1", MI250X),
    NodeSpec("models-h100-1", H100),
)
LATE_A100: Final = NodeSpec("models-a100-1", A100)
A100_MODEL: Final = "nvidiaa100sxm480gb"
"""``kaiwo/gpu-model`` of an A100 node, as the operator labels it."""
STEP: Final = 90.0
AMD_PRODUCT: Final = "amd.com/gpu.product-name"
NVIDIA_PRODUCT: Final = "nvidia.com/gpu.product"
NVIDIA_GPU: Final = "nvidia.com/gpu"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    real_stack: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pipeline]:
    async with (
        await KubernetesAsyncioAdapter.from_kubeconfig(real_stack.kubeconfig) as admin,
        kwok_fleet(admin, FLEET),
        running_pipeline(
            tmp_path_factory.mktemp("kaiwo"), real=real_stack, gpu_cluster=False
        ) as pipeline,
    ):
        await admin.apply(
            {
                "apiVersion": actors.KAIWO_API,
                "kind": "KaiwoQueueConfig",
                "metadata": {"name": actors.QUEUE_CONFIG},
                "spec": {
                    "resourceFlavors": [
                        {"name": "mi300x", "nodeLabels": {AMD_PRODUCT: MI300X.product}},
                        {"name": "mi250x", "nodeLabels": {AMD_PRODUCT: MI250X.product}},
                        {"name": "h100", "nodeLabels": {NVIDIA_PRODUCT: H100.product}},
                        {"name": "a100", "nodeLabels": {NVIDIA_PRODUCT: A100.product}},
                    ],
                    "clusterQueues": [
                        queue(
                            "two",
                            pipeline.namespace,
                            flavor("mi300x", amd=8),
                            flavor("mi250x", amd=8),
                        ),
                        queue(
                            "nvidia",
                            pipeline.namespace,
                            flavor("h100", nvidia=8),
                            flavor("a100", nvidia=8),
                        ),
                    ],
                },
            },
            field_manager="cluster-admin",
            force=False,
        )

        async def ready() -> dict[str, Any] | Pending:
            found = await admin.get(resources.KAIWO_QUEUE_CONFIG, actors.QUEUE_CONFIG)
            status = (found.get("status") or {}).get("status")
            return found if status == "READY" else Pending(f"{status}")

        await eventually(ready, what="the KaiwoQueueConfig READY", within=STEP)
        yield pipeline


async def admitted_flavor(pipeline: Pipeline, job: str, gpu: str = "amd.com/gpu") -> str:
    """The flavor of ``gpu`` Kueue admitted the Job ``job`` into (the Job there now: the
    Workload of one made anew before may still be going)."""

    async def check() -> str | Pending:
        found = await pipeline.child(resources.JOB, job)
        uid = (found or {}).get("metadata", {}).get("uid")
        listed = await pipeline.kube.list(resources.KUEUE_WORKLOAD, namespace=pipeline.namespace)
        for workload in listed.items:
            owners = workload["metadata"].get("ownerReferences") or ()
            admission = (workload.get("status") or {}).get("admission")
            if any(o.get("uid") == uid for o in owners) and admission:
                [assignment] = admission["podSetAssignments"]
                return str(assignment["flavors"][gpu])
        return Pending("not admitted")

    return await eventually(check, what=f"the Workload of {job} admitted", within=STEP)


async def node_of(pipeline: Pipeline, job: str) -> str:
    listed = await pipeline.kube.list(
        resources.POD,
        namespace=pipeline.namespace,
        label_selector=f"{actors.JOB_NAME_LABEL}={job}",
    )
    [pod] = listed.items
    return str(pod["spec"]["nodeName"])


@pytest.mark.parametrize(
    ("model", "flavor_name", "node"),
    [("mi250x", "mi250x", "models-mi250x-1"), ("mi300x", "mi300x", "models-mi300x-1")],
)
async def test_a_job_asking_for_one_gpu_model_runs_in_that_models_flavor(
    stack: Pipeline, model: str, flavor_name: str, node: str
) -> None:
    name = f"on-{model}"
    job = kaiwo_job(
        name, stack.namespace, queue_name="two", gpus=8, run_seconds=600, gpuModels=[model]
    )
    await stack.kube.create(job, field_manager="alice")
    await stack.reaches(name, "RUNNING", namespace=stack.namespace)
    assert await admitted_flavor(stack, name) == flavor_name
    assert await node_of(stack, name) == node


async def test_a_job_admitted_before_a_node_of_its_model_joined_is_made_anew_there(
    stack: Pipeline,
) -> None:
    """Decision 0264: queue ``nvidia`` has flavors ``h100`` then ``a100``, and only an H100
    node. A KaiwoJob asks for an A100: no flavor holds one, so its Job names none, and Kueue
    admits it into ``h100``, where it cannot run. An A100 node joins: the Job, none of whose
    pods ran, is made anew, and Kueue admits the new one into ``a100``, where it runs."""
    name = "on-a100"
    job = kaiwo_job(
        name,
        stack.namespace,
        queue_name="nvidia",
        gpus=8,
        vendor="nvidia",
        run_seconds=600,
        gpuModels=[A100_MODEL],
    )
    await stack.kube.create(job, field_manager="alice")
    assert await admitted_flavor(stack, name, NVIDIA_GPU) == "h100"

    async with kwok_fleet(stack.kube, [LATE_A100]):
        await stack.reaches(name, "RUNNING", namespace=stack.namespace)
        assert await admitted_flavor(stack, name, NVIDIA_GPU) == "a100"
        assert await node_of(stack, name) == LATE_A100.name
