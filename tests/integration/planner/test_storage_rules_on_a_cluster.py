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


@pytest.mark.parametrize("kind", ["KaiwoJob", "KaiwoService"])
async def test_both_volumes_at_one_mount_path_are_refused_naming_the_field(
    kube: KubernetesAsyncioAdapter, kind: str
) -> None:
    """Decision 0248: the pods mounted only the Hugging Face cache there (the data volume not
    at all, "The Job matches the workload's spec"), and the API server refused the download
    Job's two mounts at one path on every plan, the workload DOWNLOADING for good."""
    storage = {
        "data": {"storageSize": "1Gi", "mountPath": "/data"},
        "huggingFace": {"storageSize": "1Gi", "mountPath": "/data"},
    }

    with pytest.raises(Invalid) as raised:
        await kube.create(workload(kind, "one-path", storage))

    assert [(cause["field"], cause["message"]) for cause in raised.value.causes] == [
        (
            "spec.storage.huggingFace.mountPath",
            "Invalid value: huggingFace.mountPath must differ from data.mountPath: a "
            "container mounts one volume at a path, so the data volume would not be mounted "
            "(e.g. data at /workload, the Hugging Face cache at /hf_cache)",
        )
    ]
    # Paths of their own, or the cache's left to KaiwoConfig's default: accepted.
    storage["huggingFace"]["mountPath"] = "/data/hf"
    await kube.create(workload(kind, "own-paths", storage))
    del storage["huggingFace"]["mountPath"]
    await kube.create(workload(kind, "default-path", storage))


@pytest.mark.parametrize(
    ("kind", "secret_volume"),
    [
        ("KaiwoJob", {"name": "api-key", "mountPath": "/data"}),
        ("KaiwoService", {"name": "hf", "mountPath": "/etc/secrets"}),
    ],
)
async def test_a_secret_volume_in_place_of_a_storage_volume_is_refused_naming_the_field(
    kube: KubernetesAsyncioAdapter, kind: str, secret_volume: dict[str, str]
) -> None:
    """Decision 0254: the pods merge volumes by name and mounts by path, so a secret volume at
    the data volume's path (or named like the cache's volume) replaced it without a word."""
    storage = {
        "data": {"storageSize": "1Gi", "mountPath": "/data"},
        "huggingFace": {"storageSize": "1Gi"},
    }
    manifest = workload(kind, "secret-in-place", storage)
    manifest["spec"]["secretVolumes"] = [{"secretName": "credentials", **secret_volume}]

    with pytest.raises(Invalid) as raised:
        await kube.create(manifest)

    assert [(cause["field"], cause["message"]) for cause in raised.value.causes] == [
        (
            "spec.secretVolumes",
            "Invalid value: secretVolumes must not be named data or hf nor mounted at "
            "data.mountPath or huggingFace.mountPath: a pod's volumes are merged by name and "
            "its mounts by path, so the storage volume would not be mounted (e.g. name the "
            "entry api-key and mount it at /etc/secrets/api-key)",
        )
    ]
    # A name and a path of its own, or storage not enabled: accepted.
    manifest["spec"]["secretVolumes"] = [
        {"secretName": "credentials", "name": "api-key", "mountPath": "/data/keys"}
    ]
    await kube.create(manifest)
    manifest = workload(kind, "storage-off", storage)
    manifest["spec"]["storage"]["storageEnabled"] = False
    manifest["spec"]["secretVolumes"] = [{"secretName": "credentials", **secret_volume}]
    await kube.create(manifest)


async def test_a_downloaded_volume_at_the_download_jobs_own_mounts_is_refused_naming_it(
    kube: KubernetesAsyncioAdapter,
) -> None:
    """Decision 0262: the planner refused it (``Valid=False``) once the API server had taken
    it, as the API server would have refused the download Job its mounts there."""
    storage = {
        "data": {"storageSize": "1Gi", "mountPath": "/config/", "download": GIT_DOWNLOAD},
        "huggingFace": {
            "storageSize": "1Gi",
            "mountPath": "/app/secrets/hf",
            "preCacheRepos": [{"repoId": "org/model"}],
        },
    }

    with pytest.raises(Invalid) as raised:
        await kube.create(workload("KaiwoJob", "own-mounts", storage))

    told = (
        "when {what} is given: the download Job mounts its configuration at /config and the "
        "Secrets it reads under /app/secrets, so the API server would refuse the Job (e.g. {e})"
    )
    assert sorted((cause["field"], cause["message"]) for cause in raised.value.causes) == [
        (
            "spec.storage.data.mountPath",
            "Invalid value: data.mountPath must not be /config, /app/secrets or under it "
            + told.format(what="data.download", e="/workload"),
        ),
        (
            "spec.storage.huggingFace.mountPath",
            "Invalid value: huggingFace.mountPath must not be /config, /app/secrets or under "
            "it " + told.format(what="huggingFace.preCacheRepos", e="/hf_cache"),
        ),
    ]
    # Beside those paths, or there without downloads (no download Job mounts it): accepted.
    storage["data"]["mountPath"] = "/config/data"
    storage["huggingFace"]["mountPath"] = "/app/secretsfor-hf"
    await kube.create(workload("KaiwoJob", "beside", storage))
    del storage["data"]["download"], storage["huggingFace"]["preCacheRepos"]
    storage["data"]["mountPath"] = "/config"
    await kube.create(workload("KaiwoService", "no-downloads", storage))
