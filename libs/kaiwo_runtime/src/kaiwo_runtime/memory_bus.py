"""An in-memory :class:`~kaiwo_runtime.bus.Bus` that behaves like JetStream, for unit tests.

A :class:`MemoryBus` is one "connection" to a
:class:`~kaiwo_runtime.memory_jetstream.MemoryJetStream`; several can share one server, so a
test can drop a connection and resume the same durable consumer from another. Deliveries are
settled by the same policy as on NATS (:mod:`kaiwo_runtime.settlement`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.streams import BusTopology, ConsumerSpec

from kaiwo_runtime.bus import BusError, Delivery, Handler, PublishAck, StoredMessage
from kaiwo_runtime.cancellation import stop_if_cancelled
from kaiwo_runtime.dead_letters import dead_letter
from kaiwo_runtime.lanes import Lanes
from kaiwo_runtime.memory_jetstream import MemoryJetStream
from kaiwo_runtime.settlement import (
    Ack,
    DeadLetter,
    Retry,
    Terminate,
    fetch_size,
    handle_batch,
    settle,
)

_POLL_SECONDS = 0.005


class MemoryBus:
    """One connection to a :class:`MemoryJetStream`."""

    def __init__(self, *, server: MemoryJetStream, topology: BusTopology) -> None:
        self.topology = topology
        self.server = server
        self._closed = False

    async def close(self) -> None:
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise BusError("the bus connection is closed")

    async def ensure_streams(self) -> None:
        self._check_open()
        for stream in self.topology.streams:
            self.server.add_stream(stream)
        for consumer in self.topology.consumers:
            self.server.add_consumer(consumer)

    async def ensure_consumer(self, spec: ConsumerSpec) -> None:
        self._check_open()
        self.server.add_consumer(spec)

    async def publish(self, envelope: Envelope[Any], subject: str) -> PublishAck:
        headers, body = envelope.to_nats()
        return await self.publish_raw(subject, body=body, headers=headers)

    async def publish_raw(
        self, subject: str, *, body: bytes, headers: Mapping[str, str]
    ) -> PublishAck:
        self._check_open()
        return self.server.publish(subject, body=body, headers=headers)

    async def read_stored(self, stream: str, sequence: int) -> StoredMessage | None:
        self._check_open()
        return self.server.read(stream, sequence)

    async def read_next_stored(
        self, stream: str, sequence: int, *, subjects: str
    ) -> StoredMessage | None:
        self._check_open()
        return self.server.read_next(stream, sequence, subjects)

    async def process(
        self,
        consumer: ConsumerSpec,
        handler: Handler,
        *,
        max_messages: int = 16,
        wait_seconds: float = 1.0,
        lanes: Lanes | None = None,
    ) -> int:
        self._check_open()
        stop_if_cancelled()  # as NatsBus.process
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        batch = await fetch_size(consumer, max_messages, lanes)
        deliveries = self.server.take(consumer.durable_name, batch)
        while not deliveries and loop.time() < deadline:
            await asyncio.sleep(_POLL_SECONDS)
            deliveries = self.server.take(consumer.durable_name, batch)
        await handle_batch(
            deliveries,
            consumer,
            lambda delivery: self._handle(delivery, consumer, handler),
            lanes=lanes,
        )
        return len(deliveries)

    async def _handle(self, delivery: Delivery, consumer: ConsumerSpec, handler: Handler) -> None:
        match await settle(handler, delivery, consumer):
            case Ack():
                self.server.ack(consumer.durable_name, delivery.stream_sequence)
            case Retry(delay=delay):
                self.server.nak(consumer.durable_name, delivery.stream_sequence, delay=delay)
            case DeadLetter(reason=reason):
                subject, headers, body = dead_letter(
                    delivery,
                    consumer=consumer.durable_name,
                    reason=reason,
                    attempts=delivery.attempt,
                )
                await self.publish_raw(subject, body=body, headers=headers)
                self.server.ack(consumer.durable_name, delivery.stream_sequence)
            case Terminate():
                self.server.ack(consumer.durable_name, delivery.stream_sequence)
