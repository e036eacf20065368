"""The sandbox's simulated controllers on the fake and on a real API server (where the real
Job and Deployment controllers make the pods): Kueue admits queued Jobs within the
ClusterQueue's nominal quota and unsuspends them, a Job waits while the quota is used, the
kubelet runs pods for their run time or fails them on request, a Deployment becomes
available, and the GPU metrics endpoint reports the GPUs a running pod holds. Objects are
written as a user and an administrator would; no operator runs."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest
from kaiwo_kube import NotFound, resources
from kaiwo_sandbox import NodeSpec, Sandbox, SandboxOptions
from kaiwo_sandbox.fleet import NODE_TYPES
from kaiwo_sandbox.lifecycle import Timing
from kaiwo_sandbox.volumes import PERSISTENT_VOLUME

from tests.integration.conftest import SandboxCluster
from tests.waiting import eventually

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


@pytest.fixture
def backend(sandbox_cluster: SandboxCluster) -> SandboxCluster:
    return sandbox_cluster


def job(name: str, namespace: str, *, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: "q"}},
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "parallelism": 1,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {
                                "requests": {"amd.com/gpu": "4"},
                                "limits": {"amd.com/gpu": "4"},
                            },
                        }
                    ],
                },
            },
        },
    }


HANG_SECONDS = 60.0
"""How long a wait may last before the test calls it hung: a guard, not a measure (the
simulated Jobs run for seconds), generous for a loaded machine."""


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for item in ((obj or {}).get("status") or {}).get("conditions") or ():
        if item.get("type") == kind:
            return dict(item)
    return None


async def test_admission_quota_runs_failures_and_metrics(backend: SandboxCluster) -> None:
    kube = backend.kube
    run = uuid.uuid4().hex[:6]
    namespace, queue, node = f"sandbox-{run}", f"sandbox-{run}", f"sandbox-node-{run}"
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {"kaiwo-tests/namespace": "true"}},
        }
    )
    await kube.create(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": queue},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["amd.com/gpu"],
                        "flavors": [
                            {
                                "name": "mi300x",
                                "resources": [{"name": "amd.com/gpu", "nominalQuota": 8}],
                            }
                        ],
                    }
                ],
            },
        }
    )
    await kube.create(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": namespace},
            "spec": {"clusterQueue": queue},
        }
    )
    options = SandboxOptions(
        fleet=(NodeSpec(node, NODE_TYPES["amd-mi300x"]),),
        timing=Timing(admit_seconds=0, start_seconds=0.5, run_seconds=3),
        tick=0.2,
        play_controllers=not backend.real,
        only_namespaces=(namespace,),
    )
    run_seconds = "sandbox.kaiwo.silogen.ai/run-seconds"
    try:
        async with Sandbox(kube, options) as sandbox:
            await kube.create(job("first", namespace, annotations={run_seconds: "3"}))
            await kube.create(
                job(
                    "broken",
                    namespace,
                    annotations={run_seconds: "4", "sandbox.kaiwo.silogen.ai/fail": "no data"},
                )
            )
            await kube.create(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "data", "namespace": namespace},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "standard",
                        "resources": {"requests": {"storage": "10Gi"}},
                    },
                }
            )
            await kube.create(
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": "web", "namespace": namespace},
                    "spec": {
                        "replicas": 1,
                        "selector": {"matchLabels": {"app": "web"}},
                        "template": {
                            "metadata": {"labels": {"app": "web"}},
                            "spec": {"containers": [{"name": "web", "image": "nginx"}]},
                        },
                    },
                }
            )
            await asyncio.sleep(1.0)  # the third comes last: first come, first served
            await kube.create(job("third", namespace, annotations={run_seconds: "1"}))

            async def workloads() -> dict[str, dict[str, Any]]:
                listed = await kube.list(resources.KUEUE_WORKLOAD, namespace=namespace)
                return {w["metadata"]["ownerReferences"][0]["name"]: w for w in listed.items}

            async def third_waits() -> bool:
                found = condition((await workloads()).get("third"), "QuotaReserved")
                return bool(found and found["status"] == "False")

            await eventually(third_waits, within=HANG_SECONDS, what="the third Job waits for quota")
            current = await workloads()
            assert condition(current["third"], "QuotaReserved") is not None
            assert condition(current["third"], "QuotaReserved")["message"] == (  # type: ignore[index]
                "couldn't assign flavors to pod set main: insufficient unused quota for "
                "amd.com/gpu in flavor mi300x, 4 more needed"
            )
            for name in ("first", "broken"):
                assert condition(current[name], "Admitted")["status"] == "True"  # type: ignore[index]
                admission = current[name]["status"]["admission"]
                assert admission["clusterQueue"] == queue
                assert admission["podSetAssignments"][0]["flavors"] == {"amd.com/gpu": "mi300x"}
            third = await kube.get(resources.JOB, "third", namespace=namespace)
            assert third["spec"]["suspend"] is True

            seen_gpus: set[str] = set()

            async def metrics_and(check: Callable[[], Any]) -> Callable[[], Any]:
                async def both() -> Any:
                    async with (
                        aiohttp.ClientSession() as http,
                        http.get(
                            f"{sandbox.metrics_url}/api/v1/query",
                            params={"query": "gpu_gfx_activity"},
                        ) as response,
                    ):
                        answer = await response.json()
                    for series in answer["data"]["result"]:
                        if series["metric"]["namespace"] == namespace:
                            seen_gpus.add(series["metric"]["gpu_id"])
                    return await check()

                return both

            async def finished(name: str, kind: str) -> bool:
                found = await kube.get(resources.JOB, name, namespace=namespace)
                held = condition(found, kind)
                return bool(held and held["status"] == "True")

            await eventually(
                await metrics_and(lambda: finished("broken", "Failed")),
                within=HANG_SECONDS,
                what="the broken Job fails",
            )
            await eventually(
                await metrics_and(lambda: finished("third", "Complete")),
                within=HANG_SECONDS,
                what="the third Job is admitted once quota is back, and completes",
            )
            await eventually(
                lambda: finished("first", "Complete"), within=HANG_SECONDS, what="first completes"
            )
            assert seen_gpus <= {str(i) for i in range(8)} and len(seen_gpus) >= 4

            async def bound() -> bool:
                claim = await kube.get(
                    resources.PERSISTENT_VOLUME_CLAIM, "data", namespace=namespace
                )
                status = claim.get("status") or {}
                return status.get("phase") == "Bound" and status["capacity"]["storage"] == "10Gi"

            await eventually(bound, within=HANG_SECONDS, what="the claim is bound")

            async def available() -> bool:
                found = await kube.get(resources.DEPLOYMENT, "web", namespace=namespace)
                return (found.get("status") or {}).get("availableReplicas") == 1

            await eventually(available, within=HANG_SECONDS, what="the Deployment is available")
            broken_pods = await kube.list(
                resources.POD,
                namespace=namespace,
                label_selector="batch.kubernetes.io/job-name=broken",
            )
            [terminated] = [
                c["state"]["terminated"]
                for c in broken_pods.items[0]["status"]["containerStatuses"]
            ]
            assert (terminated["exitCode"], terminated["message"]) == (1, "no data")
            finished_workload = (await workloads())["first"]
            assert condition(finished_workload, "Finished")["status"] == "True"  # type: ignore[index]
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(resources.NAMESPACE, namespace)
        with contextlib.suppress(NotFound):
            await kube.delete(resources.KUEUE_CLUSTER_QUEUE, queue)
        if backend.real:
            for volume in (await kube.list(PERSISTENT_VOLUME)).items:
                if volume["spec"].get("claimRef", {}).get("namespace") == namespace:
                    with contextlib.suppress(NotFound):
                        await kube.delete(PERSISTENT_VOLUME, volume["metadata"]["name"])
        with contextlib.suppress(NotFound):
            await kube.delete(resources.NODE, node)
        with contextlib.suppress(NotFound):
            await kube.delete(resources.LEASE, node, namespace="kube-node-lease")


async def test_pods_naming_the_kaiwo_scheduler_are_scheduled_and_run(
    backend: SandboxCluster,
) -> None:
    """The operator's pods name the kaiwo-scheduler (KaiwoConfig's default): in the sandbox,
    which plays every scheduler, they are placed and run like any other (docs/sandbox.md)."""
    kube = backend.kube
    run = uuid.uuid4().hex[:6]
    namespace, node = f"sandbox-{run}", f"sandbox-node-{run}"
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {"kaiwo-tests/namespace": "true"}},
        }
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": namespace},
        "spec": {
            "schedulerName": "kaiwo-scheduler",
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"amd.com/gpu": "2"}, "limits": {"amd.com/gpu": "2"}},
                }
            ],
        },
    }
    options = SandboxOptions(
        fleet=(NodeSpec(node, NODE_TYPES["amd-mi300x"]),),
        timing=Timing(admit_seconds=0, start_seconds=0.5, run_seconds=30),
        tick=0.2,
        play_controllers=not backend.real,
        only_namespaces=(namespace,),
    )
    try:
        async with Sandbox(kube, options):
            await kube.create(pod)

            async def running() -> dict[str, Any] | None:
                found = await kube.get(resources.POD, "trainer", namespace=namespace)
                phase = (found.get("status") or {}).get("phase")
                return found if phase == "Running" else None

            placed = await eventually(running, within=HANG_SECONDS, what="the pod runs")
            assert placed["spec"]["schedulerName"] == "kaiwo-scheduler"
            where = placed["spec"].get("nodeName") or placed["metadata"]["annotations"].get(
                "sandbox.kaiwo.silogen.ai/node"
            )
            assert where == node
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(resources.NAMESPACE, namespace)
        with contextlib.suppress(NotFound):
            await kube.delete(resources.NODE, node)
        with contextlib.suppress(NotFound):
            await kube.delete(resources.LEASE, node, namespace="kube-node-lease")
