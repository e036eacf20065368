"""Pods of plain Jobs and Deployments outside Kueue that wait for GPUs are pressure for the
``OnPressure`` policy (issue 25 item 6, decision 0066), on the whole real stack: the real API
server, the real kube-scheduler (the kaiwo-scheduler profile) that marks a pod
``Unschedulable`` for "Insufficient amd.com/gpu" because no node has the GPUs free, the real
Job, Deployment and ReplicaSet controllers, kwok running the pods on one 8-GPU node; the whole
operator with its monitor reading a GPU exporter's page the test serves.

Two idle opted-in Jobs hold the node's 8 GPUs. A plain Job asking for 4 waits: the scheduler
cannot place its pod, its record says ``PendingGpu``, one idle Job is preempted for it and the
scheduler then places it. A Deployment asking for 4 waits the same way, and the other idle Job
goes for it, found through its ReplicaSet's pod (the operator never watches ReplicaSets).
Nothing of Kueue is involved: these workloads name no queue.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import aiohttp
import pytest
from kaiwo_contracts.gpu_workloads import NOT_KAIWO_POD_SELECTOR, UNBOUND_PENDING_POD_FIELDS
from kaiwo_kube import AlreadyExists, NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_sandbox.fleet import NODE_TYPES, NodeSpec

from tests.integration.pipeline.harness import Pending, Pipeline, eventually, running_pipeline
from tests.prometheus_server import GpuExporter, GpuSeries
from tests.real_cluster import RealCluster
from tests.real_stack import kwok_fleet

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow, pytest.mark.timeout(900)]

FLEET: Final = (NodeSpec("waiting-mi300x-1", NODE_TYPES["amd-mi300x"]),)
STEP: Final = 90.0
SCHEDULER: Final = "kaiwo-scheduler"
"""The real stack's kube-scheduler serves this profile only."""
RUN_SECONDS: Final = "sandbox.kaiwo.silogen.ai/run-seconds"
OPT_IN: Final = "kaiwo.silogen.ai/gpu-preemption."
ON_PRESSURE: Final = {
    f"{OPT_IN}policy": "OnPressure",
    f"{OPT_IN}grace-period": "2s",
    f"{OPT_IN}threshold": "50",
}


def pod_template(gpus: int, labels: dict[str, str], restart: str) -> dict[str, Any]:
    """A pod kwok runs for an hour, asking for ``gpus`` AMD GPUs."""
    return {
        "metadata": {"labels": labels, "annotations": {RUN_SECONDS: "3600"}},
        "spec": {
            "schedulerName": SCHEDULER,
            "restartPolicy": restart,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"limits": {"amd.com/gpu": str(gpus)}},
                }
            ],
        },
    }


def plain_job(name: str, namespace: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "annotations": ON_PRESSURE},
        "spec": {"backoffLimit": 0, "template": pod_template(gpus, {}, "Never")},
    }


def deployment(name: str, namespace: str, gpus: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "annotations": ON_PRESSURE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": pod_template(gpus, labels, "Always"),
        },
    }


async def pod_where(pipeline: Pipeline, selector: str, holds: Any, *, what: str) -> dict[str, Any]:
    """The one live pod with ``selector`` once ``holds`` it."""

    async def check() -> dict[str, Any] | Pending:
        listed = await pipeline.kube.list(
            resources.POD, namespace=pipeline.namespace, label_selector=selector
        )
        alive = [p for p in listed.items if "deletionTimestamp" not in p["metadata"]]
        if len(alive) != 1:
            return Pending(f"{len(alive)} pods")
        return alive[0] if holds(alive[0]) else Pending(f"{alive[0].get('status')}")

    return await eventually(check, what=what, within=STEP)


def running(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def unschedulable_for_gpus(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(
        c.get("type") == "PodScheduled"
        and c.get("reason") == "Unschedulable"
        and "Insufficient amd.com/gpu" in str(c.get("message"))
        for c in conditions
    )


async def record_of(
    pipeline: Pipeline, kind: str, name: str, *, phase: str | None = None
) -> dict[str, Any]:
    """The GpuWorkload of ``kind``/``name``, once it exists (in ``phase``, when given)."""

    async def check() -> dict[str, Any] | Pending:
        listed = await pipeline.kube.list(resources.GPU_WORKLOAD, namespace=pipeline.namespace)
        for item in listed.items:
            ref = item["spec"]["workloadRef"]
            if (ref["kind"], ref["name"]) == (kind, name):
                found = (item.get("status") or {}).get("phase")
                return item if phase is None or found == phase else Pending(f"phase {found}")
        return Pending("no GpuWorkload")

    return await eventually(check, what=f"GpuWorkload of {kind} {name} {phase}", within=STEP)


async def short_pending_threshold(kube: KubernetesAsyncioAdapter) -> None:
    """The KaiwoConfig: a workload waiting 1 s is pressure (the default is minutes)."""
    spec = {"scheduling": {"pendingThresholdForPreemption": "1s"}}
    try:
        await kube.create(
            {
                "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
                "kind": "KaiwoConfig",
                "metadata": {"name": "kaiwo"},
                "spec": spec,
            },
            field_manager="cluster-admin",
        )
    except AlreadyExists:
        await kube.merge_patch(
            resources.KAIWO_CONFIG, "kaiwo", {"spec": spec}, field_manager="cluster-admin"
        )


async def job_gone(pipeline: Pipeline, name: str) -> None:
    async def check() -> bool | Pending:
        try:
            await pipeline.kube.get(resources.JOB, name, namespace=pipeline.namespace)
        except NotFound:
            return True
        return Pending("still there")

    await eventually(check, what=f"Job {name} deleted", within=STEP)


async def pod_events_published(pipeline: Pipeline) -> float:
    """Pod events the watcher published (its ``/metrics``): no Kaiwo workload runs here, so
    every one is of a pod waiting for GPUs."""
    port = pipeline.stack.services["watcher"].health_port
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        text = await response.text()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("kaiwo_watcher_events_published_total{") and 'kind="Pod"' in line
    )


@contextlib.asynccontextmanager
async def counting_unbound_pod_events(
    kube: KubernetesAsyncioAdapter, namespace: str
) -> AsyncIterator[Counter[str]]:
    """What the API server sends the watcher's ``pods#waiting-gpu`` stream for ``namespace``
    (the same selectors), counted by event type while the block runs: its cost."""
    counted: Counter[str] = Counter()
    listed = await kube.list(resources.POD, namespace=namespace)

    async def count() -> None:
        events = kube.watch(
            resources.POD,
            resource_version=listed.resource_version,
            namespace=namespace,
            label_selector=NOT_KAIWO_POD_SELECTOR,
            field_selector=UNBOUND_PENDING_POD_FIELDS,
            bookmarks=False,
        )
        async with contextlib.aclosing(events):
            async for event in events:
                counted[event.type] += 1

    task = asyncio.create_task(count())
    try:
        yield counted
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def monitored_operator(
    real_stack: RealCluster, tmp_path: Path, fleet: tuple[NodeSpec, ...]
) -> AsyncIterator[tuple[Pipeline, GpuExporter]]:
    """The operator on the real stack with kwok nodes ``fleet`` and a GPU exporter the test
    sets readings on, the monitor polling every second."""
    async with contextlib.AsyncExitStack() as stack:
        admin = await stack.enter_async_context(
            await KubernetesAsyncioAdapter.from_kubeconfig(real_stack.kubeconfig)
        )
        await stack.enter_async_context(kwok_fleet(admin, fleet))
        exporter = await stack.enter_async_context(GpuExporter().serving())
        pipeline = await stack.enter_async_context(
            running_pipeline(
                tmp_path / "stack",
                real=real_stack,
                gpu_cluster=False,
                service_env={"KAIWO_MONITOR_POLLING_INTERVAL_SECONDS": "1"},
                metrics_endpoint=f"http://{exporter.target}/metrics",
            )
        )
        yield pipeline, exporter


@pytest.fixture
async def operator(
    real_stack: RealCluster, tmp_path: Path
) -> AsyncIterator[tuple[Pipeline, GpuExporter]]:
    async with monitored_operator(real_stack, tmp_path, FLEET) as operated:
        yield operated


async def test_pods_of_jobs_and_deployments_waiting_for_gpus_press_for_idle_ones(
    operator: tuple[Pipeline, GpuExporter],
) -> None:
    pipeline, exporter = operator
    kube, ns = pipeline.kube, pipeline.namespace
    await short_pending_threshold(kube)
    async with counting_unbound_pod_events(kube, ns) as unbound:
        # Two idle opted-in Jobs hold the node's 8 GPUs.
        for name in ("holder-a", "holder-b"):
            await kube.create(plain_job(name, ns, gpus=4))
        holders = {
            name: await pod_where(pipeline, f"job-name={name}", running, what=f"{name} running")
            for name in ("holder-a", "holder-b")
        }
        exporter.series = [
            GpuSeries(ns, pod["metadata"]["name"], str(gpu), 1.0)
            for pod in holders.values()
            for gpu in range(4)
        ]
        for name in holders:
            await record_of(pipeline, "Job", name, phase="Idle")

        # 1. A plain Job no node has GPUs for: the scheduler says so, and an idle Job goes.
        waits = await kube.create(plain_job("waits", ns, gpus=4))
        await pod_where(
            pipeline, "job-name=waits", unschedulable_for_gpus, what="the scheduler refusing waits"
        )
        waiting = await record_of(pipeline, "Job", "waits", phase="PendingGpu")
        assert waiting["status"]["verdict"].startswith("Waiting for 4 amd GPUs since ")

        async def one_preempted(exclude: str = "") -> tuple[str, dict[str, Any]]:
            async def check() -> tuple[str, dict[str, Any]] | Pending:
                for name in holders:
                    if name == exclude:
                        continue
                    found = await record_of(pipeline, "Job", name)
                    if found["status"].get("phase") == "Preempted":
                        return name, found
                return Pending("no holder preempted")

            return await eventually(check, what="an idle holder preempted", within=STEP)

        first, first_record = await one_preempted()
        assert first_record["status"]["preemptedFor"] == {
            "kind": "Job",
            "namespace": ns,
            "name": "waits",
            "uid": waits["metadata"]["uid"],
        }
        await job_gone(pipeline, first)
        placed = await pod_where(pipeline, "job-name=waits", running, what="waits placed at last")
        exporter.series = [
            GpuSeries(ns, holders[name]["metadata"]["name"], str(gpu), 1.0)
            for name in holders
            if name != first
            for gpu in range(4)
        ] + [GpuSeries(ns, placed["metadata"]["name"], str(gpu), 95.0) for gpu in range(4)]
        await record_of(pipeline, "Job", "waits", phase="Active")
        second = next(name for name in holders if name != first)
        assert (await record_of(pipeline, "Job", second))["status"]["phase"] == "Idle"

        # 2. A Deployment no node has GPUs for: found through its ReplicaSet's pod.
        web = await kube.create(deployment("web", ns, gpus=4))
        await pod_where(
            pipeline, "app=web", unschedulable_for_gpus, what="the scheduler refusing web's pod"
        )
        web_record = await record_of(pipeline, "Deployment", "web", phase="PendingGpu")
        assert web_record["status"]["verdict"].startswith("Waiting for 4 amd GPUs since ")
        name, second_record = await one_preempted(exclude=first)
        assert name == second
        assert second_record["status"]["preemptedFor"] == {
            "kind": "Deployment",
            "namespace": ns,
            "name": "web",
            "uid": web["metadata"]["uid"],
        }
        await job_gone(pipeline, second)
        await pod_where(pipeline, "app=web", running, what="web's pod placed at last")
        # Four pods started; only the two that waited reached the bus (waiting, then placed).
        published = await pod_events_published(pipeline)
        assert published >= 2
        print(
            f"\n4 pods started, 2 of them waiting: the unbound-pod watch got "
            f"{sum(unbound.values())} events {dict(unbound)}; the watcher published "
            f"{published:.0f} Pod events"
        )
