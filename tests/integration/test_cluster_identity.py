"""Kept state is bound to the cluster it came from (decision 0042): the cluster's identity is
the uid of its kube-system namespace, which a real API server creates at its first start and
two clusters never share, and a service's bucket filled from one cluster is refused by a
service started against another, in one line."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kaiwo_kube import resources
from kaiwo_kube.cluster_identity import cluster_identity
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kubefake import FakeKubeServer
from kaiwo_runtime.cluster_binding import CLUSTER_KEY
from kaiwo_runtime.kv import MemoryKeyValue
from kaiwo_runtime.startup import StartupError, bind_state_to_cluster

from tests.real_cluster import RealCluster

# The session's real control plane starts within the first test: room for a loaded machine.
pytestmark = pytest.mark.timeout(300)


@contextlib.asynccontextmanager
async def fake_cluster(path: Path) -> AsyncIterator[KubernetesAsyncioAdapter]:
    async with FakeKubeServer(kubeconfig_path=path / "kubeconfig") as fake:
        kube = await KubernetesAsyncioAdapter.from_kubeconfig(fake.kubeconfig_path)
        async with kube:
            yield kube


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.k8s)])
async def first(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[KubernetesAsyncioAdapter]:
    """The cluster whose state is kept: a fake API server, or the session's real one."""
    if request.param == "fake":
        (tmp_path / "first").mkdir()
        async with fake_cluster(tmp_path / "first") as kube:
            yield kube
        return
    real: RealCluster = request.getfixturevalue("real_cluster")
    kube = await KubernetesAsyncioAdapter.from_kubeconfig(real.kubeconfig)
    async with kube:
        yield kube


async def test_the_identity_is_kube_systems_uid_and_stays(
    first: KubernetesAsyncioAdapter,
) -> None:
    namespace = await first.get(resources.NAMESPACE, "kube-system")

    identity = await cluster_identity(first)

    assert identity == namespace["metadata"]["uid"]
    assert len(identity) == 36  # a UUID, as the API server makes them
    assert await cluster_identity(first) == identity


async def test_a_bucket_of_one_cluster_is_refused_on_another(
    first: KubernetesAsyncioAdapter, tmp_path: Path
) -> None:
    bucket = MemoryKeyValue()
    first_uid = await bind_state_to_cluster(
        bucket, first, bucket="kaiwo-watcher", within_seconds=10
    )
    assert await bucket.get(CLUSTER_KEY) == first_uid.encode()
    # The same cluster again (a restart): accepted, nothing rewritten.
    assert await bind_state_to_cluster(bucket, first, bucket="kaiwo-watcher", within_seconds=10)

    (tmp_path / "second").mkdir()
    async with fake_cluster(tmp_path / "second") as second:
        second_uid = await cluster_identity(second)
        with pytest.raises(StartupError) as refused:
            await bind_state_to_cluster(bucket, second, bucket="kaiwo-watcher", within_seconds=10)

    assert second_uid != first_uid
    assert str(refused.value) == (
        f"the key-value bucket kaiwo-watcher holds the state of another cluster (kube-system "
        f"uid {first_uid}), not of this one ({second_uid}); give this cluster its own NATS (or "
        "buckets), or delete kaiwo-watcher to start it afresh"
    )
    assert await bucket.get(CLUSTER_KEY) == first_uid.encode()
