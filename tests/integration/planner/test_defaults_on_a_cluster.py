"""The KaiwoConfig's storage mount-path defaults apply to a workload the API server stored: the
workload CRDs leave ``mountPath`` unset (decision 0044), so the planner's fallback sees it."""

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
