"""A fake API server with our CRDs and a real nats-server, for the watcher's integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_kube import resources
from kaiwo_kubefake import FakeKubeServer
from kaiwo_runtime.nats_server import NatsServer


@pytest.fixture
async def fake_cluster(tmp_path: Path) -> AsyncIterator[FakeKubeServer]:
    server = FakeKubeServer(kubeconfig_path=tmp_path / "kubeconfig", bookmark_interval=0.2)
    for crd in custom_resource_definitions(SERVED_KINDS):
        server.store.register_crd(crd)
    async with server:
        namespaces = server.store.kinds.lookup(group="", version="v1", plural="namespaces")
        assert namespaces is not None
        server.store.put(namespaces, {"metadata": {"name": "team-a"}})
        yield server


@pytest.fixture
async def nats_server() -> AsyncIterator[NatsServer]:
    async with NatsServer() as server:
        yield server


@pytest.fixture
def kaiwo_job_kind(fake_cluster: FakeKubeServer):
    resource = resources.KAIWO_JOB
    kind = fake_cluster.store.kinds.lookup(
        group=resource.group, version=resource.version, plural=resource.plural
    )
    assert kind is not None
    return kind
