"""The simulated kubelet, scheduler and Job/Deployment controllers' decisions (expected
values by hand)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from kaiwo_sandbox.controller_status import deployment_status, job_status
from kaiwo_sandbox.durations import duration_seconds
from kaiwo_sandbox.fleet import DEFAULT_FLEET, parse_fleet
from kaiwo_sandbox.lifecycle import RunPlan, Timing, pod_step, run_plan
from kaiwo_sandbox.quantities import quantity, templates_requests
from kaiwo_sandbox.scheduling import NodeRoom, Placement, place

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
TIMING = Timing(start_seconds=2, run_seconds=20, download_seconds=3)


def pod(
    *,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    restart: str = "Never",
    node: str | None = "amd-mi300x-1",
    phase: str | None = None,
    started: datetime | None = None,
    gpus: int = 0,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": restart,
        "containers": [{"name": "workload", "resources": {"requests": {"amd.com/gpu": str(gpus)}}}],
    }
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if started:
        status["startTime"] = started.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {
            "name": "p",
            "namespace": "ml-team",
            "creationTimestamp": "2026-01-01T12:00:00Z",
            "annotations": annotations or {},
            "labels": labels or {},
        },
        "spec": spec,
        "status": status,
    }


def test_default_fleet_is_two_amd_two_nvidia_one_cpu_node() -> None:
    assert [n.name for n in DEFAULT_FLEET] == [
        "amd-mi300x-1",
        "amd-mi300x-2",
        "nvidia-h100-1",
        "nvidia-h100-2",
        "cpu-1",
    ]
    amd, nvidia, cpu = DEFAULT_FLEET[0], DEFAULT_FLEET[2], DEFAULT_FLEET[4]
    assert amd.labels()["amd.com/gpu.product-name"] == "AMD_Instinct_MI300X_OAM"
    assert amd.labels()["beta.amd.com/gpu.family.AI"] == "8"
    assert amd.capacity()["amd.com/gpu"] == "8"
    assert nvidia.labels()["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert nvidia.labels()["nvidia.com/gpu.count"] == "8"
    assert nvidia.capacity()["nvidia.com/gpu"] == "8"
    assert "amd.com/gpu" not in cpu.capacity() and "nvidia.com/gpu" not in cpu.capacity()


def test_fleet_errors_name_the_part() -> None:
    assert [n.name for n in parse_fleet("nvidia-a100=1, cpu=2")] == [
        "nvidia-a100-1",
        "cpu-1",
        "cpu-2",
    ]
    with pytest.raises(ValueError, match="unknown node type 'tpu'"):
        parse_fleet("tpu=2")
    with pytest.raises(ValueError, match="'cpu=two' is not a whole number"):
        parse_fleet("cpu=two")


def test_run_time_annotation_then_download_then_default_cut_by_duration() -> None:
    assert run_plan(
        pod(annotations={"sandbox.kaiwo.silogen.ai/run-seconds": "7"}), timing=TIMING
    ) == RunPlan(7.0)
    assert run_plan(pod(labels={"kaiwo.silogen.ai/type": "downloader"}), timing=TIMING) == RunPlan(
        3.0
    )
    assert run_plan(pod(), timing=TIMING) == RunPlan(20.0)
    assert run_plan(pod(), timing=TIMING, duration_seconds=5) == RunPlan(5.0)
    assert run_plan(pod(restart="Always"), timing=TIMING).seconds == math.inf
    failing = pod(annotations={"sandbox.kaiwo.silogen.ai/fail": "out of memory"})
    assert run_plan(failing, timing=TIMING) == RunPlan(20.0, "out of memory")


def test_a_bound_pod_starts_after_the_start_delay_and_ends_after_its_run_time() -> None:
    fresh = pod()
    assert pod_step(fresh, RunPlan(10), timing=TIMING, now=T0 + timedelta(seconds=1)) is None
    assert pod_step(fresh, RunPlan(10), timing=TIMING, now=T0 + timedelta(seconds=2)) == "start"
    running = pod(phase="Running", started=T0 + timedelta(seconds=2))
    assert pod_step(running, RunPlan(10), timing=TIMING, now=T0 + timedelta(seconds=11)) is None
    assert (
        pod_step(running, RunPlan(10), timing=TIMING, now=T0 + timedelta(seconds=12)) == "succeed"
    )
    assert (
        pod_step(running, RunPlan(10, "boom"), timing=TIMING, now=T0 + timedelta(seconds=12))
        == "fail"
    )
    assert pod_step(pod(node=None), RunPlan(1), timing=TIMING, now=T0 + timedelta(hours=1)) is None


def test_scale_shortens_every_delay() -> None:
    fast = Timing(start_seconds=2, scale=0.5)
    assert pod_step(pod(), RunPlan(10), timing=fast, now=T0 + timedelta(seconds=1)) == "start"


def test_placement_takes_the_first_node_with_room_and_the_lowest_free_gpus() -> None:
    nodes = [
        NodeRoom("amd-1", {"amd.com/gpu": Decimal(8)}, "amd.com/gpu", 8),
        NodeRoom("amd-2", {"amd.com/gpu": Decimal(8)}, "amd.com/gpu", 8),
    ]
    holding = pod(node="amd-1", gpus=6, phase="Running")
    holding["metadata"]["annotations"]["sandbox.kaiwo.silogen.ai/gpu-ids"] = "0,1,2,3,4,5"
    assert place({"amd.com/gpu": Decimal(2)}, nodes=nodes, pods=[holding]) == Placement(
        "amd-1", (6, 7)
    )
    assert place({"amd.com/gpu": Decimal(4)}, nodes=nodes, pods=[holding]) == Placement(
        "amd-2", (0, 1, 2, 3)
    )
    assert place({"amd.com/gpu": Decimal(9)}, nodes=nodes, pods=[holding]) is None
    finished = {**holding, "status": {"phase": "Succeeded"}}
    assert place({"amd.com/gpu": Decimal(8)}, nodes=nodes, pods=[finished]) == Placement(
        "amd-1", (0, 1, 2, 3, 4, 5, 6, 7)
    )


def test_job_status_follows_its_pods() -> None:
    job = {"spec": {"parallelism": 1, "backoffLimit": 0}, "status": {}}
    running = pod(phase="Running")
    running["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    status = job_status(job, [running], now=T0)
    assert (status["active"], status["ready"], status["succeeded"]) == (1, 1, 0)
    assert "conditions" not in status
    done = job_status(job, [pod(phase="Succeeded")], now=T0)
    assert [c["type"] for c in done["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    failed_pod = pod(phase="Failed")
    failed_pod["status"]["containerStatuses"] = [
        {"name": "workload", "state": {"terminated": {"exitCode": 1, "message": "no data"}}}
    ]
    failed = job_status(job, [failed_pod], now=T0)
    assert failed["conditions"] == [
        {
            "type": "Failed",
            "status": "True",
            "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit",
            "lastTransitionTime": "2026-01-01T12:00:00Z",
        }
    ]


def test_deployment_is_available_once_its_pods_are_ready() -> None:
    deployment = {"metadata": {"generation": 3}, "spec": {"replicas": 2}}
    half = deployment_status(deployment, 1, now=T0)
    assert (half["observedGeneration"], half["readyReplicas"], half["availableReplicas"]) == (
        3,
        1,
        1,
    )
    assert half["conditions"][0]["status"] == "False"
    full = deployment_status(deployment, 2, now=T0)
    assert full["availableReplicas"] == 2 and full["conditions"][0]["status"] == "True"


def test_requests_of_a_job_and_a_ray_job() -> None:
    job_spec = {
        "parallelism": 2,
        "template": {
            "spec": {
                "containers": [{"resources": {"requests": {"amd.com/gpu": "4", "memory": "1Gi"}}}]
            }
        },
    }
    assert templates_requests(job_spec) == {"amd.com/gpu": Decimal(8), "memory": Decimal(2 * 2**30)}
    worker = {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 2}}}]}}
    ray_spec = {
        "rayClusterSpec": {
            "headGroupSpec": {
                "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "500m"}}}]}}
            },
            "workerGroupSpecs": [{"replicas": 3, "template": worker}],
        }
    }
    assert templates_requests(ray_spec) == {"cpu": Decimal("0.5"), "nvidia.com/gpu": Decimal(6)}


def test_quantities_and_durations() -> None:
    assert quantity("1536Gi") == Decimal(1536 * 2**30)
    assert quantity("250m") == Decimal("0.25")
    assert quantity(16) == Decimal(16)
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        quantity("lots")
    assert duration_seconds("12h") == 43200
    assert duration_seconds("1h30m") == 5400
    assert duration_seconds("90s") == 90
    assert duration_seconds("soon") is None
