"""A KaiwoJob whose ``ray`` is switched while its main child runs keeps that child and says so;
one still waiting in its queue takes the switch (decision 0247)."""

from __future__ import annotations

from typing import Any

from tests.planning_calls import planned
from tests.unit.planner.test_planning import NOW, TRAIN_SPEC, kaiwo_job

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
