"""The recorder's batch puller against a real nats-server: batches come at once when the
server has messages, nothing delivered is dropped between pulls, and everything settles."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_runtime.batch_consumer import NatsPuller
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_server import NatsServer

from tests.integration.pipeline.harness import Pending, eventually

pytestmark = [pytest.mark.nats]

CONSUMER = "recorder-obs"


@pytest.fixture
async def bus(nats_server: NatsServer) -> AsyncIterator[NatsBus]:
    connected = await NatsBus.connect(nats_server.url, topology=bus_topology(), name="pull-test")
    await connected.ensure_streams()
    try:
        yield connected
    finally:
        await connected.close()


async def publish(bus: NatsBus, make_observation: Any, count: int) -> None:
    for number in range(count):
        envelope, subject = make_observation(number)
        await bus.publish(envelope, subject)


async def test_a_pull_takes_what_is_there_and_leaves_the_rest_for_the_next(
    bus: NatsBus, make_observation: Any
) -> None:
    await publish(bus, make_observation, 10)
    puller = NatsPuller(bus)
    consumer = bus.topology.consumer(CONSUMER)

    first = await puller.pull(consumer, max_messages=4, wait_seconds=5)
    started = time.monotonic()
    rest = await puller.pull(consumer, max_messages=100, wait_seconds=5)
    waited = time.monotonic() - started

    assert [m.delivery.stream_sequence for m in first] == [1, 2, 3, 4]
    assert [m.delivery.stream_sequence for m in rest] == [5, 6, 7, 8, 9, 10]
    assert waited < 2  # fewer than asked for: no waiting for the rest of the batch
    for message in (*first, *rest):
        await message.ack()
    await puller.flush()

    async def settled() -> bool | Pending:
        # The server takes an ack in after the flush's round trip, not before it.
        info = await bus.client.jetstream().consumer_info("KAIWO_OBS", CONSUMER)
        pending = (info.num_ack_pending, info.num_pending)
        return True if pending == (0, 0) else Pending(f"ack pending, pending: {pending}")

    await eventually(settled, what="every message acknowledged", within=30)  # a hang guard


async def test_an_empty_pull_waits_for_the_first_message_then_returns_it(
    bus: NatsBus, make_observation: Any
) -> None:
    puller = NatsPuller(bus)
    consumer = bus.topology.consumer(CONSUMER)

    nothing = await puller.pull(consumer, max_messages=10, wait_seconds=0.2)
    await publish(bus, make_observation, 1)
    one = await puller.pull(consumer, max_messages=10, wait_seconds=5)

    assert list(nothing) == []
    assert [m.delivery.stream_sequence for m in one] == [1]
    assert one[0].delivery.attempt == 1
