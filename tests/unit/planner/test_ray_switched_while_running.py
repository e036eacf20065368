"""A KaiwoJob whose ``ray`` is switched while its main child runs keeps that child and says so;
one still waiting in its queue takes the switch (decision 0247)."""

from __future__ import annotations

from typing import Any

from kaiwo_planner.domain.scheduling.gpu_allocation import (
    GpuStats,
    allocated_gpus,
    gpu_stats,
    running_child_among,
    running_child_of,
)

from tests.planning_calls import planned
from tests.unit.planner.test_planning import NOW, TRAIN_SPEC, four_eight_gpu_nodes, kaiwo_job

RUNNING = {
    "status": "RUNNING",
    "startTime": "2026-01-01T11:00:00Z",
    "observedGeneration": 1,
    "conditions": [
        {
            "type": "Admitted",
            "status": "True",
            "reason": "Admitted",
            "message": "Workload is admitted",
            "lastTransitionTime": "2026-01-01T11:00:00Z",
        },
    ],
}
PENDING = {
    "status": "PENDING",
    "observedGeneration": 1,
    "conditions": [
        {
            "type": "Admitted",
            "status": "False",
            "reason": "Pending",
            "message": "Workload is pending admission into 'kaiwo'",
            "lastTransitionTime": "2026-01-01T11:00:00Z",
        },
    ],
}


def child(kind: str, *, suspend: bool, status: dict[str, Any]) -> dict[str, Any]:
    """The KaiwoJob ``train``'s main child of ``kind``, made by the operator before the edit."""
    return {
        "apiVersion": "ray.io/v1" if kind == "RayJob" else "batch/v1",
        "kind": kind,
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": "child-uid",
            "labels": {
                "app.kubernetes.io/managed-by": "kaiwo",
                "kaiwo.silogen.ai/owner-uid": "job-uid",
                "kueue.x-k8s.io/queue-name": "kaiwo",
            },
            "ownerReferences": [
                {
                    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
                    "kind": "KaiwoJob",
                    "name": "train",
                    "uid": "job-uid",
                    "controller": True,
                }
            ],
        },
        "spec": {"suspend": suspend},
        "status": status,
    }


def applied_condition(status: dict[str, Any]) -> tuple[str, str, str]:
    [found] = [c for c in status["conditions"] if c["type"] == "ChildSpecApplied"]
    return found["status"], found["reason"], found["message"]


def test_ray_switched_off_while_the_ray_job_runs_keeps_the_ray_job_and_says_so(
    one_node_cluster_with,
):
    owner = kaiwo_job({**TRAIN_SPEC, "ray": False}, generation=2, status=RUNNING)
    ray_job = child(
        "RayJob",
        suspend=False,
        status={"jobStatus": "RUNNING", "jobDeploymentStatus": "Running"},
    )

    plan = planned(owner=owner, cluster=one_node_cluster_with(owner, ray_job), now=NOW)

    assert plan is not None and plan.status is not None
    # The RayJob stays desired, so it is not pruned, and no batch Job is made beside it.
    assert [(d["kind"], d["metadata"]["name"]) for d in plan.desired] == [("RayJob", "train")]
    assert plan.status["status"] == "RUNNING"
    status, reason, message = applied_condition(plan.status)
    assert (status, reason) == ("False", "JobFieldsImmutable")
    # The hand-made RayJob holds none of the spec the operator made, so what else it keeps
    # is told after the switch.
    assert message.startswith(
        "Not applied to the running RayJob: spec.ray (with spec.rayJob) asks for a batch Job "
        "now, and switched while it runs the RayJob would be deleted and its work started over "
        "as a batch Job; the RayJob runs on as it started. Delete and re-create the workload "
        "to run it as a batch Job."
    ), message
    assert "ChildDeleted" not in [e.reason for e in plan.events]


def test_ray_switched_on_while_the_job_runs_keeps_the_job_and_says_so(one_node_cluster_with):
    owner = kaiwo_job({**TRAIN_SPEC, "ray": True}, generation=2, status=RUNNING)
    job = child("Job", suspend=False, status={"active": 1, "ready": 1})

    plan = planned(owner=owner, cluster=one_node_cluster_with(owner, job), now=NOW)

    assert plan is not None and plan.status is not None
    assert [(d["kind"], d["metadata"]["name"]) for d in plan.desired] == [("Job", "train")]
    assert plan.status["status"] == "RUNNING"
    status, reason, message = applied_condition(plan.status)
    assert (status, reason) == ("False", "JobFieldsImmutable")
    assert message.startswith(
        "Not applied to the running Job: spec.ray (with spec.rayJob) asks for a RayJob now, "
        "and switched while it runs the Job would be deleted and its work started over as a "
        "RayJob; the Job runs on as it started. Delete and re-create the workload to run it "
        "as a RayJob."
    ), message


def test_ray_switched_off_while_the_ray_job_waits_in_its_queue_takes_the_switch(
    one_node_cluster_with,
):
    owner = kaiwo_job({**TRAIN_SPEC, "ray": False}, generation=2, status=PENDING)
    ray_job = child("RayJob", suspend=True, status={"jobDeploymentStatus": "Suspended"})

    plan = planned(owner=owner, cluster=one_node_cluster_with(owner, ray_job), now=NOW)

    assert plan is not None and plan.status is not None
    # The waiting RayJob is not desired (so pruned) and the batch Job is made.
    assert [(d["kind"], d["metadata"]["name"]) for d in plan.desired] == [("Job", "train")]
    assert applied_condition(plan.status) == (
        "True",
        "Applied",
        "The Job matches the workload's spec",
    )


# ------------------------------------------------------------------ what preemption counts


def running_ray_job_of(owner: dict[str, Any], make_node: Any) -> dict[str, Any]:
    """The RayJob the planner made for ``owner`` (a Ray KaiwoJob) on four 8-GPU nodes, as
    observed once Kueue let it start."""
    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)
    assert plan is not None
    [made] = [m for m in plan.desired if m["kind"] == "RayJob"]
    return {
        **made,
        "metadata": {**made["metadata"], "uid": "child-uid"},
        "spec": {**made["spec"], "suspend": False},
        "status": {"jobDeploymentStatus": "Running"},
    }


def test_the_gpus_a_job_switched_off_ray_holds_are_its_running_ray_jobs(make_node) -> None:
    """Duration and idle preemption and ``kaiwo gpus`` count what the running RayJob holds,
    not what the batch Job the spec asks for now would: 16, not 4 pods of 16."""
    ray_spec = {**TRAIN_SPEC, "gpus": 16, "ray": True}
    ray_job = running_ray_job_of(kaiwo_job(ray_spec), make_node)
    switched = kaiwo_job(
        {**TRAIN_SPEC, "gpus": 16, "ray": False, "job": {"spec": {"parallelism": 4}}},
        generation=2,
        status=RUNNING,
    )
    cluster = four_eight_gpu_nodes(make_node, switched, ray_job)

    def stats_of(vendor: str) -> GpuStats:
        return gpu_stats(list(cluster.nodes), vendor)

    running = running_child_of(cluster, switched)
    assert running is not None and running["kind"] == "RayJob"
    assert allocated_gpus(switched, stats_of, running_child=running) == 16
    listed = running_child_among([ray_job], switched)
    assert listed is not None and allocated_gpus(switched, stats_of, running_child=listed) == 16
    # Not yet running: the RayJob waits in its queue, and the switch takes it (decision
    # 0247): the spec's batch Job is what it will hold.
    waiting = {**ray_job, "spec": {**ray_job["spec"], "suspend": True}}
    assert running_child_of(four_eight_gpu_nodes(make_node, switched, waiting), switched) is None
    assert running_child_among([waiting], switched) is None
    assert allocated_gpus(switched, stats_of) == 64
