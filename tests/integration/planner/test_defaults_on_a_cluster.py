"""The KaiwoConfig's storage mount-path defaults apply to a workload the API server stored: the
workload CRDs leave ``mountPath`` unset (decision 0044), so the planner's fallback sees it; and
the KaiwoConfig CRD leaves its own mount paths unset, so the deprecated ``spec.data`` settings
apply where ``spec.storage`` names none (decision 0112)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_contracts.crds.config_v1alpha1 import KAIWO_CONFIG_NAME, KaiwoConfig
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_planner.domain.state.cluster import ClusterState

from tests.planning_calls import planned
from tests.real_cluster import RealCluster
from tests.unit.planner.test_planning import queue_config

pytestmark = pytest.mark.k8s

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
NAMESPACE = "mount-defaults"
WORKLOADS_LABEL = "kaiwo.silogen.ai/workloads"


def kaiwo_config(**storage: str) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo", "uid": "config-uid"},
        "spec": {"storage": storage},
    }


def job_with_storage(name: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "user": "scientist@example.com",
            "image": "busybox",
            "command": ["sleep", "1"],
            "storage": {
                "storageEnabled": True,
                "storageClassName": "standard",
                "data": data,
                "huggingFace": {"storageSize": "1Gi"},
            },
        },
    }


@pytest.fixture
async def stored_config(
    kube: KubernetesAsyncioAdapter,
) -> AsyncIterator[Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]]:
    """Creates a KaiwoConfig of the given spec and returns it as the API server stored it,
    named ``kaiwo`` as the planner reads it.

    Created under another name: the session's operator reads the one named ``kaiwo``, and
    other tests' workloads must not get these mount paths."""
    created: list[str] = []

    async def store(spec: dict[str, Any]) -> dict[str, Any]:
        name = f"storage-probe-{uuid.uuid4().hex[:6]}"
        config = {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoConfig",
            "metadata": {"name": name},
            "spec": spec,
        }
        await kube.create(config)
        created.append(name)
        found = await kube.get(resources.KAIWO_CONFIG, name)
        return {**found, "metadata": {**found["metadata"], "name": KAIWO_CONFIG_NAME}}

    yield store
    for name in created:
        await kube.delete(resources.KAIWO_CONFIG, name)


@pytest.fixture
async def kube(real_cluster: RealCluster) -> AsyncIterator[KubernetesAsyncioAdapter]:
    async with await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig) as kube:
        # Labelled as a workload namespace: the session's operator (other tests' pipeline) plans
        # these KaiwoJobs too, and its executor may write only in such namespaces.
        namespace = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": NAMESPACE, "labels": {WORKLOADS_LABEL: "true"}},
        }
        await kube.apply(namespace, field_manager="test")
        yield kube
        for job in (await kube.list(resources.KAIWO_JOB, namespace=NAMESPACE)).items:
            await kube.delete(resources.KAIWO_JOB, job["metadata"]["name"], namespace=NAMESPACE)


def mount_paths(plan_manifests: tuple[dict[str, Any], ...]) -> dict[str, str]:
    job = next(m for m in plan_manifests if m["kind"] == "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    return {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}


def hf_home(plan_manifests: tuple[dict[str, Any], ...]) -> str:
    job = next(m for m in plan_manifests if m["kind"] == "Job")
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    return str(next(e["value"] for e in env if e["name"] == "HF_HOME"))


def planned_with(job: dict[str, Any], *objects: dict[str, Any]) -> Any:
    """The plan of ``job`` in a cluster of the queue config and ``objects``."""
    cluster = ClusterState.from_wire(
        objects=[queue_config({"name": "kaiwo", "namespaces": [NAMESPACE]}), *objects],
        namespaces=[NAMESPACE],
    )
    plan = planned(owner=job, cluster=cluster, now=NOW)
    assert plan is not None
    return plan


async def stored(kube: KubernetesAsyncioAdapter, job: dict[str, Any]) -> dict[str, Any]:
    await kube.create(job)
    return await kube.get(resources.KAIWO_JOB, job["metadata"]["name"], namespace=NAMESPACE)


async def test_the_api_server_leaves_the_mount_paths_unset(
    kube: KubernetesAsyncioAdapter,
) -> None:
    job = await stored(kube, job_with_storage("unset", {"storageSize": "1Gi"}))
    assert "mountPath" not in job["spec"]["storage"]["data"]
    assert "mountPath" not in job["spec"]["storage"]["huggingFace"]


async def test_the_kaiwoconfig_defaults_apply_to_a_stored_workload(
    kube: KubernetesAsyncioAdapter,
) -> None:
    job = await stored(kube, job_with_storage("defaulted", {"storageSize": "1Gi"}))
    plan = planned_with(
        job, kaiwo_config(defaultDataMountPath="/data", defaultHfMountPath="/models")
    )
    assert set(mount_paths(plan.desired).values()) >= {"/data", "/models"}
    assert hf_home(plan.desired) == "/models"


async def test_without_a_kaiwoconfig_the_seeds_defaults_apply(
    kube: KubernetesAsyncioAdapter,
) -> None:
    job = await stored(kube, job_with_storage("plain", {"storageSize": "1Gi"}))
    plan = planned_with(job)
    assert set(mount_paths(plan.desired).values()) >= {"/workload", "/hf_cache"}


async def test_a_workloads_own_mount_path_wins(kube: KubernetesAsyncioAdapter) -> None:
    job = await stored(kube, job_with_storage("own", {"storageSize": "1Gi", "mountPath": "/mine"}))
    plan = planned_with(job, kaiwo_config(defaultDataMountPath="/data"))
    assert "/mine" in mount_paths(plan.desired).values()
    assert "/data" not in mount_paths(plan.desired).values()


async def test_the_deprecated_data_settings_apply_from_a_stored_kaiwoconfig(
    kube: KubernetesAsyncioAdapter,
    stored_config: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
) -> None:
    config = await stored_config(
        {"data": {"defaultDataMountPath": "/mnt/data", "defaultHfMountPath": "/mnt/hf"}}
    )
    assert "defaultDataMountPath" not in config["spec"]["storage"]
    assert "defaultHfMountPath" not in config["spec"]["storage"]
    storage = KaiwoConfig.from_wire(config).spec.effective_storage
    assert (storage.default_data_mount_path, storage.default_hf_mount_path) == (
        "/mnt/data",
        "/mnt/hf",
    )

    job = await stored(kube, job_with_storage("legacy-data", {"storageSize": "1Gi"}))
    plan = planned_with(job, config)
    assert set(mount_paths(plan.desired).values()) >= {"/mnt/data", "/mnt/hf"}
    assert hf_home(plan.desired) == "/mnt/hf"


async def test_a_stored_kaiwoconfigs_storage_wins_over_its_data(
    kube: KubernetesAsyncioAdapter,
    stored_config: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
) -> None:
    config = await stored_config(
        {
            "data": {"defaultDataMountPath": "/mnt/data", "defaultHfMountPath": "/mnt/hf"},
            "storage": {"defaultDataMountPath": "/srv/data"},
        }
    )
    storage = KaiwoConfig.from_wire(config).spec.effective_storage
    assert (storage.default_data_mount_path, storage.default_hf_mount_path) == (
        "/srv/data",
        "/mnt/hf",
    )

    job = await stored(kube, job_with_storage("storage-wins", {"storageSize": "1Gi"}))
    plan = planned_with(job, config)
    assert set(mount_paths(plan.desired).values()) >= {"/srv/data", "/mnt/hf"}
    assert "/mnt/data" not in mount_paths(plan.desired).values()


async def test_a_stored_kaiwoconfig_naming_no_mount_path_gives_the_seeds_defaults(
    kube: KubernetesAsyncioAdapter,
    stored_config: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
) -> None:
    config = await stored_config({"storage": {"defaultStorageClass": "fast"}})
    assert config["spec"]["storage"] == {"defaultStorageClass": "fast"}
    storage = KaiwoConfig.from_wire(config).spec.effective_storage
    assert (storage.default_data_mount_path, storage.default_hf_mount_path) == (
        "/workload",
        "/hf_cache",
    )
