"""The planner tells ``queued`` (WorkloadEventV2) with the estimated start when a workload's
Kueue Workload starts waiting (decision 0055): once per wait, from the Kueue objects it holds."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.public import WorkloadEventV2
from kaiwo_contracts.events.streams import PUBLIC_STREAM

from tests.unit.planner_service.conftest import START

KUEUE = "kueue.x-k8s.io/v1beta1"
GPU = "nvidia.com/gpu"
SUBJECT = "kaiwo.public.workload.team-a.kaiwojob.uid-train"


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def kueue_workload(
    name: str,
    *,
    gpus: int,
    created: datetime,
    admitted: datetime | None = None,
    finished: datetime | None = None,
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    conditions = []
    status: dict[str, Any] = {"conditions": conditions}
    if admitted is not None:
        conditions.append(
            {"type": "Admitted", "status": "True", "lastTransitionTime": stamp(admitted)}
        )
        status["admission"] = {"clusterQueue": "team"}
    if finished is not None:
        conditions.append(
            {"type": "Finished", "status": "True", "lastTransitionTime": stamp(finished)}
        )
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "team-a",
        "uid": f"uid-kw-{name}",
        "creationTimestamp": stamp(created),
    }
    if owner is not None:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
            }
        ]
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": metadata,
        "spec": {
            "queueName": "q",
            "podSets": [
                {
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"resources": {"requests": {GPU: gpus}}}]}
                    },
                }
            ],
        },
        "status": status,
    }


CLUSTER_QUEUE = {
    "apiVersion": KUEUE,
    "kind": "ClusterQueue",
    "metadata": {"name": "team", "uid": "uid-cq"},
    "spec": {
        "resourceGroups": [
            {"flavors": [{"name": "h100", "resources": [{"name": GPU, "nominalQuota": 4}]}]}
        ]
    },
}
LOCAL_QUEUE = {
    "apiVersion": KUEUE,
    "kind": "LocalQueue",
    "metadata": {"name": "q", "namespace": "team-a", "uid": "uid-lq"},
    "spec": {"clusterQueue": "team"},
}


def queued_events(harness: Any) -> list[tuple[str, str, WorkloadEventV2]]:
    told = []
    for message in harness.server.stream_messages(PUBLIC_STREAM):
        if message.headers.get("ce-type") != WorkloadEventV2.EVENT_TYPE:
            continue
        envelope = Envelope[WorkloadEventV2].from_nats(message.headers, message.body)
        told.append((message.subject, envelope.id, envelope.data))
    return told


async def test_a_waiting_workload_is_told_queued_with_its_place_and_estimated_start(
    harness: Any, build: Any
) -> None:
    service = harness.service()
    await service.start()
    job = {**build.kaiwo_job("train"), "spec": {"image": "busybox", "user": "ada@example.com"}}
    batch = build.batch_job(job)
    await harness.observe(CLUSTER_QUEUE, "1", "ADDED")
    await harness.observe(LOCAL_QUEUE, "2", "ADDED")
    # One run recorded in the cluster: 10 minutes.
    old = kueue_workload(
        "old",
        gpus=2,
        created=START - timedelta(hours=3),
        admitted=START - timedelta(hours=3),
        finished=START - timedelta(hours=2, minutes=50),
    )
    await harness.observe(old, "3", "ADDED")
    # All 4 GPUs held since 11:55.
    running = kueue_workload(
        "run", gpus=4, created=START - timedelta(minutes=6), admitted=START - timedelta(minutes=5)
    )
    await harness.observe(running, "4", "ADDED")
    await harness.observe(job, "5", "ADDED")
    await harness.observe(batch, "6", "ADDED")
    waiting = kueue_workload("job-train", gpus=2, created=START, owner=batch)
    await harness.observe(waiting, "7", "ADDED")
    await harness.observe(waiting, "8")  # still waiting: nothing new to tell
    admitted = kueue_workload(
        "job-train", gpus=2, created=START, admitted=START + timedelta(minutes=5), owner=batch
    )
    await harness.observe(admitted, "9")
    await harness.observe(waiting, "10")  # evicted: waiting again
    await harness.drain(service)

    told = queued_events(harness)
    assert [(subject, event_id) for subject, event_id, _ in told] == [
        (SUBJECT, "uid-train:queued:7"),
        (SUBJECT, "uid-train:queued:10"),
    ]
    event = told[0][2]
    assert (event.transition.value, event.user, event.workload.name) == (
        "queued",
        "ada@example.com",
        "train",
    )
    estimate = event.estimate
    assert estimate is not None
    # "run" is 5 minutes into what the one recorded run took (10): its GPUs free at 12:05.
    assert (estimate.cluster_queue, estimate.resource, estimate.gpus) == ("team", GPU, 2)
    assert estimate.position == 1
    assert estimate.start == estimate.earliest == estimate.latest == START + timedelta(minutes=5)
    assert (estimate.method.value, estimate.recorded_runs, estimate.capacity_gpus) == (
        "recorded run times",
        1,
        4,
    )
