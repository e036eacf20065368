"""Every phase transition of the workload status machine, with the status written out by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus
from kaiwo_contracts.plans import EventIntent, ObjectRef
from kaiwo_planner.domain.scheduling.schedulable import SchedulableVerdict
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.status.child_phase import (
    ObservedChildren,
    child_phase,
    observe_children,
)
from kaiwo_planner.domain.status.kueue_admission import run_start
from kaiwo_planner.domain.status.workload_status import (
    StatusDecision,
    TerminationRequest,
    derive_status,
)

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
T_NOW = "2026-01-01T12:00:00Z"
T_EARLIER = "2026-01-01T11:00:00Z"
OK = SchedulableVerdict(
    schedulable=True, reason="Schedulable", message="Cluster has sufficient GPU resources"
)
SCHEDULABLE_COND = {
    "type": "Schedulable",
    "status": "True",
    "observedGeneration": 1,
    "lastTransitionTime": T_EARLIER,
    "reason": "Schedulable",
    "message": "Cluster has sufficient GPU resources",
}
ADMITTED_COND = {
    "type": "Admitted",
    "status": "True",
    "observedGeneration": 1,
    "lastTransitionTime": T_EARLIER,
    "reason": "Admitted",
    "message": "Workload is admitted",
}
PENDING_COND = {
    "type": "Admitted",
    "status": "False",
    "observedGeneration": 1,
    "lastTransitionTime": T_EARLIER,
    "reason": "Pending",
    "message": "Workload is pending admission into 'kaiwo'",
}


def job(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team", "uid": "job-uid"},
        "spec": {},
        "status": status,
    }


def admitted_workload(admitted: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "job-train", "namespace": "team"},
        "status": {"conditions": [{"type": "Admitted", "status": str(admitted)}]},
    }


def derive(
    previous: dict[str, Any] | None,
    observed: ObservedChildren,
    *,
    kind: Any = "KaiwoJob",
    now: datetime = NOW,
    schedulable: SchedulableVerdict = OK,
    **extra: Any,
) -> StatusDecision:
    return derive_status(
        workload_kind=kind,
        generation=1,
        previous_status=previous,
        observed=observed,
        schedulable=schedulable,
        cluster_queue="kaiwo",
        now=now,
        **extra,
    )


def event(reason: str, message: str, kind: Any = "Normal") -> EventIntent:
    return EventIntent(type=kind, reason=reason, message=message)


def test_new_workload_is_pending_before_any_child_exists() -> None:
    decision = derive(None, ObservedChildren(child_kind="Job"))
    assert decision.status == {
        "status": "PENDING",
        "observedGeneration": 1,
        "conditions": [
            {**SCHEDULABLE_COND, "lastTransitionTime": T_NOW},
            {**PENDING_COND, "lastTransitionTime": T_NOW},
        ],
    }
    assert decision.events == (event("WorkloadPending", "Workload is pending admission"),)
    assert decision.phase is WorkloadStatus.PENDING


def test_unschedulable_workload_is_in_error_and_recovers() -> None:
    verdict = SchedulableVerdict(
        schedulable=False, reason="NoGPUs", message="Cluster has 0 GPUs (vendor: amd)"
    )
    error = derive(None, ObservedChildren(child_kind="Job"), schedulable=verdict)
    assert error.status == {
        "status": "ERROR",
        "observedGeneration": 1,
        "conditions": [
            {
                "type": "Schedulable",
                "status": "False",
                "observedGeneration": 1,
                "lastTransitionTime": T_NOW,
                "reason": "NoGPUs",
                "message": "Cluster has 0 GPUs (vendor: amd)",
            }
        ],
    }
    assert error.events == (event("WorkloadError", "Cluster has 0 GPUs (vendor: amd)", "Warning"),)

    later = NOW + timedelta(minutes=5)
    recovered = derive(error.status, ObservedChildren(child_kind="Job"), now=later)
    assert recovered.status["status"] == "PENDING"
    assert recovered.status["conditions"][0] == {
        **SCHEDULABLE_COND,
        "lastTransitionTime": "2026-01-01T12:05:00Z",
    }
    assert recovered.events == (event("WorkloadPending", "Workload is pending admission"),)


def test_unchanged_observation_keeps_transition_times_and_emits_nothing() -> None:
    previous = {
        "status": "PENDING",
        "observedGeneration": 1,
        "conditions": [SCHEDULABLE_COND, PENDING_COND],
    }
    decision = derive(previous, ObservedChildren(child_kind="Job"))
    assert decision.status == previous
    assert decision.events == ()


@pytest.mark.parametrize(
    ("download_job", "phase", "condition"),
    [
        (None, "DOWNLOADING", None),
        (
            job(active=1),
            "DOWNLOADING",
            ("False", "JobInProgress", "Download job starting"),
        ),
        (
            job(active=1, ready=1),
            "DOWNLOADING",
            ("False", "JobInProgress", "Download job in progress"),
        ),
        (job(), "DOWNLOADING", ("False", "JobPending", "Download job pending")),
        (
            job(failed=1, conditions=[{"type": "Failed", "status": "True"}]),
            "FAILED",
            ("False", "JobFailed", "Download job failed: Job train: failed"),
        ),
        (
            job(succeeded=1, conditions=[{"type": "Complete", "status": "True"}]),
            "PENDING",
            ("True", "JobCompleted", "Download job succeeded"),
        ),
    ],
    ids=["no-job-yet", "starting", "running", "pending", "failed", "succeeded"],
)
def test_download_gates_the_workload(
    download_job: dict[str, Any] | None, phase: str, condition: tuple[str, str, str] | None
) -> None:
    observed = ObservedChildren(
        child_kind="Job", downloads_configured=True, download_job=download_job
    )
    decision = derive(None, observed)
    assert decision.status["status"] == phase
    types = [c["type"] for c in decision.status["conditions"]]
    if condition is None:
        assert types == ["Schedulable"]
        return
    download = decision.status["conditions"][1]
    assert download == {
        "type": "DownloadJobSucceeded",
        "status": condition[0],
        "observedGeneration": 1,
        "lastTransitionTime": T_NOW,
        "reason": condition[1],
        "message": condition[2],
    }


def test_download_events() -> None:
    downloading = derive(None, ObservedChildren(child_kind="Job", downloads_configured=True))
    assert downloading.events == (event("WorkloadDownloading", "Downloading data"),)
    failed = derive(
        downloading.status,
        ObservedChildren(
            child_kind="Job",
            downloads_configured=True,
            # The download Job has no retries (backoffLimit 0): its first failed pod fails it.
            download_job=job_with_spec({"backoffLimit": 0}, failed=1),
        ),
    )
    assert failed.events == (
        event(
            "WorkloadFailed",
            "Workload has failed: JobFailed: Download job failed: Job train: 1 pod(s) failed, "
            "more than its backoffLimit of 0",
            "Warning",
        ),
    )


def test_a_failed_download_tells_why_on_its_condition_and_event() -> None:
    """FAILED is final, and the download pod may not stay: the status says what the
    downloader said when it failed (decision 0248); it said "Download job failed"."""
    download = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train-download", "namespace": "team", "uid": "download-uid"},
        "spec": {"backoffLimit": 0},
        "status": {
            "failed": 1,
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                }
            ],
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-download-x7k2p",
            "namespace": "team",
            "ownerReferences": [{"kind": "Job", "uid": "download-uid", "controller": True}],
        },
        "status": {
            "phase": "Failed",
            "containerStatuses": [
                {
                    "name": "data-downloader",
                    "state": {
                        "terminated": {
                            "exitCode": 1,
                            "reason": "Error",
                            "message": "NoSuchBucket: datasets",
                            "finishedAt": "2026-01-01T11:59:00Z",
                        }
                    },
                }
            ],
        },
    }
    downloading = derive(None, ObservedChildren(child_kind="Job", downloads_configured=True))
    observed = ObservedChildren(
        child_kind="Job", downloads_configured=True, download_job=download, pods=(pod,)
    )

    failed = derive(downloading.status, observed)

    told = (
        "Download job failed: Job train-download: Job has reached the specified backoff limit; "
        "pod train-download-x7k2p: container data-downloader exited with code 1 (Error): "
        "NoSuchBucket: datasets"
    )
    assert failed.status["status"] == "FAILED"
    [condition] = [c for c in failed.status["conditions"] if c["type"] == "DownloadJobSucceeded"]
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "JobFailed",
        told,
    )
    assert failed.events == (
        event("WorkloadFailed", f"Workload has failed: JobFailed: {told}", "Warning"),
    )


def test_batch_job_lifecycle() -> None:
    pending = {
        "status": "PENDING",
        "observedGeneration": 1,
        "conditions": [SCHEDULABLE_COND, PENDING_COND],
    }
    starting = derive(
        pending,
        ObservedChildren(
            child_kind="Job", child=job(active=1), kueue_workloads=(admitted_workload(),)
        ),
    )
    assert starting.status == {
        "status": "STARTING",
        "observedGeneration": 1,
        "conditions": [SCHEDULABLE_COND, {**ADMITTED_COND, "lastTransitionTime": T_NOW}],
    }
    assert starting.events == (event("WorkloadStarting", "Workload was admitted, starting"),)

    running = derive(
        starting.status,
        ObservedChildren(
            child_kind="Job", child=job(active=1, ready=1), kueue_workloads=(admitted_workload(),)
        ),
    )
    assert running.status == {
        "status": "RUNNING",
        "observedGeneration": 1,
        "conditions": starting.status["conditions"],
        "startTime": T_NOW,
        "duration": 0,
    }
    assert running.events == (event("WorkloadRunning", "Workload has started"),)

    finished_at = NOW + timedelta(minutes=90)
    complete = derive(
        running.status,
        ObservedChildren(
            child_kind="Job",
            child=job(succeeded=1, conditions=[{"type": "Complete", "status": "True"}]),
            kueue_workloads=(admitted_workload(),),
        ),
        now=finished_at,
    )
    assert complete.status == {
        "status": "COMPLETE",
        "observedGeneration": 1,
        "conditions": starting.status["conditions"],
        "startTime": T_NOW,
        "completionTime": "2026-01-01T13:30:00Z",
        "duration": 5400,
    }
    assert complete.events == (event("WorkloadComplete", "Workload has completed"),)

    # Final: later observations change nothing but observedGeneration.
    after = derive_status(
        workload_kind="KaiwoJob",
        generation=2,
        previous_status=complete.status,
        observed=ObservedChildren(child_kind="Job"),
        schedulable=OK,
        cluster_queue="kaiwo",
        now=finished_at + timedelta(days=1),
    )
    assert after.status == {**complete.status, "observedGeneration": 2}
    assert after.events == ()


def test_running_job_that_fails() -> None:
    running = {
        "status": "RUNNING",
        "observedGeneration": 1,
        "conditions": [SCHEDULABLE_COND, ADMITTED_COND],
        "startTime": T_EARLIER,
        "duration": 0,
    }
    failed = derive(
        running,
        ObservedChildren(
            child_kind="Job",
            child=job(
                failed=1,
                conditions=[
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": "BackoffLimitExceeded",
                        "message": "Job has reached the specified backoff limit",
                    }
                ],
            ),
            kueue_workloads=(admitted_workload(),),
            pods=(failed_pod("train-x7k2p", exit_code=1, message="CUDA out of memory"),),
        ),
    )
    cause = (
        "Job train: Job has reached the specified backoff limit; pod train-x7k2p: container"
        " workload exited with code 1 (Error): CUDA out of memory"
    )
    assert failed.status == {
        **running,
        "status": "FAILED",
        "conditions": [
            SCHEDULABLE_COND,
            ADMITTED_COND,
            unhealthy("BackoffLimitExceeded", cause),
        ],
        "completionTime": T_NOW,
        "duration": 3600,
    }
    assert failed.events == (
        event("WorkloadFailed", f"Workload has failed: BackoffLimitExceeded: {cause}", "Warning"),
    )


def failed_pod(
    name: str,
    *,
    exit_code: int,
    message: str = "",
    finished: str = "2026-01-01T11:59:50Z",
    owner_uid: str = "job-uid",
) -> dict[str, Any]:
    """A Job's pod whose container ``workload`` exited with ``exit_code``."""
    terminated: dict[str, Any] = {
        "exitCode": exit_code,
        "reason": "Error",
        "startedAt": T_EARLIER,
        "finishedAt": finished,
    }
    if message:
        terminated["message"] = message
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team",
            "ownerReferences": [{"kind": "Job", "name": "train", "uid": owner_uid}],
        },
        "status": {
            "phase": "Failed",
            "containerStatuses": [{"name": "workload", "state": {"terminated": terminated}}],
        },
    }


def unhealthy(reason: str, message: str, *, since: str = T_NOW) -> dict[str, Any]:
    """The ChildHealthy condition, False since ``since``."""
    return {
        "type": "ChildHealthy",
        "status": "False",
        "observedGeneration": 1,
        "lastTransitionTime": since,
        "reason": reason,
        "message": message,
    }


# A run the planner never saw RUNNING (decision 0114): it started at 11:00:05 and finished at
# 11:02:35, and the planner, which last saw it STARTING, plans again at 12:00.
STARTING_STATUS = {
    "status": "STARTING",
    "observedGeneration": 1,
    "conditions": [SCHEDULABLE_COND, ADMITTED_COND],
}


def test_a_job_finished_unseen_takes_its_times_from_its_job() -> None:
    complete = derive(
        STARTING_STATUS,
        ObservedChildren(
            child_kind="Job",
            child=job(
                succeeded=1,
                startTime="2026-01-01T11:00:05Z",
                completionTime="2026-01-01T11:02:35Z",
                conditions=[{"type": "Complete", "status": "True"}],
            ),
            kueue_workloads=(admitted_workload(),),
        ),
    )
    assert complete.status == {
        **STARTING_STATUS,
        "status": "COMPLETE",
        "startTime": "2026-01-01T11:00:05Z",
        "completionTime": "2026-01-01T11:02:35Z",
        "duration": 150,
    }


def test_a_failed_job_finishes_when_its_failed_condition_turned_true() -> None:
    # Kubernetes sets a Job's completionTime only on success.
    failed = derive(
        {**STARTING_STATUS, "status": "PENDING"},
        ObservedChildren(
            child_kind="Job",
            child=job(
                failed=1,
                startTime="2026-01-01T11:00:05Z",
                conditions=[
                    {
                        "type": "Failed",
                        "status": "True",
                        "lastTransitionTime": "2026-01-01T11:10:05Z",
                    }
                ],
            ),
            kueue_workloads=(admitted_workload(),),
        ),
    )
    assert failed.status == {
        **STARTING_STATUS,
        "status": "FAILED",
        "conditions": [
            SCHEDULABLE_COND,
            ADMITTED_COND,
            unhealthy("JobFailed", "Job train: failed"),
        ],
        "startTime": "2026-01-01T11:00:05Z",
        "completionTime": "2026-01-01T11:10:05Z",
        "duration": 600,
    }


def test_a_ray_job_finished_unseen_takes_its_times_from_its_ray_job() -> None:
    ray_job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "train", "namespace": "team", "uid": "rayjob-uid"},
        "status": {
            "jobStatus": "SUCCEEDED",
            "jobDeploymentStatus": "Complete",
            "startTime": "2026-01-01T11:00:05Z",
            "endTime": "2026-01-01T11:30:05Z",
        },
    }
    complete = derive(
        STARTING_STATUS,
        ObservedChildren(
            child_kind="RayJob", child=ray_job, kueue_workloads=(admitted_workload(),)
        ),
    )
    assert complete.status == {
        **STARTING_STATUS,
        "status": "COMPLETE",
        "startTime": "2026-01-01T11:00:05Z",
        "completionTime": "2026-01-01T11:30:05Z",
        "duration": 1800,
    }


def test_a_job_seen_running_finishes_when_its_job_did() -> None:
    # The planner saw it run from 11:00; it finished at 11:45 and is seen finished at 12:00.
    running = {
        "status": "RUNNING",
        "observedGeneration": 1,
        "conditions": [SCHEDULABLE_COND, ADMITTED_COND],
        "startTime": T_EARLIER,
        "duration": 0,
    }
    complete = derive(
        running,
        ObservedChildren(
            child_kind="Job",
            child=job(
                succeeded=1,
                startTime="2026-01-01T10:59:00Z",
                completionTime="2026-01-01T11:45:00Z",
                conditions=[{"type": "Complete", "status": "True"}],
            ),
            kueue_workloads=(admitted_workload(),),
        ),
    )
    assert complete.status == {
        **running,
        "status": "COMPLETE",
        "completionTime": "2026-01-01T11:45:00Z",
        "duration": 2700,
    }


def test_a_job_whose_recorded_finish_precedes_the_start_seen_finishes_at_that_start() -> None:
    # The planner stamped 11:00 when it saw the run; the Job controller's clock, a little
    # behind, says it finished at 10:59:58: the end is not put before the start.
    running = {
        "status": "RUNNING",
        "observedGeneration": 1,
        "conditions": [SCHEDULABLE_COND, ADMITTED_COND],
        "startTime": T_EARLIER,
        "duration": 0,
    }
    complete = derive(
        running,
        ObservedChildren(
            child_kind="Job",
            child=job(
                succeeded=1,
                startTime="2026-01-01T10:59:50Z",
                completionTime="2026-01-01T10:59:58Z",
                conditions=[{"type": "Complete", "status": "True"}],
            ),
            kueue_workloads=(admitted_workload(),),
        ),
    )
    assert complete.status == {
        **running,
        "status": "COMPLETE",
        "completionTime": T_EARLIER,
        "duration": 0,
    }


@pytest.mark.parametrize(
    ("job_status", "previous", "expected"),
    [
        ({"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}, "RUNNING", "COMPLETE"),
        ({"conditions": [{"type": "Suspended", "status": "True"}]}, "STARTING", "PENDING"),
        ({"failed": 7}, "RUNNING", "FAILED"),
        ({"failed": 6, "active": 1}, "RUNNING", "RUNNING"),
        # Between a failed pod and its replacement: a retry starting, not back to PENDING.
        ({"failed": 1}, "STARTING", "STARTING"),
        ({"conditions": [{"type": "FailureTarget", "status": "True"}]}, "RUNNING", "FAILED"),
        ({"active": 1}, "RUNNING", "RUNNING"),
        ({"active": 1}, "STARTING", "STARTING"),
        ({}, "STARTING", "PENDING"),
    ],
)
def test_batch_job_mapping(job_status: dict[str, Any], previous: str, expected: str) -> None:
    decision = derive(
        {"status": previous, "startTime": T_EARLIER, "conditions": []},
        ObservedChildren(
            child_kind="Job", child=job(**job_status), kueue_workloads=(admitted_workload(),)
        ),
    )
    assert decision.status["status"] == expected


def job_with_spec(spec: dict[str, Any], **status: Any) -> dict[str, Any]:
    return {**job(**status), "spec": spec}


def test_a_failed_pod_within_the_backoff_limit_is_a_retry_not_a_failure() -> None:
    # backoffLimit 2: the Job controller replaces the first failed pod; the KaiwoJob runs on
    # (it used to turn FAILED, final, with a completionTime, while the Job went on to succeed).
    running = {
        "status": "RUNNING",
        "observedGeneration": 1,
        "conditions": [SCHEDULABLE_COND, ADMITTED_COND],
        "startTime": T_EARLIER,
        "duration": 0,
    }
    retrying = derive(
        running,
        ObservedChildren(
            child_kind="Job",
            child=job_with_spec({"backoffLimit": 2}, failed=1, active=1),
            kueue_workloads=(admitted_workload(),),
        ),
    )
    assert retrying.status == running
    assert retrying.events == ()

    exhausted = derive(
        running,
        ObservedChildren(
            child_kind="Job",
            child=job_with_spec({"backoffLimit": 2}, failed=3),
            kueue_workloads=(admitted_workload(),),
        ),
    )
    cause = "Job train: 3 pod(s) failed, more than its backoffLimit of 2"
    assert exhausted.status == {
        **running,
        "status": "FAILED",
        "conditions": [SCHEDULABLE_COND, ADMITTED_COND, unhealthy("BackoffLimitExceeded", cause)],
        "completionTime": T_NOW,
        "duration": 3600,
    }
    assert exhausted.events == (
        event("WorkloadFailed", f"Workload has failed: BackoffLimitExceeded: {cause}", "Warning"),
    )


@pytest.mark.parametrize(
    ("spec", "failed", "expected"),
    [
        ({"backoffLimit": 0}, 1, "FAILED"),
        ({"backoffLimit": 3}, 3, "RUNNING"),
        ({"backoffLimit": 3}, 4, "FAILED"),
        # Per-index limits: the count spans indexes; only the Job's conditions tell.
        ({"backoffLimit": 0, "backoffLimitPerIndex": 1, "completionMode": "Indexed"}, 5, "RUNNING"),
    ],
)
def test_failed_pods_count_against_the_jobs_backoff_limit(
    spec: dict[str, Any], failed: int, expected: str
) -> None:
    decision = derive(
        {"status": "RUNNING", "startTime": T_EARLIER, "conditions": []},
        ObservedChildren(
            child_kind="Job",
            child=job_with_spec(spec, failed=failed, active=1),
            kueue_workloads=(admitted_workload(),),
        ),
    )
    assert decision.status["status"] == expected


def test_not_admitted_workload_stays_pending() -> None:
    decision = derive(
        None,
        ObservedChildren(
            child_kind="Job", child=job(), kueue_workloads=(admitted_workload(admitted=False),)
        ),
    )
    assert decision.status["status"] == "PENDING"


NO_QUOTA = (
    "couldn't assign flavors to pod set main: insufficient unused quota for amd.com/gpu in "
    "flavor mi300x, 8 more needed"
)
PREEMPTED_MESSAGE = (
    "Preempted to accommodate a workload (UID: u-1, JobUID: j-1) due to prioritization in the "
    "ClusterQueue"
)


def kueue_workload(*conditions: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "job-train", "namespace": "team"},
        "status": {"conditions": list(conditions)},
    }


def test_a_waiting_workload_names_kueues_reason() -> None:
    waiting = kueue_workload(
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": NO_QUOTA}
    )
    decision = derive(
        None,
        ObservedChildren(child_kind="Job", child=job(), kueue_workloads=(waiting,)),
    )
    assert decision.status["conditions"][1] == {
        **PENDING_COND,
        "lastTransitionTime": T_NOW,
        "message": f"Workload is pending admission into 'kaiwo': {NO_QUOTA}",
    }


def test_kueues_preemption_shows_on_the_workload_with_one_warning() -> None:
    """Kueue evicted the running child for a higher priority: the workload waits again, says
    why, carries Kueue's Preempted condition and warns once."""
    evicted = kueue_workload(
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "x"},
        {"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "y"},
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": PREEMPTED_MESSAGE},
        {
            "type": "Preempted",
            "status": "True",
            "reason": "InClusterQueue",
            "message": PREEMPTED_MESSAGE,
        },
    )
    running = {
        "status": "RUNNING",
        "startTime": T_EARLIER,
        "conditions": [SCHEDULABLE_COND, ADMITTED_COND],
    }
    observed = ObservedChildren(
        child_kind="Job",
        child=job(conditions=[{"type": "Suspended", "status": "True"}]),
        kueue_workloads=(evicted,),
    )
    decision = derive(running, observed)
    assert decision.status["status"] == "PENDING"
    assert decision.status["conditions"][1:] == [
        {
            **PENDING_COND,
            "lastTransitionTime": T_NOW,
            "message": f"Workload is pending admission into 'kaiwo': {PREEMPTED_MESSAGE}",
        },
        {
            "type": "Preempted",
            "status": "True",
            "observedGeneration": 1,
            "lastTransitionTime": T_NOW,
            "reason": "InClusterQueue",
            "message": PREEMPTED_MESSAGE,
        },
        {
            "type": "Evicted",
            "status": "True",
            "observedGeneration": 1,
            "lastTransitionTime": T_NOW,
            "reason": "Preempted",
            "message": PREEMPTED_MESSAGE,
        },
    ]
    assert decision.events == (
        event("WorkloadPending", "Workload is pending admission"),
        event(
            "WorkloadPreempted",
            f"Kueue preempted the workload (InClusterQueue): {PREEMPTED_MESSAGE}",
            "Warning",
        ),
    )
    again = derive(decision.status, observed)
    assert again.events == ()
    assert again.status == decision.status


def test_a_running_workload_kueue_evicts_for_a_stopped_queue_is_warned_once() -> None:
    """The administrator stopped the ClusterQueue (``stopPolicy: HoldAndDrain``): Kueue evicts
    the running child (``Evicted`` True, ``ClusterQueueStopped``; no ``Preempted``). The
    workload waits again and a Warning says so in Kueue's words (decision 0169); before,
    only the Normal "Workload is pending admission" told it."""
    stopped = "The ClusterQueue is stopped"
    evicted = kueue_workload(
        {"type": "QuotaReserved", "status": "False", "reason": "Inadmissible", "message": "x"},
        {"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "y"},
        {"type": "Evicted", "status": "True", "reason": "ClusterQueueStopped", "message": stopped},
    )
    running = {
        "status": "RUNNING",
        "startTime": T_EARLIER,
        "conditions": [SCHEDULABLE_COND, ADMITTED_COND],
    }
    observed = ObservedChildren(
        child_kind="Job",
        child=job(conditions=[{"type": "Suspended", "status": "True"}]),
        kueue_workloads=(evicted,),
    )
    decision = derive(running, observed)
    assert decision.status["status"] == "PENDING"
    assert decision.status["conditions"][1] == {
        **PENDING_COND,
        "lastTransitionTime": T_NOW,
        "message": f"Workload is pending admission into 'kaiwo': {stopped}",
    }
    assert decision.events == (
        event("WorkloadPending", "Workload is pending admission"),
        event(
            "WorkloadEvicted",
            "Kueue evicted the workload (ClusterQueueStopped): The ClusterQueue is stopped",
            "Warning",
        ),
    )
    assert derive(decision.status, observed).events == ()


def test_a_workload_waiting_from_the_start_in_a_stopped_queue_is_not_told_evicted() -> None:
    """Never admitted, it was not evicted: the Evicted condition of a Workload Kueue stopped
    before admitting it tells nothing new (its Admitted condition says why it waits)."""
    evicted = kueue_workload(
        {"type": "Evicted", "status": "True", "reason": "ClusterQueueStopped", "message": "s"},
    )
    observed = ObservedChildren(
        child_kind="Job",
        child=job(conditions=[{"type": "Suspended", "status": "True"}]),
        kueue_workloads=(evicted,),
    )
    decision = derive(None, observed)
    assert decision.status["status"] == "PENDING"
    assert decision.events == (event("WorkloadPending", "Workload is pending admission"),)


def test_a_workload_kueue_is_evicting_waits_at_once_with_kueues_reason() -> None:
    """Kueue keeps a preempted Workload Admitted until the child has stopped; the child is
    suspended already, so the workload is PENDING and says why, not "admitted"."""
    evicting = kueue_workload(
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "q"},
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "a"},
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": PREEMPTED_MESSAGE},
    )
    observed = ObservedChildren(
        child_kind="Job",
        child=job(conditions=[{"type": "Suspended", "status": "True"}]),
        kueue_workloads=(evicting,),
    )
    decision = derive({"status": "RUNNING", "startTime": T_EARLIER}, observed)
    assert decision.status["status"] == "PENDING"
    assert decision.status["conditions"][1]["status"] == "False"
    assert decision.status["conditions"][1]["message"] == (
        f"Workload is pending admission into 'kaiwo': {PREEMPTED_MESSAGE}"
    )


def test_a_workload_kueue_admitted_again_after_an_eviction_is_admitted() -> None:
    """Kueue turns Evicted False when it reserves quota again."""
    readmitted = kueue_workload(
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "a"},
        {"type": "Evicted", "status": "False", "reason": "QuotaReserved", "message": "Previously"},
    )
    decision = derive(
        None,
        ObservedChildren(child_kind="Job", child=job(active=1), kueue_workloads=(readmitted,)),
    )
    assert decision.status["status"] == "STARTING"
    assert decision.status["conditions"][1]["status"] == "True"


def test_child_without_kueue_workload_counts_as_admitted_once_it_runs() -> None:
    decision = derive(None, ObservedChildren(child_kind="Job", child=job(active=1, ready=1)))
    assert decision.status["status"] == "RUNNING"
    assert decision.status["conditions"][1]["reason"] == "Admitted"


@pytest.mark.parametrize(
    ("ray_status", "expected"),
    [
        ({}, "STARTING"),
        ({"jobStatus": "PENDING"}, "STARTING"),
        ({"jobStatus": "RUNNING"}, "RUNNING"),
        ({"jobStatus": "SUCCEEDED"}, "COMPLETE"),
        ({"jobStatus": "FAILED"}, "FAILED"),
        ({"jobStatus": "STOPPED"}, "TERMINATED"),
        ({"jobDeploymentStatus": "Failed"}, "FAILED"),
        ({"jobDeploymentStatus": "ValidationFailed"}, "FAILED"),
        # An attempt failed within spec.backoffLimit: KubeRay starts another one.
        ({"jobStatus": "FAILED", "jobDeploymentStatus": "Retrying"}, "STARTING"),
        ({"jobStatus": "FAILED", "jobDeploymentStatus": "Failed"}, "FAILED"),
    ],
)
def test_ray_job_mapping(ray_status: dict[str, Any], expected: str) -> None:
    decision = derive(None, admitted_ray_job(ray_status))
    assert decision.status["status"] == expected


def admitted_ray_job(status: dict[str, Any]) -> ObservedChildren:
    """The RayJob ``train`` with ``status``, its Workload admitted by Kueue."""
    ray_job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "train", "uid": "rj"},
        "status": status,
    }
    return ObservedChildren(
        child_kind="RayJob", child=ray_job, kueue_workloads=(admitted_workload(),)
    )


def test_a_ray_job_stopped_on_its_cluster_is_terminated_and_says_so() -> None:
    """``ray job stop`` on the Ray dashboard: KubeRay's RayJob says STOPPED, with Ray's
    message. TERMINATED came with no condition and no Event (decision 0188)."""
    stopped_job = admitted_ray_job(
        {
            "jobStatus": "STOPPED",
            "jobDeploymentStatus": "Complete",
            "message": "Job was intentionally stopped.",
        }
    )
    running = derive(None, admitted_ray_job({"jobStatus": "RUNNING"})).status
    decision = derive(running, stopped_job)
    assert decision.status["status"] == "TERMINATED"
    told = (
        "RayJob train: its Ray job was stopped on its Ray cluster: Job was intentionally stopped."
    )
    [stopped] = [c for c in decision.status["conditions"] if c["type"] == "WorkloadTerminatedEarly"]
    assert (stopped["status"], stopped["reason"], stopped["message"]) == (
        "True",
        "RayJobStopped",
        told,
    )
    assert decision.events == (
        event("WorkloadTerminated", f"Workload has been terminated: {told}"),
    )
    # Final: the next plan keeps it as it is, and tells nothing again.
    again = derive(decision.status, stopped_job)
    assert again.status == {**decision.status, "observedGeneration": 1}
    assert again.events == ()


def deployment(*, replicas: int | None, available: int, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "generation": 2},
        "spec": {"replicas": replicas},
        "status": {"observedGeneration": 2, "availableReplicas": available, **status},
    }


@pytest.mark.parametrize(
    ("child", "expected"),
    [
        (deployment(replicas=2, available=0), "STARTING"),
        (deployment(replicas=2, available=1), "RUNNING"),
        (deployment(replicas=2, available=2), "READY"),
        # A new spec not yet observed by the Deployment controller: its pods still serve
        # (decision 0135; upstream says STARTING).
        (
            {**deployment(replicas=2, available=2), "metadata": {"name": "web", "generation": 3}},
            "READY",
        ),
        (
            {
                **deployment(replicas=3, available=2),
                "metadata": {"name": "web", "generation": 3},
            },
            "RUNNING",
        ),
        (
            deployment(
                replicas=1,
                available=0,
                conditions=[
                    {
                        "type": "Progressing",
                        "status": "False",
                        "reason": "ProgressDeadlineExceeded",
                    }
                ],
            ),
            "ERROR",
        ),
        # Found by fuzzing: a null replicas is the API server's default of 1.
        (deployment(replicas=None, available=1), "READY"),
    ],
    ids=[
        "no-pods",
        "some-pods",
        "all-available",
        "new-generation",
        "new-generation-scaled-up",
        "deadline",
        "null-replicas",
    ],
)
def test_deployment_mapping(child: dict[str, Any], expected: str) -> None:
    decision = derive(
        None,
        ObservedChildren(
            child_kind="Deployment", child=child, kueue_workloads=(admitted_workload(),)
        ),
        kind="KaiwoService",
    )
    assert decision.status["status"] == expected


def test_ready_service_gets_start_time_and_ready_event() -> None:
    previous = {
        "status": "STARTING",
        "observedGeneration": 1,
        "conditions": [SCHEDULABLE_COND, ADMITTED_COND],
    }
    ready = derive(
        previous,
        ObservedChildren(
            child_kind="Deployment",
            child=deployment(replicas=1, available=1),
            kueue_workloads=(admitted_workload(),),
        ),
        kind="KaiwoService",
    )
    assert ready.status == {**previous, "status": "READY", "startTime": T_NOW, "duration": 0}
    assert ready.events == (event("WorkloadReady", "Workload is ready"),)


WEB_HASH = "5d8f7c9b4"
"""The ``pod-template-hash`` of Deployment ``web``'s current ReplicaSet, ``web-5d8f7c9b4``."""


def web(*, replicas: int | None = 1, available: int = 0, **status: Any) -> dict[str, Any]:
    """Deployment ``web`` of namespace ``team``, made for KaiwoService ``web`` (uid ks-uid)."""
    made = deployment(replicas=replicas, available=available, **status)
    owner = {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoService", "name": "web"}
    metadata = {
        **made["metadata"],
        "namespace": "team",
        "uid": "dep-uid",
        "ownerReferences": [{**owner, "uid": "ks-uid", "controller": True}],
    }
    return {**made, "metadata": metadata}


def web_pod(
    name: str,
    phase: str,
    *,
    ready: bool = False,
    deleting: bool = False,
    controller: tuple[str, str] = ("ReplicaSet", f"web-{WEB_HASH}"),
    namespace: str = "team",
) -> dict[str, Any]:
    """A pod carrying KaiwoService ``web``'s run-id, as ``controller`` (kind, name) makes it:
    by default Deployment ``web``'s ReplicaSet, which labels it with its template's hash."""
    kind, controller_name = controller
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "labels": {"kaiwo.silogen.ai/run-id": "ks-uid", "pod-template-hash": WEB_HASH},
        "ownerReferences": [
            {
                "apiVersion": "apps/v1" if kind == "ReplicaSet" else "batch/v1",
                "kind": kind,
                "name": controller_name,
                "uid": f"uid-{controller_name}",
                "controller": True,
            }
        ],
    }
    if deleting:
        metadata["deletionTimestamp"] = T_NOW
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


DEADLINE_PASSED = [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]


@pytest.mark.parametrize(
    ("child", "pods", "expected"),
    [
        (web(), (), "STARTING"),
        (web(), (web_pod("web-5d8f7c9b4-a1b2c", "Running"),), "RUNNING"),
        (web(), (web_pod("web-5d8f7c9b4-a1b2c", "Pending"),), "STARTING"),
        (web(), (web_pod("web-5d8f7c9b4-a1b2c", "Running", deleting=True),), "STARTING"),
        (web(), (web_pod("web-5d8f7c9b4-a1b2c", "Failed"),), "STARTING"),
        (
            web(replicas=2),
            (web_pod("web-5d8f7c9b4-a1b2c", "Pending"), web_pod("web-5d8f7c9b4-d3e4f", "Running")),
            "RUNNING",
        ),
        # Pods carrying the workload's run-id that are not the Deployment's: its download
        # Job's, another Deployment's whose name starts with its name, one in another
        # namespace.
        (
            web(),
            (web_pod("web-download-x9z8y", "Running", controller=("Job", "web-download")),),
            "STARTING",
        ),
        (
            web(),
            (
                web_pod(
                    "web-api-5d8f7c9b4-a1b2c",
                    "Running",
                    controller=("ReplicaSet", f"web-api-{WEB_HASH}"),
                ),
            ),
            "STARTING",
        ),
        (web(), (web_pod("web-5d8f7c9b4-a1b2c", "Running", namespace="other"),), "STARTING"),
        # Scaled to 0, with a pod not yet deleted: READY, as before (decision 0111).
        (web(replicas=0), (web_pod("web-5d8f7c9b4-a1b2c", "Running"),), "READY"),
        # Past its progress deadline: ERROR, whatever its pods do.
        (web(conditions=DEADLINE_PASSED), (web_pod("web-5d8f7c9b4-a1b2c", "Running"),), "ERROR"),
        (web(available=1), (web_pod("web-5d8f7c9b4-a1b2c", "Running", ready=True),), "READY"),
    ],
    ids=[
        "no-pods",
        "running-not-ready",
        "pending",
        "being-deleted",
        "evicted",
        "one-of-two-running",
        "download-pod",
        "another-deployments-pod",
        "another-namespace",
        "scaled-to-zero",
        "deadline",
        "ready",
    ],
)
def test_a_services_deployment_with_a_running_pod_is_running(
    child: dict[str, Any], pods: tuple[dict[str, Any], ...], expected: str
) -> None:
    """RUNNING for a KaiwoService is "pods are up but may not yet be fully ready/healthy":
    a live pod of its Deployment in phase Running, none available yet (decision 0214)."""
    decision = derive(
        None,
        ObservedChildren(
            child_kind="Deployment",
            child=child,
            kueue_workloads=(admitted_workload(),),
            pods=pods,
        ),
        kind="KaiwoService",
    )
    assert decision.status["status"] == expected


def test_a_service_whose_pod_runs_before_it_is_ready_is_running_from_then() -> None:
    """A server loading its model runs minutes before its readiness probe answers: RUNNING,
    with ``startTime`` from then, and READY later keeping it; settled, nothing is written
    again (decision 0214). Before, it said STARTING without a ``startTime`` until READY."""

    def observed(child: dict[str, Any], pod: dict[str, Any]) -> ObservedChildren:
        return ObservedChildren(
            child_kind="Deployment",
            child=child,
            kueue_workloads=(admitted_workload(),),
            pods=(pod,),
        )

    previous = {
        "status": "STARTING",
        "observedGeneration": 1,
        "conditions": [SCHEDULABLE_COND, ADMITTED_COND],
    }
    pod = "web-5d8f7c9b4-a1b2c"
    pending = derive(
        previous, observed(web(), web_pod(pod, "Pending")), kind="KaiwoService", now=NOW
    )
    assert pending.status == previous
    assert pending.events == ()

    running = derive(
        previous, observed(web(), web_pod(pod, "Running")), kind="KaiwoService", now=NOW
    )
    assert running.status == {**previous, "status": "RUNNING", "startTime": T_NOW, "duration": 0}
    assert running.events == (event("WorkloadRunning", "Workload has started"),)

    still = derive(
        running.status,
        observed(web(), web_pod(pod, "Running")),
        kind="KaiwoService",
        now=NOW + timedelta(minutes=2),
    )
    assert still.status == running.status
    assert still.events == ()

    ready = derive(
        running.status,
        observed(web(available=1, readyReplicas=1), web_pod(pod, "Running", ready=True)),
        kind="KaiwoService",
        now=NOW + timedelta(minutes=5),
    )
    assert ready.status == {**previous, "status": "READY", "startTime": T_NOW, "duration": 300}
    assert ready.events == (event("WorkloadReady", "Workload is ready"),)

    settled = derive(
        ready.status,
        observed(web(available=1, readyReplicas=1), web_pod(pod, "Running", ready=True)),
        kind="KaiwoService",
        now=NOW + timedelta(minutes=15),
    )
    assert settled.status == ready.status
    assert settled.events == ()


def test_a_ready_service_whose_only_pod_is_no_longer_ready_runs_and_keeps_its_start() -> None:
    """Its readiness probe fails, its pod runs: RUNNING (it said STARTING), ``startTime``
    kept (decision 0214)."""
    previous = {
        "status": "READY",
        "startTime": T_EARLIER,
        "duration": 0,
        "observedGeneration": 1,
        "conditions": [SCHEDULABLE_COND, ADMITTED_COND],
    }
    decision = derive(
        previous,
        ObservedChildren(
            child_kind="Deployment",
            child=web(),
            kueue_workloads=(admitted_workload(),),
            pods=(web_pod("web-5d8f7c9b4-a1b2c", "Running"),),
        ),
        kind="KaiwoService",
    )
    assert decision.status == {**previous, "status": "RUNNING", "duration": 3600}
    # Decision 0168's Event for a READY service that runs again.
    assert decision.events == (
        event(
            "WorkloadRunning", "Workload serves with 0 of 1 replicas available; 1 not available yet"
        ),
    )


def test_the_running_pods_of_a_service_are_its_deployments_own() -> None:
    """Observed as the planner observes them (by the workload's run-id): the download Job's
    running pod does not make the service RUNNING; the Deployment's own does (decision 0214)."""
    download_pod = web_pod("web-download-x9z8y", "Running", controller=("Job", "web-download"))
    own_pod = web_pod("web-5d8f7c9b4-a1b2c", "Running")

    def phase(*pods: dict[str, Any]) -> WorkloadStatus | None:
        observed = observe_children(
            cluster=ClusterState.from_wire(objects=[web(), *pods]),
            owner_uid="ks-uid",
            name="web",
            child_kind="Deployment",
            downloads_configured=True,
            namespace="team",
        )
        return child_phase(observed, previous_phase=WorkloadStatus.STARTING)

    assert phase(download_pod) is WorkloadStatus.STARTING
    assert phase(download_pod, own_pod) is WorkloadStatus.RUNNING


def waiting_pod_workload() -> dict[str, Any]:
    """A pod's Workload Kueue has not admitted: no quota left in the queue."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "pod-web-new", "namespace": "team"},
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": "Pending",
                    "message": "couldn't assign flavors to pod set main: insufficient quota",
                }
            ]
        },
    }


def service_status(
    previous: dict[str, Any] | None, child: dict[str, Any], *workloads: dict[str, Any]
) -> StatusDecision:
    """The status of a KaiwoService whose Deployment's pods have these Kueue Workloads."""
    observed = ObservedChildren(child_kind="Deployment", child=child, kueue_workloads=workloads)
    return derive(previous, observed, kind="KaiwoService")


def test_a_ready_service_whose_new_pod_waits_for_admission_stays_ready() -> None:
    """A rollout (or a scale-up) makes pods whose Workloads wait while the admitted pods serve:
    the service stays READY, no Event, and Admitted says who waits (decision 0135). Upstream
    made it PENDING until every pod was admitted."""
    previous = {
        "status": "READY",
        "startTime": T_EARLIER,
        "observedGeneration": 1,
        "conditions": [SCHEDULABLE_COND, ADMITTED_COND],
    }
    rolling = service_status(
        previous,
        deployment(replicas=1, available=1),
        admitted_workload(),
        waiting_pod_workload(),
    )

    assert rolling.status["status"] == "READY"
    assert rolling.events == ()
    admitted = next(c for c in rolling.status["conditions"] if c["type"] == "Admitted")
    assert admitted == {
        "type": "Admitted",
        "status": "True",
        "observedGeneration": 1,
        "lastTransitionTime": T_EARLIER,
        "reason": "PartlyAdmitted",
        "message": "1 of 2 pods are admitted; 1 pending admission into 'kaiwo': couldn't "
        "assign flavors to pod set main: insufficient quota",
    }


def test_a_service_none_of_whose_pods_is_admitted_waits() -> None:
    waiting = service_status(
        None, deployment(replicas=2, available=0), waiting_pod_workload(), waiting_pod_workload()
    )
    assert waiting.status["status"] == "PENDING"


@pytest.mark.parametrize(
    ("ray_service", "expected"),
    [
        (None, "STARTING"),
        ({"status": {}}, "STARTING"),
        ({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, "READY"),
        (
            {"status": {"activeServiceStatus": {"rayClusterStatus": {"state": "ready"}}}},
            "RUNNING",
        ),
        (
            {
                "status": {
                    "activeServiceStatus": {"applicationStatuses": {"app": {"status": "UNHEALTHY"}}}
                }
            },
            "ERROR",  # not FAILED, which is final (decision 0134)
        ),
        # The first cluster, not serving yet: its pods are up, Ray Serve deploys (0186).
        (
            {"status": {"pendingServiceStatus": {"rayClusterStatus": {"state": "ready"}}}},
            "RUNNING",
        ),
        (
            {"status": {"pendingServiceStatus": {"rayClusterStatus": {"state": ""}}}},
            "STARTING",
        ),
        (
            {
                "status": {
                    "pendingServiceStatus": {
                        "rayClusterStatus": {"state": "ready"},
                        "applicationStatuses": {"app": {"status": "DEPLOY_FAILED"}},
                    }
                }
            },
            "ERROR",
        ),
        # An edit failing on the cluster started for it while the other serves (0186).
        (
            {
                "status": {
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "pendingServiceStatus": {
                        "applicationStatuses": {"app": {"status": "DEPLOY_FAILED"}}
                    },
                }
            },
            "READY",
        ),
    ],
)
def test_ray_service_mapping(ray_service: dict[str, Any] | None, expected: str) -> None:
    app_wrapper = {"kind": "AppWrapper", "metadata": {"name": "svc", "uid": "aw"}}
    decision = derive(
        None,
        ObservedChildren(
            child_kind="AppWrapper",
            child=app_wrapper,
            ray_service=ray_service,
            kueue_workloads=(admitted_workload(),),
        ),
        kind="KaiwoService",
    )
    assert decision.status["status"] == expected


def ray_pod(cluster: str, node_type: str, *, ready: bool) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": f"{cluster}-{node_type}",
            "labels": {"ray.io/node-type": node_type},
            "ownerReferences": [{"kind": "RayCluster", "name": cluster, "controller": True}],
        },
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        ((ray_pod("svc-x7k2p", "head", ready=True),), "RUNNING"),
        (
            (ray_pod("svc-x7k2p", "head", ready=True), ray_pod("svc-x7k2p", "worker", ready=True)),
            "RUNNING",
        ),
        (
            (
                ray_pod("svc-x7k2p", "head", ready=True),
                ray_pod("svc-x7k2p", "worker", ready=False),
            ),
            "STARTING",
        ),
        ((ray_pod("svc-x7k2p", "worker", ready=True),), "STARTING"),  # no head yet
        ((ray_pod("svc-old00", "head", ready=True),), "STARTING"),  # a cluster it does not name
    ],
)
def test_a_ray_service_whose_first_clusters_pods_are_up_is_running(
    pods: tuple[dict[str, Any], ...], expected: str
) -> None:
    # KubeRay writes the RayService's status only when its applications change: with none
    # deployed yet, its cluster's state there still says it starts (seen on the real stack).
    ray_service = {
        "status": {"pendingServiceStatus": {"rayClusterName": "svc-x7k2p", "rayClusterStatus": {}}}
    }
    decision = derive(
        None,
        ObservedChildren(
            child_kind="AppWrapper",
            child={"kind": "AppWrapper", "metadata": {"name": "svc", "uid": "aw"}},
            ray_service=ray_service,
            kueue_workloads=(admitted_workload(),),
            pods=pods,
        ),
        kind="KaiwoService",
    )
    assert decision.status["status"] == expected


def test_pvc_lost_fails_the_workload() -> None:
    pvc = {"kind": "PersistentVolumeClaim", "metadata": {"name": "x-data"}}
    decision = derive(
        None,
        ObservedChildren(child_kind="Job", pvcs=({**pvc, "status": {"phase": "Lost"}},)),
    )
    assert decision.status["status"] == "FAILED"
    assert decision.status["conditions"][1] == {
        "type": "PvcReady",
        "status": "False",
        "observedGeneration": 1,
        "lastTransitionTime": T_NOW,
        "reason": "Lost",
        "message": "PersistentVolumeClaim x-data is Lost",
    }


def test_a_pvc_not_bound_yet_says_where_to_look_if_it_stays_so() -> None:
    pvc = {"kind": "PersistentVolumeClaim", "metadata": {"name": "x-data"}}
    decision = derive(
        None,
        ObservedChildren(child_kind="Job", pvcs=({**pvc, "status": {"phase": "Pending"}},)),
    )
    assert decision.status["status"] == "PENDING"
    [claim] = [c for c in decision.status["conditions"] if c["type"] == "PvcReady"]
    assert (claim["reason"], claim["message"]) == (
        "Pending",
        "PersistentVolumeClaim x-data is Pending (if it stays so, see its Events: a storage "
        "class that does not exist?)",
    )


def test_a_pvc_being_deleted_while_in_use_is_told_and_the_workload_runs_on() -> None:
    """Decision 0139: Kubernetes keeps a claim pods use until they stop; the status said
    "All PersistentVolumeClaims are bound" while its data was about to go."""
    pvc = {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "train-data", "deletionTimestamp": T_NOW},
        "status": {"phase": "Bound"},
    }
    running = {"status": "RUNNING", "observedGeneration": 1, "startTime": T_EARLIER}
    decision = derive(
        running,
        ObservedChildren(
            child_kind="Job",
            child=job(ready=1, active=1),
            kueue_workloads=(admitted_workload(),),
            pvcs=(pvc,),
        ),
    )
    assert decision.status["status"] == "RUNNING"
    assert [c for c in decision.status["conditions"] if c["type"] == "PvcReady"] == [
        {
            "type": "PvcReady",
            "status": "False",
            "observedGeneration": 1,
            "lastTransitionTime": T_NOW,
            "reason": "Deleting",
            "message": "PersistentVolumeClaim train-data is being deleted: it is kept while "
            "pods use it, then goes with its data, and a new, empty one is made",
        }
    ]


RUNNING_WITH_DURATION = {
    "status": "RUNNING",
    "observedGeneration": 1,
    "conditions": [SCHEDULABLE_COND, ADMITTED_COND],
    "startTime": "2026-01-01T11:30:00Z",
    "duration": 0,
}
RUNNING_CHILD = ObservedChildren(
    child_kind="Job", child=job(active=1, ready=1), kueue_workloads=(admitted_workload(),)
)


def test_duration_not_exceeded_plans_again_at_the_deadline() -> None:
    decision = derive(RUNNING_WITH_DURATION, RUNNING_CHILD, duration=timedelta(hours=1))
    assert decision.status["conditions"][2] == {
        "type": "Preemptable",
        "status": "False",
        "observedGeneration": 1,
        "lastTransitionTime": T_NOW,
        "reason": "DurationNotExceeded",
        "message": "Workload is running and the duration has not been exceeded",
    }
    assert decision.status["duration"] == 1800
    assert decision.replan_after == timedelta(minutes=30)
    assert decision.events == ()


def test_a_readmitted_workloads_deadline_counts_from_its_readmission() -> None:
    """First started at 11:00, evicted by Kueue, admitted again at 11:50 (its Admitted
    condition turned True then): at 12:00 it has run 10 of its 30 minutes (decision 0169).
    Counted from 11:00 it was past its duration, the 50 minutes evicted included."""
    readmitted = {
        **RUNNING_WITH_DURATION,
        "startTime": "2026-01-01T11:00:00Z",
        "conditions": [
            SCHEDULABLE_COND,
            {**ADMITTED_COND, "lastTransitionTime": "2026-01-01T11:50:00Z"},
        ],
    }
    decision = derive(readmitted, RUNNING_CHILD, duration=timedelta(minutes=30))
    assert decision.status["status"] == "RUNNING"
    assert decision.status["startTime"] == "2026-01-01T11:00:00Z"  # the first run's
    preemptable = decision.status["conditions"][2]
    assert (preemptable["type"], preemptable["status"], preemptable["reason"]) == (
        "Preemptable",
        "False",
        "DurationNotExceeded",
    )
    assert decision.replan_after == timedelta(minutes=20)


def test_a_workload_seen_admitted_again_starts_its_run_now() -> None:
    """Evicted (PENDING, Admitted False) after a first run from 11:00; this observation sees
    Kueue admit it again and its pods run: its 10 minutes start now."""
    evicted = {
        "status": "PENDING",
        "observedGeneration": 1,
        "conditions": [SCHEDULABLE_COND, PENDING_COND],
        "startTime": "2026-01-01T11:00:00Z",
        "duration": 300,
    }
    decision = derive(evicted, RUNNING_CHILD, duration=timedelta(minutes=10))
    assert decision.status["status"] == "RUNNING"
    assert decision.status["conditions"][1]["lastTransitionTime"] == T_NOW
    assert decision.status["conditions"][2]["reason"] == "DurationNotExceeded"
    assert decision.replan_after == timedelta(minutes=10)


PREEMPTABLE_RUNNING = {
    "type": "Preemptable",
    "status": "False",
    "observedGeneration": 1,
    "lastTransitionTime": "2026-01-01T11:30:00Z",
    "reason": "DurationNotExceeded",
    "message": "Workload is running and the duration has not been exceeded",
}
STOPPED_QUEUE_EVICTION = kueue_workload(
    {"type": "QuotaReserved", "status": "False", "reason": "Inadmissible", "message": "x"},
    {"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "y"},
    {
        "type": "Evicted",
        "status": "True",
        "reason": "ClusterQueueStopped",
        "message": "The ClusterQueue is stopped",
    },
)
SUSPENDED_JOB = job(conditions=[{"type": "Suspended", "status": "True"}])


def test_a_running_workload_kueue_evicts_is_not_told_running_while_it_waits() -> None:
    """RUNNING with 30 minutes since 11:30, Kueue evicts it for a stopped queue: while it
    waits, ``Preemptable`` says it is not running and why, not "Workload is running" (decision
    0171; before, the condition was written only while running and kept its old words)."""
    running = {
        "status": "RUNNING",
        "observedGeneration": 1,
        "startTime": "2026-01-01T11:30:00Z",
        "conditions": [SCHEDULABLE_COND, ADMITTED_COND, PREEMPTABLE_RUNNING],
    }
    observed = ObservedChildren(
        child_kind="Job", child=SUSPENDED_JOB, kueue_workloads=(STOPPED_QUEUE_EVICTION,)
    )
    decision = derive(running, observed, duration=timedelta(minutes=30))
    assert decision.status["status"] == "PENDING"
    assert decision.status["conditions"][2] == {
        "type": "Preemptable",
        "status": "False",
        "observedGeneration": 1,
        "lastTransitionTime": "2026-01-01T11:30:00Z",
        "reason": "Evicted",
        "message": "Workload is not running: Kueue evicted it (ClusterQueueStopped) and it "
        "waits to be admitted again; its duration counts again from its readmission",
    }
    assert decision.replan_after is None
    again = derive(decision.status, observed, duration=timedelta(minutes=30))
    assert again.status["conditions"] == decision.status["conditions"]


def test_a_workload_past_its_duration_that_kueue_preempts_is_no_longer_preemptable() -> None:
    """Past its duration (Preemptable True), then preempted by Kueue: it holds nothing while
    it waits, so it is no longer preemptable; the turn moves the transition time."""
    expired = {
        "status": "RUNNING",
        "observedGeneration": 1,
        "startTime": "2026-01-01T11:00:00Z",
        "conditions": [
            SCHEDULABLE_COND,
            ADMITTED_COND,
            {
                **PREEMPTABLE_RUNNING,
                "status": "True",
                "reason": "DurationExceeded",
                "message": "Workload duration has exceeded",
            },
        ],
    }
    preempted = kueue_workload(
        {"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "y"},
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": PREEMPTED_MESSAGE},
    )
    observed = ObservedChildren(child_kind="Job", child=SUSPENDED_JOB, kueue_workloads=(preempted,))
    decision = derive(expired, observed, duration=timedelta(minutes=10))
    preemptable = decision.status["conditions"][2]
    assert preemptable == {
        "type": "Preemptable",
        "status": "False",
        "observedGeneration": 1,
        "lastTransitionTime": T_NOW,
        "reason": "Evicted",
        "message": "Workload is not running: Kueue evicted it (Preempted) and it waits to be "
        "admitted again; its duration counts again from its readmission",
    }


def test_an_evicted_workload_admitted_again_says_its_run_counts_from_then() -> None:
    """Evicted (Preemptable ``Evicted``), Kueue admits it again at 12:00 and its pods start:
    STARTING, the condition says when its run began (run_start, decision 0169); RUNNING at
    12:05, it is running with 5 of its 10 minutes left."""
    evicted = {
        "status": "PENDING",
        "observedGeneration": 1,
        "startTime": "2026-01-01T11:00:00Z",
        "conditions": [
            SCHEDULABLE_COND,
            PENDING_COND,
            {**PREEMPTABLE_RUNNING, "reason": "Evicted", "message": "evicted"},
        ],
    }
    starting = derive(
        evicted,
        ObservedChildren(
            child_kind="Job", child=job(active=1), kueue_workloads=(admitted_workload(),)
        ),
        duration=timedelta(minutes=10),
    )
    assert starting.status["status"] == "STARTING"
    assert starting.status["conditions"][2] == {
        "type": "Preemptable",
        "status": "False",
        "observedGeneration": 1,
        "lastTransitionTime": "2026-01-01T11:30:00Z",
        "reason": "Readmitted",
        "message": "Workload was admitted again at 2026-01-01T12:00:00Z and is starting; its "
        "duration counts from its readmission",
    }
    later = datetime(2026, 1, 1, 12, 5, 0, tzinfo=UTC)
    still = derive(
        starting.status,
        ObservedChildren(
            child_kind="Job", child=job(active=1), kueue_workloads=(admitted_workload(),)
        ),
        duration=timedelta(minutes=10),
        now=later,
    )
    assert still.status["conditions"][2]["message"] == (
        "Workload was admitted again at 2026-01-01T12:00:00Z and is starting; its duration "
        "counts from its readmission"
    )
    running = derive(starting.status, RUNNING_CHILD, duration=timedelta(minutes=10), now=later)
    assert running.status["status"] == "RUNNING"
    assert running.status["conditions"][2]["reason"] == "DurationNotExceeded"
    assert running.status["conditions"][2]["message"] == (
        "Workload is running and the duration has not been exceeded"
    )
    assert running.replan_after == timedelta(minutes=5)


def test_a_first_start_and_a_job_without_duration_get_no_preemptable_condition() -> None:
    """Never run (no Preemptable yet) or without ``duration``: nothing is written while it
    starts or waits, as before."""
    first = derive(
        {"status": "PENDING", "conditions": [SCHEDULABLE_COND, PENDING_COND]},
        ObservedChildren(
            child_kind="Job", child=job(active=1), kueue_workloads=(admitted_workload(),)
        ),
        duration=timedelta(minutes=10),
    )
    assert first.status["status"] == "STARTING"
    assert [c["type"] for c in first.status["conditions"]] == ["Schedulable", "Admitted"]
    running = {
        "status": "RUNNING",
        "startTime": "2026-01-01T11:30:00Z",
        "conditions": [SCHEDULABLE_COND, ADMITTED_COND, PREEMPTABLE_RUNNING],
    }
    evicted = ObservedChildren(
        child_kind="Job", child=SUSPENDED_JOB, kueue_workloads=(STOPPED_QUEUE_EVICTION,)
    )
    without = derive(running, evicted)
    assert without.status["conditions"][2] == PREEMPTABLE_RUNNING


def test_duration_exceeded_without_termination_keeps_running() -> None:
    decision = derive(RUNNING_WITH_DURATION, RUNNING_CHILD, duration=timedelta(minutes=10))
    assert decision.status["status"] == "RUNNING"
    assert decision.status["conditions"][2]["status"] == "True"
    assert decision.status["conditions"][2]["reason"] == "DurationExceeded"
    assert decision.status["conditions"][2]["message"] == "Workload duration has exceeded"
    assert decision.replan_after is None


def test_preempted_workload_terminates_then_is_terminated() -> None:
    termination = TerminationRequest(
        reason="DurationExceededWithActiveGpuDemand",
        message="Terminated since duration was exceeded and there is active GPU demand",
        beneficiary=ObjectRef(
            api_version="kaiwo.silogen.ai/v1alpha1",
            kind="KaiwoJob",
            name="waiting",
            namespace="team-a",
            uid="uid-waiting",
        ),
    )
    terminating = derive(
        RUNNING_WITH_DURATION,
        RUNNING_CHILD,
        duration=timedelta(minutes=10),
        termination=termination,
    )
    early_false = {
        "type": "WorkloadTerminatedEarly",
        "status": "False",
        "observedGeneration": 1,
        "lastTransitionTime": T_NOW,
        "reason": "DurationExceededWithActiveGpuDemand",
        "message": "Terminated since duration was exceeded and there is active GPU demand",
    }
    assert terminating.status == {
        "status": "TERMINATING",
        "observedGeneration": 1,
        "conditions": [
            SCHEDULABLE_COND,
            ADMITTED_COND,
            {
                "type": "Preemptable",
                "status": "True",
                "observedGeneration": 1,
                "lastTransitionTime": T_NOW,
                "reason": "DurationExceeded",
                "message": "Workload duration has exceeded",
            },
            early_false,
        ],
        "startTime": "2026-01-01T11:30:00Z",
        "duration": 1800,
        "preemptedFor": {
            "kind": "KaiwoJob",
            "namespace": "team-a",
            "name": "waiting",
            "uid": "uid-waiting",
        },
    }
    assert terminating.events == (
        event("WorkloadTermination", "Workload has been flagged for termination"),
    )

    later = NOW + timedelta(seconds=5)
    terminated = derive(terminating.status, RUNNING_CHILD, now=later)
    assert terminated.status == {
        **terminating.status,
        "status": "TERMINATED",
        "conditions": [
            *terminating.status["conditions"][:3],
            {**early_false, "status": "True", "lastTransitionTime": "2026-01-01T12:00:05Z"},
        ],
        "completionTime": "2026-01-01T12:00:05Z",
        "duration": 1805,
    }
    assert terminated.events == (
        event("WorkloadTerminated", "Workload has been terminated"),
        event(
            "DurationExceededWithActiveGpuDemand",
            "Terminated since duration was exceeded and there is active GPU demand",
            "Warning",
        ),
    )


def test_a_termination_before_the_deadline_stops_a_running_workload_too() -> None:
    # Underutilization and idle preemption do not wait for the duration (workload_plan asks
    # for a duration preemption only after the deadline).
    decision = derive(
        RUNNING_WITH_DURATION,
        RUNNING_CHILD,
        duration=timedelta(hours=2),
        termination=TerminationRequest(reason="GpuUtilizationLow", message="idle"),
    )
    assert decision.status["status"] == "TERMINATING"
    assert "preemptedFor" not in decision.status  # stopped for nobody in particular
    (early,) = [c for c in decision.status["conditions"] if c["type"] == "WorkloadTerminatedEarly"]
    assert (early["status"], early["reason"], early["message"]) == (
        "False",
        "GpuUtilizationLow",
        "idle",
    )


def test_a_running_workloads_duration_alone_never_rewrites_its_status() -> None:
    # A resync or a restart plans every running workload again: nothing a user reads has
    # changed, so its status stays as it is, however long it has run (decision 0043).
    running = {
        "status": "RUNNING",
        "observedGeneration": 1,
        "conditions": [SCHEDULABLE_COND, ADMITTED_COND],
        "startTime": T_NOW,
        "duration": 10,
    }
    for later in (timedelta(seconds=75), timedelta(minutes=10), timedelta(days=3)):
        assert derive(running, RUNNING_CHILD, now=NOW + later).status == running


def test_duration_moves_with_a_status_change() -> None:
    running = {
        "status": "RUNNING",
        "observedGeneration": 1,
        "conditions": [SCHEDULABLE_COND, ADMITTED_COND],
        "startTime": T_NOW,
        "duration": 10,
    }
    # A change people read (here the phase) brings the duration up to date with it.
    done = derive(
        running,
        ObservedChildren(
            child_kind="Job",
            child=job(succeeded=1, conditions=[{"type": "Complete", "status": "True"}]),
            kueue_workloads=(admitted_workload(),),
        ),
        now=NOW + timedelta(hours=1),
    )
    assert done.status["status"] == "COMPLETE"
    assert done.status["duration"] == 3600


def test_observe_children_from_cluster_state() -> None:
    owner = {"uid": "kj-uid", "kind": "KaiwoJob", "name": "train"}
    main = {**job(active=1), "metadata": {**job()["metadata"], "ownerReferences": [owner]}}
    download = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train-download", "namespace": "team", "ownerReferences": [owner]},
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "train-data", "namespace": "team", "ownerReferences": [owner]},
    }
    workload = {
        "kind": "Workload",
        "metadata": {"name": "w", "labels": {"kueue.x-k8s.io/job-uid": "job-uid"}},
    }
    cluster = ClusterState.from_wire(objects=[main, download, pvc], kueue_workloads=[workload])
    observed = observe_children(
        cluster=cluster,
        owner_uid="kj-uid",
        name="train",
        child_kind="Job",
        downloads_configured=True,
    )
    assert observed == ObservedChildren(
        child_kind="Job",
        child=main,
        kueue_workloads=(workload,),
        downloads_configured=True,
        download_job=download,
        pvcs=(pvc,),
    )


def test_observe_deployment_admission_through_pods() -> None:
    owner = {"uid": "ks-uid", "kind": "KaiwoService", "name": "web"}
    dep = {
        **deployment(replicas=1, available=1),
        "metadata": {"name": "web", "uid": "dep", "ownerReferences": [owner]},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-1",
            "uid": "pod-1",
            "labels": {"kaiwo.silogen.ai/run-id": "ks-uid"},
        },
    }
    workload = {
        "kind": "Workload",
        "metadata": {"name": "pod-web-1", "labels": {"kueue.x-k8s.io/job-uid": "pod-1"}},
    }
    cluster = ClusterState.from_wire(objects=[dep, pod], kueue_workloads=[workload])
    observed = observe_children(
        cluster=cluster,
        owner_uid="ks-uid",
        name="web",
        child_kind="Deployment",
        downloads_configured=False,
    )
    assert observed.child == dep
    assert observed.kueue_workloads == (workload,)


def partial_workload(*, asked: int, admitted: int, min_count: int | None = 2) -> dict[str, Any]:
    """The Kueue Workload of a Job of ``asked`` pods, admitted with ``admitted`` of them."""
    pod_set: dict[str, Any] = {"name": "main", "count": asked}
    if min_count is not None:
        pod_set["minCount"] = min_count
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "job-train", "namespace": "team"},
        "spec": {"podSets": [pod_set]},
        "status": {
            "admission": {
                "clusterQueue": "kaiwo",
                "podSetAssignments": [{"name": "main", "count": admitted}],
            },
            "conditions": [{"type": "Admitted", "status": "True"}],
        },
    }


def test_a_partially_admitted_job_says_how_many_of_its_pods_kueue_admitted() -> None:
    """Kueue admitted 2 of the Job's 4 pods (decision 0153): Admitted says so. Before, it
    said "Workload is admitted", and nothing told that half the pods run."""
    decision = derive(
        None,
        ObservedChildren(
            child_kind="Job",
            child=job(active=2, ready=2),
            kueue_workloads=(partial_workload(asked=4, admitted=2),),
        ),
    )
    admitted = next(c for c in decision.status["conditions"] if c["type"] == "Admitted")
    assert (admitted["status"], admitted["reason"]) == ("True", "PartlyAdmitted")
    assert admitted["message"] == (
        "Kueue admitted 2 of 4 pods of the Job (partial admission, "
        "kueue.x-k8s.io/job-min-parallelism): the Job runs 2 pods at once while admitted, "
        "and spec.job.spec.parallelism is kept as Kueue set it"
    )


@pytest.mark.parametrize(
    ("asked", "admitted", "min_count"), [(4, 4, 2), (4, 2, None)], ids=["whole", "no-min"]
)
def test_a_wholly_admitted_job_is_admitted(
    asked: int, admitted: int, min_count: int | None
) -> None:
    decision = derive(
        None,
        ObservedChildren(
            child_kind="Job",
            child=job(active=2, ready=2),
            kueue_workloads=(
                partial_workload(asked=asked, admitted=admitted, min_count=min_count),
            ),
        ),
    )
    found = next(c for c in decision.status["conditions"] if c["type"] == "Admitted")
    assert (found["reason"], found["message"]) == ("Admitted", "Workload is admitted")


def test_a_ray_job_on_an_existing_cluster_starts_without_kueue() -> None:
    """A RayJob sent to an existing Ray cluster (``clusterSelector``) has no Kueue Workload
    and never will: it is not queued, so the workload is not "pending admission" but as far
    as KubeRay has taken the RayJob (decision 0156). Before, PENDING until the Ray job ran."""
    ray_job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "train", "namespace": "team", "uid": "rayjob-uid"},
        "spec": {"clusterSelector": {"ray.io/cluster": "shared"}, "suspend": False},
        "status": {"jobDeploymentStatus": "Running", "rayClusterName": "shared"},
    }

    starting = derive(None, ObservedChildren(child_kind="RayJob", child=ray_job))

    assert starting.status["status"] == "STARTING"
    [admitted] = [c for c in starting.status["conditions"] if c["type"] == "Admitted"]
    assert (admitted["status"], admitted["reason"], admitted["message"]) == (
        "True",
        "NotQueued",
        "Kueue does not queue a RayJob sent to an existing Ray cluster "
        "(spec.rayJob.spec.clusterSelector): it runs on that cluster's pods, queued with the "
        "cluster",
    )


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({}, None),  # never ran
        ({"conditions": [ADMITTED_COND]}, None),
        ({"startTime": "2026-01-01T11:30:00Z"}, datetime(2026, 1, 1, 11, 30, tzinfo=UTC)),
        # admitted at 11:00, first pod running at 11:30: the run started at 11:30
        (
            {"startTime": "2026-01-01T11:30:00Z", "conditions": [ADMITTED_COND]},
            datetime(2026, 1, 1, 11, 30, tzinfo=UTC),
        ),
        # evicted: the Admitted condition turned False at 11:45; the first run's start stands
        (
            {
                "startTime": "2026-01-01T11:30:00Z",
                "conditions": [{**PENDING_COND, "lastTransitionTime": "2026-01-01T11:45:00Z"}],
            },
            datetime(2026, 1, 1, 11, 30, tzinfo=UTC),
        ),
        # admitted again at 11:50: the run started then
        (
            {
                "startTime": "2026-01-01T11:30:00Z",
                "conditions": [{**ADMITTED_COND, "lastTransitionTime": "2026-01-01T11:50:00Z"}],
            },
            datetime(2026, 1, 1, 11, 50, tzinfo=UTC),
        ),
    ],
)
def test_the_current_run_starts_at_the_first_start_or_at_kueues_readmission(
    status: dict[str, Any], expected: datetime | None
) -> None:
    assert run_start(status) == expected


def test_an_unreadable_start_time_is_kept_and_counts_no_duration() -> None:
    """The CRD's ``format: date-time`` keeps a malformed time off the real API server, but a
    replayed log or another server may carry one: planning takes it as no time, and does not
    raise (it raised ``ValueError`` while the status parsed its times on its own)."""
    running = {
        "status": "RUNNING",
        "observedGeneration": 1,
        "conditions": [SCHEDULABLE_COND, {**ADMITTED_COND, "lastTransitionTime": T_NOW}],
        "startTime": "yesterday",
    }
    still = derive(
        running,
        ObservedChildren(
            child_kind="Job", child=job(active=1, ready=1), kueue_workloads=(admitted_workload(),)
        ),
    )
    assert still.status == running
    assert still.events == ()


STOPPED = "The ClusterQueue is stopped"
INACTIVE = "ClusterQueue kaiwo is inactive"


def pod_workload(name: str, *conditions: dict[str, str]) -> dict[str, Any]:
    """The Kueue Workload of one pod of a serving Deployment (Kueue admits each pod alone)."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": f"pod-{name}", "namespace": "team"},
        "status": {"conditions": list(conditions)},
    }


def evicted_pod_workload(name: str) -> dict[str, Any]:
    """An admitted pod's Workload after its ClusterQueue was stopped (``HoldAndDrain``), as
    measured on Kueue 0.17 (decision 0180)."""
    return pod_workload(
        name,
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": STOPPED},
        {"type": "Evicted", "status": "True", "reason": "ClusterQueueStopped", "message": STOPPED},
        {"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "none"},
    )


def fresh_pod_workload(name: str) -> dict[str, Any]:
    """The Workload of a pod the ReplicaSet made to replace an evicted one: it only waits."""
    return pod_workload(
        name,
        {"type": "QuotaReserved", "status": "False", "reason": "Inadmissible", "message": INACTIVE},
    )


def kueue_gated_pod(name: str) -> dict[str, Any]:
    """A serving pod Kueue's webhook gated, before Kueue made its Workload."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]},
    }


EVICTED_COND = {
    "type": "Evicted",
    "status": "True",
    "observedGeneration": 1,
    "lastTransitionTime": T_NOW,
    "reason": "ClusterQueueStopped",
    "message": STOPPED,
}


def test_a_ready_service_kueue_evicts_keeps_kueues_reason_after_its_pods_are_replaced() -> None:
    """A READY service whose ClusterQueue is stopped: Kueue evicts its pods' Workloads, then
    the ReplicaSet's new pods wait with fresh Workloads that say only that the queue is
    inactive. The service says it was evicted and why, with Kueue's reason, all along the
    wait, and once admitted again that it was readmitted (decision 0180; before, nothing on
    the service said ``ClusterQueueStopped`` once its pods were replaced)."""
    ready = {
        "status": "READY",
        "startTime": T_EARLIER,
        "duration": 0,
        "observedGeneration": 1,
        "conditions": [SCHEDULABLE_COND, ADMITTED_COND],
    }
    drained = deployment(replicas=2, available=0)
    evicted = service_status(
        ready, drained, evicted_pod_workload("web-a"), evicted_pod_workload("web-b")
    )
    assert evicted.status == {
        "status": "PENDING",
        "startTime": T_EARLIER,
        "duration": 0,
        "observedGeneration": 1,
        "conditions": [
            SCHEDULABLE_COND,
            {
                **PENDING_COND,
                "lastTransitionTime": T_NOW,
                "message": f"Workload is pending admission into 'kaiwo': {STOPPED}",
            },
            EVICTED_COND,
        ],
    }
    assert evicted.events == (
        event("WorkloadPending", "Workload is pending admission"),
        event(
            "WorkloadEvicted",
            f"Kueue evicted the workload (ClusterQueueStopped): {STOPPED}",
            "Warning",
        ),
    )

    replaced = service_status(
        evicted.status, drained, fresh_pod_workload("web-c"), fresh_pod_workload("web-d")
    )
    assert replaced.status["conditions"] == [
        SCHEDULABLE_COND,
        {
            **PENDING_COND,
            "lastTransitionTime": T_NOW,
            "message": f"Workload is pending admission into 'kaiwo': {INACTIVE}",
        },
        EVICTED_COND,
    ]
    assert replaced.events == ()
    settled = service_status(
        replaced.status, drained, fresh_pod_workload("web-c"), fresh_pod_workload("web-d")
    )
    assert settled.status == replaced.status

    # Between the old pods' going and Kueue's making Workloads for the new ones, the
    # Deployment's counts may still say 2 ready: the new pods at Kueue's gate keep it PENDING
    # (before, it flapped to READY under load and back).
    stale_counts = deployment(replicas=2, available=2)
    gated = derive(
        replaced.status,
        ObservedChildren(
            child_kind="Deployment",
            child=stale_counts,
            pods=(kueue_gated_pod("web-c"), kueue_gated_pod("web-d")),
        ),
        kind="KaiwoService",
    )
    assert gated.status["status"] == "PENDING"
    assert EVICTED_COND in gated.status["conditions"]
    assert gated.events == ()
    # Whatever the phase shows meanwhile (no pod seen at all, or one pod admitted beside one
    # waiting), Kueue has not admitted the service again, so the eviction stays told (CI saw
    # Readmitted here while the queue was still stopped).
    for moment in (
        (),
        (admitted_workload(), fresh_pod_workload("web-d")),
    ):
        flapped = service_status(replaced.status, stale_counts, *moment)
        assert flapped.status["status"] != "PENDING"
        assert EVICTED_COND in flapped.status["conditions"]

    later = NOW + timedelta(minutes=1)
    starting = derive(
        replaced.status,
        ObservedChildren(
            child_kind="Deployment",
            child=drained,
            kueue_workloads=(admitted_workload(), admitted_workload()),
        ),
        kind="KaiwoService",
        now=later,
    )
    assert starting.status["status"] == "STARTING"
    assert starting.status["conditions"][2] == {
        "type": "Evicted",
        "status": "False",
        "observedGeneration": 1,
        "lastTransitionTime": "2026-01-01T12:01:00Z",
        "reason": "Readmitted",
        "message": "Kueue admitted the workload again after evicting it",
    }


def test_a_service_waiting_from_the_start_was_not_evicted() -> None:
    """A service whose pods have waited from the start, in a queue stopped before it was
    made, was never admitted: it gets no ``Evicted`` condition."""
    waiting = service_status(
        {"status": "PENDING", "conditions": [SCHEDULABLE_COND, PENDING_COND]},
        deployment(replicas=2, available=0),
        fresh_pod_workload("web-a"),
        evicted_pod_workload("web-b"),
    )
    assert [c["type"] for c in waiting.status["conditions"]] == ["Schedulable", "Admitted"]
