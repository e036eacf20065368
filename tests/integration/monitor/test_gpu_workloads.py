"""GPU idle preemption of workloads no Kaiwo kind owns (decision 0047), end to end on the real
API server: the whole operator (``kaiwo up``) with its monitor reading a GPU exporter's page,
the real Job, Deployment, ReplicaSet and garbage-collector controllers making and removing
pods, the test playing the kubelets and the exporter.

One operator serves the scenario:

1. discovery: an opted-in plain Job, a Deployment in an opted-in namespace and a bare Pod each
   get their GpuWorkload (the watcher sees only their roots); a busy opted-in Job is tracked
   Active; an idle GPU Job nobody opted in gets no record and is never touched;
2. preemption, policy Always: the idle Job is deleted (its pods with it), the idle Deployment
   scaled to zero and kept; policy OnPressure: the idle bare Pod is deleted for a KaiwoJob
   that waits for GPUs, its record naming it;
3. ``kaiwo gpus`` lists every record with its phase, utilization, policy and verdict;
4. replay reproduces every recorded plan, the records' included.

A second operator shows that tracked workloads waiting for GPUs are pressure (decision 0056):
a plain Job Kueue does not admit for GPUs and a bare Pod the scheduler cannot place for GPUs
each get an idle OnPressure Job preempted for them, their records saying ``PendingGpu``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import pytest
from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_cli.replay.store import replay_from_store
from kaiwo_kube import AlreadyExists, NotFound, resources

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, Pipeline, eventually, running_pipeline
from tests.prometheus_server import GpuExporter, GpuSeries
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow, pytest.mark.timeout(300)]

MONITOR_ENV: Final = {"KAIWO_MONITOR_POLLING_INTERVAL_SECONDS": "1"}
WITHIN: Final = 45.0
CRON_JOB: Final = resources.ResourceType(
    group="batch", version="v1", plural="cronjobs", kind="CronJob", namespaced=True
)
OPT_IN: Final = "kaiwo.silogen.ai/gpu-preemption."
ALWAYS: Final = {f"{OPT_IN}policy": "Always", f"{OPT_IN}grace-period": "2s"}
ON_PRESSURE: Final = {f"{OPT_IN}policy": "OnPressure", f"{OPT_IN}grace-period": "2s"}


def gpu_pod_spec(gpus: int) -> dict[str, Any]:
    resources_ = {"limits": {"amd.com/gpu": str(gpus)}}
    return {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox", "resources": resources_}],
    }


def plain_job(name: str, namespace: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {"backoffLimit": 0, "template": {"spec": gpu_pod_spec(2)}},
    }


def deployment(name: str, namespace: str) -> dict[str, Any]:
    labels = {"app": name}
    spec = {**gpu_pod_spec(1), "restartPolicy": "Always"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def bare_pod(name: str, namespace: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": gpu_pod_spec(2),
    }


def waiting_kaiwo_job(name: str, namespace: str) -> dict[str, Any]:
    job = actors.training_job(name, namespace=namespace, download=False)
    job["spec"]["gpus"] = 2
    return job


async def report_running(kube: Any, pod: dict[str, Any]) -> None:
    """The kubelet's word: the pod runs (no kubelet and no scheduler here)."""
    metadata = pod["metadata"]
    status = {
        "phase": "Running",
        "startTime": actors.now(),
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": actors.now()}],
    }
    await kube.patch_status(
        resources.POD,
        metadata["name"],
        status,
        namespace=metadata["namespace"],
        field_manager="kubelet",
        method="merge",
    )


async def pods_with(pipeline: Pipeline, namespace: str, selector: str) -> list[dict[str, Any]]:
    async def check() -> list[dict[str, Any]] | Pending:
        found = await pipeline.kube.list(
            resources.POD, namespace=namespace, label_selector=selector
        )
        alive = [p for p in found.items if "deletionTimestamp" not in p["metadata"]]
        return alive or Pending(f"no pod with {selector}")

    return await eventually(check, what=f"pods with {selector}", within=WITHIN)


async def running_pod_of(pipeline: Pipeline, namespace: str, selector: str) -> str:
    [pod] = await pods_with(pipeline, namespace, selector)
    await report_running(pipeline.kube, pod)
    return str(pod["metadata"]["name"])


async def record_of(
    pipeline: Pipeline, namespace: str, kind: str, name: str, *, phase: str | None = None
) -> dict[str, Any]:
    """The GpuWorkload of ``kind``/``name``, once it exists (in ``phase``, when given)."""

    async def check() -> dict[str, Any] | Pending:
        listed = await pipeline.kube.list(resources.GPU_WORKLOAD, namespace=namespace)
        for item in listed.items:
            ref = item["spec"]["workloadRef"]
            if (ref["kind"], ref["name"]) == (kind, name):
                found = (item.get("status") or {}).get("phase")
                if phase is None or found == phase:
                    return item
                return Pending(f"phase {found}")
        return Pending("no GpuWorkload")

    return await eventually(check, what=f"GpuWorkload of {kind} {name} {phase}", within=WITHIN)


async def gone(pipeline: Pipeline, resource: resources.ResourceType, name: str, ns: str) -> None:
    async def check() -> bool | Pending:
        try:
            await pipeline.kube.get(resource, name, namespace=ns)
        except NotFound:
            return True
        return Pending("still there")

    await eventually(check, what=f"{resource.kind} {name} deleted", within=WITHIN)


@pytest.fixture
async def operator(
    real_cluster: RealCluster, tmp_path: Path
) -> AsyncIterator[tuple[Pipeline, GpuExporter]]:
    async with contextlib.AsyncExitStack() as stack:
        exporter = await stack.enter_async_context(GpuExporter().serving())
        pipeline = await stack.enter_async_context(
            running_pipeline(
                tmp_path / "stack",
                real=real_cluster,
                service_env=MONITOR_ENV,
                metrics_endpoint=f"http://{exporter.target}/metrics",
            )
        )
        yield pipeline, exporter


async def short_pending_threshold(kube: Any) -> None:
    """The KaiwoConfig: a workload waiting 1 s is pressure (the default is minutes)."""
    try:
        await kube.create(
            {
                "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
                "kind": "KaiwoConfig",
                "metadata": {"name": "kaiwo"},
                "spec": {"scheduling": {"pendingThresholdForPreemption": "1s"}},
            },
            field_manager="cluster-admin",
        )
    except AlreadyExists:
        await kube.merge_patch(
            resources.KAIWO_CONFIG,
            "kaiwo",
            {"spec": {"scheduling": {"pendingThresholdForPreemption": "1s"}}},
            field_manager="cluster-admin",
        )


async def test_plain_jobs_deployments_and_bare_pods_are_tracked_and_preempted(
    operator: tuple[Pipeline, GpuExporter], real_cluster: RealCluster
) -> None:
    pipeline, exporter = operator
    kube, ns = pipeline.kube, pipeline.namespace
    team = f"{ns}-team"  # opted in as a whole, by its annotations
    await actors.create_namespace(kube, team)
    await kube.merge_patch(
        resources.NAMESPACE,
        team,
        {"metadata": {"annotations": {**ALWAYS, f"{OPT_IN}threshold": "10"}}},
        field_manager="cluster-admin",
    )
    await short_pending_threshold(kube)

    # Busy and idle GPU workloads of every kind, all reported by the exporter.
    await kube.create(plain_job("busy", ns, {**ALWAYS, f"{OPT_IN}threshold": "50"}))
    await kube.create(plain_job("idle-job", ns, {**ALWAYS, f"{OPT_IN}threshold": "50"}))
    await kube.create(plain_job("nobodys", ns, {}))
    await kube.create(deployment("idle-deploy", team))
    await kube.create(bare_pod("idle-pod", ns, {**ON_PRESSURE, f"{OPT_IN}threshold": "50"}))
    busy = await running_pod_of(pipeline, ns, "job-name=busy")
    idle_job = await running_pod_of(pipeline, ns, "job-name=idle-job")
    nobodys = await running_pod_of(pipeline, ns, "job-name=nobodys")
    idle_deploy = await running_pod_of(pipeline, team, "app=idle-deploy")
    await report_running(kube, await kube.get(resources.POD, "idle-pod", namespace=ns))
    busy_series = [GpuSeries(ns, busy, "0", 90.0), GpuSeries(ns, busy, "1", 95.0)]
    idle_series = [
        GpuSeries(ns, idle_job, "0", 1.0),
        GpuSeries(ns, nobodys, "0", 0.0),
        GpuSeries(team, idle_deploy, "0", 2.0),
        GpuSeries(ns, "idle-pod", "0", 3.0),
    ]
    exporter.series = busy_series

    # 1. Discovery: each opted-in root gets its record; the busy one is Active.
    active = await record_of(pipeline, ns, "Job", "busy", phase="Active")
    assert active["status"]["utilization"] == 93  # its pod: the mean of 90 % and 95 %
    assert (active["status"]["gpus"], active["status"]["policy"]) == (2, "Always")
    for kind, name, where in (
        ("Job", "idle-job", ns),
        ("Deployment", "idle-deploy", team),
        ("Pod", "idle-pod", ns),
    ):
        await record_of(pipeline, where, kind, name)

    # 2. Idle: Always preempts after its grace, OnPressure only for a waiting workload.
    exporter.series = busy_series + idle_series
    job_record = await record_of(pipeline, ns, "Job", "idle-job", phase="Preempted")
    assert "policy Always" in job_record["status"]["preemptionReason"]
    await gone(pipeline, resources.JOB, "idle-job", ns)
    deploy_record = await record_of(pipeline, team, "Deployment", "idle-deploy", phase="Preempted")
    assert deploy_record["status"]["threshold"] == 10.0  # the namespace's annotation
    kept = await kube.get(resources.DEPLOYMENT, "idle-deploy", namespace=team)
    assert kept["spec"]["replicas"] == 0
    pod_record = await record_of(pipeline, ns, "Pod", "idle-pod", phase="Idle")
    assert "policy OnPressure" in pod_record["status"]["verdict"]

    await kube.create(waiting_kaiwo_job("wants", ns))
    await pipeline.reaches("wants", "PENDING")
    pod_record = await record_of(pipeline, ns, "Pod", "idle-pod", phase="Preempted")
    wants = await pipeline.kaiwo_job("wants")
    assert pod_record["status"]["preemptedFor"] == {
        "kind": "KaiwoJob",
        "namespace": ns,
        "name": "wants",
        "uid": wants["metadata"]["uid"],
    }
    await gone(pipeline, resources.POD, "idle-pod", ns)

    # Nobody opted the idle Job in: no record, and it still runs.
    listed = await kube.list(resources.GPU_WORKLOAD, namespace=ns)
    assert "nobodys" not in {item["spec"]["workloadRef"]["name"] for item in listed.items}
    assert await kube.get(resources.JOB, "nobodys", namespace=ns)
    assert (await record_of(pipeline, ns, "Job", "busy"))["status"]["phase"] == "Active"
    events = await kube.list(
        resources.EVENT,
        namespace=ns,
        field_selector=f"involvedObject.uid={job_record['metadata']['uid']}",
    )
    assert {"GpuIdlePreemption", "WorkloadPreempted"} <= {e["reason"] for e in events.items}

    # 3. The tracked set, as a platform team lists it.
    arguments = ["gpus", "-A", "--kubeconfig", str(real_cluster.kubeconfig)]
    result = await asyncio.to_thread(CliRunner().invoke, app, arguments, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:6] == ["NAMESPACE", "WORKLOAD", "PHASE", "GPUS", "UTIL", "IDLE"]
    rows = {line.split()[1]: line.split() for line in lines[1:]}
    assert rows["Job/busy"][2:4] == ["Active", "2"]
    assert rows["Job/idle-job"][2] == "Preempted"
    assert rows["Deployment/idle-deploy"][0] == team
    assert rows["Pod/idle-pod"][2] == "Preempted"

    # 4. Replay reproduces every plan, the records' too.
    await pipeline.settled(within=WITHIN)
    async with pipeline.store() as store:
        report = await replay_from_store(store)
    records = [p for p in report.plans if "GpuWorkload" in p.owner]
    assert records, "no GpuWorkload plan was recorded"
    assert report.differ == 0, [p.diff for p in report.plans if p.outcome == "differs"][:1]


QUOTA_FOR_GPUS: Final = (
    "couldn't assign flavors to pod set main: insufficient unused quota for amd.com/gpu in "
    "flavor mi300x, 2 more needed"
)


async def kueue_refuses_for_gpus(kube: Any, job: dict[str, Any]) -> str:
    """Kueue's word (no Kueue manager here): the Job's Workload, its quota not reserved."""
    metadata = job["metadata"]
    name, namespace, uid = metadata["name"], metadata["namespace"], metadata["uid"]
    await kube.create(
        {
            "apiVersion": resources.KUEUE_WORKLOAD.api_version,
            "kind": "Workload",
            "metadata": {
                "name": f"job-{name}-{uid[:5]}",
                "namespace": namespace,
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": name,
                        "uid": uid,
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "queueName": "gpus",
                "podSets": [{"name": "main", "count": 1, "template": job["spec"]["template"]}],
            },
        },
        field_manager="kueue",
    )
    condition = {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "Pending",
        "message": QUOTA_FOR_GPUS,
        "lastTransitionTime": actors.now(),
    }
    await kube.patch_status(
        resources.KUEUE_WORKLOAD,
        f"job-{name}-{uid[:5]}",
        {"conditions": [condition]},
        namespace=namespace,
        field_manager="kueue",
        method="merge",
    )
    return f"job-{name}-{uid[:5]}"


async def kueue_admits(kube: Any, workload: str, namespace: str) -> None:
    """Kueue's word: quota reserved and admitted."""
    conditions = [
        {
            "type": kind,
            "status": "True",
            "reason": kind,
            "message": kind,
            "lastTransitionTime": actors.now(),
        }
        for kind in ("QuotaReserved", "Admitted")
    ]
    await kube.patch_status(
        resources.KUEUE_WORKLOAD,
        workload,
        {
            "admission": {
                "clusterQueue": "gpus",
                "podSetAssignments": [{"name": "main", "count": 1}],
            },
            "conditions": conditions,
        },
        namespace=namespace,
        field_manager="kueue",
        method="merge",
    )


async def scheduler_cannot_place(kube: Any, namespace: str, name: str) -> None:
    """The kube-scheduler's word (none runs here): no node has the GPUs."""
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/3 nodes are available: 3 Insufficient amd.com/gpu.",
        "lastTransitionTime": actors.now(),
    }
    await kube.patch_status(
        resources.POD,
        name,
        {"phase": "Pending", "conditions": [condition]},
        namespace=namespace,
        field_manager="kube-scheduler",
        method="merge",
    )


async def test_tracked_workloads_waiting_for_gpus_are_pressure_for_on_pressure(
    operator: tuple[Pipeline, GpuExporter],
) -> None:
    pipeline, exporter = operator
    kube, ns = pipeline.kube, pipeline.namespace
    await short_pending_threshold(kube)
    idle_on_pressure = {**ON_PRESSURE, f"{OPT_IN}threshold": "50"}
    await kube.create(plain_job("idle-a", ns, idle_on_pressure))
    await kube.create(plain_job("idle-b", ns, idle_on_pressure))
    idle_a = await running_pod_of(pipeline, ns, "job-name=idle-a")
    idle_b = await running_pod_of(pipeline, ns, "job-name=idle-b")
    # idle-b is busy (both its GPUs) until the queued Job is admitted.
    busy_b = [GpuSeries(ns, idle_b, "0", 90.0), GpuSeries(ns, idle_b, "1", 90.0)]
    exporter.series = [GpuSeries(ns, idle_a, "0", 1.0), *busy_b]
    await record_of(pipeline, ns, "Job", "idle-a", phase="Idle")
    await record_of(pipeline, ns, "Job", "idle-b", phase="Active")

    # A plain Job, suspended as Kueue's webhook leaves it, opted in: tracked, not waiting yet.
    queued = plain_job("queued", ns, ON_PRESSURE)
    queued["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "gpus"}
    queued["spec"]["suspend"] = True
    queued = await kube.create(queued)
    await record_of(pipeline, ns, "Job", "queued", phase="Unknown")
    await pipeline.settled(within=WITHIN)
    assert (await record_of(pipeline, ns, "Job", "idle-a"))["status"]["phase"] == "Idle"

    # Kueue does not admit it for GPUs: it waits, and the idle Job goes for it.
    workload = await kueue_refuses_for_gpus(kube, queued)
    waiting = await record_of(pipeline, ns, "Job", "queued", phase="PendingGpu")
    assert waiting["status"]["verdict"].startswith("Waiting for 2 amd GPUs since ")
    first = await record_of(pipeline, ns, "Job", "idle-a", phase="Preempted")
    assert first["status"]["preemptedFor"] == {
        "kind": "Job",
        "namespace": ns,
        "name": "queued",
        "uid": queued["metadata"]["uid"],
    }
    await gone(pipeline, resources.JOB, "idle-a", ns)
    await kueue_admits(kube, workload, ns)  # the freed quota: the queued Job no longer waits
    await record_of(pipeline, ns, "Job", "queued", phase="Unknown")
    exporter.series = [GpuSeries(ns, idle_b, "0", 2.0)]
    await record_of(pipeline, ns, "Job", "idle-b", phase="Idle")
    await pipeline.settled(within=WITHIN)
    assert (await record_of(pipeline, ns, "Job", "idle-b"))["status"]["phase"] == "Idle"

    # A bare Pod the scheduler cannot place for GPUs: the other idle Job goes for it.
    await kube.create(bare_pod("notebook", ns, ON_PRESSURE))
    await scheduler_cannot_place(kube, ns, "notebook")
    await record_of(pipeline, ns, "Pod", "notebook", phase="PendingGpu")
    second = await record_of(pipeline, ns, "Job", "idle-b", phase="Preempted")
    assert second["status"]["preemptedFor"]["name"] == "notebook"
    assert "for pending workload Pod/" in second["status"]["preemptionReason"]
    await gone(pipeline, resources.JOB, "idle-b", ns)


async def test_a_cronjobs_run_is_tracked_and_preempted_and_the_cronjob_stays(
    operator: tuple[Pipeline, GpuExporter],
) -> None:
    """Decision 0056: the real CronJob controller makes a run for the minute it missed; the run
    carries the job template's opt-in, is tracked as a Job of its own and, idle under Always,
    deleted. The CronJob, its schedule and its template stay."""
    pipeline, exporter = operator
    kube, ns = pipeline.kube, pipeline.namespace
    template = plain_job("unused", ns, {**ALWAYS, f"{OPT_IN}threshold": "50"})
    cron = await kube.create(
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "nightly", "namespace": ns},
            "spec": {
                "schedule": "* * * * *",
                "concurrencyPolicy": "Forbid",
                "jobTemplate": {
                    "metadata": {"annotations": template["metadata"]["annotations"]},
                    "spec": template["spec"],
                },
            },
        }
    )

    async def first_run() -> str | Pending:
        jobs = await kube.list(resources.JOB, namespace=ns)
        for job in jobs.items:
            owners = job["metadata"].get("ownerReferences") or []
            if any(o["uid"] == cron["metadata"]["uid"] for o in owners):
                return str(job["metadata"]["name"])
        return Pending("the CronJob has not run yet")

    # The controller runs a CronJob at the schedule times it has missed since its last run. A
    # last run two minutes back has it run now, not at the next minute's start.
    await kube.patch_status(
        CRON_JOB,
        "nightly",
        {"lastScheduleTime": f"{datetime.now(UTC) - timedelta(minutes=2):%Y-%m-%dT%H:%M:%SZ}"},
        namespace=ns,
        field_manager="cluster-admin",
        method="merge",
    )
    run = await eventually(first_run, what="the CronJob's first run", within=120.0)
    pod = await running_pod_of(pipeline, ns, f"job-name={run}")
    exporter.series = [GpuSeries(ns, pod, "0", 1.0)]

    record = await record_of(pipeline, ns, "Job", run, phase="Preempted")
    assert "policy Always" in record["status"]["preemptionReason"]
    await gone(pipeline, resources.JOB, run, ns)
    kept = await kube.get(CRON_JOB, "nightly", namespace=ns)
    assert kept["metadata"]["uid"] == cron["metadata"]["uid"]
    assert kept["spec"]["jobTemplate"] == cron["spec"]["jobTemplate"]
    listed = await kube.list(resources.GPU_WORKLOAD, namespace=ns)
    assert "CronJob" not in {item["spec"]["workloadRef"]["kind"] for item in listed.items}
