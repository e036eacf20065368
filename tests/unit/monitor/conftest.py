"""Fixtures of the monitor's tests: a fake API server with our CRDs and the real adapter, an
in-memory JetStream, and a scraper that returns what the test sets."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kube.resources import ResourceType
from kaiwo_kubefake import FakeKubeServer
from kaiwo_monitor.domain.samples import GpuSample
from kaiwo_monitor.prometheus import ScrapeError
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream

from tests.waiting import eventually


@dataclass
class Cluster:
    """The fake API server and an adapter talking to it over HTTP."""

    server: FakeKubeServer
    kube: KubernetesAsyncioAdapter

    def put(self, resource: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        kind = self.server.store.kinds.lookup(
            group=resource.group, version=resource.version, plural=resource.plural
        )
        assert kind is not None, f"{resource} is not served by the fake"
        return self.server.store.put(kind, obj)

    def get(self, resource: ResourceType, name: str, namespace: str | None = None) -> Any:
        kind = self.server.store.kinds.lookup(
            group=resource.group, version=resource.version, plural=resource.plural
        )
        assert kind is not None
        return self.server.store.get(kind, namespace=namespace, name=name)

    def namespace(self, name: str) -> None:
        self.put(resources.NAMESPACE, {"metadata": {"name": name}})


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    server = FakeKubeServer(kubeconfig_path=tmp_path / "kubeconfig")
    for crd in custom_resource_definitions(SERVED_KINDS):
        server.store.register_crd(crd)
    async with server:
        kube = await KubernetesAsyncioAdapter.from_kubeconfig(server.kubeconfig_path)
        cluster = Cluster(server=server, kube=kube)
        for name in ("team-a", "team-b", "kaiwo-system"):
            cluster.namespace(name)
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
class FakeScraper:
    """Returns ``samples``, or raises ``failure`` when set; counts the calls. With a
    ``clock``, every sample is taken at its time (a live exporter), else at its own ``at``."""

    samples: list[GpuSample] = field(default_factory=list)
    failure: str | None = None
    calls: int = 0
    clock: Callable[[], datetime] | None = None

    async def scrape(self) -> tuple[GpuSample, ...]:
        self.calls += 1
        if self.failure is not None:
            raise ScrapeError(self.failure)
        if self.clock is not None:
            return tuple(replace(sample, at=self.clock()) for sample in self.samples)
        return tuple(self.samples)


@pytest.fixture
def wait_for() -> Callable[..., Awaitable[None]]:
    """``await wait_for(condition, within=...)``: poll until ``condition`` holds."""
    return eventually


@pytest.fixture
def scraper() -> FakeScraper:
    return FakeScraper()
