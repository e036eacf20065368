"""Which workload a waiting Kueue Workload is told ``queued`` for, and when (decision 0055)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_planner.domain.status.queued_events import (
    QueueObjects,
    derive_queued_event,
    owning_workload,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
JOB = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoJob",
    "metadata": {"name": "train", "namespace": "ml", "uid": "uid-train", "resourceVersion": "9"},
    "spec": {"clusterQueue": "team"},
    "status": {"status": "PENDING"},
}
BATCH = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {
        "name": "train",
        "namespace": "ml",
        "uid": "uid-batch",
        "ownerReferences": [{"kind": "KaiwoJob", "name": "train", "uid": "uid-train"}],
    },
}
NOTHING = QueueObjects(cluster_queues=(), local_queues=(), kueue_workloads=(), workloads=())


def kueue_workload(*, admitted: bool = False, **metadata: Any) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if admitted:
        status["admission"] = {"clusterQueue": "team"}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "job-train", "namespace": "ml", "uid": "uid-kw", **metadata},
        "spec": {"queueName": "q"},
        "status": status,
    }


def observed(obj: dict[str, Any], rv: str, event: str = "MODIFIED") -> ObservedObjectV1:
    return ObservedObjectV1(
        kind="Workload",
        api_version="kueue.x-k8s.io/v1beta1",
        namespace="ml",
        name="job-train",
        uid="uid-kw",
        resource_version=rv,
        event_type=event,  # type: ignore[arg-type]
        object=obj,
    )


def lookup(uid: str) -> dict[str, Any] | None:
    return {"uid-train": JOB, "uid-batch": BATCH}.get(uid)


def test_the_workload_is_found_through_the_job_it_owns_or_the_job_uid_label() -> None:
    by_owner = kueue_workload(
        ownerReferences=[{"kind": "Job", "name": "train", "uid": "uid-batch"}]
    )
    by_label = kueue_workload(labels={"kueue.x-k8s.io/job-uid": "uid-train"})
    stray = kueue_workload(ownerReferences=[{"kind": "Job", "name": "x", "uid": "uid-other"}])

    assert owning_workload(by_owner, lookup) is JOB
    assert owning_workload(by_label, lookup) is JOB
    assert owning_workload(stray, lookup) is None


def test_a_serving_pods_workload_is_found_by_the_pods_run_id() -> None:
    """A Deployment's pod is admitted on its own: its Workload is owned by the pod, whose
    ReplicaSet the planner does not hold; the pod names its workload by its run-id label."""
    service = {**JOB, "kind": "KaiwoService", "metadata": {**JOB["metadata"], "uid": "uid-svc"}}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "svc-7d9f-abcde",
            "namespace": "ml",
            "uid": "uid-pod",
            "labels": {"kaiwo.silogen.ai/run-id": "uid-svc", "pod-template-hash": "7d9f"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "svc-7d9f", "uid": "uid-rs"}],
        },
    }
    held = {"uid-svc": service, "uid-pod": pod}
    of_pod = kueue_workload(
        ownerReferences=[{"kind": "Pod", "name": "svc-7d9f-abcde", "uid": "uid-pod"}]
    )
    unlabelled = {**pod, "metadata": {**pod["metadata"], "labels": {}}}

    assert owning_workload(of_pod, held.get) is service
    assert owning_workload(of_pod, {**held, "uid-pod": unlabelled}.get) is None
    assert owning_workload(of_pod, {"uid-pod": pod}.get) is None  # the service not held


def test_a_workload_whose_job_was_not_seen_yet_is_found_by_the_jobs_name() -> None:
    early = kueue_workload(ownerReferences=[{"kind": "Job", "name": "train", "uid": "uid-new"}])

    def named(namespace: str, name: str) -> dict[str, Any] | None:
        return JOB if (namespace, name) == ("ml", "train") else None

    assert owning_workload(early, lookup) is None
    assert owning_workload(early, lookup, named) is JOB


def test_queued_once_per_wait_and_never_for_a_deletion() -> None:
    waiting, admitted = kueue_workload(), kueue_workload(admitted=True)

    def told(previous: dict[str, Any] | None, now: ObservedObjectV1) -> str | None:
        event = derive_queued_event(previous, now, workload=JOB, queues=NOTHING, observed_at=NOW)
        return None if event is None else event.id

    assert told(None, observed(waiting, "5")) == "uid-train:queued:5"
    assert told(waiting, observed(waiting, "6")) is None  # still waiting
    assert told(waiting, observed(admitted, "7")) is None
    assert told(admitted, observed(waiting, "8")) == "uid-train:queued:8"  # evicted
    assert told(waiting, observed(waiting, "9", "DELETED")) is None
    # Its queue is not among the ClusterQueues the planner holds: told without an estimate.
    event = derive_queued_event(
        None, observed(waiting, "5"), workload=JOB, queues=NOTHING, observed_at=NOW
    )
    assert event is not None
    assert event.payload.estimate is None  # type: ignore[union-attr]
    assert event.subject == "kaiwo.public.workload.ml.kaiwojob.uid-train"


def evicted(reason: str, message: str) -> dict[str, Any]:
    """A Kueue Workload Kueue evicted and took the quota of: ``Evicted`` holds until it is
    admitted again."""
    found = kueue_workload()
    found["status"]["conditions"] = [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "q"},
        {"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "a"},
        {"type": "Evicted", "status": "True", "reason": reason, "message": message},
    ]
    return found


def test_queued_again_after_an_eviction_says_why_kueue_evicted_it() -> None:
    """A subscriber tells a stopped queue from a preemption: ``queued`` after an eviction
    carries Kueue's ``Evicted`` reason and message (decision 0171; before, both were null and
    ``phase-changed`` to PENDING said nothing more)."""
    admitted = kueue_workload(admitted=True)

    def said(now: dict[str, Any]) -> tuple[str | None, str | None]:
        event = derive_queued_event(
            admitted, observed(now, "8"), workload=JOB, queues=NOTHING, observed_at=NOW
        )
        assert event is not None
        return event.payload.reason, event.payload.message  # type: ignore[union-attr]

    assert said(evicted("ClusterQueueStopped", "The ClusterQueue is stopped")) == (
        "ClusterQueueStopped",
        "The ClusterQueue is stopped",
    )
    assert said(evicted("Preempted", "Preempted to accommodate a workload (UID: u-1)")) == (
        "Preempted",
        "Preempted to accommodate a workload (UID: u-1)",
    )
    assert said(evicted("PodsReadyTimeout", "")) == ("PodsReadyTimeout", None)
    assert said(evicted("LocalQueueStopped", "x" * 600)) == ("LocalQueueStopped", "x" * 512)


def test_queued_for_the_first_time_has_no_reason() -> None:
    event = derive_queued_event(
        None, observed(kueue_workload(), "5"), workload=JOB, queues=NOTHING, observed_at=NOW
    )
    assert event is not None
    assert (event.payload.reason, event.payload.message) == (None, None)  # type: ignore[union-attr]
    wire = event.payload.model_dump(mode="json", by_alias=True, exclude_none=False)
    assert wire["reason"] is None and wire["transition"] == "queued"


def test_a_replacement_pod_of_an_evicted_service_is_queued_with_the_services_eviction() -> None:
    """A READY service's pods evicted from a stopped queue are replaced by the ReplicaSet; the
    new pods' fresh Workloads say only that they wait ("ClusterQueue svc is inactive"). Their
    ``queued`` carries the eviction the service's own ``Evicted`` condition keeps (decision
    0180; before, both were null). Once admitted again (the condition False), a new wait says
    nothing of it."""
    fresh = kueue_workload()
    fresh["status"]["conditions"] = [
        {
            "type": "QuotaReserved",
            "status": "False",
            "reason": "Inadmissible",
            "message": "ClusterQueue svc is inactive",
        }
    ]

    def service(evicted: str) -> dict[str, Any]:
        return {
            **JOB,
            "kind": "KaiwoService",
            "status": {
                "status": "PENDING",
                "conditions": [
                    {
                        "type": "Evicted",
                        "status": evicted,
                        "reason": "ClusterQueueStopped",
                        "message": "The ClusterQueue is stopped",
                    }
                ],
            },
        }

    def said(workload: dict[str, Any]) -> tuple[str | None, str | None]:
        event = derive_queued_event(
            None, observed(fresh, "5"), workload=workload, queues=NOTHING, observed_at=NOW
        )
        assert event is not None
        return event.payload.reason, event.payload.message  # type: ignore[union-attr]

    assert said(service("True")) == ("ClusterQueueStopped", "The ClusterQueue is stopped")
    assert said(service("False")) == (None, None)
