"""ExecutorService on the in-memory bus: plans in, results out, poison to the dead letters."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.results import ApplyResultV1, PlanRefusedV1
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_contracts.events.subjects import plan_subject
from kaiwo_executor.api_retries import RetryPolicy
from kaiwo_executor.service import ExecutorService, executor_consumers
from kaiwo_kube import Retryable
from kaiwo_runtime.bus import Delivery, RetryLater
from kaiwo_runtime.dead_letters import DLQ_REASON
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream

PLANNED = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
RESULT_TIME = datetime(2025, 3, 1, 12, 0, 5, tzinfo=UTC)
PLAN_ID = "8c6f0d0e-7a43-4c1e-9a7f-3f0c2b7d9e10"
OBSERVATION_ID = "4b2a7a51-0f55-4a7e-8d0e-6a8e2f1c0c01:1234"


async def _bus() -> MemoryBus:
    bus = MemoryBus(server=MemoryJetStream(), topology=bus_topology())
    await bus.ensure_streams()
    return bus


def _service(bus: MemoryBus, harness: Any, kube: Any = None, *, attempts: int = 3) -> Any:
    async def no_sleep(_seconds: float) -> None:
        return None

    return ExecutorService(
        bus,
        kube or harness.kube,
        harness.kv,
        lambda: RESULT_TIME,
        retry=RetryPolicy(attempts=attempts, initial_delay=0.0, max_delay=0.0),
        sleep=no_sleep,
    )


async def _publish_plan(bus: MemoryBus, harness: Any, plan: Any, *, plan_id: str = PLAN_ID) -> Any:
    envelope = Envelope.new(
        data=PlanDecidedV1.of(plan, planned_at=PLANNED),
        source="/kaiwo/planner",
        time=PLANNED,
        subject="team-a/train",
        correlationid=harness.owner.uid,
        causationid=OBSERVATION_ID,
        id=plan_id,
    )
    subject = plan_subject(kind="KaiwoJob", namespace="team-a", uid=harness.owner.uid)
    await bus.publish(envelope, subject)
    return envelope


def _redelivery(bus: MemoryBus, *, attempt: int) -> Delivery:
    """The one stored plan delivered again (as after a lost ack or a nak)."""
    [stored] = bus.server.stream_messages("KAIWO_PLAN")
    return Delivery(
        stream="KAIWO_PLAN",
        consumer="executor-plan",
        stream_sequence=stored.sequence,
        attempt=attempt,
        subject=stored.subject,
        headers=stored.headers,
        body=stored.body,
    )


def _results(bus: MemoryBus) -> list[tuple[str, Envelope[ApplyResultV1]]]:
    return [
        (stored.subject, Envelope[ApplyResultV1].from_nats(stored.headers, stored.body))
        for stored in bus.server.stream_messages("KAIWO_RES")
        if not stored.subject.startswith("kaiwo.res.refused.")
    ]


def _refusals(bus: MemoryBus) -> list[tuple[str, Envelope[PlanRefusedV1]]]:
    return [
        (stored.subject, Envelope[PlanRefusedV1].from_nats(stored.headers, stored.body))
        for stored in bus.server.stream_messages("KAIWO_RES")
        if stored.subject.startswith("kaiwo.res.refused.")
    ]


async def test_a_plan_is_applied_and_its_result_published_caused_by_the_plan(
    harness: Any,
) -> None:
    bus = await _bus()
    service = _service(bus, harness)
    await _publish_plan(bus, harness, harness.plan([harness.job(), harness.config_map()]))

    assert await service.step() == 1

    assert harness.find("batch/v1", "Job", "train") is not None
    [(subject, result)] = _results(bus)
    assert subject == f"kaiwo.res.applied.kaiwojob.team-a.{harness.owner.uid}"
    assert result.causationid == PLAN_ID
    assert result.correlationid == harness.owner.uid
    assert result.source == "/kaiwo/executor"
    assert result.type == "ai.silogen.kaiwo.res.applied.v1"
    assert result.time == RESULT_TIME
    assert result.subject == "team-a/train"
    assert result.data.plan_id == PLAN_ID
    assert result.data.owner == harness.owner
    assert result.data.outcome == "applied"
    assert [(a.operation, a.target.display(), a.outcome) for a in result.data.actions] == [
        ("apply", "Job/team-a/train", "applied"),
        ("apply", "ConfigMap/team-a/train-entrypoint", "applied"),
    ]


async def test_a_redelivered_plan_is_skipped_and_publishes_nothing_more(harness: Any) -> None:
    bus = await _bus()
    service = _service(bus, harness)
    await _publish_plan(bus, harness, harness.plan([harness.job()]))
    await service.step()
    writes = harness.writes()

    # A redelivery (the ack was lost): the handler sees the same message again.
    await service.handle(_redelivery(bus, attempt=2))

    assert harness.writes() == writes
    assert len(_results(bus)) == 1
    assert service.metrics.plans.labels(outcome="skipped")._value.get() == 1


async def test_a_failed_action_makes_a_failed_result(harness: Any) -> None:
    bus = await _bus()
    service = _service(bus, harness)
    bad = harness.config_map()
    bad["metadata"]["name"] = "Not_Valid"
    await _publish_plan(bus, harness, harness.plan([harness.job(), bad]))

    await service.step()

    [(subject, result)] = _results(bus)
    assert subject == f"kaiwo.res.failed.kaiwojob.team-a.{harness.owner.uid}"
    assert result.data.outcome == "failed"
    assert [(a.target.display(), a.http_status) for a in result.data.failures] == [
        ("ConfigMap/team-a/Not_Valid", 422)
    ]


async def test_an_api_server_that_keeps_failing_has_the_plan_redelivered(
    harness: Any, flaky: Any
) -> None:
    bus = await _bus()
    service = _service(bus, harness, flaky, attempts=2)
    flaky.fail("apply", Retryable("unavailable", code=503), Retryable("unavailable", code=503))
    await _publish_plan(bus, harness, harness.plan([harness.job(), harness.config_map()]))

    await service.step()

    # No result yet, the plan waits for redelivery; the ConfigMap that worked is remembered.
    assert _results(bus) == []
    assert harness.find("v1", "ConfigMap", "train-entrypoint") is not None
    assert harness.find("batch/v1", "Job", "train") is None
    assert service.metrics.plans.labels(outcome="retry")._value.get() == 1

    writes = harness.writes()
    await service.handle(_redelivery(bus, attempt=2))

    assert harness.find("batch/v1", "Job", "train") is not None
    assert sum((harness.writes() - writes).values()) == 1
    [(_subject, result)] = _results(bus)
    assert result.data.outcome == "applied"


async def test_on_the_last_delivery_a_failed_result_is_published_before_dead_lettering(
    harness: Any, flaky: Any
) -> None:
    bus = await _bus()
    service = _service(bus, harness, flaky, attempts=1)
    flaky.fail("apply", Retryable("unavailable", code=503))
    await _publish_plan(bus, harness, harness.plan([harness.job()]))
    with pytest.raises(RetryLater):
        await service.handle(_redelivery(bus, attempt=6))

    [(subject, result)] = _results(bus)
    assert subject.startswith("kaiwo.res.failed.kaiwojob.team-a.")
    assert [(a.target.display(), a.http_status) for a in result.data.failures] == [
        ("Job/team-a/train", 503)
    ]


async def test_a_malformed_plan_goes_to_the_dead_letters(harness: Any) -> None:
    bus = await _bus()
    service = _service(bus, harness)
    subject = plan_subject(kind="KaiwoJob", namespace="team-a", uid=harness.owner.uid)
    await bus.publish_raw(
        subject,
        body=b'{"plan": "not a plan"}',
        headers={
            "ce-id": "broken-1",
            "ce-source": "/kaiwo/planner",
            "ce-specversion": "1.0",
            "ce-type": "ai.silogen.kaiwo.plan.decided.v1",
            "ce-time": "2025-03-01T12:00:00Z",
            "ce-correlationid": "x",
            "Nats-Msg-Id": "broken-1",
        },
    )

    await service.step()

    [dead] = bus.server.stream_messages("KAIWO_DLQ")
    assert dead.subject == "kaiwo.dlq.KAIWO_PLAN.executor-plan"
    assert dead.headers[DLQ_REASON] == (
        "rejected: EnvelopeFormatError: invalid-payload: data.plan: Input should be a valid "
        "dictionary or instance of Plan; data.fingerprint: Field required"
    )
    assert _results(bus) == []


def test_the_plan_consumers_are_one_or_one_per_partition() -> None:
    partitioned = executor_consumers(bus_topology(partitions=3))
    alone = executor_consumers(bus_topology())

    assert [c.durable_name for c in partitioned] == [
        "executor-plan-p0",
        "executor-plan-p1",
        "executor-plan-p2",
    ]
    assert [c.durable_name for c in alone] == ["executor-plan"]


async def test_a_forged_plan_for_an_owner_that_does_not_exist_is_dead_lettered(
    harness: Any,
) -> None:
    bus = await _bus()
    service = _service(bus, harness)
    ghost = harness.owner.model_copy(update={"name": "ghost", "uid": "not-a-real-uid"})
    harness.owner = ghost
    plan = harness.plan([harness.job()])
    await _publish_plan(bus, harness, plan)

    await service.step()

    [dead] = bus.server.stream_messages("KAIWO_DLQ")
    assert dead.headers[DLQ_REASON] == (
        "rejected: PoisonMessage: plan refused: the owner KaiwoJob/team-a/ghost does not exist"
    )
    assert harness.find("batch/v1", "Job", "train") is None
    assert _results(bus) == []
    refused = service.metrics.registry.registry.get_sample_value(
        "kaiwo_executor_plans_refused_total", {"owner_kind": "KaiwoJob"}
    )
    assert refused == 1


async def test_a_plan_writing_outside_its_owners_namespace_is_refused_whole(
    harness: Any,
) -> None:
    bus = await _bus()
    service = _service(bus, harness)
    escaped = harness.job()
    escaped["metadata"] = {**escaped["metadata"], "name": "miner", "namespace": "kube-system"}
    await _publish_plan(bus, harness, harness.plan([harness.config_map(), escaped]))

    await service.step()

    [dead] = bus.server.stream_messages("KAIWO_DLQ")
    assert dead.headers[DLQ_REASON] == (
        "rejected: PoisonMessage: plan refused: "
        "Job kube-system/miner: outside the owner's namespace team-a"
    )
    # Nothing of it is applied, not even the part that was within bounds.
    assert harness.find("v1", "ConfigMap", "train-entrypoint") is None
    assert harness.find("batch/v1", "Job", "miner", namespace="kube-system") is None
    [event] = [
        e
        for e in harness.fake.store.list_objects(harness.served("v1", "Event"), namespace="team-a")[
            0
        ]
        if e["reason"] == "PlanRefused"
    ]
    assert event["type"] == "Warning"
    assert event["involvedObject"]["uid"] == harness.owner.uid
    assert "outside the owner's namespace team-a" in event["message"]


async def test_a_gained_partition_is_read_until_it_is_released(harness: Any) -> None:
    bus = MemoryBus(server=MemoryJetStream(), topology=bus_topology(partitions=2))
    await bus.ensure_streams()
    service = ExecutorService(bus, harness.kube, harness.kv, lambda: RESULT_TIME, poll_timeout=0.05)
    await _publish_plan(bus, harness, harness.plan([harness.job()]))
    [stored] = bus.server.stream_messages("KAIWO_PLAN")
    partition = int(stored.subject.rsplit(".", 1)[1])
    work = service.partition_work()

    await work.gained(1 - partition)  # the other partition: the plan is not its to carry out
    await asyncio.sleep(0.2)
    assert _results(bus) == []

    await work.gained(partition)
    for _ in range(100):
        if _results(bus):
            break
        await asyncio.sleep(0.02)
    assert len(_results(bus)) == 1
    assert work.partitions == {0, 1}

    await work.released(partition)
    await work.released(1 - partition)
    assert work.partitions == frozenset()
    assert harness.find("batch/v1", "Job", "train") is not None
