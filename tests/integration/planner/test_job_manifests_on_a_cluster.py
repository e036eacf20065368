"""The Jobs planned for a KaiwoJob are accepted by the API server where users' specs used to
make them invalid (decision 0119): a ``spec.job`` that leaves ``restartPolicy`` out (a pod
template without one means ``Always``, which a Job may not have), and downloads whose
credentials are in a Secret with a dot in its name (a pod volume's name may have none)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_planner.domain.state.cluster import ClusterState

from tests.planning_calls import planned
from tests.real_cluster import RealCluster
from tests.unit.planner.test_planning import queue_config

pytestmark = pytest.mark.k8s

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
NAMESPACE = "job-manifests"
WORKLOADS_LABEL = "kaiwo.silogen.ai/workloads"


@pytest.fixture
async def kube(real_cluster: RealCluster) -> AsyncIterator[KubernetesAsyncioAdapter]:
    async with await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig) as kube:
        namespace = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": NAMESPACE, "labels": {WORKLOADS_LABEL: "true"}},
        }
        await kube.apply(namespace, field_manager="test")
        yield kube
        for job in (await kube.list(resources.JOB, namespace=NAMESPACE)).items:
            await kube.delete(resources.JOB, job["metadata"]["name"], namespace=NAMESPACE)
        for job in (await kube.list(resources.KAIWO_JOB, namespace=NAMESPACE)).items:
            await kube.delete(resources.KAIWO_JOB, job["metadata"]["name"], namespace=NAMESPACE)


async def planned_jobs(
    kube: KubernetesAsyncioAdapter, workload: dict[str, Any]
) -> list[dict[str, Any]]:
    """The Jobs the planner wants for ``workload``, once the API server has stored it (its
    defaults filled in), in a namespace the ``kaiwo`` queue serves."""
    created = await kube.create(workload)
    stored = await kube.get(resources.KAIWO_JOB, created["metadata"]["name"], namespace=NAMESPACE)
    cluster = ClusterState.from_wire(
        objects=[queue_config({"name": "kaiwo", "namespaces": [NAMESPACE]})],
        namespaces=[NAMESPACE],
    )
    plan = planned(owner=stored, cluster=cluster, now=NOW)
    assert plan is not None
    return [m for m in plan.desired if m["kind"] == "Job"]


def kaiwo_job_with_a_job_spec(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "user": "scientist@example.com",
            "entrypoint": "python train.py",
            "job": {
                "spec": {
                    "backoffLimit": 2,
                    "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}},
                }
            },
        },
    }


def kaiwo_job_downloading(name: str, download: dict[str, Any]) -> dict[str, Any]:
    """A KaiwoJob whose data volume of 1Gi is filled by ``download`` first."""
    data = {"storageSize": "1Gi", "download": download}
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"image": "busybox", "storage": {"storageEnabled": True, "data": data}},
    }


async def test_the_job_of_a_user_job_spec_without_restart_policy_is_accepted(
    kube: KubernetesAsyncioAdapter,
) -> None:
    (job,) = await planned_jobs(kube, kaiwo_job_with_a_job_spec("no-restart-policy"))

    created = await kube.create(job, field_manager="test")

    assert created["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert created["spec"]["backoffLimit"] == 2


async def test_the_download_job_of_a_secret_with_a_dotted_name_is_accepted(
    kube: KubernetesAsyncioAdapter,
) -> None:
    s3 = {
        "endpointUrl": "https://s3.example.com",
        "accessKeyId": {"secretName": "s3.creds", "secretKey": "id"},
        "secretKey": {"secretName": "s3.creds", "secretKey": "key"},
        "buckets": [{"name": "data"}],
    }
    workload = kaiwo_job_downloading("dotted-secret", {"s3": [s3]})
    (download,) = await planned_jobs(kube, workload)
    assert download["metadata"]["name"] == "dotted-secret-download"

    created = await kube.create(download, field_manager="test")

    volumes = {v["name"]: v for v in created["spec"]["template"]["spec"]["volumes"]}
    assert volumes["secret-s3-creds-90422086"]["secret"]["secretName"] == "s3.creds"


async def test_secret_volumes_that_share_a_directory_are_all_mounted(
    kube: KubernetesAsyncioAdapter,
) -> None:
    # A container takes one mount per path: before, only the last entry's file was there.
    workload = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "shared-secret-dir", "namespace": NAMESPACE},
        "spec": {
            "image": "busybox",
            "entrypoint": "cat /etc/creds/user /etc/creds/password",
            "secretVolumes": [
                {
                    "name": "user",
                    "secretName": "db-user",
                    "key": "username",
                    "subPath": "user",
                    "mountPath": "/etc/creds",
                },
                {
                    "name": "password",
                    "secretName": "db-pass",
                    "key": "password",
                    "mountPath": "/etc/creds",
                },
            ],
        },
    }
    (job,) = await planned_jobs(kube, workload)

    created = await kube.create(job, field_manager="test")

    pod = created["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert [m for m in container["volumeMounts"] if m["mountPath"] == "/etc/creds"] == [
        {"name": "user", "mountPath": "/etc/creds"}
    ]
    [volume] = [v for v in pod["volumes"] if v["name"] == "user"]
    assert [s["secret"] for s in volume["projected"]["sources"]] == [
        {"name": "db-user", "items": [{"key": "username", "path": "user"}]},
        {"name": "db-pass", "items": [{"key": "password", "path": "password"}]},
    ]


async def test_a_secret_key_given_its_own_file_is_mounted_there_in_the_download_job(
    kube: KubernetesAsyncioAdapter,
) -> None:
    # The seed: ``file`` is "the expected path within the download job's container where the
    # secret value will be mounted as a file". The downloader reads the path the config names,
    # so the key must be there, besides the Secret's directory under /app/secrets.
    credentials = {"secretName": "gcp", "secretKey": "key.json", "file": "/etc/gcp/key.json"}
    gcs = {"applicationCredentials": credentials, "buckets": [{"name": "data"}]}
    workload = kaiwo_job_downloading("given-file", {"gcs": [gcs]})
    (download,) = await planned_jobs(kube, workload)

    created = await kube.create(download, field_manager="test")

    (container,) = created["spec"]["template"]["spec"]["containers"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/etc/gcp/key.json"] == {
        "name": "secret-gcp",
        "mountPath": "/etc/gcp/key.json",
        "subPath": "key.json",
        "readOnly": True,
    }
    assert mounts["/app/secrets/gcp"]["name"] == "secret-gcp"
