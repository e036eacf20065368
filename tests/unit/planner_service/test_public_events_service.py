"""The planner publishes the public workload events each observation shows, in order, once."""

from __future__ import annotations

from typing import Any

from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.public import WorkloadEventV1
from kaiwo_contracts.events.streams import PUBLIC_STREAM
from kaiwo_planner.service import PlannerService
from kaiwo_runtime.bus import BusError

from tests.unit.planner_service.test_planner_service import FailingOnce, stored_delivery


def public_events(harness: Any) -> list[tuple[str, str, str]]:
    told = []
    for message in harness.server.stream_messages(PUBLIC_STREAM):
        envelope = Envelope[WorkloadEventV1].from_nats(message.headers, message.body)
        told.append((message.subject, envelope.id, envelope.data.transition.value))
    return told


def with_phase(job: dict[str, Any], phase: str, *conditions: dict[str, str]) -> dict[str, Any]:
    return {**job, "status": {"status": phase, "conditions": list(conditions)}}


ADMITTED = {"type": "Admitted", "status": "True", "reason": "Admitted", "message": ""}
SUBJECT = "kaiwo.public.workload.team-a.kaiwojob.uid-train"


async def test_each_transition_is_published_once_in_order(harness: Any, build: Any) -> None:
    service = harness.service()
    await service.start()
    job = build.kaiwo_job("train")
    await harness.observe(job, "1", "ADDED")
    await harness.observe(with_phase(job, "PENDING"), "2")
    await harness.observe(with_phase(job, "PENDING"), "2")  # a relist: the same version
    await harness.observe(with_phase(job, "RUNNING", ADMITTED), "3")
    await harness.observe(with_phase(job, "COMPLETE", ADMITTED), "4")
    await harness.observe(build.gpu_node("gpu-0"), "5", "ADDED")
    await harness.drain(service)

    assert public_events(harness) == [
        (SUBJECT, "uid-train:submitted", "submitted"),
        (SUBJECT, "uid-train:phase-changed:2", "phase-changed"),
        (SUBJECT, "uid-train:admitted:3", "admitted"),
        (SUBJECT, "uid-train:phase-changed:3", "phase-changed"),
        (SUBJECT, "uid-train:phase-changed:4", "phase-changed"),
        (SUBJECT, "uid-train:completed:4", "completed"),
    ]
    [first] = harness.server.stream_messages(PUBLIC_STREAM)[:1]
    envelope = Envelope[WorkloadEventV1].from_nats(first.headers, first.body)
    assert (envelope.source, envelope.correlationid, envelope.subject) == (
        "/kaiwo/planner",
        "uid-train",
        "team-a/train",
    )
    assert envelope.causationid == "uid-train:1"


async def test_a_failed_public_publish_is_sent_again_on_redelivery(
    harness: Any, build: Any
) -> None:
    bus = FailingOnce(harness.bus(), fail_at=2, prefix="kaiwo.public.")
    service = PlannerService(bus, harness.kv, clock=harness.clock, plan_fn=build.toy_planner)
    await service.start()
    job = build.kaiwo_job("train")
    await harness.observe(job, "1", "ADDED")
    await service.handle(await stored_delivery(harness, 1))
    await harness.observe(with_phase(job, "RUNNING", ADMITTED), "2")
    delivery = await stored_delivery(harness, 2)
    try:
        await service.handle(delivery)
        raise AssertionError("the publish failure must reach the bus, which redelivers")
    except BusError:
        pass
    assert [event for _, event, _ in public_events(harness)] == ["uid-train:submitted"]
    await service.handle(delivery)  # the redelivery

    assert [event for _, event, _ in public_events(harness)] == [
        "uid-train:submitted",
        "uid-train:admitted:2",
        "uid-train:phase-changed:2",
    ]
    assert len(harness.plans()) == 2
