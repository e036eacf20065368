"""``GpuIdle`` of a KaiwoJob or KaiwoService that ends (decision 0242).

Decision 0228 withdrew the condition from a workload that opts out or stops running, but the
plan that writes a final phase still judged the last reading, and nothing was written after
it: a completed, failed or preempted workload kept ``GpuIdle`` True ("... preempted when a
pending workload needs amd GPUs") for good, and ``kaiwo gpus`` and the console flagged it
idle. Now the write of the final phase withdraws it (False, ``NotRunning``), and a settled
workload gets the same status again (no write).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from kaiwo_planner.domain.state.cluster import ClusterState

from tests.planning_calls import planned
from tests.unit.planner.test_planning import (
    NOW,
    RUNNING_STATUS,
    TRAIN_SPEC,
    admitted,
    finding,
    kaiwo_job,
    kaiwo_service,
    opted_in,
    queue_config,
    running_job,
    with_findings,
)

LATER = NOW + timedelta(minutes=5)
IDLE = finding(at=LATER, idle_since=NOW - timedelta(minutes=3))
NOT_RUNNING = {
    "type": "GpuIdle",
    "status": "False",
    "observedGeneration": 1,
    "lastTransitionTime": "2026-01-01T12:05:00Z",
    "reason": "NotRunning",
    "message": "Not running: GPU idleness is judged only while the workload runs",
}


@pytest.fixture
def cluster_of(make_node: Callable[..., dict[str, Any]]) -> Callable[..., ClusterState]:
    def build(*objects: dict[str, Any]) -> ClusterState:
        cluster = ClusterState.from_wire(
            nodes=[make_node("mi300x-0", gpu="mi300x"), make_node("mi300x-1", gpu="mi300x")],
            objects=[queue_config({"name": "kaiwo"}), *objects],
            kueue_workloads=(admitted("job-uid-job"),),
            namespaces=["team-a"],
        )
        return with_findings(cluster, IDLE)

    return build


def status_of(owner: dict[str, Any], cluster: ClusterState) -> dict[str, Any]:
    plan = planned(owner=owner, cluster=cluster, now=LATER)
    assert plan is not None and plan.status is not None
    return plan.status


def gpu_idle(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "GpuIdle")


def idle_job(cluster_of: Callable[..., ClusterState]) -> dict[str, Any]:
    """An opted-in KaiwoJob running with ``GpuIdle`` True, as the planner wrote it."""
    owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS))
    status = status_of(owner, cluster_of(owner, running_job(owner)))
    assert (gpu_idle(status)["status"], gpu_idle(status)["reason"]) == ("True", "GpuIdle")
    return opted_in(kaiwo_job(TRAIN_SPEC, status=status))


def finished(job: dict[str, Any], condition: str) -> dict[str, Any]:
    return {**job, "status": {"conditions": [{"type": condition, "status": "True"}]}}


@pytest.mark.parametrize(
    ("job_condition", "phase"), [("Complete", "COMPLETE"), ("Failed", "FAILED")]
)
def test_a_job_that_ends_while_idle_has_gpu_idle_withdrawn_in_the_same_write(
    cluster_of: Callable[..., ClusterState], job_condition: str, phase: str
) -> None:
    owner = idle_job(cluster_of)
    child = finished(running_job(owner), job_condition)

    ended = status_of(owner, cluster_of(owner, child))

    assert ended["status"] == phase
    assert gpu_idle(ended) == NOT_RUNNING
    # Settled: the next plan, with a reading still claiming idleness, writes the same status.
    settled = opted_in(kaiwo_job(TRAIN_SPEC, status=ended))
    assert status_of(settled, cluster_of(settled, child)) == ended


def test_a_workload_preempted_for_idleness_keeps_why_until_terminated_then_withdraws_it(
    cluster_of: Callable[..., ClusterState],
) -> None:
    """TERMINATING still says it is idle (what led to the preemption); the TERMINATED write
    withdraws it, and the WorkloadTerminatedEarly condition keeps the reason."""
    owner = idle_job(cluster_of)
    terminating = {
        **owner["status"],
        "status": "TERMINATING",
        "conditions": [
            *owner["status"]["conditions"],
            {
                "type": "WorkloadTerminatedEarly",
                "status": "False",
                "observedGeneration": 1,
                "lastTransitionTime": "2026-01-01T12:00:00Z",
                "reason": "GpuIdlePreemption",
                "message": "preempted: GPU idle since 2026-01-01T11:57:00Z",
            },
        ],
    }
    stopping = opted_in(kaiwo_job(TRAIN_SPEC, status=terminating))

    ended = status_of(stopping, cluster_of(stopping))

    assert ended["status"] == "TERMINATED"
    assert gpu_idle(ended) == NOT_RUNNING
    early = next(c for c in ended["conditions"] if c["type"] == "WorkloadTerminatedEarly")
    assert (early["status"], early["reason"]) == ("True", "GpuIdlePreemption")
    settled = opted_in(kaiwo_job(TRAIN_SPEC, status=ended))
    assert status_of(settled, cluster_of(settled)) == ended


def test_a_service_that_ended_before_the_fix_has_gpu_idle_withdrawn_once(
    cluster_of: Callable[..., ClusterState],
) -> None:
    """A workload that ended under an earlier version still shows ``GpuIdle`` True: its next
    plan withdraws it (one write), and only observedGeneration moves after that."""
    busy_at_the_end = {
        "type": "GpuIdle",
        "status": "False",
        "observedGeneration": 1,
        "lastTransitionTime": "2026-01-01T11:00:00Z",
        "reason": "GpuActive",
        "message": "Busy: at or above the idle threshold of 5% (policy OnPressure, "
        "grace period 10m0s)",
    }
    # lastTransitionTime moves only where the status turns (True to False).
    idle_at_the_end = {**busy_at_the_end, "status": "True", "reason": "GpuIdle"}
    for left, turned in ((busy_at_the_end, "2026-01-01T11:00:00Z"), (idle_at_the_end, None)):
        terminated = {
            "status": "TERMINATED",
            "startTime": "2026-01-01T09:00:00Z",
            "observedGeneration": 1,
            "conditions": [left],
        }
        owner = opted_in(kaiwo_service(TRAIN_SPEC, status=terminated))

        withdrawn = status_of(owner, cluster_of(owner))

        expected = {
            **NOT_RUNNING,
            "lastTransitionTime": turned or NOT_RUNNING["lastTransitionTime"],
        }
        assert withdrawn == {**terminated, "conditions": [expected]}
        edited = opted_in(kaiwo_service(TRAIN_SPEC, generation=2, status=withdrawn))
        assert status_of(edited, cluster_of(edited)) == {**withdrawn, "observedGeneration": 2}


def test_a_workload_that_never_had_gpu_idle_ends_without_one(
    cluster_of: Callable[..., ClusterState],
) -> None:
    """Its first idle reading arrives in the plan that sees it complete: nothing to withdraw,
    and no condition claiming idleness is written onto a finished workload."""
    owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS))
    child = finished(running_job(owner), "Complete")

    ended = status_of(owner, cluster_of(owner, child))

    assert ended["status"] == "COMPLETE"
    assert "GpuIdle" not in {c["type"] for c in ended.get("conditions") or ()}


def test_a_workload_that_opted_out_before_it_ended_keeps_not_opted_in(
    cluster_of: Callable[..., ClusterState],
) -> None:
    owner = idle_job(cluster_of)
    plain = kaiwo_job(TRAIN_SPEC, status=owner["status"])
    opted_out = status_of(plain, cluster_of(plain, running_job(plain)))
    assert gpu_idle(opted_out)["reason"] == "NotOptedIn"
    stopped = kaiwo_job(TRAIN_SPEC, status=opted_out)
    child = finished(running_job(stopped), "Complete")

    ended = status_of(stopped, cluster_of(stopped, child))

    assert ended["status"] == "COMPLETE"
    assert gpu_idle(ended) == gpu_idle(opted_out)


def test_the_reading_still_decides_while_the_workload_runs(
    cluster_of: Callable[..., ClusterState],
) -> None:
    """What the end changes, and only that: a running idle workload keeps ``GpuIdle`` True."""
    owner = idle_job(cluster_of)
    busy = dataclasses.replace(IDLE, idle_since=None, idle_utilization_ratio=0.5)
    cluster = with_findings(cluster_of(owner, running_job(owner)), busy)

    still_running = status_of(owner, cluster)

    assert still_running["status"] == "RUNNING"
    assert gpu_idle(still_running)["reason"] == "GpuActive"
