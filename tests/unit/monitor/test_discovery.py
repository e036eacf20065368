"""GPU workloads no Kaiwo kind owns, found from the readings (kaiwo_monitor.discovery,
decision 0047): a pod with readings that is no Kaiwo workload's is traced up its controllers
to its root; roots of kinds preemption does not handle, and pods Kaiwo made, are not tracked;
a ReplicaSet's controller is read once. Against the fake API server; expected roots by hand."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kubefake import FakeKubeServer, ResourceKind
from kaiwo_monitor.discovery import RootFinder, candidate_pods
from kaiwo_monitor.domain.pods import MonitoredPod, workload_ref
from kaiwo_monitor.domain.samples import GpuSample

NS = "team-a"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
REPLICA_SET = ResourceKind(
    group="apps", version="v1", plural="replicasets", kind="ReplicaSet", namespaced=True
)
CRON_JOB = ResourceKind(
    group="batch", version="v1", plural="cronjobs", kind="CronJob", namespaced=True
)
JOB_SET = ResourceKind(
    group="jobset.x-k8s.io", version="v1alpha2", plural="jobsets", kind="JobSet", namespaced=True
)
GPU_SPEC = {"containers": [{"name": "main", "resources": {"limits": {"amd.com/gpu": "2"}}}]}


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[tuple[FakeKubeServer, KubernetesAsyncioAdapter]]:
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(
            FakeKubeServer(
                kubeconfig_path=tmp_path / "kubeconfig", kinds=(REPLICA_SET, CRON_JOB, JOB_SET)
            )
        )
        adapter = await KubernetesAsyncioAdapter.from_kubeconfig(server.kubeconfig_path)
        stack.push_async_callback(adapter.close)
        await adapter.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield server, adapter


def controlled_by(owner: dict[str, Any]) -> list[dict[str, Any]]:
    meta = owner["metadata"]
    return [
        {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
        }
    ]


async def make(
    kube: KubernetesAsyncioAdapter, api_version: str, kind: str, name: str, **meta: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": GPU_SPEC}}
    if kind == "Pod":
        spec = dict(GPU_SPEC)
    if kind == "CronJob":
        spec = {"schedule": "@daily", "jobTemplate": {"spec": spec}}
    made = await kube.create(
        {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"name": name, "namespace": NS, **meta},
            "spec": spec,
        }
    )
    if kind == "Pod":
        made = await kube.patch_status(
            resources.POD,
            name,
            {"phase": "Running"},
            namespace=NS,
            field_manager="kubelet",
            method="merge",
        )
    return {**made, "apiVersion": api_version, "kind": kind}


def sample(pod: str) -> GpuSample:
    return GpuSample(namespace=NS, pod=pod, gpu="0", percent=1.0, at=NOW)


async def test_pods_are_traced_to_their_roots_and_only_trackable_roots_count(
    kube: tuple[FakeKubeServer, KubernetesAsyncioAdapter],
) -> None:
    _, adapter = kube
    deployment = await make(adapter, "apps/v1", "Deployment", "serve")
    replicas = await make(
        adapter, "apps/v1", "ReplicaSet", "serve-5d4f", ownerReferences=controlled_by(deployment)
    )
    await make(adapter, "v1", "Pod", "serve-5d4f-x", ownerReferences=controlled_by(replicas))
    await make(adapter, "v1", "Pod", "notebook")
    cron = await make(adapter, "batch/v1", "CronJob", "nightly")
    nightly = await make(
        adapter, "batch/v1", "Job", "nightly-1", ownerReferences=controlled_by(cron)
    )
    await make(adapter, "v1", "Pod", "nightly-1-y", ownerReferences=controlled_by(nightly))
    # A Job another kind controls (a JobSet's): not a root, and nothing above it is either.
    job_set = await make(adapter, "jobset.x-k8s.io/v1alpha2", "JobSet", "set")
    theirs = await make(
        adapter, "batch/v1", "Job", "theirs", ownerReferences=controlled_by(job_set)
    )
    await make(adapter, "v1", "Pod", "theirs-z", ownerReferences=controlled_by(theirs))
    await make(adapter, "v1", "Pod", "kaiwo-made", labels={"app.kubernetes.io/managed-by": "kaiwo"})
    pods = ("serve-5d4f-x", "notebook", "nightly-1-y", "theirs-z", "kaiwo-made", "gone")
    finder = RootFinder(adapter)

    found = await finder.workloads(candidate_pods([sample(p) for p in pods], []))

    by_root = {(w.root["kind"], w.root["metadata"]["name"]): w for w in found}
    # A CronJob's Job is a root of its own (decision 0056): that run is tracked.
    assert set(by_root) == {("Deployment", "serve"), ("Pod", "notebook"), ("Job", "nightly-1")}
    [served] = by_root[("Deployment", "serve")].pods
    assert served == MonitoredPod(
        namespace=NS,
        name="serve-5d4f-x",
        workload=workload_ref(
            kind="Deployment",
            name="serve",
            namespace=NS,
            uid=deployment["metadata"]["uid"],
            api_version="apps/v1",
        ),
        requested_gpus=2,
        vendor="amd",
        running=True,
    )
    # One list of the namespace's pods; the ReplicaSet, the Deployment, the two Jobs.
    assert finder.reads == 5

    await finder.workloads(candidate_pods([sample("serve-5d4f-x")], []))
    # The list and the Deployment (its annotations may change); the ReplicaSet remembered.
    assert finder.reads == 5 + 2


def test_only_pods_no_kaiwo_workload_holds_are_candidates() -> None:
    ours = MonitoredPod(
        namespace=NS,
        name="train-0",
        workload=workload_ref(kind="KaiwoJob", name="train", namespace=NS, uid="u"),
        requested_gpus=1,
        vendor="amd",
        running=True,
    )
    samples = [sample("train-0"), sample("notebook"), GpuSample("team-b", "x", "1", 0.0, NOW)]

    assert candidate_pods(samples, [ours]) == {
        NS: frozenset({"notebook"}),
        "team-b": frozenset({"x"}),
    }


async def test_a_found_roots_running_gpu_pods_without_readings_are_its_pods_too(
    kube: tuple[FakeKubeServer, KubernetesAsyncioAdapter],
) -> None:
    """Decision 0173: a pod without readings makes its root's use unknown, so the monitor
    must know it; pods of roots nobody read, and CPU pods, are left alone."""
    _, adapter = kube
    job = await make(adapter, "batch/v1", "Job", "train")
    await make(adapter, "v1", "Pod", "train-a", ownerReferences=controlled_by(job))
    await make(adapter, "v1", "Pod", "train-b", ownerReferences=controlled_by(job))
    deployment = await make(adapter, "apps/v1", "Deployment", "serve")
    replicas = await make(
        adapter, "apps/v1", "ReplicaSet", "serve-5d4f", ownerReferences=controlled_by(deployment)
    )
    await make(adapter, "v1", "Pod", "serve-5d4f-x", ownerReferences=controlled_by(replicas))
    await make(adapter, "v1", "Pod", "serve-5d4f-y", ownerReferences=controlled_by(replicas))
    other = await make(adapter, "batch/v1", "Job", "other")
    await make(adapter, "v1", "Pod", "other-a", ownerReferences=controlled_by(other))
    finder = RootFinder(adapter)

    found = await finder.workloads(candidate_pods([sample("train-a"), sample("serve-5d4f-x")], []))

    pods = {w.root["metadata"]["name"]: sorted(p.name for p in w.pods) for w in found}
    assert pods == {"train": ["train-a", "train-b"], "serve": ["serve-5d4f-x", "serve-5d4f-y"]}
    # The list; the Job; the ReplicaSet and the Deployment; nothing for train-b (its
    # controller is the Job found), serve-5d4f-y (its ReplicaSet remembered) or other-a
    # (its Job is no root found: not read).
    assert finder.reads == 4
