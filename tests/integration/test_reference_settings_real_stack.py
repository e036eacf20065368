"""The API reference's installation settings end to end (issue 25 item 3, decision 0046): the
whole operator on the whole real stack (the real API server, Kueue's manager, the
kube-scheduler, kwok running the pods), its processes configured only by the reference's
names, then by both names at once.

1. **The reference's names alone.** ``DEFAULT_CLUSTER_QUEUE_NAME=research`` goes into the
   KaiwoConfig the operator creates, and the real Kueue admits a KaiwoJob that names no queue
   in the ClusterQueue ``research``. The monitor runs with ``RESOURCE_MONITORING_ENABLED``,
   ``RESOURCE_MONITORING_METRICS_ENDPOINT`` (an exporter's own ``/metrics`` page, read
   directly, no Prometheus in between) and ``RESOURCE_MONITORING_POLLING_INTERVAL=1s``: the
   GPU job the exporter shows idle is flagged ``ResourceUnderutilization``, and it is scraped
   every second (the default would be every 30 s). ``resourceMonitoring.profile: gpu`` judges
   GPU pods only: a CPU-only job the exporter also shows at 0 % is never flagged, and the real
   API server refuses a profile the reference does not list.
2. **``RESOURCE_MONITORING_ENABLED=false``**: the monitor runs and asks its endpoint nothing.
3. **Both names set, the project's decides.** ``KAIWO_DEFAULT_CLUSTER_QUEUE_NAME=ops`` over
   ``DEFAULT_CLUSTER_QUEUE_NAME=research``: the KaiwoConfig made again names ``ops`` and Kueue
   admits the next job there. ``KAIWO_MONITOR_ENABLED=true`` over ``..._ENABLED=false``,
   ``KAIWO_MONITOR_METRICS_ENDPOINT`` (exporter B) over ``..._METRICS_ENDPOINT`` (exporter A,
   never asked) and ``KAIWO_MONITOR_POLLING_INTERVAL_SECONDS=1`` over
   ``..._POLLING_INTERVAL=1h``: a job busy at the monitor's first tick and idle afterwards is
   flagged, which only a second tick within the hour can do.

The settings are environment variables that take effect when a process starts (as the
reference says); each phase restarts the process concerned with its environment changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from kaiwo_kube import Invalid, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_sandbox.fleet import NODE_TYPES, NodeSpec

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import (
    Pending,
    Pipeline,
    eventually,
    pipeline_on_kwok_nodes,
)
from tests.prometheus_server import GpuExporter, GpuSeries
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow, pytest.mark.timeout(900)]

MI300X: Final = NODE_TYPES["amd-mi300x"]
FLEET: Final = (NodeSpec("settings-mi300x-1", MI300X),)
FLAVOR: Final = "settings-mi300x"
STEP: Final = 90.0
RUN_SECONDS: Final = "sandbox.kaiwo.silogen.ai/run-seconds"
UNDERUTILIZED: Final = "ResourceUnderutilization"
QUIET_SECONDS: Final = 5.0
SETTINGS: Final = (
    "RESOURCE_MONITORING_ENABLED",
    "RESOURCE_MONITORING_METRICS_ENDPOINT",
    "RESOURCE_MONITORING_POLLING_INTERVAL",
    "DEFAULT_CLUSTER_QUEUE_NAME",
    "KAIWO_MONITOR_ENABLED",
    "KAIWO_MONITOR_METRICS_ENDPOINT",
    "KAIWO_MONITOR_POLLING_INTERVAL_SECONDS",
    "KAIWO_DEFAULT_CLUSTER_QUEUE_NAME",
)
"""Both names of every setting under test: none may come from the test's own environment,
which the services inherit."""


def cluster_queue(name: str, namespace: str) -> dict[str, Any]:
    quota = [
        {"name": "cpu", "nominalQuota": "256"},
        {"name": "memory", "nominalQuota": "4Ti"},
        {"name": "amd.com/gpu", "nominalQuota": "8"},
    ]
    group = {
        "coveredResources": ["cpu", "memory", "amd.com/gpu"],
        "flavors": [{"name": FLAVOR, "resources": quota}],
    }
    return {"name": name, "namespaces": [namespace], "spec": {"resourceGroups": [group]}}


async def apply_queue_config(kube: KubernetesAsyncioAdapter, namespace: str) -> None:
    """Two ClusterQueues, ``research`` and ``ops``, and none named ``kaiwo`` (the CRD's default
    queue): a job lands in a queue only through the setting."""
    manifest = {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": actors.QUEUE_CONFIG},
        "spec": {
            "resourceFlavors": [
                {"name": FLAVOR, "nodeLabels": {"amd.com/gpu.product-name": MI300X.product}}
            ],
            "clusterQueues": [
                cluster_queue("research", namespace),
                cluster_queue("ops", namespace),
            ],
        },
    }
    await kube.apply(manifest, field_manager="cluster-admin", force=True)


def job(name: str, namespace: str, *, gpus: int) -> dict[str, Any]:
    """A KaiwoJob naming no queue, running (on kwok) until the test deletes it."""
    return {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoJob",
        "metadata": {"name": name, "namespace": namespace, "annotations": {RUN_SECONDS: "3600"}},
        "spec": {
            "user": "alice@example.com",
            "image": "ghcr.io/silogen/rocm-ray:6.4",
            "entrypoint": "python train.py",
            "gpus": gpus,
            "gpuVendor": "amd",
        },
    }


async def running_pod(pipeline: Pipeline, name: str) -> str:
    """The name of the Running pod of the KaiwoJob ``name``'s Job (kwok runs it)."""

    async def check() -> str | Pending:
        pods = await pipeline.kube.list(
            resources.POD,
            namespace=pipeline.namespace,
            label_selector=f"{actors.JOB_NAME_LABEL}={name}",
        )
        running = [p for p in pods.items if (p.get("status") or {}).get("phase") == "Running"]
        return str(running[0]["metadata"]["name"]) if running else Pending(f"{len(pods.items)}")

    return await eventually(check, what=f"the pod of {name} running", within=STEP)


async def admitted_in(pipeline: Pipeline, job_name: str) -> str:
    """The ClusterQueue the real Kueue admitted the Job ``job_name``'s Workload to."""

    async def check() -> str | Pending:
        workloads = await pipeline.kube.list(resources.KUEUE_WORKLOAD, namespace=pipeline.namespace)
        for workload in workloads.items:
            owners = workload["metadata"].get("ownerReferences") or ()
            if any(o["kind"] == "Job" and o["name"] == job_name for o in owners):
                admission = (workload.get("status") or {}).get("admission") or {}
                if admission.get("clusterQueue"):
                    return str(admission["clusterQueue"])
                return Pending("its Workload is not admitted")
        return Pending("no Workload for it")

    return await eventually(check, what=f"Kueue admitting {job_name}", within=STEP)


async def kaiwo_config(pipeline: Pipeline, *, default_queue: str) -> dict[str, Any]:
    """The KaiwoConfig the operator created, once it names ``default_queue``."""

    async def check() -> dict[str, Any] | Pending:
        found = await actors.get_or_none(
            pipeline.kube, resources.KAIWO_CONFIG, actors.KAIWO_CONFIG, namespace=None
        )
        if found is None:
            return Pending("no KaiwoConfig")
        queue = found["spec"].get("defaultClusterQueueName")
        return found if queue == default_queue else Pending(f"default queue {queue}")

    return await eventually(check, what=f"a KaiwoConfig naming {default_queue}", within=STEP)


async def monitor_judges(pipeline: Pipeline) -> None:
    """What resource monitoring judges by, in the KaiwoConfig: a threshold of 10 %, the
    profile ``gpu``."""
    patch = {"spec": {"resourceMonitoring": {"lowUtilizationThreshold": 10, "profile": "gpu"}}}
    await pipeline.kube.merge_patch(
        resources.KAIWO_CONFIG, actors.KAIWO_CONFIG, patch, field_manager="cluster-admin"
    )


def underutilization(workload: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (workload.get("status") or {}).get("conditions") or ()
    return next((c for c in conditions if c.get("type") == UNDERUTILIZED), None)


async def flagged(pipeline: Pipeline, name: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | Pending:
        found = underutilization(await pipeline.kaiwo_job(name))
        return found if found and found["status"] == "True" else Pending(f"{found}")

    return await eventually(check, what=f"{name} flagged {UNDERUTILIZED}", within=STEP)


async def scraped(exporter: GpuExporter, times: int, *, what: str) -> None:
    async def check() -> bool | Pending:
        return True if exporter.scrapes >= times else Pending(f"{exporter.scrapes} scrapes")

    await eventually(check, what=what, within=STEP, interval=0.05)


async def delete_and_wait(pipeline: Pipeline, *names: str) -> None:
    for name in names:
        await pipeline.kube.delete(resources.KAIWO_JOB, name, namespace=pipeline.namespace)

    async def gone() -> bool | Pending:
        left = [name for name in names if await pipeline.child(resources.KAIWO_JOB, name)]
        pods = await pipeline.kube.list(resources.POD, namespace=pipeline.namespace)
        return True if not left and not pods.items else Pending(f"{left}, {len(pods.items)} pods")

    await eventually(gone, what=f"{', '.join(names)} deleted", within=STEP)


@pytest.fixture
def without_the_settings() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for name in SETTINGS:
            patch.delenv(name, raising=False)
        yield


@pytest.fixture
async def exporters(without_the_settings: None) -> AsyncIterator[tuple[GpuExporter, GpuExporter]]:
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(GpuExporter().serving())
        b = await stack.enter_async_context(GpuExporter().serving())
        yield a, b


def page(exporter: GpuExporter) -> str:
    return f"http://{exporter.target}/metrics"


@pytest.fixture
async def stack(
    real_stack: RealCluster,
    tmp_path: Path,
    exporters: tuple[GpuExporter, GpuExporter],
) -> AsyncIterator[Pipeline]:
    exporter_a, _ = exporters
    reference_names = {
        "RESOURCE_MONITORING_ENABLED": "true",
        "RESOURCE_MONITORING_METRICS_ENDPOINT": page(exporter_a),
        "RESOURCE_MONITORING_POLLING_INTERVAL": "1s",
        "DEFAULT_CLUSTER_QUEUE_NAME": "research",
    }
    assert not set(SETTINGS) & set(os.environ)
    async with pipeline_on_kwok_nodes(
        real_stack, FLEET, tmp_path / "stack", service_env=reference_names
    ) as pipeline:
        assert "monitor" in pipeline.stack.services  # started on the reference's name
        yield pipeline


async def test_the_references_names_alone_and_beside_the_projects(
    stack: Pipeline, exporters: tuple[GpuExporter, GpuExporter]
) -> None:
    pipeline, (exporter_a, exporter_b) = stack, exporters
    ns = pipeline.namespace
    monitor_env = pipeline.stack.services["monitor"].env
    assert not {name for name in SETTINGS if name.startswith("KAIWO_")} & set(monitor_env)

    # 1. The reference's names alone.
    await apply_queue_config(pipeline.kube, ns)
    await kaiwo_config(pipeline, default_queue="research")
    await monitor_judges(pipeline)
    with pytest.raises(Invalid, match="profile"):
        await pipeline.kube.merge_patch(
            resources.KAIWO_CONFIG,
            actors.KAIWO_CONFIG,
            {"spec": {"resourceMonitoring": {"profile": "cpu"}}},
            field_manager="cluster-admin",
        )
    await pipeline.kube.create(job("first", ns, gpus=1))
    await pipeline.kube.create(job("cpu-only", ns, gpus=0))
    await pipeline.reaches("first", "RUNNING", within=STEP)
    await pipeline.reaches("cpu-only", "RUNNING", within=STEP)
    assert await admitted_in(pipeline, "first") == "research"
    assert await admitted_in(pipeline, "cpu-only") == "research"
    first_pod = await running_pod(pipeline, "first")
    cpu_pod = await running_pod(pipeline, "cpu-only")
    exporter_a.series = [GpuSeries(ns, first_pod, "0", 2.0), GpuSeries(ns, cpu_pod, "0", 0.0)]
    flag = await flagged(pipeline, "first")
    assert flag["reason"] == "GpuUtilizationLow"
    # Every second, not every 30 s: ten more scrapes within the step's generous limit.
    await scraped(exporter_a, exporter_a.scrapes + 10, what="the exporter scraped every second")
    # The same ticks judged the CPU-only job: the profile `gpu` leaves it out.
    assert underutilization(await pipeline.kaiwo_job("cpu-only")) is None
    assert exporter_b.scrapes == 0
    await delete_and_wait(pipeline, "first", "cpu-only")

    # 2. Switched off by the reference's name: the monitor runs and asks nothing.
    monitor = pipeline.stack.services["monitor"]
    log_from = monitor.log_path.stat().st_size
    await pipeline.restart_with("monitor", {"RESOURCE_MONITORING_ENABLED": "false"})
    asked = exporter_a.scrapes
    await asyncio.sleep(QUIET_SECONDS)  # five ticks' time at the interval still set
    assert exporter_a.scrapes == asked
    assert "monitor disabled" in monitor.log_path.read_text()[log_from:]

    # 3. Both names set: the project's decide. The KaiwoConfig is the operator's to create
    # only when there is none: deleted, it is made again by the restarted planner.
    await pipeline.restart_with("planner", {"KAIWO_DEFAULT_CLUSTER_QUEUE_NAME": "ops"})
    await pipeline.kube.delete(resources.KAIWO_CONFIG, actors.KAIWO_CONFIG)
    await kaiwo_config(pipeline, default_queue="ops")
    await monitor_judges(pipeline)
    await pipeline.kube.create(job("second", ns, gpus=1))
    await pipeline.reaches("second", "RUNNING", within=STEP)
    assert await admitted_in(pipeline, "second") == "ops"
    second_pod = await running_pod(pipeline, "second")
    exporter_a.series = [GpuSeries(ns, second_pod, "0", 2.0)]  # would flag it at once
    exporter_b.series = [GpuSeries(ns, second_pod, "0", 90.0)]
    await pipeline.restart_with(
        "monitor",
        {
            "KAIWO_MONITOR_ENABLED": "true",  # over RESOURCE_MONITORING_ENABLED=false
            "KAIWO_MONITOR_METRICS_ENDPOINT": page(exporter_b),
            "RESOURCE_MONITORING_POLLING_INTERVAL": "1h",
            "KAIWO_MONITOR_POLLING_INTERVAL_SECONDS": "1",
        },
    )
    # The start's probe and the leader's first tick saw it busy; idle from now on, only a
    # second tick flags it.
    await scraped(exporter_b, 2, what="exporter B probed and scraped by the first tick")
    exporter_b.series = [GpuSeries(ns, second_pod, "0", 3.0)]
    assert (await flagged(pipeline, "second"))["reason"] == "GpuUtilizationLow"
    assert exporter_a.scrapes == asked  # the reference's endpoint never asked
