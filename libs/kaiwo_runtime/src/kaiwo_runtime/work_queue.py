"""A durable consumer used as a work queue by a service that answers each message: how the
gateway's messenger reads ``KAIWO_MSG_REQ`` and answers on ``KAIWO_MSG_RES`` (decision 0049).

The streams and the consumer are the administrator's; the service only binds to them
(:meth:`NatsWorkQueue.bind` checks they exist and returns the consumer as it was declared,
since the server redelivers by the declared deliveries and backoff). Pulling and settling is
the batch consumer's (:mod:`kaiwo_runtime.batch_consumer`): ``ack`` once answered, ``nak``
to be delivered again, ``term`` for a message no delivery can help, ``extend`` while a long
answer is being made. Answers are published with their headers and a JetStream ack; the
largest message is the server's ``max_payload`` (answers are not envelopes, so the envelope's
limit does not apply). :meth:`NatsWorkQueue.stored_per_subject` reads how many messages the
stream stores per subject (the autoscaler's backlog, decision 0057).

Every failure of the server or the connection is a :class:`~kaiwo_runtime.bus.BusError`, so
the service that uses this never names nats-py (an import-linter contract holds it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import nats.errors
import nats.js.errors
from kaiwo_contracts.events.streams import ConsumerSpec
from nats.js.api import ConsumerConfig

from kaiwo_runtime.batch_consumer import NatsPuller, PulledMessage
from kaiwo_runtime.bus import BusError
from kaiwo_runtime.nats_bus import NatsBus

_DEFAULT_MAX_PAYLOAD = 1024 * 1024
"""nats-server's own default, for a connection that has not heard the server's yet."""


class NotDeclaredError(BusError):
    """Streams or the consumer of a work queue do not exist."""

    def __init__(self, missing: Sequence[str]) -> None:
        super().__init__(", ".join(missing))
        self.missing = tuple(missing)


class NatsWorkQueue:
    def __init__(self, bus: NatsBus, *, timeout: float = 5.0) -> None:
        self._client = bus.client
        self._js = bus.client.jetstream(timeout=timeout)
        self._puller = NatsPuller(bus)

    @property
    def message_limit(self) -> int:
        """The largest message (headers and body) the server accepts."""
        return self._client.max_payload or _DEFAULT_MAX_PAYLOAD

    async def bind(self, consumer: ConsumerSpec, *, streams: Sequence[str]) -> ConsumerSpec:
        """``consumer`` with the deliveries, backoff and ack wait it was declared with;
        :class:`NotDeclaredError` naming each of ``streams`` and the consumer that is missing."""
        missing: list[str] = []
        for stream in streams:
            try:
                await self._js.stream_info(stream)
            except nats.js.errors.NotFoundError:
                missing.append(f"stream {stream}")
            except (nats.errors.Error, TimeoutError) as error:
                raise BusError(f"reading stream {stream} failed: {error!r}") from error
        try:
            info = await self._js.consumer_info(consumer.stream, consumer.durable_name)
        except nats.js.errors.NotFoundError:
            missing.append(f"consumer {consumer.durable_name} of {consumer.stream}")
        except (nats.errors.Error, TimeoutError) as error:
            raise BusError(f"reading consumer {consumer.durable_name} failed: {error!r}") from error
        if missing:
            raise NotDeclaredError(missing)
        return _as_declared(consumer, info.config)

    async def pull(
        self, consumer: ConsumerSpec, *, max_messages: int, wait_seconds: float
    ) -> Sequence[PulledMessage]:
        """Up to ``max_messages`` deliveries, waiting up to ``wait_seconds`` for the first;
        a ``nak``'s delay is the one wanted (the consumer's backoff is accounted for)."""
        return await self._puller.pull(
            consumer, max_messages=max_messages, wait_seconds=wait_seconds
        )

    async def publish(self, subject: str, *, body: bytes, headers: Mapping[str, str]) -> None:
        """Publish and wait for the stream's ack (a ``Nats-Msg-Id`` already stored is
        dropped by the stream, which is not an error)."""
        try:
            await self._js.publish(subject, body, headers=dict(headers))
        except (nats.errors.Error, nats.js.errors.Error, TimeoutError) as error:
            raise BusError(f"publish to {subject!r} failed: {error!r}") from error

    async def stored_per_subject(self, stream: str, *, subjects: str) -> Mapping[str, int]:
        """How many messages ``stream`` stores per subject matching ``subjects``."""
        try:
            info = await self._js.stream_info(stream, subjects_filter=subjects)
        except (nats.errors.Error, TimeoutError) as error:
            raise BusError(f"reading stream {stream} failed: {error!r}") from error
        return dict(info.state.subjects or {})


def _as_declared(spec: ConsumerSpec, config: ConsumerConfig) -> ConsumerSpec:
    """``spec`` with the deliveries and backoff the administrator declared (the server
    redelivers by those; the service decides its last delivery by them)."""
    backoff = tuple(float(seconds) for seconds in config.backoff or ())
    declared = config.max_deliver or 0
    return dataclasses.replace(
        spec,
        max_deliver=declared if declared > 0 else spec.max_deliver,
        backoff_seconds=backoff,
        ack_wait_seconds=float(config.ack_wait or spec.ack_wait_seconds),
    )
