"""A workload's main child deleted by someone while it ran: made again, told, and (for a child
Kueue admits) only once Kueue's Workload of the deleted one is gone (decision 0139)."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_contracts.plans import EventIntent, PruneRule
from kaiwo_planner.domain.state.cluster import ClusterState

from tests.planning_calls import planned
from tests.unit.planner.test_planning import (
    NOW,
    SERVE_SPEC,
    TRAIN_SPEC,
    WORKLOAD_PRUNE,
    kaiwo_job,
    kaiwo_service,
    queue_config,
)

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


@pytest.fixture
def cluster_with(make_node: Any) -> Any:
    def build(*objects: dict[str, Any], workloads: tuple[dict[str, Any], ...] = ()) -> ClusterState:
        return ClusterState.from_wire(
            nodes=[make_node("mi300x-0", gpu="mi300x"), make_node("mi300x-1", gpu="mi300x")],
            objects=[queue_config({"name": "kaiwo"}), *objects],
            kueue_workloads=workloads,
            namespaces=["team-a"],
        )

    return build


def deleted_jobs_workload(*, name: str = "train", kind: str = "Job") -> dict[str, Any]:
    """The admitted Kueue Workload of the deleted Job, not yet removed by the collector."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": f"job-{name}-53749",
            "namespace": "team-a",
            "uid": "wl-of-the-deleted-job",
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": kind,
                    "name": name,
                    "uid": "the-deleted-job",
                    "controller": True,
                }
            ],
        },
        "status": {"conditions": [{"type": "Admitted", "status": "True"}]},
    }


def kinds_and_names(desired: tuple[dict[str, Any], ...]) -> list[tuple[str, str]]:
    return [(d["kind"], d["metadata"]["name"]) for d in desired]


def test_a_running_jobs_deleted_job_waits_for_its_kueue_workload_to_go(cluster_with):
    """On the real stack a Job made again at once ran on the deleted Job's admitted Workload
    (Kueue finds a Workload by its job's name), and was suspended for good when the garbage
    collector removed it: the KaiwoJob stayed PENDING with nothing running."""
    owner = kaiwo_job(TRAIN_SPEC, status=RUNNING)

    plan = planned(
        owner=owner, cluster=cluster_with(owner, workloads=(deleted_jobs_workload(),)), now=NOW
    )

    assert plan is not None and plan.status is not None
    assert kinds_and_names(plan.desired) == []
    assert PruneRule(api_version="batch/v1", kind="Job") not in plan.prune
    assert plan.prune == tuple(r for r in WORKLOAD_PRUNE if r.kind != "Job")
    assert plan.status["status"] == "PENDING"
    assert (
        EventIntent(
            type="Warning",
            reason="ChildDeleted",
            message=(
                "The Job train was deleted while the workload was RUNNING: the operator creates "
                "it again, once Kueue's Workload of the deleted one is gone, and its run starts "
                "over from the beginning"
            ),
        )
        in plan.events
    )


def test_once_the_workload_is_gone_the_job_is_made_again_and_nothing_more_is_told(cluster_with):
    told = {**RUNNING, "status": "PENDING"}
    owner = kaiwo_job(TRAIN_SPEC, status=told)

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    assert kinds_and_names(plan.desired) == [("Job", "train")]
    assert plan.prune == tuple(WORKLOAD_PRUNE)
    assert [e.reason for e in plan.events] == []


def test_a_deleted_job_whose_workload_went_first_is_made_again_and_told(cluster_with):
    owner = kaiwo_job(TRAIN_SPEC, status={**RUNNING, "status": "STARTING"})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    assert kinds_and_names(plan.desired) == [("Job", "train")]
    assert (
        EventIntent(
            type="Warning",
            reason="ChildDeleted",
            message=(
                "The Job train was deleted while the workload was STARTING: the operator creates "
                "it again, and its run starts over from the beginning"
            ),
        )
        in plan.events
    )


def test_a_waiting_jobs_deleted_job_is_made_again_without_a_warning(cluster_with):
    """Nothing ran, nothing is lost: a PENDING workload's Job is made again silently (once
    its Workload is gone, like any other)."""
    owner = kaiwo_job(TRAIN_SPEC, status={"status": "PENDING", "observedGeneration": 1})

    waiting = planned(
        owner=owner, cluster=cluster_with(owner, workloads=(deleted_jobs_workload(),)), now=NOW
    )

    assert waiting is not None
    assert kinds_and_names(waiting.desired) == []
    assert [e.reason for e in waiting.events] == []


def test_a_workload_of_a_job_of_another_name_holds_nothing(cluster_with):
    owner = kaiwo_job(TRAIN_SPEC, status={"status": "PENDING", "observedGeneration": 1})
    other = deleted_jobs_workload(name="train-download")

    plan = planned(owner=owner, cluster=cluster_with(owner, workloads=(other,)), now=NOW)

    assert plan is not None
    assert kinds_and_names(plan.desired) == [("Job", "train")]


def test_a_ready_services_deleted_deployment_is_made_again_and_told(cluster_with):
    """A Deployment's pods have Workloads of their own (owned by each pod): nothing to wait
    for."""
    owner = kaiwo_service(SERVE_SPEC, status={"status": "READY", "observedGeneration": 1})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None and plan.status is not None
    assert ("Deployment", "chat") in kinds_and_names(plan.desired)
    assert (
        EventIntent(
            type="Warning",
            reason="ChildDeleted",
            message=(
                "The Deployment chat was deleted while the workload was READY: the operator "
                "creates it again, and its pods start again"
            ),
        )
        in plan.events
    )


RAY_SERVE_SPEC = {**SERVE_SPEC, "ray": True, "image": "rayproject/ray:2.40.0"}


@pytest.mark.parametrize(
    ("before", "after", "replaced", "made"),
    [
        pytest.param(SERVE_SPEC, RAY_SERVE_SPEC, "Deployment", "AppWrapper", id="ray switched on"),
        pytest.param(RAY_SERVE_SPEC, SERVE_SPEC, "AppWrapper", "Deployment", id="ray switched off"),
    ],
)
def test_a_ready_service_whose_ray_is_switched_is_not_told_its_child_was_deleted(
    cluster_with, before, after, replaced, made
):
    """Decision 0293: the service's child of the other kind is replaced by one of the kind its
    spec asks for now; nobody deleted the new one, which does not exist yet. It said
    ``ChildDeleted`` for it."""
    ready = {"status": "READY", "observedGeneration": 1}
    first_owner = kaiwo_service(before, status=ready)
    first = planned(owner=first_owner, cluster=cluster_with(first_owner), now=NOW)
    assert first is not None
    (old,) = [m for m in first.desired if m["kind"] == replaced]
    running = {**old, "metadata": {**old["metadata"], "uid": "old-child-uid"}}
    switched = kaiwo_service(after, generation=2, status=ready)

    plan = planned(owner=switched, cluster=cluster_with(switched, running), now=NOW)

    assert plan is not None
    assert (made, "chat") in kinds_and_names(plan.desired)
    assert any(rule.kind == replaced for rule in plan.prune)
    assert [e for e in plan.events if e.reason == "ChildDeleted"] == []


def test_a_volume_deleted_while_the_job_runs_is_told_once(cluster_with):
    spec = {
        **TRAIN_SPEC,
        "storage": {
            "storageEnabled": True,
            "storageClassName": "standard",
            "data": {"storageSize": "10Gi"},
        },
    }
    owner = kaiwo_job(spec, status=RUNNING)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": "the-job",
            "ownerReferences": [{"uid": "job-uid", "controller": True}],
        },
        "spec": {"suspend": False},
        "status": {"active": 1, "ready": 1},
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "train-data",
            "namespace": "team-a",
            "uid": "the-pvc",
            "deletionTimestamp": "2026-01-01T11:59:00Z",
            "ownerReferences": [{"uid": "job-uid", "controller": True}],
        },
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "standard",
            "resources": {"requests": {"storage": "10Gi"}},
        },
        "status": {"phase": "Bound"},
    }
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": "job-train-1",
            "namespace": "team-a",
            "uid": "wl",
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "the-job"}
            ],
        },
        "status": {"conditions": [{"type": "Admitted", "status": "True"}]},
    }
    cluster = cluster_with(owner, job, pvc, workloads=(workload,))

    plan = planned(owner=owner, cluster=cluster, now=NOW)

    assert plan is not None and plan.status is not None
    assert plan.status["status"] == "RUNNING"
    message = (
        "PersistentVolumeClaim train-data is being deleted: it is kept while pods use it, "
        "then goes with its data, and a new, empty one is made"
    )
    assert EventIntent(type="Warning", reason="PvcDeleting", message=message) in plan.events
    # Told: the next plan, from the status this one wrote, says it no more.
    again = planned(owner=kaiwo_job(spec, status=plan.status), cluster=cluster, now=NOW)
    assert again is not None
    assert "PvcDeleting" not in [e.reason for e in again.events]
