"""A serving Deployment's rollout that waits for Kueue's quota, and a READY service scaled up
(decision 0168): the status and Events written out by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_contracts.plans import EventIntent
from kaiwo_planner.domain.scheduling.schedulable import SchedulableVerdict
from kaiwo_planner.domain.status.child_phase import ObservedChildren
from kaiwo_planner.domain.status.rollout import rollout_waiting_for_quota
from kaiwo_planner.domain.status.workload_status import StatusDecision, derive_status

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
T_NOW = "2026-01-01T12:00:00Z"
T_EARLIER = "2026-01-01T11:00:00Z"
OK = SchedulableVerdict(schedulable=True, reason="Schedulable", message="enough GPUs")
SCHEDULABLE = {
    "type": "Schedulable",
    "status": "True",
    "observedGeneration": 2,
    "lastTransitionTime": T_EARLIER,
    "reason": "Schedulable",
    "message": "enough GPUs",
}
PARTLY_ADMITTED = {
    "type": "Admitted",
    "status": "True",
    "observedGeneration": 2,
    "lastTransitionTime": T_EARLIER,
    "reason": "PartlyAdmitted",
    "message": "2 of 3 pods are admitted; 1 pending admission into 'svc': couldn't assign "
    "flavors to pod set main: insufficient unused quota for amd.com/gpu in flavor mi300x, "
    "4 more needed",
}
KUEUE_WORDS = (
    "couldn't assign flavors to pod set main: insufficient unused quota for amd.com/gpu in "
    "flavor mi300x, 4 more needed"
)
PAST_DEADLINE = {
    "type": "Progressing",
    "status": "False",
    "reason": "ProgressDeadlineExceeded",
    "message": 'ReplicaSet "chat-6956" has timed out progressing.',
}
WAITING_MESSAGE = (
    "The rollout of Deployment chat waits for quota: pod chat-6956-v94f4 pending admission "
    f"into 'svc': {KUEUE_WORDS}; 2 of 2 replicas are available and serve meanwhile (the "
    "Deployment keeps its old pods until their successors are available; it passed its "
    "progressDeadlineSeconds of 5 and goes on once Kueue admits the new pods)"
)


def deployment(
    *conditions: dict[str, Any], replicas: int = 2, available: int = 2
) -> dict[str, Any]:
    """A Deployment of 2 rolling to a new image, as measured on the real stack: the new
    ReplicaSet's pod surged, the two old ones available."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "chat", "generation": 2, "uid": "dep"},
        "spec": {"replicas": replicas, "progressDeadlineSeconds": 5},
        "status": {
            "observedGeneration": 2,
            "replicas": 3,
            "updatedReplicas": 1,
            "readyReplicas": available,
            "availableReplicas": available,
            "conditions": list(conditions),
        },
    }


def pod_workload(pod: str, *, admitted: bool) -> dict[str, Any]:
    """Kueue's Workload of one pod (owned by the pod, as Kueue's pod integration makes it)."""
    conditions = (
        [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
            {"type": "Admitted", "status": "True", "reason": "Admitted"},
        ]
        if admitted
        else [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": KUEUE_WORDS,
            }
        ]
    )
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": f"pod-{pod}-0a1b2",
            "namespace": "team",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": pod}],
        },
        "status": {"conditions": conditions},
    }


WORKLOADS = (
    pod_workload("chat-6fd5-mgf6x", admitted=True),
    pod_workload("chat-6fd5-zrnth", admitted=True),
    pod_workload("chat-6956-v94f4", admitted=False),
)


def pod(name: str, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team"},
        "status": {"phase": "Running", **status},
    }


GATED = pod(
    "chat-6956-v94f4",
    phase="Pending",
    conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
)
SERVING_PODS = (pod("chat-6fd5-mgf6x"), pod("chat-6fd5-zrnth"), GATED)


def previous(phase: str = "READY", *conditions: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": phase,
        "observedGeneration": 2,
        "conditions": [SCHEDULABLE, *(conditions or (PARTLY_ADMITTED,))],
        "startTime": T_EARLIER,
        "duration": 0,
    }


def derive(
    before: dict[str, Any],
    child: dict[str, Any],
    *,
    workloads: tuple[dict[str, Any], ...] = WORKLOADS,
    pods: tuple[dict[str, Any], ...] = SERVING_PODS,
) -> StatusDecision:
    return derive_status(
        workload_kind="KaiwoService",
        generation=2,
        previous_status=before,
        observed=ObservedChildren(
            child_kind="Deployment", child=child, kueue_workloads=workloads, pods=pods
        ),
        schedulable=OK,
        cluster_queue="svc",
        now=NOW,
    )


def test_a_rollout_past_its_deadline_waiting_for_quota_stays_ready_and_is_told_once() -> None:
    """Before: ERROR, ``ChildHealthy`` False ``ProgressDeadlineExceeded`` and a Warning
    ``WorkloadError`` while the two old pods served."""
    waiting = derive(previous(), deployment(PAST_DEADLINE))

    assert waiting.status == {
        "status": "READY",
        "observedGeneration": 2,
        "conditions": [
            SCHEDULABLE,
            {
                "type": "Admitted",
                "status": "True",
                "observedGeneration": 2,
                "lastTransitionTime": T_EARLIER,
                "reason": "RolloutWaitingForQuota",
                "message": WAITING_MESSAGE,
            },
        ],
        "startTime": T_EARLIER,
        "duration": 3600,
    }
    assert waiting.events == (
        EventIntent(type="Normal", reason="RolloutWaitingForQuota", message=WAITING_MESSAGE),
    )
    again = derive(waiting.status, deployment(PAST_DEADLINE))
    assert again.status == waiting.status
    assert again.events == ()


def test_the_rollout_admitted_at_last_is_admitted_again_without_an_event() -> None:
    waited = derive(previous(), deployment(PAST_DEADLINE)).status
    admitted = (*WORKLOADS[:2], pod_workload("chat-6956-v94f4", admitted=True))
    done = derive(waited, deployment(), workloads=admitted, pods=())
    assert done.status["status"] == "READY"
    assert done.status["conditions"][1] == {
        "type": "Admitted",
        "status": "True",
        "observedGeneration": 2,
        "lastTransitionTime": T_EARLIER,
        "reason": "Admitted",
        "message": "Workload is admitted",
    }
    assert done.events == ()


def test_a_scaled_up_service_waiting_past_its_deadline_is_running() -> None:
    """Fewer available than asked: the pods' phase, RUNNING, still not ERROR."""
    scaled = derive(previous("RUNNING"), deployment(PAST_DEADLINE, replicas=3))
    assert scaled.status["status"] == "RUNNING"
    assert scaled.status["conditions"][1]["message"] == WAITING_MESSAGE.replace(
        "2 of 2 replicas", "2 of 3 replicas"
    )


CRASHING = pod(
    "chat-6956-x1",
    phase="Running",
    containerStatuses=[
        {
            "name": "workload",
            "ready": False,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
        }
    ],
)
UNSCHEDULABLE = pod(
    "chat-6956-x2",
    phase="Pending",
    conditions=[
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/4 nodes are available: 4 Insufficient amd.com/gpu.",
        }
    ],
)


@pytest.mark.parametrize(
    ("workloads", "pods", "reason"),
    [
        # Every pod admitted: the rollout is stuck on something else than quota.
        (WORKLOADS[:2], SERVING_PODS[:2], "ProgressDeadlineExceeded"),
        # A new pod crashing, another waiting for quota: the rollout truly fails.
        (WORKLOADS, (*SERVING_PODS, CRASHING), "ProgressDeadlineExceeded"),
        # An admitted pod no node fits.
        (WORKLOADS, (*SERVING_PODS, UNSCHEDULABLE), "ProgressDeadlineExceeded"),
    ],
    ids=["all-admitted", "crashing-pod", "unschedulable-pod"],
)
def test_a_rollout_stuck_on_anything_but_quota_is_still_an_error(
    workloads: tuple[dict[str, Any], ...], pods: tuple[dict[str, Any], ...], reason: str
) -> None:
    error = derive(previous(), deployment(PAST_DEADLINE), workloads=workloads, pods=pods)
    assert error.status["status"] == "ERROR"
    health = next(c for c in error.status["conditions"] if c["type"] == "ChildHealthy")
    assert (health["status"], health["reason"]) == ("False", reason)
    assert [e.reason for e in error.events] == ["WorkloadError"]


def test_rollout_waiting_for_quota_names_the_waiting_pods() -> None:
    observed = ObservedChildren(
        child_kind="Deployment",
        child=deployment(PAST_DEADLINE),
        kueue_workloads=(*WORKLOADS, pod_workload("chat-6956-a0000", admitted=False)),
        pods=SERVING_PODS,
    )
    assert rollout_waiting_for_quota(observed) == ("chat-6956-a0000", "chat-6956-v94f4")
    # Not past the deadline: the rollout goes on, PartlyAdmitted tells it (decision 0135).
    assert (
        rollout_waiting_for_quota(
            ObservedChildren(
                child_kind="Deployment",
                child=deployment(),
                kueue_workloads=WORKLOADS,
                pods=SERVING_PODS,
            )
        )
        == ()
    )
    # None admitted: the service waits (PENDING), as any workload not admitted.
    assert (
        rollout_waiting_for_quota(
            ObservedChildren(
                child_kind="Deployment",
                child=deployment(PAST_DEADLINE),
                kueue_workloads=(WORKLOADS[2],),
                pods=(GATED,),
            )
        )
        == ()
    )


def test_a_ready_service_scaled_up_says_how_many_replicas_serve_not_that_it_started() -> None:
    """Before: ``WorkloadRunning`` "Workload has started", for a service serving for hours."""
    ready = previous(
        "READY", {**PARTLY_ADMITTED, "reason": "Admitted", "message": "Workload is admitted"}
    )
    admitted = (*WORKLOADS[:2], pod_workload("chat-6956-v94f4", admitted=True))
    scaled = derive(ready, deployment(replicas=3, available=2), workloads=admitted, pods=())
    assert scaled.status["status"] == "RUNNING"
    assert scaled.events == (
        EventIntent(
            type="Normal",
            reason="WorkloadRunning",
            message="Workload serves with 2 of 3 replicas available; 1 not available yet",
        ),
    )


def test_a_service_starting_then_running_has_started() -> None:
    starting = previous(
        "STARTING", {**PARTLY_ADMITTED, "reason": "Admitted", "message": "Workload is admitted"}
    )
    admitted = (*WORKLOADS[:2], pod_workload("chat-6956-v94f4", admitted=True))
    running = derive(starting, deployment(replicas=3, available=1), workloads=admitted, pods=())
    assert running.status["status"] == "RUNNING"
    assert running.events == (
        EventIntent(type="Normal", reason="WorkloadRunning", message="Workload has started"),
    )


def test_a_first_rollout_waiting_for_quota_whose_admitted_pod_runs_is_running() -> None:
    """A new service of 2: one pod admitted and running, not Ready yet (its server loads
    its model), the other waiting for quota, past the progress deadline. Its phase is what
    its pods do: RUNNING, with ``startTime`` from now (decision 0214; it said STARTING)."""
    running_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "chat-6956-a1b2c",
            "namespace": "team",
            "uid": "chat-6956-a1b2c",
            "labels": {"pod-template-hash": "6956"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "chat-6956",
                    "controller": True,
                }
            ],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]},
    }
    starting = {
        "status": "STARTING",
        "observedGeneration": 2,
        "conditions": [SCHEDULABLE, PARTLY_ADMITTED],
    }
    child = deployment(PAST_DEADLINE, available=0)
    child["metadata"]["namespace"] = "team"
    waiting = derive(
        starting,
        child,
        workloads=(
            pod_workload("chat-6956-a1b2c", admitted=True),
            pod_workload("chat-6956-v94f4", admitted=False),
        ),
        pods=(running_pod, GATED),
    )
    assert (
        waiting.status["status"],
        waiting.status["startTime"],
        waiting.status["duration"],
        waiting.status["conditions"][1]["reason"],
    ) == ("RUNNING", T_NOW, 0, "RolloutWaitingForQuota")
