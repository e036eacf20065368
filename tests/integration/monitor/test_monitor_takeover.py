"""Two monitors on the real API server, reading a real Prometheus: one leads through its Lease
and publishes; when it dies (its task is cancelled: no release) the other takes over within
the lease duration and continues the first one's underutilized stretch from the bucket."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import pytest
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.monitor import UtilizationV1
from kaiwo_contracts.events.streams import MONITOR_STREAM, bus_topology
from kaiwo_kube import NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_monitor.leader import LeaseTiming
from kaiwo_monitor.metrics import MonitorMetrics
from kaiwo_monitor.prometheus import PrometheusScraper
from kaiwo_monitor.service import MonitorService
from kaiwo_monitor.settings import MonitorSettings
from kaiwo_runtime.kv import MemoryKeyValue
from kaiwo_runtime.memory_bus import MemoryBus, MemoryJetStream

from tests.integration.pipeline.harness import Pending, eventually
from tests.prometheus_server import GpuExporter, GpuSeries, running_prometheus, wait_for_series
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.k8s, pytest.mark.slow]

LEASE: Final = LeaseTiming(duration_seconds=2, renew_deadline=1.2, retry_period=0.2)
RUN_ID: Final = "33333333-3333-4333-8333-333333333333"


def utilization_events(jetstream: MemoryJetStream) -> list[Envelope[UtilizationV1]]:
    return [
        Envelope[UtilizationV1].from_nats(message.headers, message.body)
        for message in jetstream.stream_messages(MONITOR_STREAM)
        if message.subject.startswith("kaiwo.mon.utilization.")
    ]


@pytest.fixture
async def kube(real_cluster: RealCluster) -> AsyncIterator[KubernetesAsyncioAdapter]:
    client = await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def namespace(kube: KubernetesAsyncioAdapter) -> AsyncIterator[str]:
    name = f"monitor-{uuid.uuid4().hex[:6]}"
    await kube.create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        field_manager="kaiwo-tests",
    )
    try:
        yield name
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(resources.NAMESPACE, name)


async def running_training_pod(kube: KubernetesAsyncioAdapter, namespace: str) -> None:
    """A KaiwoJob's pod holding one GPU, reported Running (no kubelet here)."""
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-0",
            "namespace": namespace,
            "labels": {
                "kaiwo.silogen.ai/run-id": RUN_ID,
                "kaiwo.silogen.ai/type": "job",
                "kaiwo.silogen.ai/name": "train",
            },
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"amd.com/gpu": "1"}, "limits": {"amd.com/gpu": "1"}},
                }
            ]
        },
    }
    await kube.create(pod, field_manager="kaiwo-tests")
    await kube.patch_status(
        resources.POD,
        "train-0",
        {"phase": "Running"},
        namespace=namespace,
        field_manager="kaiwo-tests",
        method="merge",
    )


def monitor(
    kube: KubernetesAsyncioAdapter,
    jetstream: MemoryJetStream,
    kv: MemoryKeyValue,
    *,
    scraper: PrometheusScraper,
    namespace: str,
    identity: str,
) -> MonitorService:
    settings = MonitorSettings(
        monitor_metrics_endpoint=scraper.url,
        monitor_polling_interval_seconds=0.5,
        monitor_lease_namespace=namespace,
    )
    return MonitorService(
        MemoryBus(server=jetstream, topology=bus_topology()),
        kube,
        scraper=scraper,
        clock=lambda: datetime.now(UTC),
        settings=settings,
        kv=kv,
        metrics=MonitorMetrics(),
        identity=identity,
        lease_timing=LEASE,
    )


async def test_a_second_monitor_takes_over_when_the_first_dies(
    kube: KubernetesAsyncioAdapter, namespace: str, tmp_path: Path
) -> None:
    await running_training_pod(kube, namespace)
    jetstream = MemoryJetStream()
    await MemoryBus(server=jetstream, topology=bus_topology()).ensure_streams()
    kv = MemoryKeyValue()
    async with contextlib.AsyncExitStack() as stack:
        exporter = await stack.enter_async_context(GpuExporter().serving())
        prometheus = await stack.enter_async_context(running_prometheus(exporter, tmp_path))
        exporter.series = [GpuSeries(namespace, "train-0", "0", 0.5)]
        await wait_for_series(prometheus.url, "gpu_gfx_activity", 1)

        scrapers = [PrometheusScraper(prometheus.url) for _ in range(2)]
        for scraper in scrapers:
            stack.push_async_callback(scraper.close)
        first, second = (
            monitor(kube, jetstream, kv, scraper=scraper, namespace=namespace, identity=name)
            for scraper, name in zip(scrapers, ("first", "second"), strict=True)
        )
        stop = asyncio.Event()
        first_task = asyncio.create_task(first.run(stop))

        async def first_leads() -> bool | Pending:
            events = utilization_events(jetstream)
            return True if first.elector.leading and events else Pending(f"{len(events)} events")

        await eventually(first_leads, what="the first monitor leads and publishes", within=15)
        second_task = asyncio.create_task(second.run(stop))
        await asyncio.sleep(1.0)
        assert not second.elector.leading
        started = utilization_events(jetstream)[0].data.underutilized_since
        assert started is not None

        first_task.cancel()  # dies: the Lease is not released
        await asyncio.gather(first_task, return_exceptions=True)
        died_at = len(utilization_events(jetstream))

        async def second_publishes() -> bool | Pending:
            events = utilization_events(jetstream)[died_at:]
            if second.elector.leading and events:
                return True
            return Pending(f"second leading={second.elector.leading}, {len(events)} events")

        await eventually(second_publishes, what="the second monitor takes over", within=10)
        lease = await kube.get(resources.LEASE, "kaiwo-monitor", namespace=namespace)
        assert lease["spec"]["holderIdentity"] == "second"
        taken_over = utilization_events(jetstream)[-1].data
        assert taken_over.workload.uid == RUN_ID
        assert taken_over.underutilized_since == started  # the stretch continues

        stop.set()
        await asyncio.wait_for(second_task, 10)
