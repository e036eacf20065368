"""The API server refuses a download without the size of the volume it fills (decision 0111),
naming the field: the workload CRDs carry the models' CEL rules."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kaiwo_kube import Invalid, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter

from tests.real_cluster import RealCluster

pytestmark = pytest.mark.k8s

NAMESPACE = "storage-rules"
GIT_DOWNLOAD = {"git": [{"repository": "https://example.com/r.git", "targetPath": "r"}]}


def workload(kind: str, name: str, storage: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"image": "busybox", "storage": {"storageEnabled": True, **storage}},
    }


@pytest.fixture
async def kube(real_cluster: RealCluster) -> AsyncIterator[KubernetesAsyncioAdapter]:
    async with await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig) as kube:
        # No workloads label: nothing here is created, and the operator need not plan it.
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        await kube.apply(namespace, field_manager="test")
        yield kube
        for kind in (resources.KAIWO_JOB, resources.KAIWO_SERVICE):
            for item in (await kube.list(kind, namespace=NAMESPACE)).items:
                await kube.delete(kind, item["metadata"]["name"], namespace=NAMESPACE)


@pytest.mark.parametrize(
    ("kind", "volume", "downloads", "words"),
    [
        (
            "KaiwoJob",
            "data",
            {"download": GIT_DOWNLOAD},
            "storageSize is required when data.download is given",
        ),
        (
            "KaiwoService",
            "huggingFace",
            {"preCacheRepos": [{"repoId": "org/model"}]},
            "storageSize is required when huggingFace.preCacheRepos is given",
        ),
    ],
)
async def test_a_download_without_a_storage_size_is_refused_naming_the_field(
    kube: KubernetesAsyncioAdapter,
    kind: str,
    volume: str,
    downloads: dict[str, Any],
    words: str,
) -> None:
    with pytest.raises(Invalid) as raised:
        await kube.create(workload(kind, "no-size", {volume: downloads}))

    assert [(cause["field"], words in cause["message"]) for cause in raised.value.causes] == [
        (f"spec.storage.{volume}.storageSize", True)
    ]
    # With the size, or with storage not enabled (all of it ignored), the same is accepted.
    disabled = workload(kind, "disabled", {volume: downloads})
    disabled["spec"]["storage"]["storageEnabled"] = False
    await kube.create(workload(kind, "sized", {volume: {**downloads, "storageSize": "1Gi"}}))
    await kube.create(disabled)


async def test_a_secret_file_that_is_not_an_absolute_path_is_refused_naming_the_field(
    kube: KubernetesAsyncioAdapter,
) -> None:
    reference = {"secretName": "gcp", "secretKey": "key.json"}
    gcs = {"gcs": [{"applicationCredentials": {**reference, "file": "key.json"}, "buckets": []}]}
    data = {"storageSize": "1Gi", "download": gcs}

    with pytest.raises(Invalid) as raised:
        await kube.create(workload("KaiwoJob", "relative-file", {"data": data}))

    assert [
        (cause["field"], "an absolute path" in cause["message"]) for cause in raised.value.causes
    ] == [("spec.storage.data.download.gcs[0].applicationCredentials.file", True)]
    # An absolute path, and no file (the default path), are accepted.
    gcs["gcs"][0]["applicationCredentials"] = {**reference, "file": "/etc/gcp/key.json"}
    await kube.create(workload("KaiwoJob", "absolute-file", {"data": data}))
    gcs["gcs"][0]["applicationCredentials"] = reference
    await kube.create(workload("KaiwoJob", "default-file", {"data": data}))
