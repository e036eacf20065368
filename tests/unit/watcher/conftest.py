"""Fixtures for the watcher's tests: a fake API server with our CRDs, the real adapter, an
in-memory JetStream, and a way to run a WatcherService in the background."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kaiwo_cli.stack.third_party import open_schema_crd
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.streams import OBSERVED_STREAM, bus_topology
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kube.resources import ResourceType
from kaiwo_kubefake import FakeKubeServer, ResourceKind
from kaiwo_runtime.kv import KeyValue, MemoryKeyValue
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream
from kaiwo_runtime.nats_server import free_port
from kaiwo_watcher.progress import WatcherTuning
from kaiwo_watcher.service import WatcherService

from tests.waiting import eventually

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
THIRD_PARTY = (
    resources.RAY_JOB,
    resources.RAY_SERVICE,
    resources.APP_WRAPPER,
    resources.HTTP_ROUTE,
    resources.KUEUE_RESOURCE_FLAVOR,
    resources.KUEUE_CLUSTER_QUEUE,
    resources.KUEUE_LOCAL_QUEUE,
    resources.KUEUE_WORKLOAD_PRIORITY_CLASS,
    resources.KUEUE_WORKLOAD,
    resources.KUEUE_TOPOLOGY,
)
KUEUE = tuple(r for r in THIRD_PARTY if r.group == "kueue.x-k8s.io")
# Bookmarks often, so checkpoints also move by them during the tests.
BOOKMARK_SECONDS = 0.2
FAST = WatcherTuning(
    watch_timeout=30, missing_kind_retry=0.2, backoff_initial=0.05, backoff_max=0.2
)


def fixed_clock() -> datetime:
    return NOW


def install_crds(server: FakeKubeServer, *, without: tuple[ResourceType, ...] = ()) -> None:
    """Our CRDs and open-schema stand-ins for the third-party kinds, minus ``without``."""
    for crd in custom_resource_definitions(SERVED_KINDS):
        server.store.register_crd(crd)
    for resource in THIRD_PARTY:
        if resource not in without:
            server.store.register_crd(open_schema_crd(resource))


def fake_kind(server: FakeKubeServer, resource: ResourceType) -> ResourceKind:
    kind = server.store.kinds.lookup(
        group=resource.group, version=resource.version, plural=resource.plural
    )
    assert kind is not None, f"{resource} is not served by the fake"
    return kind


@dataclass
class Cluster:
    """The fake API server and an adapter talking to it over HTTP."""

    server: FakeKubeServer
    kube: KubernetesAsyncioAdapter

    def put(self, resource: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` as another controller would (the watcher never writes)."""
        return self.server.store.put(fake_kind(self.server, resource), obj)

    def delete(self, resource: ResourceType, name: str, namespace: str | None = None) -> None:
        self.server.store.delete(fake_kind(self.server, resource), namespace=namespace, name=name)

    def namespace(self, name: str) -> None:
        self.put(resources.NAMESPACE, {"metadata": {"name": name}})

    def install(self, *kinds: ResourceType) -> None:
        """Install a third-party API (its CRD), as deploying Kueue would."""
        for resource in kinds:
            self.server.store.register_crd(open_schema_crd(resource))


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    # A fixed port, so a test can stop and start the server (the store stays).
    server = FakeKubeServer(
        port=free_port(),
        kubeconfig_path=tmp_path / "kubeconfig",
        bookmark_interval=BOOKMARK_SECONDS,
    )
    install_crds(server)
    async with server:
        kube = await KubernetesAsyncioAdapter.from_kubeconfig(server.kubeconfig_path)
        cluster = Cluster(server=server, kube=kube)
        cluster.namespace("team-a")
        cluster.namespace("team-b")
        try:
            yield cluster
        finally:
            await kube.close()


@pytest.fixture
async def bare_cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """A cluster where Kueue is not installed (its CRDs are missing)."""
    server = FakeKubeServer(
        kubeconfig_path=tmp_path / "kubeconfig", bookmark_interval=BOOKMARK_SECONDS
    )
    install_crds(server, without=KUEUE)
    async with server:
        kube = await KubernetesAsyncioAdapter.from_kubeconfig(server.kubeconfig_path)
        cluster = Cluster(server=server, kube=kube)
        cluster.namespace("team-a")
        try:
            yield cluster
        finally:
            await kube.close()


@pytest.fixture
async def jetstream() -> MemoryJetStream:
    server = MemoryJetStream()
    await MemoryBus(server=server, topology=bus_topology()).ensure_streams()
    return server


@dataclass
class Running:
    """A service running in the background until the block ends."""

    service: WatcherService
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


@dataclass
class WatcherKit:
    """What a watcher test needs: the cluster, the in-memory JetStream and helpers."""

    cluster: Cluster
    jetstream: MemoryJetStream

    def bus(self) -> MemoryBus:
        """A bus connection of its own, to the test's JetStream."""
        return MemoryBus(server=self.jetstream, topology=bus_topology())

    def service(
        self, *, kv: KeyValue | None = None, bus: Any = None, **options: Any
    ) -> WatcherService:
        """A watcher on the cluster with its own bus connection (or ``bus``, a wrapper of
        :meth:`bus` that fails on purpose) and a new KV unless given."""
        return WatcherService(
            self.cluster.kube,
            bus if bus is not None else self.bus(),
            kv=kv if kv is not None else MemoryKeyValue(),
            clock=fixed_clock,
            tuning=options.pop("tuning", FAST),
            **options,
        )

    def all_events(self) -> list[Envelope[ObservedObjectV1]]:
        """Every observed event JetStream holds, in stream order."""
        return [
            Envelope[ObservedObjectV1].from_nats(message.headers, message.body)
            for message in self.jetstream.stream_messages(OBSERVED_STREAM)
        ]

    def events(self) -> list[Envelope[ObservedObjectV1]]:
        """The stored events but Namespaces' (every cluster has some; tests make two)."""
        return [event for event in self.all_events() if event.data.kind != "Namespace"]

    def subjects(self) -> list[str]:
        return [
            message.subject
            for message in self.jetstream.stream_messages(OBSERVED_STREAM)
            if not message.subject.startswith("kaiwo.obs.namespace.")
        ]

    def ids(self) -> list[str]:
        return [event.id for event in self.events()]

    async def stored_id(self, event_id: str) -> None:
        """Wait until an event with this id is stored."""
        await eventually(lambda: event_id in self.ids())

    @contextlib.asynccontextmanager
    async def running(self, service: WatcherService) -> AsyncIterator[Running]:
        """Run ``service`` in the background (ready on entry) until the block ends."""
        handle = Running(service=service)
        task = asyncio.create_task(service.run(handle.stop))
        handle.task = task
        try:
            await eventually(lambda: service.ready or task.done())
            if task.done():
                task.result()
            yield handle
        finally:
            handle.stop.set()
            await asyncio.wait_for(task, 10)


@pytest.fixture
def kit(cluster: Cluster, jetstream: MemoryJetStream) -> WatcherKit:
    return WatcherKit(cluster=cluster, jetstream=jetstream)


@pytest.fixture
def bare_kit(bare_cluster: Cluster, jetstream: MemoryJetStream) -> WatcherKit:
    return WatcherKit(cluster=bare_cluster, jetstream=jetstream)
