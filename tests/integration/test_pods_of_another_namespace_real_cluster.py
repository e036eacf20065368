"""A tenant's pod labelled with another namespace's workload uid, with the whole operator and
its monitor (a real Prometheus scraping a small exporter) on the session's real API server
(decision 0252).

A scientist bound to ``edit`` in their own namespace (and the deployment's user roles) may not
create a pod in the workload's namespace, but may create one in theirs labelled
``kaiwo.silogen.ai/run-id: <uid of the KaiwoJob there>``: labels are the pod's creator's to
choose. The watcher and the monitor read every pod carrying that label, in every namespace.
Before, such a pod counted as the KaiwoJob's:

* for the planner, a crash loop in the tenant's namespace gave the other namespace's KaiwoJob
  ``ChildHealthy=False`` and a Warning Event naming the tenant's pod;
* for the monitor, the tenant's idle GPUs were averaged with the KaiwoJob's busy ones, so
  the busy KaiwoJob was found underutilized and, with ``terminateUnderutilized``, terminated.

Now only the pods of the workload's own namespace are its own; a pod there is still told.
Neither Kueue nor a kubelet runs: the test admits each Job as Kueue would and reports each
pod's state as a kubelet would (its status).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import AlreadyExists, KubeError, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, Pipeline, eventually, running_pipeline
from tests.integration.test_scientist_cli_on_the_api_server import scientist_in_a_namespace
from tests.prometheus_server import GpuExporter, GpuSeries, running_prometheus
from tests.real_cluster import RealCluster

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.asyncio(loop_scope="module"),
]

RUN_ID: Final = "kaiwo.silogen.ai/run-id"
CRASH_LOOP: Final = "CrashLoopBackOff"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Pipeline, GpuExporter]]:
    workdir = tmp_path_factory.mktemp("kaiwo")
    (workdir / "prometheus").mkdir()
    async with contextlib.AsyncExitStack() as exits:
        exporter = await exits.enter_async_context(GpuExporter().serving())
        prometheus = await exits.enter_async_context(
            running_prometheus(exporter, workdir / "prometheus")
        )
        pipeline = await exits.enter_async_context(
            running_pipeline(
                workdir / "stack",
                real=real_cluster,
                service_env={"KAIWO_MONITOR_POLLING_INTERVAL_SECONDS": "1"},
                metrics_endpoint=prometheus.url,
            )
        )
        yield pipeline, exporter


@contextlib.asynccontextmanager
async def tenant_namespace(
    real_cluster: RealCluster, tmp_path: Path
) -> AsyncIterator[tuple[KubernetesAsyncioAdapter, KubernetesAsyncioAdapter, str]]:
    """A namespace whose scientist may use it (``edit``) and nothing else: the admin, the
    scientist's client and the namespace."""
    async with scientist_in_a_namespace(real_cluster, tmp_path) as (admin, namespace, env):
        tenant = await KubernetesAsyncioAdapter.from_kubeconfig(Path(env["KUBECONFIG"]))
        try:
            yield admin, tenant, namespace
        finally:
            await tenant.close()


def labelled_pod(
    name: str, namespace: str, run_id: str, *, gpus: int = 0, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox", "command": ["false"]}
    if gpus:
        container["resources"] = {"limits": {"amd.com/gpu": str(gpus)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {RUN_ID: run_id, **(labels or {})},
        },
        "spec": {"restartPolicy": "Always", "containers": [container]},
    }


async def start_running(p: Pipeline, name: str, *, gpus: int) -> tuple[str, str]:
    """A KaiwoJob on ``gpus`` GPUs, its Job admitted and its pod Running: its uid and pod."""
    job = actors.training_job(name, namespace=p.namespace, download=False)
    job["spec"]["gpus"] = gpus
    await p.kube.create(job)
    await actors.kueue_admits(p.kube, await p.appears(resources.JOB, name))
    await p.jobs.pod_running(name, namespace=p.namespace, ready=True)
    uid = (await p.reaches(name, "RUNNING"))["metadata"]["uid"]
    pod = await p.jobs.job_pod(name, namespace=p.namespace)  # type: ignore[attr-defined]
    return uid, str(pod["metadata"]["name"])


async def crash_loop(admin: KubernetesAsyncioAdapter, pod: dict[str, Any]) -> None:
    """What a kubelet reports of a container that keeps exiting."""
    waiting = {"waiting": {"reason": CRASH_LOOP, "message": "back-off 2m40s"}}
    await report(admin, pod, ready=False, restarts=5, state=waiting)


async def report(
    admin: KubernetesAsyncioAdapter,
    pod: dict[str, Any],
    *,
    ready: bool,
    restarts: int,
    state: dict[str, Any],
) -> None:
    """The pod's status as a kubelet reports it, its one container in ``state``."""
    status = {
        "phase": "Running",
        "containerStatuses": [
            {
                "name": "main",
                "image": "busybox",
                "imageID": "",
                "ready": ready,
                "started": ready,
                "restartCount": restarts,
                "state": state,
            }
        ],
    }
    meta = pod["metadata"]
    await admin.patch_status(
        resources.POD,
        meta["name"],
        status,
        namespace=meta["namespace"],
        field_manager="kubelet",
        method="merge",
    )


async def child_unhealthy(p: Pipeline, workload: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | Pending:
        found = await p.kaiwo_job(workload)
        for condition in (found.get("status") or {}).get("conditions") or []:
            if condition["type"] == "ChildHealthy" and condition["status"] == "False":
                return dict(condition)
        return Pending(f"status {found.get('status')}")

    return await eventually(check, what=f"KaiwoJob {workload} with ChildHealthy False")


async def test_a_tenants_crashing_pod_labelled_with_another_namespaces_workload_uid_is_not_its(
    stack: tuple[Pipeline, GpuExporter], real_cluster: RealCluster, tmp_path: Path
) -> None:
    p, _ = stack
    uid, _ = await start_running(p, "train", gpus=4)

    async with tenant_namespace(real_cluster, tmp_path) as (admin, tenant, tenant_ns):
        with pytest.raises(KubeError, match="forbidden"):
            await tenant.create(labelled_pod("intruder", p.namespace, uid))
        decoy = await tenant.create(labelled_pod("decoy", tenant_ns, uid))
        await crash_loop(admin, decoy)
        # The control, observed after the decoy on the same watch: a pod of the KaiwoJob's own
        # namespace in the same trouble is told, and it alone.
        own = await p.kube.create(labelled_pod("train-own", p.namespace, uid))
        await crash_loop(admin, own)

        condition = await child_unhealthy(p, "train")

        assert condition["reason"] == CRASH_LOOP
        assert condition["message"] == f"pod train-own: container main is waiting: {CRASH_LOOP}"
        told = await child_unhealthy_events(p, uid)
        assert [message for message in told if "decoy" in message] == []


async def child_unhealthy_events(p: Pipeline, uid: str) -> list[str]:
    """The messages of the workload's ``ChildUnhealthy`` Warning Events, once there is one
    (the executor writes the Event after the status the same plan carries)."""

    async def check() -> list[str] | Pending:
        events = await p.kube.list(resources.EVENT, namespace=p.namespace)
        told = [
            str(e["message"])
            for e in events.items
            if e["involvedObject"].get("uid") == uid and e.get("reason") == "ChildUnhealthy"
        ]
        return told or Pending("no ChildUnhealthy Event yet")

    return await eventually(check, what="a ChildUnhealthy Event")


async def test_a_tenants_idle_gpu_pods_labelled_with_a_busy_workloads_uid_do_not_end_it(
    stack: tuple[Pipeline, GpuExporter], real_cluster: RealCluster, tmp_path: Path
) -> None:
    """A busy KaiwoJob on 2 GPUs at 95 % and the tenant's pod on 6 idle GPUs: together 23.75 %,
    below the 30 % threshold. A KaiwoJob of the same namespace whose own GPUs idle is the
    control: once it is terminated, the busy one has been judged over the same ticks."""
    p, exporter = stack
    await set_kaiwo_config(
        p,
        {
            "resourceMonitoring": {
                "lowUtilizationThreshold": 30,
                "terminateUnderutilized": True,
                "terminateUnderutilizedAfter": "3s",
            }
        },
    )
    busy_uid, busy_pod = await start_running(p, "busy", gpus=2)
    ns = p.namespace
    exporter.series = [GpuSeries(ns, busy_pod, "0", 95.0), GpuSeries(ns, busy_pod, "1", 95.0)]

    async with tenant_namespace(real_cluster, tmp_path) as (admin, tenant, tenant_ns):
        workload_labels = {"kaiwo.silogen.ai/type": "job", "kaiwo.silogen.ai/name": "busy"}
        decoy = await tenant.create(
            labelled_pod("decoy", tenant_ns, busy_uid, gpus=6, labels=workload_labels)
        )
        await report(admin, decoy, ready=True, restarts=0, state={"running": {}})
        exporter.series += [GpuSeries(tenant_ns, "decoy", str(gpu), 0.0) for gpu in range(6)]

        _, idle_pod = await start_running(p, "idle", gpus=2)
        exporter.series += [GpuSeries(ns, idle_pod, "0", 1.0), GpuSeries(ns, idle_pod, "1", 1.0)]
        await p.reaches("idle", "TERMINATED", within=60.0)

        busy = await p.kaiwo_job("busy")
        assert busy["status"]["status"] == "RUNNING", busy["status"]
        [judged] = [
            c for c in busy["status"]["conditions"] if c["type"] == "ResourceUnderutilization"
        ]
        assert (judged["status"], judged["reason"]) == ("False", "GpuUtilizationNormal")


async def set_kaiwo_config(p: Pipeline, spec: dict[str, Any]) -> None:
    body = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": spec,
    }
    try:
        await p.kube.create(body, field_manager="cluster-admin")
    except AlreadyExists:
        await p.kube.merge_patch(
            resources.KAIWO_CONFIG, "kaiwo", {"spec": spec}, field_manager="cluster-admin"
        )
