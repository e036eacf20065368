"""Two monitor processes on one nats-server, the real API server and a real Prometheus: one
leads through the ``monitor`` lease in the NATS lease bucket (the planner's and the
executor's mechanism, decision 0025) and publishes; when it is killed (no release) the other
takes over once the lease runs out and continues the first one's underutilized stretch from
the ``kaiwo-monitor`` bucket."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.monitor import UtilizationV1
from kaiwo_contracts.events.streams import MONITOR_STREAM
from kaiwo_kube import NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_runtime.leases import NatsLeaseStore
from kaiwo_runtime.nats_server import NatsServer
from nats.aio.client import Client
from nats.js.errors import NotFoundError

from tests.integration.pipeline.harness import Pending, eventually
from tests.prometheus_server import GpuExporter, GpuSeries, running_prometheus, wait_for_series
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow]

LEASE_SECONDS: Final = 2.0
HANG_SECONDS: Final = 30.0
"""How long a wait may last before the test calls it hung: a guard, not a measure."""
RUN_ID: Final = "33333333-3333-4333-8333-333333333333"
ROLE: Final = "monitor"


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


@pytest.fixture
async def nats(tmp_path: Path) -> AsyncIterator[tuple[NatsServer, Client, NatsLeaseStore]]:
    async with NatsServer(store_dir=tmp_path / "nats") as server:
        client = Client()
        await client.connect(server.url)
        try:
            leases = await NatsLeaseStore.open(
                client, "kaiwo-leases", duration_seconds=LEASE_SECONDS
            )
            yield server, client, leases
        finally:
            await client.close()


@pytest.fixture
def monitors() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def start_monitor(
    *,
    nats_url: str,
    kubeconfig: Path,
    metrics_endpoint: str,
    log: Path,
    started: list[subprocess.Popen[bytes]],
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "KAIWO_NATS_URL": nats_url,
        "KAIWO_KUBECONFIG": str(kubeconfig),
        "KAIWO_MONITOR_METRICS_ENDPOINT": metrics_endpoint,
        "KAIWO_MONITOR_POLLING_INTERVAL_SECONDS": "0.5",
        "KAIWO_LEASE_SECONDS": str(LEASE_SECONDS),
        "KAIWO_HEALTH_HOST": "127.0.0.1",
        "KAIWO_HEALTH_PORT": "0",  # a port of its own, bound by the service
        "KAIWO_STARTUP_TIMEOUT_SECONDS": "30",
        "KAIWO_LOG_FORMAT": "json",
    }
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "kaiwo_monitor"], env=env, stdout=out, stderr=out
        )
    started.append(process)
    return process


def holder_of(process: subprocess.Popen[bytes]) -> str:
    return f"{socket.gethostname()}/{process.pid}"


async def utilization_events(client: Client) -> list[tuple[int, UtilizationV1]]:
    """(stream sequence, finding) of every stored utilization finding of the test's job."""
    jsm = client.jsm()
    try:
        info = await jsm.stream_info(MONITOR_STREAM)
    except NotFoundError:
        return []
    found: list[tuple[int, UtilizationV1]] = []
    if not info.state.messages:  # an empty stream's first and last sequence say nothing
        return found
    for sequence in range(info.state.first_seq, info.state.last_seq + 1):
        message = await jsm.get_msg(MONITOR_STREAM, seq=sequence)
        if not message.subject.startswith("kaiwo.mon.utilization."):
            continue
        headers: dict[str, Any] = dict(message.headers or {})
        envelope = Envelope[UtilizationV1].from_nats(headers, message.data or b"")
        if envelope.data.workload.uid == RUN_ID:
            found.append((sequence, envelope.data))
    return found


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


async def until_holder(leases: NatsLeaseStore, expected: str | None, *, within: float) -> None:
    async def check() -> bool | Pending:
        holder = await leases.holder(ROLE)
        return holder == expected or Pending(f"the monitor lease is {holder!r}, not {expected!r}")

    await eventually(check, what="the monitor lease changes hands", within=within)


async def test_a_second_monitor_takes_over_when_the_first_dies(
    kube: KubernetesAsyncioAdapter,
    namespace: str,
    nats: tuple[NatsServer, Client, NatsLeaseStore],
    monitors: list[subprocess.Popen[bytes]],
    real_cluster: RealCluster,
    tmp_path: Path,
) -> None:
    server, client, leases = nats
    await running_training_pod(kube, namespace)
    async with contextlib.AsyncExitStack() as stack:
        exporter = await stack.enter_async_context(GpuExporter().serving())
        prometheus = await stack.enter_async_context(running_prometheus(exporter, tmp_path))
        exporter.series = [GpuSeries(namespace, "train-0", "0", 0.5)]
        await wait_for_series(prometheus.url, "gpu_gfx_activity", 1)

        def monitor(name: str) -> subprocess.Popen[bytes]:
            return start_monitor(
                nats_url=server.url,
                kubeconfig=real_cluster.kubeconfig,
                metrics_endpoint=prometheus.url,
                log=tmp_path / f"{name}.log",
                started=monitors,
            )

        first = monitor("first")
        await until_holder(leases, holder_of(first), within=30)

        async def first_publishes() -> bool | Pending:
            events = await utilization_events(client)
            return bool(events) or Pending("no utilization finding yet")

        await eventually(first_publishes, what="the first monitor publishes", within=30)
        second = monitor("second")
        log = tmp_path / "second.log"

        async def second_waits() -> bool | Pending:
            written = await asyncio.to_thread(log.read_bytes)
            return b"standby: another replica is active" in written or Pending(written.decode())

        # A loaded machine can take seconds to start a Python process: wait for it to say so.
        await eventually(second_waits, what="the second monitor waits as a standby", within=30)
        await asyncio.sleep(
            LEASE_SECONDS * 2
        )  # several claims by the second, renewals by the first
        assert second.poll() is None, log.read_text()
        assert await leases.holder(ROLE) == holder_of(first)
        started = (await utilization_events(client))[0][1].underutilized_since
        assert started is not None

        first.send_signal(signal.SIGKILL)  # dies: the lease is not released
        await asyncio.to_thread(first.wait, 10)
        died_at = (await utilization_events(client))[-1][0]
        # It runs out LEASE_SECONDS after the last renewal; the rest of the wait is a guard that
        # tells a hang from a loaded machine (that it did not change hands early is shown above).
        await until_holder(leases, holder_of(second), within=LEASE_SECONDS + HANG_SECONDS)

        async def second_publishes() -> bool | Pending:
            later = [
                data for sequence, data in await utilization_events(client) if sequence > died_at
            ]
            return bool(later) or Pending("no finding since the first monitor died")

        await eventually(second_publishes, what="the second monitor publishes", within=HANG_SECONDS)
        taken_over = (await utilization_events(client))[-1][1]
        assert taken_over.workload.uid == RUN_ID
        assert taken_over.underutilized_since == started  # the stretch continues

        second.send_signal(signal.SIGTERM)  # a graceful stop releases the lease
        assert await asyncio.to_thread(second.wait, 20) == 0
        assert await leases.holder(ROLE) is None
