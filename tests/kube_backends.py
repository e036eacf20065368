"""The Kubernetes port harness: one test run against the fake API server and the session's
real control plane (fixture params ``"fake"`` and ``"real"``, the latter marked ``k8s``), and a
namespace of the test's own that is deleted after it."""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from kaiwo_kube import NotFound, ObjectWriter, ResourceType
from kaiwo_kube.resources import NAMESPACE
from kaiwo_kubefake import FakeKubeServer

from tests.real_cluster import RealCluster


@dataclass(frozen=True)
class ApiServer:
    kubeconfig: Path
    fake: FakeKubeServer | None
    """The fake itself, for what only a fake can do (compact its history); None on the real."""


async def api_server(
    backend: str,
    request: pytest.FixtureRequest,
    stack: contextlib.AsyncExitStack,
    tmp_path: Path,
    *,
    bookmark_interval: float | None = None,
) -> ApiServer:
    """``backend`` starting with "fake": a fake API server, closed with ``stack``; else the
    session's real control plane (the ``real_cluster`` fixture)."""
    if backend.startswith("fake"):
        path = tmp_path / "kubeconfig"
        fake = await stack.enter_async_context(
            FakeKubeServer(kubeconfig_path=path)
            if bookmark_interval is None
            else FakeKubeServer(kubeconfig_path=path, bookmark_interval=bookmark_interval)
        )
        return ApiServer(fake.kubeconfig_path, fake)
    real: RealCluster = request.getfixturevalue("real_cluster")
    return ApiServer(real.kubeconfig, None)


async def scratch_namespace(
    kube: ObjectWriter, stack: contextlib.AsyncExitStack, *, prefix: str, run_id: str | None = None
) -> str:
    """A namespace ``<prefix>-<run id>``, deleted when ``stack`` closes."""
    namespace = f"{prefix}-{run_id or uuid.uuid4().hex[:8]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    stack.push_async_callback(delete_quietly, kube, NAMESPACE, namespace)
    return namespace


async def delete_quietly(
    kube: ObjectWriter, resource: ResourceType, name: str, namespace: str | None = None
) -> None:
    """Delete, if it is still there."""
    with contextlib.suppress(NotFound):
        await kube.delete(resource, name, namespace=namespace)
