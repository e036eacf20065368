"""The planner service given an observation the watcher had to reduce (object too large)."""

from __future__ import annotations

from typing import Any

from kaiwo_contracts.events.envelope import Envelope, observed_event_id
from kaiwo_contracts.events.observed import ObservedObjectV1, OversizedObject, reduced_object
from kaiwo_contracts.events.subjects import observed_subject

KAIWO = "kaiwo.silogen.ai/v1alpha1"


def kaiwo_job(rv: str, *, entrypoint: str) -> dict[str, Any]:
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoJob",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": "uid-train",
            "generation": 1 if rv == "3" else 2,
            "resourceVersion": rv,
        },
        "spec": {"image": "busybox", "entrypoint": entrypoint},
    }


def queue_config() -> dict[str, Any]:
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "uid-kqc", "generation": 1},
        "spec": {"clusterQueues": [{"name": "kaiwo", "namespaces": ["team-a"], "spec": {}}]},
    }


async def test_an_oversized_owner_is_reported_invalid_and_its_children_are_kept(
    harness: Any, clock: Any
) -> None:
    service = harness.service(plan_fn=None)
    await service.start()
    await harness.observe(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "uid": "ns"}},
        "1",
        "ADDED",
    )
    await harness.observe(queue_config(), "2", "ADDED")
    await harness.observe(kaiwo_job("3", entrypoint="echo hello"), "3", "ADDED")
    await harness.drain(service)
    clock.advance(1)
    whole = kaiwo_job("4", entrypoint="echo " + "x" * 2_000_000)
    marker = OversizedObject(size_bytes=2_000_250, limit_bytes=1_048_576)
    observed = ObservedObjectV1(
        kind="KaiwoJob",
        api_version=KAIWO,
        namespace="team-a",
        name="train",
        uid="uid-train",
        resource_version="4",
        event_type="MODIFIED",
        object=reduced_object(whole, oversized=marker),
        oversized=marker,
    )
    envelope = Envelope.new(
        data=observed,
        source="/kaiwo/watcher",
        time=clock(),
        correlationid="uid-train",
        subject="team-a/train",
        id=observed_event_id(uid="uid-train", resource_version="4"),
    )
    await harness.watcher.publish(
        envelope, observed_subject(kind="KaiwoJob", namespace="team-a", uid="uid-train")
    )
    await harness.drain(service)

    first, reported = [p for p in harness.plans() if p.correlationid == "uid-train"]
    assert [d["kind"] for d in first.data.plan.desired] == ["Job"]
    assert reported.causationid == "uid-train:4"
    assert (reported.data.plan.desired, reported.data.plan.prune) == ((), ())
    assert reported.data.plan.status is not None
    [valid] = [c for c in reported.data.plan.status["conditions"] if c["type"] == "Valid"]
    assert (valid["status"], valid["reason"]) == ("False", "ObjectTooLarge")
    assert [(e.type, e.reason) for e in reported.data.plan.events] == [
        ("Warning", "ObjectTooLarge")
    ]
    assert harness.dead_letters() == []
