"""Duration preemption on the real stack takes a serving scale-up waiting at Kueue's gate for
a waiting workload, as GPU idle preemption does (decisions 0236, 0256): the real Kueue admits
the pods of a Kueue-managed namespace one by one, the kube-scheduler binds, kwok runs them.

A READY KaiwoService of one 8-GPU replica and a KaiwoJob of 8 GPUs past its ``duration`` fill
the queue ``qs`` (16 GPUs). Scaled to 2 replicas, the service's new pod waits at Kueue's gate:
the expired job is terminated for the service (``DurationExceededWithActiveGpuDemand``), and
the service is READY with both replicas. Before the fix the expired job kept running and the
new replica waited for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Final

import pytest
import pytest_asyncio
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_sandbox.fleet import NODE_TYPES, NodeSpec

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pipeline, running_pipeline
from tests.integration.test_real_stack import flavor, kaiwo_job, queue, vllm_service
from tests.integration.test_real_stack_idle_preemption_queues import (
    LONG_RUN,
    short_pending_threshold,
    terminated_early,
)
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
FLEET: Final = tuple(NodeSpec(f"dur-mi300x-{i}", MI300X) for i in range(1, 4))
DURATION_SECONDS: Final = 5


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    real_stack: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pipeline]:
    async with contextlib.AsyncExitStack() as exits:
        admin = await KubernetesAsyncioAdapter.from_kubeconfig(real_stack.kubeconfig)
        exits.push_async_callback(admin.close)
        await exits.enter_async_context(kwok_fleet(admin, FLEET))
        pipeline = await exits.enter_async_context(
            running_pipeline(tmp_path_factory.mktemp("kaiwo"), real=real_stack, gpu_cluster=False)
        )
        serving = f"{pipeline.namespace}-svc"
        await actors.create_namespace(admin, serving)
        await admin.merge_patch(
            resources.NAMESPACE,
            serving,
            {"metadata": {"labels": {"kueue-managed": "true"}}},
            field_manager="cluster-admin",
        )
        await admin.apply(
            {
                "apiVersion": actors.KAIWO_API,
                "kind": "KaiwoQueueConfig",
                "metadata": {"name": actors.QUEUE_CONFIG},
                "spec": {
                    "resourceFlavors": [
                        {
                            "name": "mi300x",
                            "nodeLabels": {"amd.com/gpu.product-name": MI300X.product},
                        }
                    ],
                    "clusterQueues": [queue("qs", serving, flavor("mi300x", amd=16))],
                },
            },
            field_manager="cluster-admin",
            force=False,
        )
        await short_pending_threshold(admin)
        yield pipeline


async def test_a_serving_scale_up_waiting_for_quota_gets_an_expired_job_of_its_queue_stopped(
    stack: Pipeline,
) -> None:
    pipeline = stack
    serving = f"{pipeline.namespace}-svc"
    service = vllm_service("chat", serving, clusterQueue="qs", gpusPerReplica=8)
    await pipeline.kube.create(service, field_manager="erin")
    await pipeline.reaches("chat", "READY", kind=resources.KAIWO_SERVICE, namespace=serving)
    expired = kaiwo_job(
        "expired",
        serving,
        queue_name="qs",
        gpus=8,
        run_seconds=LONG_RUN,
        duration=f"{DURATION_SECONDS}s",
    )
    await pipeline.kube.create(expired, field_manager="alice")
    await pipeline.reaches("expired", "RUNNING", namespace=serving)
    await asyncio.sleep(DURATION_SECONDS + 1)  # past its duration, and nobody waits yet
    job = await pipeline.kube.get(resources.KAIWO_JOB, "expired", namespace=serving)
    assert job["status"]["status"] == "RUNNING"

    # qs is full: the second replica's pod waits at Kueue's gate.
    await pipeline.kube.merge_patch(
        resources.KAIWO_SERVICE,
        "chat",
        {"spec": {"replicas": 2}},
        namespace=serving,
        field_manager="erin",
    )
    stopped = await pipeline.reaches("expired", "TERMINATED", namespace=serving)
    reason = terminated_early(stopped)
    assert reason is not None and reason["reason"] == "DurationExceededWithActiveGpuDemand"
    assert f"KaiwoService/{serving}/chat has waited for 8 amd GPUs" in reason["message"]
    assert stopped["status"]["preemptedFor"]["name"] == "chat"
    await pipeline.reaches("chat", "READY", kind=resources.KAIWO_SERVICE, namespace=serving)
    deployment = await pipeline.kube.get(resources.DEPLOYMENT, "chat", namespace=serving)
    assert deployment["status"]["availableReplicas"] == 2
