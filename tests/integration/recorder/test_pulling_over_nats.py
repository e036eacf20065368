"""The recorder's batch puller against a real nats-server: batches come at once when the
server has messages, nothing delivered is dropped between pulls, and everything settles."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import nats
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


async def every_message_acknowledged(bus: NatsBus, consumer: str) -> None:
    """Wait until ``consumer`` has nothing pending, acknowledged or not (a hang guard)."""

    async def settled() -> bool | Pending:
        # The server takes an ack in after the flush's round trip, not before it.
        info = await bus.client.jetstream().consumer_info("KAIWO_OBS", consumer)
        pending = (info.num_ack_pending, info.num_pending)
        return True if pending == (0, 0) else Pending(f"ack pending, pending: {pending}")

    await eventually(settled, what=f"every message of {consumer} acknowledged", within=30)


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

    await every_message_acknowledged(bus, CONSUMER)


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


# --------------------------------------------------------------------------- requests sent
# Every pull, the bus's included, goes through one PullInbox: the pull requests it sends
# are counted on the wire, by a second connection that subscribes to their subject.


async def processed(client: Any) -> None:
    """Return once the server has processed every command ``client`` sent so far.

    Not ``flush()``: nats-py writes its PING straight to the socket, ahead of the commands
    still waiting in its buffer, so the PONG can come before the server has them (a spy's
    SUB was seen arriving after a request it was meant to see). A message to a subject of
    its own goes through that buffer behind them, and comes back after them.
    """
    subject = client.new_inbox()
    echo = await client.subscribe(subject, max_msgs=1)
    await client.publish(subject, b"")
    await echo.next_msg(timeout=10)


class RequestSpy:
    """The pull requests sent for one consumer (``CONSUMER``), as their JSON bodies."""

    def __init__(self, client: Any, subscription: Any) -> None:
        self._client = client
        self._subscription = subscription
        self.requests: list[dict[str, Any]] = []

    @classmethod
    async def on(cls, nats_server: NatsServer, consumer: str = CONSUMER) -> RequestSpy:
        client = await nats.connect(nats_server.url)
        subscription = await client.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.KAIWO_OBS.{consumer}")
        await processed(client)
        return cls(client, subscription)

    async def take(self) -> int:
        """Take in the copies that came; how many requests so far."""
        while self._subscription.pending_msgs:
            message = await self._subscription.next_msg(timeout=1)
            self.requests.append(json.loads(message.data))
        return len(self.requests)

    async def sent(self, bus: NatsBus) -> list[str]:
        """Each request so far: "no-wait" or "waits"."""
        await processed(bus.client)  # the server has every request the bus sent,
        await processed(self._client)  # and this connection has read its copy of each
        await self.take()
        return ["no-wait" if r.get("no_wait") else "waits" for r in self.requests]

    async def close(self) -> None:
        await self._client.close()


@pytest.fixture
async def spy(nats_server: NatsServer) -> AsyncIterator[RequestSpy]:
    found = await RequestSpy.on(nats_server)
    try:
        yield found
    finally:
        await found.close()


async def test_a_pull_that_may_not_wait_sends_one_no_wait_request(
    bus: NatsBus, spy: RequestSpy
) -> None:
    puller = NatsPuller(bus)
    consumer = bus.topology.consumer(CONSUMER)

    nothing = await puller.pull(consumer, max_messages=10, wait_seconds=0)

    assert list(nothing) == []
    assert await spy.sent(bus) == ["no-wait"]


async def test_a_reader_that_found_nothing_waits_again_with_one_request(
    bus: NatsBus, spy: RequestSpy
) -> None:
    """A no-wait probe that found the consumer empty is not sent again before the next wait:
    the planner looks between observations and then waits, one request instead of two."""
    puller = NatsPuller(bus)
    consumer = bus.topology.consumer(CONSUMER)

    first = await puller.pull(consumer, max_messages=10, wait_seconds=0)
    second = await puller.pull(consumer, max_messages=10, wait_seconds=0.2)

    assert (list(first), list(second)) == ([], [])
    assert await spy.sent(bus) == ["no-wait", "waits"]


async def test_a_request_still_open_brings_the_next_messages_without_another(
    bus: NatsBus, spy: RequestSpy, make_observation: Any
) -> None:
    puller = NatsPuller(bus)
    consumer = bus.topology.consumer(CONSUMER)
    waiting = asyncio.create_task(puller.pull(consumer, max_messages=10, wait_seconds=30))

    async def waits() -> bool | Pending:
        return await spy.take() == 2 or Pending(f"requests {spy.requests}")

    await eventually(waits, what="the pull waits", within=30)
    await publish(bus, make_observation, 1)
    first = await waiting
    for number in (1, 2):
        envelope, subject = make_observation(number)
        await bus.publish(envelope, subject)
    later: list[int] = []
    while len(later) < 2:  # the open request brings them; each pull takes what came
        pulled = await puller.pull(consumer, max_messages=10, wait_seconds=30)
        later += [m.delivery.stream_sequence for m in pulled]

    assert [m.delivery.stream_sequence for m in first] == [1]
    assert later == [2, 3]
    assert await spy.sent(bus) == ["no-wait", "waits"]


async def test_the_bus_reads_with_the_same_requests(
    bus: NatsBus, spy: RequestSpy, make_observation: Any
) -> None:
    """``process`` pulls like the batch puller: a wait of 0 is one no-wait request."""
    consumer = bus.topology.consumer(CONSUMER)
    handled: list[int] = []

    async def handle(delivery: Any) -> None:
        handled.append(delivery.stream_sequence)

    assert await bus.process(consumer, handle, wait_seconds=0) == 0
    await publish(bus, make_observation, 1)
    assert await bus.process(consumer, handle, wait_seconds=0) == 1

    assert handled == [1]
    assert await spy.sent(bus) == ["no-wait", "no-wait"]


async def test_one_message_at_a_time_the_acknowledgement_asks_for_the_next(
    bus: NatsBus, nats_server: NatsServer, make_observation: Any
) -> None:
    """``planner-obs`` hands out one observation at a time: after the first probe, each
    acknowledgement asks for the next (``+NXT``), and no pull request is sent."""
    consumer = bus.topology.consumer("planner-obs")
    assert consumer.max_ack_pending == 1
    spy = await RequestSpy.on(nats_server, consumer.durable_name)
    await publish(bus, make_observation, 3)
    handled: list[int] = []

    async def handle(delivery: Any) -> None:
        handled.append(delivery.stream_sequence)

    try:
        counts = [await bus.process(consumer, handle, wait_seconds=0) for _ in range(4)]
        requests = await spy.sent(bus)
    finally:
        await spy.close()

    assert counts == [1, 1, 1, 0]
    assert handled == [1, 2, 3]
    assert requests == ["no-wait"]
    await every_message_acknowledged(bus, consumer.durable_name)
