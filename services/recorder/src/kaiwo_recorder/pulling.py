"""Pull a *batch* of messages and settle each one later: what the recorder needs from the bus.

The :class:`~kaiwo_runtime.bus.Bus` port settles every message as soon as its handler
returns, one message at a time, so a consumer built on it commits one event per
transaction (100-200 events/s on SQLite). The recorder instead pulls up to a few hundred
messages, appends them in one transaction and only then acknowledges them, so it settles
messages itself. This module gives it that, for the two bus adapters:

* :class:`NatsPuller` fetches from the durable consumer with nats-py (the bus's own
  connection) and settles with ``ack`` / ``nak(delay)`` / ``term`` / ``in_progress``;
* :class:`MemoryPuller` does the same on the in-memory JetStream of unit tests.

``extend`` tells the server the message is still being worked on (``+WPI``): the recorder
calls it while a batch waits for the database, so the server neither redelivers the batch
nor counts deliveries towards ``max_deliver`` during an outage.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import nats.errors
import nats.js.errors
from kaiwo_contracts.events.streams import ConsumerSpec
from kaiwo_runtime.bus import Bus, BusError, Delivery
from kaiwo_runtime.memory_bus import MemoryBus, MemoryJetStream
from kaiwo_runtime.nats_bus import NatsBus
from nats.aio.msg import Msg
from nats.js import JetStreamContext


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

    async def ack(self) -> None:
        await self.message.ack()

    async def nak(self, *, delay: float) -> None:
        await self.message.nak(delay=delay)

    async def term(self) -> None:
        await self.message.term()

    async def extend(self) -> None:
        await self.message.in_progress()


class NatsPuller:
    def __init__(self, bus: NatsBus) -> None:
        self._bus = bus
        self._js = bus.client.jetstream()
        self._subscriptions: dict[str, JetStreamContext.PullSubscription] = {}

    async def pull(
        self, consumer: ConsumerSpec, *, max_messages: int, wait_seconds: float
    ) -> Sequence[PulledMessage]:
        subscription = await self._subscription(consumer)
        batch = max(1, min(max_messages, consumer.max_ack_pending))
        try:
            messages = await subscription.fetch(batch, timeout=max(wait_seconds, 0.05))
        except (nats.errors.TimeoutError, TimeoutError):
            # nats-py raises either, depending on where the wait ran out: nothing came.
            return ()
        except (nats.errors.ConnectionClosedError, nats.js.errors.APIError) as error:
            raise BusError(f"fetch for {consumer.durable_name} failed: {error!r}") from error
        return tuple(_NatsMessage(message, _delivery(message, consumer)) for message in messages)

    async def flush(self) -> None:
        # Acks are fire-and-forget; until the server has them, they still count against
        # max_ack_pending and the next fetch returns a handful of messages instead of a batch.
        try:
            await self._bus.client.flush(timeout=5)
        except (nats.errors.Error, TimeoutError) as error:
            raise BusError(f"flush failed: {error!r}") from error

    async def _subscription(self, consumer: ConsumerSpec) -> JetStreamContext.PullSubscription:
        found = self._subscriptions.get(consumer.durable_name)
        if found is None:
            try:
                found = await self._js.pull_subscribe_bind(
                    durable=consumer.durable_name, stream=consumer.stream
                )
            except (nats.errors.Error, nats.js.errors.Error) as error:
                raise BusError(f"cannot bind {consumer.durable_name}: {error!r}") from error
            self._subscriptions[consumer.durable_name] = found
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
