"""A status write the executor gave up on is written by the next resync (decision 0234).

The executor dead-letters a plan whose API calls kept failing through every delivery (the
API server down for more than the 260 s of retries). Its children are corrected by a resync
(absent, drifted), but its status stayed as it was, RUNNING never told, while nothing else
about the owner changed: the planner plans from the status it published, and a resync
published only for gaps in the children.
"""

from __future__ import annotations

from typing import Any

from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.plans import PlanDecidedV1

KAIWO = "kaiwo.silogen.ai/v1alpha1"


def kaiwo_job(status: dict[str, Any] | None = None) -> dict[str, Any]:
    job: dict[str, Any] = {
        "apiVersion": KAIWO,
        "kind": "KaiwoJob",
        "metadata": {"name": "train", "namespace": "team-a", "uid": "uid-train", "generation": 1},
        "spec": {"image": "busybox", "entrypoint": "echo hello"},
    }
    if status is not None:
        job["status"] = status
    return job


def queue_config() -> dict[str, Any]:
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "uid-kqc", "generation": 1},
        "spec": {"clusterQueues": [{"name": "kaiwo", "namespaces": ["team-a"], "spec": {}}]},
    }


def namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "uid": "ns"}}


def admitted_kueue_workload(job_uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": "job-train",
            "namespace": "team-a",
            "uid": "uid-kueue-train",
            "labels": {"kueue.x-k8s.io/job-uid": job_uid},
        },
        "status": {"conditions": [{"type": "Admitted", "status": "True"}]},
    }


def train_plans(harness: Any) -> list[Envelope[PlanDecidedV1]]:
    return [plan for plan in harness.plans() if plan.subject == "team-a/train"]


def planned_status(plan: Envelope[PlanDecidedV1]) -> str:
    assert plan.data.plan.status is not None
    return str(plan.data.plan.status["status"])


async def test_a_resync_publishes_again_a_status_the_owner_never_got(
    harness: Any, clock: Any
) -> None:
    service = harness.service(plan_fn=None, resync_on_start=False, resync_every_seconds=0)
    await service.start()
    await harness.observe(namespace(), "1", "ADDED")
    await harness.observe(queue_config(), "2", "ADDED")
    await harness.observe(kaiwo_job(), "3", "ADDED")
    await harness.drain(service)
    [first] = train_plans(harness)
    # Its Job was created and admitted; the status write of the plan that says RUNNING
    # was dead-lettered: the KaiwoJob is never observed again.
    child = dict(first.data.plan.desired[0])
    child["metadata"] = {**child["metadata"], "uid": "uid-job-train"}
    child["status"] = {"active": 1, "ready": 1}
    clock.advance(5)
    await harness.observe(child, "4", "ADDED")
    await harness.observe(admitted_kueue_workload("uid-job-train"), "5", "ADDED")
    await harness.drain(service)
    running = train_plans(harness)[-1]
    assert planned_status(running) == "RUNNING"
    published = len(train_plans(harness))

    clock.advance(600)
    await service.resync()
    [again] = train_plans(harness)[published:]
    assert (again.data.trigger, planned_status(again)) == ("resync", "RUNNING")
    assert (again.data.absent, again.data.drifted) == ((), ())

    # Written this time: the next resync has nothing to say.
    await harness.observe(kaiwo_job(status=dict(again.data.plan.status or {})), "6")
    await harness.drain(service)
    settled = len(train_plans(harness))
    clock.advance(600)
    await service.resync()
    assert len(train_plans(harness)) == settled
