"""The feedback loop end to end: a real Prometheus scraping a small exporter of chosen GPU
series, the whole operator with its monitor (``kaiwo up`` with a metrics endpoint) on the real
API server, the tests playing Kueue and the kubelets.

One operator serves the whole scenario, phase after phase (starting it is most of the cost):

1. a KaiwoJob whose GPUs idle gets ``ResourceUnderutilization`` True; busy again, False;
2. with ``terminateUnderutilized`` on, it goes TERMINATING -> TERMINATED after the window, its
   Job is removed, and a condition and a Warning Event say why; a KaiwoJob whose pods the
   endpoint does not know (missing data) is neither flagged nor terminated;
3. GPU idle preemption, policy OnPressure: with a GPU KaiwoJob pending, the idle opted-in
   KaiwoJob is preempted for it (reason naming the beneficiary), the busy one is not, and
   replay reproduces every plan, those the findings drove included.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import pytest
from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_cli.replay.store import replay_from_store
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.public import PreemptionV1
from kaiwo_contracts.events.streams import PUBLIC_STREAM
from kaiwo_kube import AlreadyExists, resources

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, Pipeline, eventually, running_pipeline
from tests.prometheus_server import GpuExporter, GpuSeries, running_prometheus
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow]

MONITOR_ENV: Final = {
    "KAIWO_MONITOR_POLLING_INTERVAL_SECONDS": "1",
}
WITHIN: Final = 30.0
PREEMPTION: Final = "kaiwo.silogen.ai/gpu-preemption."


def gpu_job(name: str, namespace: str, *, gpus: int, annotations: dict[str, str] | None = None):
    job = actors.training_job(name, namespace=namespace, download=False)
    job["spec"]["gpus"] = gpus
    if annotations:
        job["metadata"]["annotations"] = annotations
    return job


async def set_kaiwo_config(pipeline: Pipeline, spec: dict[str, Any]) -> None:
    body = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": spec,
    }
    try:
        await pipeline.kube.create(body, field_manager="cluster-admin")
    except AlreadyExists:
        await pipeline.kube.merge_patch(
            resources.KAIWO_CONFIG, "kaiwo", {"spec": spec}, field_manager="cluster-admin"
        )


async def start_running(pipeline: Pipeline, job: dict[str, Any]) -> str:
    """Create the KaiwoJob, admit its Job, report its pod Running; returns the pod's name."""
    name, ns = job["metadata"]["name"], pipeline.namespace
    await pipeline.kube.create(job)
    child = await pipeline.appears(resources.JOB, name)
    await actors.kueue_admits(pipeline.kube, child)
    await pipeline.jobs.pod_running(name, namespace=ns, ready=True)
    await pipeline.reaches(name, "RUNNING")
    pod = await pipeline.jobs.job_pod(name, namespace=ns)  # type: ignore[attr-defined]
    return str(pod["metadata"]["name"])


async def preemption_decision(pipeline: Pipeline, uid: str) -> PreemptionV1:
    """The public preemption event of the workload ``uid`` (the KAIWO_PUBLIC stream)."""
    jsm = pipeline.nats.jsm()
    info = await jsm.stream_info(PUBLIC_STREAM)
    assert info.state.messages, "no public event at all"
    for sequence in range(info.state.first_seq, info.state.last_seq + 1):
        message = await jsm.get_msg(PUBLIC_STREAM, seq=sequence)
        headers = {key.lower(): value for key, value in (message.headers or {}).items()}
        if headers.get("ce-type") != PreemptionV1.EVENT_TYPE:
            continue
        decision = Envelope[PreemptionV1].from_nats(message.headers, message.data or b"").data
        if decision.victim.uid == uid:
            return decision
    raise AssertionError(f"no preemption event for {uid}")


def condition_of(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next(
        (c for c in (job.get("status") or {}).get("conditions") or () if c.get("type") == kind),
        None,
    )


async def has_condition(pipeline: Pipeline, name: str, kind: str, status: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | Pending:
        found = condition_of(await pipeline.kaiwo_job(name), kind)
        if found is not None and found.get("status") == status:
            return found
        return Pending(f"{kind} is {found}")

    return await eventually(check, what=f"{name}: {kind}={status}", within=WITHIN)


@pytest.fixture
async def loop(
    real_cluster: RealCluster, tmp_path: Path
) -> AsyncIterator[tuple[Pipeline, GpuExporter]]:
    (tmp_path / "prometheus").mkdir()
    async with contextlib.AsyncExitStack() as stack:
        exporter = await stack.enter_async_context(GpuExporter().serving())
        prometheus = await stack.enter_async_context(
            running_prometheus(exporter, tmp_path / "prometheus")
        )
        pipeline = await stack.enter_async_context(
            running_pipeline(
                tmp_path / "stack",
                real=real_cluster,
                service_env=MONITOR_ENV,
                metrics_endpoint=prometheus.url,
            )
        )
        yield pipeline, exporter


async def gpus_rows(real_cluster: RealCluster, namespace: str) -> dict[str, list[str]]:
    """``kaiwo gpus -n``'s rows by workload (its columns split at runs of spaces)."""
    arguments = ["gpus", "-n", namespace, "--kubeconfig", str(real_cluster.kubeconfig)]
    result = await asyncio.to_thread(CliRunner().invoke, app, arguments, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return {line.split()[1]: line.split() for line in result.output.splitlines()[1:]}


async def test_findings_flag_clear_terminate_and_preempt(
    loop: tuple[Pipeline, GpuExporter], real_cluster: RealCluster
) -> None:
    pipeline, exporter = loop
    ns = pipeline.namespace
    await set_kaiwo_config(
        pipeline,
        {
            "resourceMonitoring": {"lowUtilizationThreshold": 10, "terminateUnderutilized": False},
            "scheduling": {"pendingThresholdForPreemption": "1s"},
        },
    )

    # 1. Flagged while idle, cleared when busy again.
    idle_pod = await start_running(pipeline, gpu_job("idle", ns, gpus=2))
    quiet_pod = await start_running(pipeline, gpu_job("quiet", ns, gpus=2))
    exporter.series = [GpuSeries(ns, idle_pod, "0", 2.0), GpuSeries(ns, idle_pod, "1", 4.0)]
    flagged = await has_condition(pipeline, "idle", "ResourceUnderutilization", "True")
    assert flagged["reason"] == "GpuUtilizationLow"
    exporter.series = [GpuSeries(ns, idle_pod, "0", 80.0), GpuSeries(ns, idle_pod, "1", 90.0)]
    cleared = await has_condition(pipeline, "idle", "ResourceUnderutilization", "False")
    assert cleared["reason"] == "GpuUtilizationNormal"

    # 2. Terminated after the window; the pod without data is left alone.
    await set_kaiwo_config(
        pipeline,
        {
            "resourceMonitoring": {
                "lowUtilizationThreshold": 10,
                "terminateUnderutilized": True,
                "terminateUnderutilizedAfter": "3s",
            }
        },
    )
    exporter.series = [GpuSeries(ns, idle_pod, "0", 1.0), GpuSeries(ns, idle_pod, "1", 1.0)]
    terminated = await pipeline.reaches("idle", "TERMINATED", within=WITHIN)
    early = condition_of(terminated, "WorkloadTerminatedEarly")
    assert early is not None
    assert (early["status"], early["reason"]) == ("True", "GpuUtilizationLow")
    assert "terminateUnderutilizedAfter (3s)" in early["message"]

    async def job_gone() -> bool | Pending:
        return True if await pipeline.child(resources.JOB, "idle") is None else Pending("there")

    await eventually(job_gone, what="the Job of idle removed", within=WITHIN)
    events = await pipeline.kube.list(
        resources.EVENT,
        namespace=ns,
        field_selector=f"involvedObject.uid={terminated['metadata']['uid']}",
    )
    assert ("Warning", "GpuUtilizationLow") in {(e["type"], e["reason"]) for e in events.items}
    quiet = await pipeline.kaiwo_job("quiet")
    assert quiet["status"]["status"] == "RUNNING"
    assert condition_of(quiet, "ResourceUnderutilization") is None

    # 3. OnPressure: the idle opted-in job is preempted for the pending one, the busy one not.
    await set_kaiwo_config(
        pipeline,
        {
            "resourceMonitoring": {"terminateUnderutilized": False},
            "scheduling": {"pendingThresholdForPreemption": "1s"},
        },
    )
    opted_in = {f"{PREEMPTION}threshold": "50", f"{PREEMPTION}grace-period": "2s"}
    holder_pod = await start_running(pipeline, gpu_job("holder", ns, gpus=2, annotations=opted_in))
    busy_pod = await start_running(pipeline, gpu_job("busy", ns, gpus=2, annotations=opted_in))
    exporter.series = [
        GpuSeries(ns, holder_pod, "0", 3.0),
        GpuSeries(ns, busy_pod, "0", 95.0),
        GpuSeries(ns, busy_pod, "1", 95.0),  # both requested GPUs busy
    ]
    # Their GpuIdle condition, and kaiwo gpus listing them (decision 0056).
    idle_now = await has_condition(pipeline, "holder", "GpuIdle", "True")
    assert idle_now["message"].startswith("Idle since ")
    assert idle_now["message"].endswith("needs amd GPUs (policy OnPressure)")
    assert (await has_condition(pipeline, "busy", "GpuIdle", "False"))["reason"] == "GpuActive"
    rows = await gpus_rows(real_cluster, ns)
    assert rows["KaiwoJob/holder"][2:5] == ["Idle", "2", "<50%"]
    assert rows["KaiwoJob/busy"][2:5] == ["Active", "2", ">=50%"]
    assert "KaiwoJob/quiet" not in rows  # never opted in

    await pipeline.kube.create(gpu_job("wants", ns, gpus=2))
    await pipeline.reaches("wants", "PENDING")
    preempted = await pipeline.reaches("holder", "TERMINATED", within=WITHIN)
    assert (await gpus_rows(real_cluster, ns))["KaiwoJob/holder"][2] == "Preempted"
    reason = condition_of(preempted, "WorkloadTerminatedEarly")
    assert reason is not None and reason["reason"] == "GpuIdlePreemption"
    assert f"for pending workload KaiwoJob/{ns}/wants" in reason["message"]
    wants = await pipeline.kaiwo_job("wants")
    beneficiary = {
        "kind": "KaiwoJob",
        "namespace": ns,
        "name": "wants",
        "uid": wants["metadata"]["uid"],
    }
    assert preempted["status"]["preemptedFor"] == beneficiary  # stored by the real API server
    decision = await preemption_decision(pipeline, preempted["metadata"]["uid"])
    assert decision.victim.name == "holder"
    assert decision.beneficiary is not None
    assert decision.beneficiary.model_dump() == beneficiary
    assert decision.reason == "GpuIdlePreemption"
    busy = await pipeline.kaiwo_job("busy")
    assert busy["status"]["status"] == "RUNNING", busy["status"]
    assert (await pipeline.kaiwo_job("quiet"))["status"]["status"] == "RUNNING"
    del quiet_pod

    # Replay reproduces every recorded plan, those driven by findings included.
    await pipeline.settled()
    async with pipeline.store() as store:
        report = await replay_from_store(store)
    driven = [p for p in report.plans if p.trigger == "finding"]
    assert driven, "no plan was made on a finding"
    assert report.differ == 0, [p.diff for p in report.plans if p.outcome == "differs"][:1]
