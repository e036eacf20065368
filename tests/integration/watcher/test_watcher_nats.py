"""The watcher against a real nats-server: deduplication, checkpoints, the process itself."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest
from kaiwo_cli.stack.ports import Listener
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.streams import OBSERVED_STREAM, bus_topology
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_runtime.kv import NatsKeyValue
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_server import free_port
from kaiwo_watcher.progress import WatcherTuning
from kaiwo_watcher.service import WatcherService
from kaiwo_watcher.watch_list import WatchTarget

from tests.health_sockets import health_env, health_socket
from tests.waiting import eventually

pytestmark = pytest.mark.nats

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TUNING = WatcherTuning(watch_timeout=30, backoff_initial=0.05, backoff_max=0.5)
WATCH_LIST = (
    WatchTarget(resource=resources.KAIWO_JOB, workload=True),
    WatchTarget(resource=resources.NODE),
)


def job(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team-a"}, "spec": {"image": "busybox"}}


async def stored_events(bus: NatsBus) -> list[Envelope[ObservedObjectV1]]:
    info = await bus.client.jetstream().stream_info(OBSERVED_STREAM)
    events = []
    for sequence in range(info.state.first_seq, info.state.last_seq + 1):
        message = await bus.read_stored(OBSERVED_STREAM, sequence)
        if message is not None:
            events.append(Envelope[ObservedObjectV1].from_nats(message.headers, message.body))
    return events


@dataclass
class Replica:
    service: WatcherService
    bus: NatsBus


@contextlib.asynccontextmanager
async def replica(nats_url: str, kubeconfig: Any, *, name: str) -> AsyncIterator[Replica]:
    """One watcher replica: its own NATS connection and API client, the shared bucket."""
    bus = await NatsBus.connect(nats_url, topology=bus_topology(), name=name)
    kube = await KubernetesAsyncioAdapter.from_kubeconfig(kubeconfig)
    try:
        await bus.ensure_streams()
        kv = await NatsKeyValue.open(bus.client, "kaiwo-watcher")
        service = WatcherService(
            kube, bus, kv=kv, clock=lambda: NOW, watch_list=WATCH_LIST, tuning=TUNING
        )
        stop = asyncio.Event()
        task = asyncio.create_task(service.run(stop))
        try:
            await eventually(lambda: _ready(service, task))
            yield Replica(service=service, bus=bus)
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
    finally:
        await kube.close()
        await bus.close()


async def _ready(service: WatcherService, task: asyncio.Task[None]) -> bool:
    if task.done():
        task.result()
    return service.ready


def sample(replica: Replica, name: str, **labels: str) -> float:
    return replica.service.metrics.registry.registry.get_sample_value(name, labels) or 0.0


async def test_two_replicas_on_nats_store_each_version_once(
    fake_cluster, nats_server, kaiwo_job_kind
):
    store = fake_cluster.store
    async with (
        replica(nats_server.url, fake_cluster.kubeconfig_path, name="watcher-0") as one,
        replica(nats_server.url, fake_cluster.kubeconfig_path, name="watcher-1") as two,
    ):
        created = store.put(kaiwo_job_kind, job("train"))
        store.put(kaiwo_job_kind, {**created, "spec": {"image": "alpine"}})
        nodes = store.kinds.lookup(group="", version="v1", plural="nodes")
        store.put(nodes, {"metadata": {"name": "gpu-1.example.com"}})
        store.delete(kaiwo_job_kind, namespace="team-a", name="train")

        async def both_saw_all() -> bool:
            offered = sum(
                sample(s, "kaiwo_watcher_events_published_total", kind=k, type=t)
                for s in (one, two)
                for k, t in (
                    ("KaiwoJob", "ADDED"),
                    ("KaiwoJob", "MODIFIED"),
                    ("KaiwoJob", "DELETED"),
                    ("Node", "ADDED"),
                )
            )
            dropped = sum(
                sample(s, "kaiwo_watcher_duplicates_total", kind=k)
                for s in (one, two)
                for k in ("KaiwoJob", "Node")
            )
            return offered == 4 and dropped == 4

        await eventually(both_saw_all)
        events = await stored_events(one.bus)

    uid = created["metadata"]["uid"]
    # Kinds are watched independently, so only each object's own order is fixed:
    # the node's event may be stored before the job's first.
    job_events = [e for e in events if e.data.kind == "KaiwoJob"]
    assert [e.data.event_type for e in job_events] == ["ADDED", "MODIFIED", "DELETED"]
    assert [e.data.name for e in events if e.data.kind == "Node"] == ["gpu-1.example.com"]
    assert job_events[0].id == f"{uid}:{created['metadata']['resourceVersion']}"
    assert len({e.id for e in events}) == 4


async def test_a_restarted_replica_resumes_from_the_bucket(
    fake_cluster, nats_server, kaiwo_job_kind
):
    store = fake_cluster.store
    async with replica(nats_server.url, fake_cluster.kubeconfig_path, name="w") as first:
        first_job = store.put(kaiwo_job_kind, job("first"))

        async def published() -> bool:
            return (
                sample(first, "kaiwo_watcher_events_published_total", kind="KaiwoJob", type="ADDED")
                == 1
            )

        await eventually(published)

    second_job = store.put(kaiwo_job_kind, job("second"))
    async with replica(nats_server.url, fake_cluster.kubeconfig_path, name="w") as second:

        async def caught_up() -> bool:
            return (
                sample(
                    second, "kaiwo_watcher_events_published_total", kind="KaiwoJob", type="ADDED"
                )
                == 1
            )

        await eventually(caught_up)
        events = await stored_events(second.bus)
        assert sample(second, "kaiwo_watcher_relists_total", kind="KaiwoJob") == 0

    assert [e.data.name for e in events] == ["first", "second"]
    assert events[1].id == (
        f"{second_job['metadata']['uid']}:{second_job['metadata']['resourceVersion']}"
    )
    assert first_job["metadata"]["uid"] != second_job["metadata"]["uid"]


async def _readyz(port: int) -> int:
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http,
            http.get(f"http://127.0.0.1:{port}/readyz") as response,
        ):
            return response.status
    except (aiohttp.ClientError, TimeoutError):
        return 0


def _environment(nats_url: str, kubeconfig: Any, health: Listener | None = None) -> dict[str, str]:
    return {
        **os.environ,
        "KAIWO_NATS_URL": nats_url,
        "KAIWO_KUBECONFIG": str(kubeconfig),
        **(
            health_env(health)
            if health
            else {"KAIWO_HEALTH_HOST": "127.0.0.1", "KAIWO_HEALTH_PORT": "0"}
        ),
        "KAIWO_LOG_FORMAT": "json",
        "KAIWO_STARTUP_TIMEOUT_SECONDS": "3",
        "KAIWO_MISSING_KIND_RETRY_SECONDS": "1",
    }


async def test_the_process_gets_ready_publishes_and_stops_on_sigterm(
    fake_cluster, nats_server, kaiwo_job_kind
):
    with health_socket() as health:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kaiwo_watcher",
            env=_environment(nats_server.url, fake_cluster.kubeconfig_path, health),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            pass_fds=(health.fd,),
        )
        try:

            async def ready() -> bool:
                return await _readyz(health.port) == 200

            # Kueue, KubeRay... are missing from this cluster: skipped, not blocking readiness.
            await eventually(ready, within=30)
            created = fake_cluster.store.put(kaiwo_job_kind, job("train"))
            bus = await NatsBus.connect(nats_server.url, topology=bus_topology(), name="reader")
            try:
                expected = f"{created['metadata']['uid']}:{created['metadata']['resourceVersion']}"

                async def stored() -> bool:
                    return expected in {e.id for e in await stored_events(bus)}

                await eventually(stored)
            finally:
                await bus.close()
            process.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(process.wait(), 15) == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


async def test_the_process_exits_with_one_line_when_nats_is_unreachable(fake_cluster):
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kaiwo_watcher",
        env=_environment(f"nats://127.0.0.1:{free_port()}", fake_cluster.kubeconfig_path),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 1
    lines = stderr.decode().strip().splitlines()
    assert lines[-1].startswith("kaiwo-watcher: NATS at nats://127.0.0.1:")
    assert "unreachable" in lines[-1]
