"""Slow and failing plans (decision 0234).

* On both adapters: the executor's plans of owners whose API calls keep failing are nak'ed
  for a retry and stay unacknowledged through their backoff (5, 15, 60, 180 s). They must not
  keep the plans of every other owner from being delivered meanwhile.
* On a real server: a message handled, or waiting for its turn, for longer than its ack wait
  is not delivered again meanwhile.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from kaiwo_contracts.events.streams import PLAN_STREAM, BusTopology, ConsumerSpec, bus_topology
from kaiwo_contracts.events.subjects import plan_subject
from kaiwo_runtime.bus import Delivery, RetryLater
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_server import NatsServer
from kaiwo_runtime.settlement import run_consumer

HANG_SECONDS = 60.0
"""How long the loop may run before the test calls it hung: a guard, not a measure."""
FAILING_OWNERS = 16
"""As many owners failing as the executor carries out plans at once."""


def _uid(number: int) -> str:
    return f"0b8f0a52-2a4c-4c38-9a43-1f7d52a1c{number:03d}"


async def _publish_plan(bus, uid: str) -> None:  # type: ignore[no-untyped-def]
    subject = plan_subject(kind="KaiwoJob", namespace="team-a", uid=uid)
    await bus.publish_raw(subject, body=b"{}", headers={"Nats-Msg-Id": f"plan-{uid}"})


async def test_plans_waiting_for_their_retry_do_not_hold_up_another_owners_plan(
    bus_harness,  # type: ignore[no-untyped-def]
) -> None:
    topology = bus_topology()
    plans = topology.consumer("executor-plan")
    bus = await bus_harness.connect(topology)
    await bus.ensure_streams()
    failing = [_uid(number) for number in range(FAILING_OWNERS)]
    for uid in failing:
        await _publish_plan(bus, uid)
    healthy = _uid(999)
    failed: list[str] = []
    all_failed = asyncio.Event()
    handled = asyncio.Event()

    async def handle(delivery: Delivery) -> None:
        uid = delivery.subject.rsplit(".", 1)[-1]
        if uid != healthy:
            failed.append(uid)
            if len(failed) == FAILING_OWNERS:
                all_failed.set()
            raise RetryLater("the API server keeps answering 500 for this owner")
        handled.set()

    stop = asyncio.Event()
    loop = asyncio.create_task(run_consumer(bus, plans, handle, stop=stop, poll_timeout=0.2))
    try:
        await asyncio.wait_for(all_failed.wait(), HANG_SECONDS)
        assert sorted(failed) == failing  # each tried once, now waiting for its retry
        await _publish_plan(bus, healthy)
        # Well before the first retry (5 s): a loop whose slots the failing plans hold gets
        # nothing more until they are dead-lettered, 260 s later.
        await asyncio.wait_for(handled.wait(), 3.0)
        assert len(failed) == FAILING_OWNERS  # none of them retried yet
    finally:
        stop.set()
        await asyncio.wait_for(loop, HANG_SECONDS)


SLOW_PLANS = ConsumerSpec(
    durable_name="test-slow-plans",
    stream=PLAN_STREAM,
    filter_subjects=("kaiwo.plan.>",),
    description="plans that take longer than the ack wait",
    max_deliver=3,
    backoff_seconds=(0.6, 0.6),
    max_ack_pending=4,
    ordered_by_uid=True,
)
"""Scaled down from the executor's: an ack wait of 0.6 s instead of 5 s."""


@pytest.mark.nats
@pytest.mark.parametrize("ordered_by_uid", [True, False], ids=["lanes", "in-order"])
async def test_a_message_in_hand_past_its_ack_wait_is_not_delivered_again(
    nats_server: NatsServer, ordered_by_uid: bool
) -> None:
    consumer = replace(SLOW_PLANS, ordered_by_uid=ordered_by_uid)
    base = bus_topology()
    topology = BusTopology(partitions=1, streams=base.streams, consumers=(consumer,))
    bus = await NatsBus.connect(nats_server.url, topology=topology, name="slow-plans")
    try:
        await bus.ensure_streams()
        owner = _uid(1)
        # The first takes 3 ack waits; the second waits that long for its turn.
        for number in (1, 2):
            subject = plan_subject(kind="KaiwoJob", namespace="team-a", uid=owner)
            await bus.publish_raw(subject, body=b"{}", headers={"Nats-Msg-Id": f"plan-{number}"})
        deliveries: list[tuple[str | None, int]] = []
        both = asyncio.Event()

        async def handle(delivery: Delivery) -> None:
            deliveries.append((delivery.message_id, delivery.attempt))
            if delivery.message_id == "plan-1":
                await asyncio.sleep(1.8)
            if len(deliveries) >= 2:
                both.set()

        stop = asyncio.Event()
        loop = asyncio.create_task(run_consumer(bus, consumer, handle, stop=stop, poll_timeout=0.2))
        await asyncio.wait_for(both.wait(), HANG_SECONDS)
        await asyncio.sleep(1.5)  # more than two ack waits: a redelivery would come
        stop.set()
        await asyncio.wait_for(loop, HANG_SECONDS)
        assert deliveries == [("plan-1", 1), ("plan-2", 1)]
    finally:
        await bus.close()
