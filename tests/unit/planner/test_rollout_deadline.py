"""A rolling Deployment's pod that Kueue admitted and that is not Ready within the Deployment's
``progressDeadlineSeconds``, counted from its admission (decision 0176): the status, Events
and the moment to plan again, written out by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kaiwo_contracts.plans import EventIntent
from kaiwo_planner.domain.scheduling.schedulable import SchedulableVerdict
from kaiwo_planner.domain.status.child_phase import ObservedChildren
from kaiwo_planner.domain.status.rollout_deadline import (
    AdmittedPodsDeadline,
    OverduePod,
    admitted_pods_deadline,
)
from kaiwo_planner.domain.status.workload_status import StatusDecision, derive_status

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
T_EARLIER = "2026-01-01T11:00:00Z"
TEN_SECONDS_AGO = "2026-01-01T11:59:50Z"
TWO_SECONDS_AGO = "2026-01-01T11:59:58Z"
OK = SchedulableVerdict(schedulable=True, reason="Schedulable", message="enough GPUs")
KUEUE_WORDS = (
    "couldn't assign flavors to pod set main: insufficient unused quota for amd.com/gpu in "
    "flavor mi300x, 2 more needed"
)
SCHEDULABLE = {
    "type": "Schedulable",
    "status": "True",
    "observedGeneration": 2,
    "lastTransitionTime": T_EARLIER,
    "reason": "Schedulable",
    "message": "enough GPUs",
}
PAST_DEADLINE = {
    "type": "Progressing",
    "status": "False",
    "reason": "ProgressDeadlineExceeded",
    "message": 'ReplicaSet "chat-6956" has timed out progressing.',
}
ROLLING = {
    "type": "Progressing",
    "status": "True",
    "reason": "ReplicaSetUpdated",
    "message": 'ReplicaSet "chat-6956" is progressing.',
}
COMPLETE = {
    "type": "Progressing",
    "status": "True",
    "reason": "NewRSAvailable",
    "message": 'ReplicaSet "chat-6956" has successfully progressed.',
}


def deployment(*conditions: dict[str, Any], deadline: int | None = 5) -> dict[str, Any]:
    """A Deployment of 3 rolling to a new template with ``maxSurge: 2``: two new pods, the
    three old ones available."""
    spec: dict[str, Any] = {"replicas": 3}
    if deadline is not None:
        spec["progressDeadlineSeconds"] = deadline
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "chat", "generation": 2, "uid": "dep"},
        "spec": spec,
        "status": {
            "observedGeneration": 2,
            "replicas": 5,
            "updatedReplicas": 2,
            "readyReplicas": 3,
            "availableReplicas": 3,
            "conditions": list(conditions),
        },
    }


def pod_workload(pod: str, *, admitted_at: str | None) -> dict[str, Any]:
    """Kueue's Workload of one pod, owned by the pod; admitted at ``admitted_at`` (its
    ``Admitted`` condition's lastTransitionTime), or waiting for quota when None."""
    conditions = (
        [
            {"type": "QuotaReserved", "status": "True", "lastTransitionTime": admitted_at},
            {"type": "Admitted", "status": "True", "lastTransitionTime": admitted_at},
        ]
        if admitted_at
        else [{"type": "QuotaReserved", "status": "False", "message": KUEUE_WORDS}]
    )
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": f"pod-{pod}-0a1b2",
            "ownerReferences": [{"kind": "Pod", "name": pod, "uid": f"uid-{pod}"}],
        },
        "status": {"conditions": conditions},
    }


def pod(name: str, *, node: str = "", phase: str = "Running", **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, **status},
    }


def ready(since: str, status: str = "True") -> list[dict[str, Any]]:
    return [{"type": "Ready", "status": status, "lastTransitionTime": since}]


OLD = ("chat-6fd5-a", "chat-6fd5-b", "chat-6fd5-c")
SERVING = tuple(pod(name, node="n1", conditions=ready(T_EARLIER)) for name in OLD)
# Bound to a node that never runs it: no kubelet writes its status (as measured on kwok).
NEVER_STARTED = pod(
    "chat-6956-x",
    node="stack-mi300x-nokubelet",
    phase="Pending",
    conditions=[{"type": "PodScheduled", "status": "True"}],
)
GATED = pod(
    "chat-6956-y",
    phase="Pending",
    conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
)
PODS = (*SERVING, NEVER_STARTED, GATED)


def workloads(new_pod_admitted_at: str) -> tuple[dict[str, Any], ...]:
    return (
        *(pod_workload(name, admitted_at=T_EARLIER) for name in OLD),
        pod_workload("chat-6956-x", admitted_at=new_pod_admitted_at),
        pod_workload("chat-6956-y", admitted_at=None),
    )


def previous(admitted: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": "READY",
        "observedGeneration": 2,
        "conditions": [SCHEDULABLE, admitted],
        "startTime": T_EARLIER,
        "duration": 0,
    }


PARTLY_ADMITTED = {
    "type": "Admitted",
    "status": "True",
    "observedGeneration": 2,
    "lastTransitionTime": T_EARLIER,
    "reason": "PartlyAdmitted",
    "message": f"4 of 5 pods are admitted; 1 pending admission into 'svc': {KUEUE_WORDS}",
}
WAITING_FOR_QUOTA = {
    **PARTLY_ADMITTED,
    "reason": "RolloutWaitingForQuota",
    "message": "The rollout of Deployment chat waits for quota: pod chat-6956-y pending "
    f"admission into 'svc': {KUEUE_WORDS}; 3 of 3 replicas are available and serve "
    "meanwhile (the Deployment keeps its old pods until their successors are available; it "
    "passed its progressDeadlineSeconds of 5 and goes on once Kueue admits the new pods)",
}
NEVER_STARTED_TOLD = (
    "pod chat-6956-x was admitted by Kueue at 2026-01-01T11:59:50Z and is not Ready within "
    "the deadline (Pending on node stack-mi300x-nokubelet)"
)


def derive(
    before: dict[str, Any],
    child: dict[str, Any],
    *,
    admitted_at: str = TEN_SECONDS_AGO,
    pods: tuple[dict[str, Any], ...] = PODS,
) -> StatusDecision:
    return derive_status(
        workload_kind="KaiwoService",
        generation=2,
        previous_status=before,
        observed=ObservedChildren(
            child_kind="Deployment",
            child=child,
            kueue_workloads=workloads(admitted_at),
            pods=pods,
        ),
        schedulable=OK,
        cluster_queue="svc",
        now=NOW,
    )


def test_an_admitted_pod_never_ready_while_another_waits_for_quota_is_an_error() -> None:
    """Before: READY, ``RolloutWaitingForQuota`` (decision 0168 took the whole rollout for a
    wait for quota), and no plan ever said otherwise."""
    error = derive(previous(WAITING_FOR_QUOTA), deployment(PAST_DEADLINE))

    told = (
        'ReplicaSet "chat-6956" has timed out progressing. (progressDeadlineSeconds: 5); '
        + NEVER_STARTED_TOLD
    )
    assert error.status == {
        "status": "ERROR",
        "observedGeneration": 2,
        "conditions": [
            SCHEDULABLE,
            PARTLY_ADMITTED,
            {
                "type": "ChildHealthy",
                "status": "False",
                "observedGeneration": 2,
                "lastTransitionTime": "2026-01-01T12:00:00Z",
                "reason": "ProgressDeadlineExceeded",
                "message": told,
            },
        ],
        "startTime": T_EARLIER,
        "duration": 0,  # not a running phase: the duration written last stays
    }
    assert error.events == (EventIntent(type="Warning", reason="WorkloadError", message=told),)
    assert error.replan_after is None
    again = derive(error.status, deployment(PAST_DEADLINE))
    assert (again.status, again.events) == (error.status, ())


def test_an_admitted_pod_within_its_time_asks_to_be_planned_when_it_runs_out() -> None:
    """Admitted 2 s ago with a deadline of 5: still a wait for quota, and the plan asks to be
    made again in 3 s. Before: no moment, so nothing looked again unless another change
    arrived."""
    waiting = derive(
        previous(WAITING_FOR_QUOTA), deployment(PAST_DEADLINE), admitted_at=TWO_SECONDS_AGO
    )
    assert waiting.status["status"] == "READY"
    assert waiting.status["conditions"][1] == WAITING_FOR_QUOTA
    assert waiting.replan_after == timedelta(seconds=3)


def test_the_deadline_counts_from_the_pods_admission_not_the_deployments_progress() -> None:
    """The Deployment controller still says it progresses (another pod's progress renewed its
    deadline), yet the pod admitted 10 s ago with a deadline of 5 is not Ready: ERROR, told
    in the planner's words. Before: READY."""
    error = derive(previous(PARTLY_ADMITTED), deployment(ROLLING))
    assert error.status["status"] == "ERROR"
    health = error.status["conditions"][2]
    assert (health["type"], health["reason"], health["message"]) == (
        "ChildHealthy",
        "ProgressDeadlineExceeded",
        f"Deployment chat is not progressing (progressDeadlineSeconds: 5); {NEVER_STARTED_TOLD}",
    )


def test_a_pod_ready_once_counts_from_when_it_stopped_being_ready() -> None:
    """Admitted an hour ago, Ready until 2 s ago: 3 s left, not an error. Before: no moment
    to plan again."""
    unready = pod("chat-6956-x", node="n2", conditions=ready(TWO_SECONDS_AGO, status="False"))
    waiting = derive(
        previous(WAITING_FOR_QUOTA),
        deployment(PAST_DEADLINE),
        admitted_at=T_EARLIER,
        pods=(*SERVING, unready, GATED),
    )
    assert waiting.status["status"] == "READY"
    assert waiting.replan_after == timedelta(seconds=3)


def test_a_deployment_that_completed_its_rollout_holds_no_deadline() -> None:
    """The Deployment controller times out only a rollout; a pod of a complete Deployment
    (a lost replica's replacement) is not looked at. Passes before and after."""
    observed = ObservedChildren(
        child_kind="Deployment",
        child=deployment(COMPLETE),
        kueue_workloads=workloads(T_EARLIER),
        pods=PODS,
    )
    assert admitted_pods_deadline(observed, now=NOW) == AdmittedPodsDeadline()


def test_without_a_progress_deadline_the_kubernetes_default_of_600_seconds_holds() -> None:
    def at(admitted_at: datetime) -> AdmittedPodsDeadline:
        observed = ObservedChildren(
            child_kind="Deployment",
            child=deployment(ROLLING, deadline=None),
            kueue_workloads=(
                pod_workload("chat-6956-x", admitted_at=admitted_at.strftime("%Y-%m-%dT%H:%M:%SZ")),
            ),
            pods=(NEVER_STARTED,),
        )
        return admitted_pods_deadline(observed, now=NOW)

    assert at(NOW - timedelta(seconds=599)) == AdmittedPodsDeadline(
        next_deadline=NOW + timedelta(seconds=1)
    )
    assert at(NOW - timedelta(seconds=600)) == AdmittedPodsDeadline(
        overdue=(
            OverduePod(
                name="chat-6956-x",
                admitted_at=NOW - timedelta(seconds=600),
                pod_phase="Pending",
                node="stack-mi300x-nokubelet",
            ),
        )
    )


def test_pods_ready_finished_or_being_deleted_hold_no_deadline() -> None:
    deleting = {
        **NEVER_STARTED,
        "metadata": {**NEVER_STARTED["metadata"], "deletionTimestamp": T_EARLIER},
    }
    finished = pod("chat-6956-x", node="n2", phase="Failed")
    serving = pod("chat-6956-x", node="n2", conditions=ready(TWO_SECONDS_AGO))
    for shown in (deleting, finished, serving):
        observed = ObservedChildren(
            child_kind="Deployment",
            child=deployment(ROLLING),
            kueue_workloads=workloads(T_EARLIER),
            pods=(*SERVING, shown, GATED),
        )
        assert admitted_pods_deadline(observed, now=NOW) == AdmittedPodsDeadline(), shown
