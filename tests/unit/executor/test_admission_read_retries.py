"""A plan's admission reads are retried like its writes (decision 0234).

Admission reads the plan's owner (and configuration objects) before anything is written.
A 429 or 5xx there went straight to JetStream: the plan came back 5 s later, then 15, 60,
180 s, where a failed write is retried within the delivery (0.2 s, 0.4 s, ...).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.results import ApplyResultV1
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_contracts.events.subjects import plan_subject
from kaiwo_executor.api_retries import RetryPolicy
from kaiwo_executor.service import ExecutorService
from kaiwo_kube import Retryable
from kaiwo_runtime.bus import Delivery, RetryLater
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream

PLANNED = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
RESULT_TIME = datetime(2025, 3, 1, 12, 0, 5, tzinfo=UTC)
PLAN_ID = "0d4c3b2a-7a43-4c1e-9a7f-3f0c2b7d9e10"


async def _bus() -> MemoryBus:
    bus = MemoryBus(server=MemoryJetStream(), topology=bus_topology())
    await bus.ensure_streams()
    return bus


def _service(bus: MemoryBus, harness: Any, kube: Any, *, attempts: int) -> ExecutorService:
    async def no_sleep(_seconds: float) -> None:
        return None

    return ExecutorService(
        bus,
        kube,
        harness.kv,
        lambda: RESULT_TIME,
        retry=RetryPolicy(attempts=attempts, initial_delay=0.0, max_delay=0.0),
        sleep=no_sleep,
    )


async def _publish_plan(bus: MemoryBus, harness: Any) -> None:
    envelope = Envelope.new(
        data=PlanDecidedV1.of(harness.plan([harness.job()]), planned_at=PLANNED),
        source="/kaiwo/planner",
        time=PLANNED,
        subject="team-a/train",
        correlationid=harness.owner.uid,
        causationid="observation-1",
        id=PLAN_ID,
    )
    await bus.publish(
        envelope, plan_subject(kind="KaiwoJob", namespace="team-a", uid=harness.owner.uid)
    )


def _delivery(bus: MemoryBus, *, attempt: int) -> Delivery:
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


def _outcomes(bus: MemoryBus) -> list[str]:
    return [
        Envelope[ApplyResultV1].from_nats(stored.headers, stored.body).data.outcome
        for stored in bus.server.stream_messages("KAIWO_RES")
    ]


async def test_an_owner_read_the_api_server_throttles_once_is_retried_at_once(
    harness: Any, flaky: Any
) -> None:
    bus = await _bus()
    service = _service(bus, harness, flaky, attempts=3)
    flaky.fail("get", Retryable("too many requests", code=429))
    await _publish_plan(bus, harness)

    await service.handle(_delivery(bus, attempt=1))

    assert _outcomes(bus) == ["applied"]
    assert harness.find("batch/v1", "Job", "train") is not None


async def test_owner_reads_that_keep_failing_have_the_plan_delivered_again(
    harness: Any, flaky: Any
) -> None:
    bus = await _bus()
    service = _service(bus, harness, flaky, attempts=2)
    flaky.fail("get", *[Retryable("unavailable", code=503)] * 2)
    await _publish_plan(bus, harness)

    with pytest.raises(RetryLater, match="admission reads"):
        await service.handle(_delivery(bus, attempt=1))

    assert flaky.reads["KaiwoJob"] == 2
    assert _outcomes(bus) == []
    assert harness.find("batch/v1", "Job", "train") is None
