"""The batch consumer: pull a *batch* of messages from a durable consumer and settle each one
later (the recorder's way of reading the bus).

The :class:`~kaiwo_runtime.bus.Bus` port settles every message as soon as its handler
returns, one message at a time, so a consumer built on it commits one event per
transaction (100-200 events/s on SQLite). The recorder instead pulls up to a few hundred
messages, appends them in one transaction and only then acknowledges them, so it settles
messages itself. This module gives it that, for the two bus adapters, so that no service
speaks nats-py itself (an import-linter contract holds it):

* :class:`NatsPuller` pulls the durable consumer on the bus's own nats-py connection (a
  :class:`~kaiwo_runtime.pull_inbox.PullInbox`, as the bus's ``process`` does), and settles
  with ``ack`` / ``nak(delay)`` / ``term`` / ``in_progress``;
* :class:`MemoryPuller` does the same on the in-memory JetStream of unit tests.

``extend`` tells the server the message is still being worked on (``+WPI``): the recorder
calls it while a batch waits for the database, so the server neither redelivers the batch
nor counts deliveries towards ``max_deliver`` during an outage.

``position`` asks the server where a consumer stands in its stream (for the recorder's lag
and for gaps: messages the stream dropped before the recorder read them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import nats.errors
from kaiwo_contracts.events.streams import ConsumerSpec
from nats.aio.msg import Msg

from kaiwo_runtime.bus import Bus, BusError, ConsumerPosition, Delivery
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream
from kaiwo_runtime.nats_bus import NatsBus, nak_delay
from kaiwo_runtime.pull_inbox import SETTLE_SECONDS, PullInbox


class PulledMessage(Protocol):
    """One delivery whose settlement is up to the caller."""

    @property
    def delivery(self) -> Delivery: ...

    async def ack(self) -> None: ...

    async def nak(self, *, delay: float) -> None: ...

    async def term(self) -> None: ...

    async def extend(self) -> None: ...


class MessagePuller(Protocol):
    async def pull(
        self, consumer: ConsumerSpec, *, max_messages: int, wait_seconds: float
    ) -> Sequence[PulledMessage]:
        """Up to ``max_messages`` deliveries, waiting up to ``wait_seconds`` for the first."""
        ...

    async def flush(self) -> None:
        """Make sure the settlements sent so far reached the server."""
        ...

    async def position(self, consumer: ConsumerSpec) -> ConsumerPosition:
        """Where ``consumer`` stands in its stream; :class:`BusError` when the server does
        not answer."""
        ...


def puller_for(bus: Bus) -> MessagePuller:
    """The puller that works on ``bus``'s connection."""
    if isinstance(bus, NatsBus):
        return NatsPuller(bus)
    if isinstance(bus, MemoryBus):
        return MemoryPuller(bus.server)
    raise TypeError(f"no batch puller for {type(bus).__name__}; pass one to the recorder")


# --------------------------------------------------------------------------- NATS


@dataclass(slots=True)
class _NatsMessage:
    message: Msg
    delivery: Delivery
    consumer: ConsumerSpec

    async def ack(self) -> None:
        await self.message.ack()

    async def nak(self, *, delay: float) -> None:
        wanted = nak_delay(self.consumer, attempt=self.delivery.attempt, wanted=delay)
        await self.message.nak(delay=wanted)

    async def term(self) -> None:
        await self.message.term()

    async def extend(self) -> None:
        await self.message.in_progress()


class NatsPuller:
    def __init__(self, bus: NatsBus) -> None:
        self._bus = bus
        self._inboxes: dict[str, PullInbox] = {}

    async def pull(
        self, consumer: ConsumerSpec, *, max_messages: int, wait_seconds: float
    ) -> Sequence[PulledMessage]:
        inbox = await self._inbox(consumer)
        batch = max(1, min(max_messages, consumer.max_ack_pending))
        messages = await inbox.pull(batch=batch, wait_seconds=wait_seconds)
        return tuple(
            _NatsMessage(message, _delivery(message, consumer), consumer) for message in messages
        )

    async def flush(self) -> None:
        # Acks are fire-and-forget; until the server has them, they still count against
        # max_ack_pending and the next fetch returns a handful of messages instead of a batch.
        try:
            await self._bus.client.flush(timeout=5)
        except (nats.errors.Error, TimeoutError) as error:
            raise BusError(f"flush failed: {error!r}") from error

    async def position(self, consumer: ConsumerSpec) -> ConsumerPosition:
        js = self._bus.client.jetstream(timeout=SETTLE_SECONDS)
        try:
            info = await js.consumer_info(consumer.stream, consumer.durable_name)
            stream = await js.stream_info(consumer.stream)
        except (nats.errors.Error, TimeoutError) as error:
            raise BusError(f"no position for {consumer.durable_name}: {error!r}") from error
        return ConsumerPosition(
            first_sequence=stream.state.first_seq,
            last_sequence=stream.state.last_seq,
            delivered_sequence=info.delivered.stream_seq if info.delivered else 0,
            unsettled=(info.num_pending or 0) + (info.num_ack_pending or 0),
        )

    async def _inbox(self, consumer: ConsumerSpec) -> PullInbox:
        found = self._inboxes.get(consumer.durable_name)
        if found is None:
            found = await PullInbox.opened(self._bus.client, consumer)
            self._inboxes[consumer.durable_name] = found
        return found


def _delivery(message: Msg, consumer: ConsumerSpec) -> Delivery:
    metadata = message.metadata
    return Delivery(
        stream=metadata.stream,
        consumer=consumer.durable_name,
        stream_sequence=metadata.sequence.stream,
        attempt=metadata.num_delivered or 1,
        subject=message.subject,
        headers=dict(message.headers or {}),
        body=message.data,
    )


# --------------------------------------------------------------------------- in memory


@dataclass(slots=True)
class _MemoryMessage:
    server: MemoryJetStream
    consumer: ConsumerSpec
    delivery: Delivery

    async def ack(self) -> None:
        self.server.ack(self.consumer.durable_name, self.delivery.stream_sequence)

    async def nak(self, *, delay: float) -> None:
        self.server.nak(self.consumer.durable_name, self.delivery.stream_sequence, delay=delay)

    async def term(self) -> None:
        self.server.ack(self.consumer.durable_name, self.delivery.stream_sequence)

    async def extend(self) -> None:
        # Restart the ack wait without counting a delivery, as +WPI does on the server.
        self.server.nak(
            self.consumer.durable_name,
            self.delivery.stream_sequence,
            delay=self.consumer.retry_delay(self.delivery.attempt),
        )


class MemoryPuller:
    def __init__(self, server: MemoryJetStream, *, poll_seconds: float = 0.005) -> None:
        self._server = server
        self._poll_seconds = poll_seconds

    async def pull(
        self, consumer: ConsumerSpec, *, max_messages: int, wait_seconds: float
    ) -> Sequence[PulledMessage]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        batch = max(1, min(max_messages, consumer.max_ack_pending))
        while True:
            deliveries = self._server.take(consumer.durable_name, batch)
            if deliveries or loop.time() >= deadline:
                break
            await asyncio.sleep(self._poll_seconds)
        return tuple(_MemoryMessage(self._server, consumer, d) for d in deliveries)

    async def flush(self) -> None:
        return None

    async def position(self, consumer: ConsumerSpec) -> ConsumerPosition:
        return self._server.position(consumer.durable_name)
