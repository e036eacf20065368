"""GPU idle preemption on the real stack stops nobody for a pod no node could hold (decision
0256): the kube-scheduler refuses a bare Pod asking 16 GPUs on nodes of 8 ("Insufficient
amd.com/gpu"), the planner takes it for a workload waiting for GPUs (decision 0066), and two
idle opted-in KaiwoJobs of 8 GPUs each, together enough, are kept: freed, their GPUs would
still be on two nodes. Before the fix both were TERMINATED (``GpuIdlePreemption``, "for
pending workload Pod/.../big") and the pod stayed Pending.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_sandbox.fleet import NODE_TYPES, NodeSpec

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, Pipeline, eventually, running_pipeline
from tests.integration.test_real_stack import flavor, queue
from tests.integration.test_real_stack_idle_preemption_queues import (
    ON_PRESSURE,
    POLLING_SECONDS,
    STEP,
    opted_in_job,
    readings,
    running_pod,
    short_pending_threshold,
    terminated_early,
    through_monitor_ticks,
)
from tests.prometheus_server import GpuExporter
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
FLEET: Final = tuple(NodeSpec(f"fit-mi300x-{i}", MI300X) for i in range(1, 4))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    real_stack: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Pipeline, GpuExporter]]:
    async with contextlib.AsyncExitStack() as exits:
        admin = await KubernetesAsyncioAdapter.from_kubeconfig(real_stack.kubeconfig)
        exits.push_async_callback(admin.close)
        await exits.enter_async_context(kwok_fleet(admin, FLEET))
        exporter = await exits.enter_async_context(GpuExporter().serving())
        pipeline = await exits.enter_async_context(
            running_pipeline(
                tmp_path_factory.mktemp("kaiwo"),
                real=real_stack,
                gpu_cluster=False,
                service_env={"KAIWO_MONITOR_POLLING_INTERVAL_SECONDS": str(POLLING_SECONDS)},
                metrics_endpoint=f"http://{exporter.target}/metrics",
            )
        )
        await actors.create_namespace(admin, pipeline.namespace)
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
                    "clusterQueues": [queue("q", pipeline.namespace, flavor("mi300x", amd=16))],
                },
            },
            field_manager="cluster-admin",
            force=False,
        )
        await short_pending_threshold(admin)
        yield pipeline, exporter


def big_pod(namespace: str) -> dict[str, Any]:
    """A bare Pod asking 16 GPUs, opted in to OnPressure: on 8-GPU nodes it never fits."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "big", "namespace": namespace, "annotations": dict(ON_PRESSURE)},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "ghcr.io/silogen/rocm-ray:6.4",
                    "resources": {"limits": {"amd.com/gpu": "16"}},
                }
            ]
        },
    }


async def test_a_pod_no_node_could_hold_has_no_idle_job_stopped_for_it(
    stack: tuple[Pipeline, GpuExporter],
) -> None:
    pipeline, exporter = stack
    namespace = pipeline.namespace
    for name in ("idle-1", "idle-2"):
        await pipeline.kube.create(opted_in_job(name, namespace, "q"), field_manager="alice")
    for name in ("idle-1", "idle-2"):
        await pipeline.reaches(name, "RUNNING", namespace=namespace)
    pods = [await running_pod(pipeline, namespace, name) for name in ("idle-1", "idle-2")]
    exporter.series = [series for pod in pods for series in readings(namespace, pod, 1.0)]

    await pipeline.kube.create(big_pod(namespace), field_manager="bob")

    async def waits_for_gpus() -> dict[str, Any] | Pending:
        listed = await pipeline.kube.list(resources.GPU_WORKLOAD, namespace=namespace)
        found = [
            record
            for record in listed.items
            if record["spec"]["workloadRef"]["name"] == "big"
            and (record.get("status") or {}).get("phase") == "PendingGpu"
        ]
        return found[0] if found else Pending("the pod's GpuWorkload does not say PendingGpu")

    record = await eventually(waits_for_gpus, what="the pod waiting for GPUs", within=STEP)
    # Its record says nobody is preempted for it (decision 0260), not that somebody may be.
    assert record["status"]["verdict"].endswith(
        "no schedulable node has enough GPUs and matches its node selector and affinity, "
        "so no idle workload is preempted for it"
    ), record["status"]

    async def kept() -> None:
        for name in ("idle-1", "idle-2"):
            job = await pipeline.kube.get(resources.KAIWO_JOB, name, namespace=namespace)
            assert job["status"]["status"] == "RUNNING", job["status"]
            assert terminated_early(job) is None, job["status"]

    await through_monitor_ticks(exporter, kept)
    for name in ("idle-1", "idle-2"):
        job = await pipeline.kube.get(resources.KAIWO_JOB, name, namespace=namespace)
        gpu_idle = next(c for c in job["status"]["conditions"] if c["type"] == "GpuIdle")
        assert gpu_idle["status"] == "True"  # idle all along: only the fit kept it
    pod = await pipeline.kube.get(resources.POD, "big", namespace=namespace)
    assert pod["status"]["phase"] == "Pending"
