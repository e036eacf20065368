"""A GPU pod the metrics endpoint does not report makes its workload's use unknown, never idle
(decision 0173), on the whole real stack: the real API server, kube-scheduler and Job
controller, kwok running the pods on one 8-GPU node, the whole operator with its monitor
reading a GPU exporter's page the test serves.

A plain Job of two pods, 4 GPUs each, opted in to idle preemption (``OnPressure``, threshold
50 %, grace 2 s, aggregation ``Max``): the exporter reports one pod at 1 % and not the other
(as when the other pod's node exporter is gone). Another Job waits for 4 GPUs. The pair must
not be preempted: its unread pod may be the busy one. Once both pods read 1 %, it is idle
and goes for the waiting Job (the rig works). Before the decision, the pair was judged on the
read pod alone, marked ``Idle`` and preempted within seconds.

A gap is no part of an idle stretch: the pair idle, then one pod unread for longer than the
monitor's gap (3 polling intervals and the scrape timeout: 8 s here), then read idle again,
is idle since the reading after the gap, not since before it (it may have worked meanwhile).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import pytest
from kaiwo_kube import resources
from kaiwo_sandbox.fleet import NODE_TYPES, NodeSpec

from tests.integration.monitor.test_waiting_pods_real_stack import (
    ON_PRESSURE,
    STEP,
    job_gone,
    monitored_operator,
    plain_job,
    pod_template,
    pod_where,
    record_of,
    running,
    short_pending_threshold,
)
from tests.integration.pipeline.harness import Pending, Pipeline, eventually
from tests.prometheus_server import GpuExporter, GpuSeries
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow, pytest.mark.timeout(900)]

FLEET: Final = (NodeSpec("unread-mi300x-1", NODE_TYPES["amd-mi300x"]),)
SETTLE_SECONDS: Final = 20.0
"""Monitor ticks every second, grace 2 s: before the fix the pair was gone within 5 s."""


def pair_job(name: str, namespace: str) -> dict[str, Any]:
    """A Job of two pods running at once, 4 AMD GPUs each, opted in to idle preemption."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "annotations": ON_PRESSURE},
        "spec": {
            "backoffLimit": 0,
            "parallelism": 2,
            "completions": 2,
            "template": pod_template(4, {}, "Never"),
        },
    }


@pytest.fixture
async def operator(
    real_stack: RealCluster, tmp_path: Path
) -> AsyncIterator[tuple[Pipeline, GpuExporter]]:
    async with monitored_operator(real_stack, tmp_path, FLEET) as operated:
        yield operated


async def running_pods(pipeline: Pipeline, job: str, count: int) -> list[dict[str, Any]]:
    async def check() -> list[dict[str, Any]] | Pending:
        listed = await pipeline.kube.list(
            resources.POD, namespace=pipeline.namespace, label_selector=f"job-name={job}"
        )
        up = [p for p in listed.items if (p.get("status") or {}).get("phase") == "Running"]
        return (
            sorted(up, key=lambda p: p["metadata"]["name"])
            if len(up) == count
            else Pending(f"{len(up)} running")
        )

    return await eventually(check, what=f"{count} pods of {job} running", within=STEP)


async def test_a_gpu_pod_without_readings_keeps_its_job_from_being_preempted_as_idle(
    operator: tuple[Pipeline, GpuExporter],
) -> None:
    pipeline, exporter = operator
    kube, ns = pipeline.kube, pipeline.namespace
    await short_pending_threshold(kube)
    await kube.create(pair_job("pair", ns))
    read, _unread = await running_pods(pipeline, "pair", 2)
    exporter.series = [GpuSeries(ns, read["metadata"]["name"], str(gpu), 1.0) for gpu in range(4)]

    waits = await kube.create(plain_job("waits", ns, gpus=4))
    await record_of(pipeline, "Job", "waits", phase="PendingGpu")
    await asyncio.sleep(SETTLE_SECONDS)

    record = await record_of(pipeline, "Job", "pair")
    status = record["status"]
    print(f"\nwith one pod unread: {status.get('phase')}: {status.get('verdict')}")
    assert status["phase"] == "Unknown"
    assert status["verdict"] == "No current GPU reading: not judged"
    assert "preemptedFor" not in status
    await kube.get(resources.JOB, "pair", namespace=ns)  # still there, both pods running

    # Both pods read 1 %: the pair is idle, and goes for the waiting Job.
    pods = await running_pods(pipeline, "pair", 2)
    exporter.series = [
        GpuSeries(ns, pod["metadata"]["name"], str(gpu), 1.0) for pod in pods for gpu in range(4)
    ]
    preempted = await record_of(pipeline, "Job", "pair", phase="Preempted")
    assert preempted["status"]["preemptedFor"] == {
        "kind": "Job",
        "namespace": ns,
        "name": "waits",
        "uid": waits["metadata"]["uid"],
    }
    await job_gone(pipeline, "pair")
    await pod_where(pipeline, "job-name=waits", running, what="waits placed at last")


async def test_an_idle_stretch_starts_anew_after_a_pod_went_unread(
    operator: tuple[Pipeline, GpuExporter],
) -> None:
    pipeline, exporter = operator
    kube, ns = pipeline.kube, pipeline.namespace
    await kube.create(pair_job("pair", ns))
    pods = await running_pods(pipeline, "pair", 2)
    both = [
        GpuSeries(ns, pod["metadata"]["name"], str(gpu), 1.0) for pod in pods for gpu in range(4)
    ]
    exporter.series = both
    first = (await record_of(pipeline, "Job", "pair", phase="Idle"))["status"]["idleSince"]

    exporter.series = both[:4]  # the second pod's node exporter gone
    await record_of(pipeline, "Job", "pair", phase="Unknown")
    await asyncio.sleep(12.0)  # longer than the gap of 8 s
    back = datetime.now(UTC)
    exporter.series = both

    again = (await record_of(pipeline, "Job", "pair", phase="Idle"))["status"]
    since = datetime.fromisoformat(again["idleSince"])
    print(f"\nidle since {first}; unread; read again at {back.isoformat()}: idle since {since}")
    assert since >= back - timedelta(seconds=1)
    assert since > datetime.fromisoformat(first) + timedelta(seconds=12)
