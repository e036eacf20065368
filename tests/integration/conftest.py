"""Fixtures of the pipeline and fault tests (the harness lives in ``tests/integration/pipeline``):
the whole operator as ``kaiwo up`` runs it, against the fake API server (``--fake``) with its
event store on SQLite and on the session's PostgreSQL; and against the session's real
API server (``real_cluster``, marker ``k8s``) on SQLite."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kaiwo_cli.stack.third_party import driven_kind_crds
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter

from tests.integration.pipeline.harness import Pipeline, running_pipeline
from tests.integration.pipeline.postgres import fresh_database
from tests.kube_backends import api_server
from tests.real_cluster import RealCluster


@contextlib.asynccontextmanager
async def event_store_url(kind: str, request: pytest.FixtureRequest) -> AsyncIterator[str | None]:
    """None (the stack's SQLite file in its state directory) or a fresh database on the
    session's PostgreSQL server."""
    if kind == "sqlite":
        yield None
        return
    async with fresh_database(request.getfixturevalue("postgres_server")) as url:
        yield url


def real_cluster_if(request: pytest.FixtureRequest, backend: str) -> RealCluster | None:
    return request.getfixturevalue("real_cluster") if backend == "real" else None


FAKE_SQLITE = pytest.param(("fake", "sqlite"), id="fake-sqlite")
FAKE_POSTGRES = pytest.param(("fake", "postgres"), id="fake-postgres", marks=pytest.mark.postgres)


def real_sqlite(*marks: pytest.MarkDecorator) -> Any:
    """The real API server with the store on SQLite (PostgreSQL there would add time only:
    the store does not meet the cluster)."""
    return pytest.param(("real", "sqlite"), id="real-sqlite", marks=[pytest.mark.k8s, *marks])


@pytest.fixture(params=[FAKE_SQLITE, FAKE_POSTGRES, real_sqlite()])
async def pipeline(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Pipeline]:
    """A fresh operator per test, on the fake or the real API server, its event store on
    SQLite or PostgreSQL."""
    backend, store = request.param
    real = real_cluster_if(request, backend)
    async with (
        event_store_url(store, request) as url,
        running_pipeline(tmp_path / "kaiwo", store_url=url, real=real) as running,
    ):
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["fake"])
async def shared_pipeline(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pipeline]:
    """One operator (SQLite) for every test of a module that uses the same API server: the
    fake, or ``"real"`` where a test asks for it (indirect parametrization, marker ``k8s``);
    the tests must not need a fresh one."""
    real = real_cluster_if(request, request.param)
    async with running_pipeline(tmp_path_factory.mktemp("kaiwo"), real=real) as running:
        yield running


@dataclass(frozen=True)
class SandboxCluster:
    """A cluster for the sandbox's simulated controllers: the fake API server (with the
    third-party kinds they drive) or the session's real one."""

    kube: KubernetesAsyncioAdapter
    kubeconfig: Path
    real: bool


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.k8s)])
async def sandbox_cluster(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[SandboxCluster]:
    async with contextlib.AsyncExitStack() as stack:
        server = await api_server(request.param, request, stack, tmp_path)
        real, kubeconfig = server.fake is None, server.kubeconfig
        kube = await KubernetesAsyncioAdapter.from_kubeconfig(kubeconfig)
        stack.push_async_callback(kube.close)
        if not real:  # the kinds the sandbox's Kueue reads (the real server has them)
            await kube.ensure_crds(driven_kind_crds(), field_manager="test")
        yield SandboxCluster(kube=kube, kubeconfig=kubeconfig, real=real)
