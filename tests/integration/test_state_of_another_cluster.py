"""Started for another cluster, each service refuses the state it finds, in one line, and
leaves it as it was (decision 0042): the watcher its bucket (it reads kube-system's uid from
its API server), the planner its bucket and snapshot and the recorder its event store (both
take the cluster from the watcher's bucket: they never talk to the API server).

The processes are the real ones (``python -m kaiwo_…``) on a real nats-server; the clusters
are two fake API servers (each has a kube-system namespace of its own uid, as two real
clusters do; the identity itself is checked on the real API server in
``test_cluster_identity.py``); the event store is SQLite or the session's PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kaiwo_cli.stack.ports import Listener
from kaiwo_eventstore import open_event_store
from kaiwo_kube.cluster_identity import cluster_identity
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kubefake import FakeKubeServer
from kaiwo_planner.snapshot_store import SnapshotStore
from kaiwo_runtime.cluster_binding import CLUSTER_KEY
from kaiwo_runtime.kv import NatsKeyValue
from kaiwo_runtime.nats_server import NatsServer
from kaiwo_runtime.startup import bind_state_to_cluster
from nats.aio.client import Client

from tests.health_sockets import health_env, health_socket, inherited_fds
from tests.integration.pipeline.harness import Pending, eventually
from tests.integration.pipeline.postgres import fresh_database

pytestmark = pytest.mark.timeout(300)

PROCESS_SECONDS = 120.0
"""Longest a service process may take to start and give up: a guard, not a measure."""


@contextlib.asynccontextmanager
async def fake_cluster(path: Path) -> AsyncIterator[tuple[KubernetesAsyncioAdapter, Path]]:
    await asyncio.to_thread(path.mkdir)
    async with FakeKubeServer(kubeconfig_path=path / "kubeconfig") as fake:
        kube = await KubernetesAsyncioAdapter.from_kubeconfig(fake.kubeconfig_path)
        async with kube:
            yield kube, fake.kubeconfig_path


@contextlib.asynccontextmanager
async def bus(tmp_path: Path) -> AsyncIterator[tuple[str, Client]]:
    async with NatsServer(store_dir=tmp_path / "nats") as server:
        client = Client()
        await client.connect(server.url)
        try:
            yield server.url, client
        finally:
            await client.close()


async def watcher_bucket_of(client: Client, kube: KubernetesAsyncioAdapter) -> str:
    """The watcher's bucket made afresh and bound to ``kube``'s cluster, as the watcher's
    first start against it does; returns the cluster's identity."""
    with contextlib.suppress(Exception):  # none yet
        await client.jetstream().delete_key_value("kaiwo-watcher")
    bucket = await NatsKeyValue.open(client, "kaiwo-watcher")
    return await bind_state_to_cluster(bucket, kube, bucket="kaiwo-watcher", within_seconds=30)


def service_env(nats_url: str, health: Listener, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "KAIWO_NATS_URL": nats_url,
        **health_env(health),
        "KAIWO_LOG_FORMAT": "json",
        **extra,
    }


@pytest.fixture
def health() -> Iterator[Listener]:
    with health_socket() as held:
        yield held


async def start(module: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        pass_fds=inherited_fds(env),
    )


async def stop(process: asyncio.subprocess.Process) -> int:
    process.send_signal(signal.SIGTERM)
    return await asyncio.wait_for(process.wait(), PROCESS_SECONDS)


async def refusal(module: str, env: dict[str, str]) -> tuple[int, list[str]]:
    """Run ``module`` until it exits by itself: its status and its stderr lines that are not
    JSON logs (the one line for the operator)."""
    process = await start(module, env)
    try:
        _, err = await asyncio.wait_for(process.communicate(), PROCESS_SECONDS)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    lines = [line for line in err.decode().splitlines() if not line.startswith("{")]
    assert process.returncode is not None
    return process.returncode, lines


async def test_a_watcher_process_refuses_the_bucket_of_another_cluster(
    tmp_path: Path, health: Listener
) -> None:
    async with (
        bus(tmp_path) as (nats_url, client),
        fake_cluster(tmp_path / "first") as (first, _),
        fake_cluster(tmp_path / "second") as (second, second_kubeconfig),
    ):
        first_uid = await watcher_bucket_of(client, first)
        second_uid = await cluster_identity(second)
        status, lines = await refusal(
            "kaiwo_watcher", service_env(nats_url, health, KAIWO_KUBECONFIG=str(second_kubeconfig))
        )
        bucket = await NatsKeyValue.open(client, "kaiwo-watcher")
        kept = await bucket.get(CLUSTER_KEY)

    assert status == 1
    assert lines == [
        f"kaiwo-watcher: the key-value bucket kaiwo-watcher holds the state of another cluster "
        f"(kube-system uid {first_uid}), not of this one ({second_uid}); give this cluster its "
        "own NATS (or buckets), or delete kaiwo-watcher to start it afresh"
    ]
    assert kept == first_uid.encode()


async def test_a_planner_process_refuses_the_state_of_another_cluster(
    tmp_path: Path, health: Listener
) -> None:
    async with (
        bus(tmp_path) as (nats_url, client),
        fake_cluster(tmp_path / "first") as (first, _),
        fake_cluster(tmp_path / "second") as (second, _),
    ):
        first_uid = await watcher_bucket_of(client, first)
        # The planner's run on the first cluster binds its bucket and snapshots on the way out.
        env = service_env(nats_url, health)
        planner = await start("kaiwo_planner", env)
        await eventually(lambda: _ready(env["KAIWO_HEALTH_PORT"]), what="planner ready")
        assert await stop(planner) == 0
        state = await NatsKeyValue.open(client, "kaiwo-planner")
        assert await state.get(CLUSTER_KEY) == first_uid.encode()
        snapshot = await SnapshotStore(state).load()
        assert snapshot is not None
        assert snapshot["cluster"] == first_uid

        # The bus is reused by a second cluster: its watcher's bucket is made afresh for it.
        second_uid = await watcher_bucket_of(client, second)
        status, lines = await refusal("kaiwo_planner", service_env(nats_url, health))
        kept = await state.get(CLUSTER_KEY)
        snapshot_after = await SnapshotStore(state).load()

    assert status == 1
    assert lines == [
        f"kaiwo-planner: the key-value bucket kaiwo-planner holds the state of another cluster "
        f"(kube-system uid {first_uid}), not of this one ({second_uid}); give this cluster its "
        "own NATS (or buckets), or delete kaiwo-planner to start it afresh"
    ]
    assert kept == first_uid.encode()
    assert snapshot_after == snapshot


async def _ready(port: str) -> bool | Pending:
    """``/readyz`` of a service answers 200 (the planner: its projection restored and caught
    up, so it writes a snapshot when it stops)."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", int(port))
    except OSError as error:
        return Pending(f"health port not open: {error}")
    try:
        writer.write(b"GET /readyz HTTP/1.0\r\nHost: localhost\r\n\r\n")
        await writer.drain()
        status = await reader.readline()
    finally:
        writer.close()
    return True if b" 200 " in status else Pending(f"not ready: {status!r}")


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_recorder_process_refuses_an_event_store_of_another_cluster(
    store: str, tmp_path: Path, request: pytest.FixtureRequest, health: Listener
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        if store == "sqlite":
            url = f"sqlite:///{tmp_path / 'store' / 'events.db'}"
        else:
            url = await stack.enter_async_context(
                fresh_database(request.getfixturevalue("postgres_server"))
            )
        nats_url, client = await stack.enter_async_context(bus(tmp_path))
        first, _ = await stack.enter_async_context(fake_cluster(tmp_path / "first"))
        second, _ = await stack.enter_async_context(fake_cluster(tmp_path / "second"))
        env = service_env(nats_url, health, KAIWO_EVENTSTORE_URL=url)

        first_uid = await watcher_bucket_of(client, first)
        recorder = await start("kaiwo_recorder", env)
        await eventually(lambda: _ready(env["KAIWO_HEALTH_PORT"]), what="recorder ready")
        assert await stop(recorder) == 0
        assert await _store_when_bound(url) == first_uid

        second_uid = await watcher_bucket_of(client, second)
        status, lines = await refusal("kaiwo_recorder", env)
        kept = await _store_when_bound(url)

    assert status == 2
    [line] = lines
    assert line.startswith("kaiwo-recorder: the event store ")
    assert line.endswith(
        f" holds the state of another cluster (kube-system uid {first_uid}), not of this one "
        f"({second_uid}); point KAIWO_EVENTSTORE_URL at this cluster's own store"
    )
    assert kept == first_uid


async def _store_when_bound(url: str) -> str | Pending:
    store = await open_event_store(url)
    try:
        cluster = await store.cluster()
    finally:
        await store.close()
    return cluster if cluster is not None else Pending("the store records no cluster yet")
