"""What the settlement of one delivery logs: nothing on success, the delivery when not."""

from __future__ import annotations

import pytest
from kaiwo_contracts.events.streams import ConsumerSpec
from kaiwo_runtime.bus import Delivery, PoisonMessage
from kaiwo_runtime.settlement import Ack, DeadLetter, Retry, settle
from structlog.testing import capture_logs

CONSUMER = ConsumerSpec(
    durable_name="planner-obs",
    stream="KAIWO_OBS",
    filter_subjects=("kaiwo.obs.>",),
    description="test",
    max_deliver=3,
    backoff_seconds=(1.0,),
)
DELIVERY = Delivery(
    stream="KAIWO_OBS",
    consumer="planner-obs",
    stream_sequence=7,
    attempt=1,
    subject="kaiwo.obs.kaiwojob.ns.u1",
    headers={"nats-msg-id": "u1:5"},
)


async def test_a_handled_message_is_acknowledged_without_a_log_line() -> None:
    async def handler(_delivery: Delivery) -> None:
        return None

    with capture_logs() as logs:
        assert await settle(handler, DELIVERY, CONSUMER) == Ack()
    assert logs == []


async def test_a_rejected_message_is_logged_with_where_it_came_from() -> None:
    async def handler(_delivery: Delivery) -> None:
        raise PoisonMessage("not an observation")

    with capture_logs() as logs:
        outcome = await settle(handler, DELIVERY, CONSUMER)
    assert outcome == DeadLetter("rejected: PoisonMessage: not an observation")
    assert logs == [
        {
            "event": "message rejected",
            "log_level": "warning",
            "reason": "rejected: PoisonMessage: not an observation",
            "stream": "KAIWO_OBS",
            "consumer": "planner-obs",
            "seq": 7,
            "attempt": 1,
            "event_id": "u1:5",
        }
    ]


@pytest.mark.parametrize(("attempt", "level"), [(1, "warning"), (3, "error")])
async def test_a_failed_message_is_logged_with_its_attempt(attempt: int, level: str) -> None:
    async def handler(_delivery: Delivery) -> None:
        raise RuntimeError("publish failed")

    delivery = Delivery(
        stream="KAIWO_OBS",
        consumer="planner-obs",
        stream_sequence=7,
        attempt=attempt,
        subject="kaiwo.obs.kaiwojob.ns.u1",
    )
    with capture_logs() as logs:
        outcome = await settle(handler, delivery, CONSUMER)
    assert isinstance(outcome, Retry if attempt < 3 else DeadLetter)
    assert [(entry["log_level"], entry["seq"], entry["attempt"]) for entry in logs] == [
        (level, 7, attempt)
    ]
