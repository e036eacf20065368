"""The bus port: publish envelopes idempotently, consume durable pull consumers, dead letters.

Two adapters implement :class:`Bus` with the same behaviour, checked by one contract suite
(``tests/contract/test_bus_contract.py``): :class:`kaiwo_runtime.nats_bus.NatsBus` (nats-py
JetStream) and :class:`kaiwo_runtime.memory_bus.MemoryBus` (in memory, for unit tests).

Delivery policy (shared by both adapters, :func:`kaiwo_runtime.settlement.settle`):

* the handler returns -> ``ack``;
* the handler raises a *non-retryable* error (:class:`PoisonMessage`, a message that cannot
  be decoded — :class:`EnvelopeFormatError`, whatever was wrong with it —, a pydantic
  ``ValidationError``, a publish the bus refused for good) -> the message is copied to the
  consumer's dead-letter subject ``kaiwo.dlq.<stream>.<consumer>`` with the reason and its
  original headers, then terminated (``term``: never redelivered), on its first delivery;
* any other exception -> ``nak`` with the consumer's backoff for that attempt (or the delay
  of :class:`RetryLater`), until the last allowed delivery, which is dead-lettered instead;
* the handler is cancelled (shutdown, crash) -> nothing is sent; the server redelivers after
  the ack wait. When that exhausts ``max_deliver`` the server publishes a max-deliveries
  advisory, which the ``KAIWO_DLQ`` stream stores and
  :func:`kaiwo_runtime.dead_letters.dead_letter_relay` turns into a
  dead letter carrying the original message.

A dead letter is never dead-lettered again: a message of ``KAIWO_DLQ`` that its consumer gives
up on is only terminated (the stream keeps it), and the relay ignores advisories about
``KAIWO_DLQ``'s own consumers. Otherwise one poison message feeds itself through the relay
for ever (each new dead letter failing the same way as the last).

Sizes: nothing larger than :data:`MAX_MESSAGE_BYTES` (headers and body) is ever sent; the
server would close the connection over it. Such a publish raises :class:`PublishRefusedError`.

Why nats-py and not FastStream here: FastStream does not set ``Nats-Msg-Id`` and hides
``PubAck.duplicate``; the dead-letter path needs ``term`` after a publish, the delivery count
and the stream sequence, and the relay reads stored messages by sequence. Services may still
wire their subscribers with FastStream: :meth:`Envelope.to_nats` gives the headers (with
``Nats-Msg-Id``) and :meth:`Envelope.from_nats` parses them. See docs/decisions/0005.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from kaiwo_contracts.events.decoding import decode_envelope
from kaiwo_contracts.events.envelope import NATS_MSG_ID_HEADER, Envelope, EnvelopeFormatError
from kaiwo_contracts.events.streams import BusTopology, ConsumerSpec
from pydantic import BaseModel, ValidationError

from kaiwo_runtime.lanes import Lanes

T = TypeVar("T", bound=BaseModel)


class PoisonMessage(Exception):  # noqa: N818 - it names the message, not the failure
    """The message can never be handled (malformed, unknown type): dead-letter it now."""


class RetryLater(Exception):  # noqa: N818 - an instruction, like asyncio.CancelledError
    """Handle the message again after ``delay`` seconds (None: the consumer's backoff)."""

    def __init__(self, reason: str, *, delay: float | None = None) -> None:
        super().__init__(reason)
        self.delay = delay


class BusError(RuntimeError):
    """The bus could not do what was asked (no stream for a subject, not connected)."""


class PublishRefusedError(BusError):
    """The bus will never take this message as it is (too large): do not retry it."""

    def __init__(self, reason: str, *, size: int, limit: int) -> None:
        super().__init__(reason)
        self.size = size
        self.limit = limit


NON_RETRYABLE: tuple[type[BaseException], ...] = (
    PoisonMessage,
    EnvelopeFormatError,
    ValidationError,
    PublishRefusedError,
)
"""Errors that mean the message can never be handled: dead-lettered on the first delivery."""


def message_size(headers: Mapping[str, str], body: bytes) -> int:
    """Bytes a message takes against the server's ``max_payload``: the body and the header
    block as NATS encodes it (``NATS/1.0`` line, ``name: value`` lines, blank line)."""
    if not headers:
        return len(body)
    header_bytes = len(b"NATS/1.0\r\n\r\n") + sum(
        len(key.encode()) + len(value.encode()) + 4 for key, value in headers.items()
    )
    return header_bytes + len(body)


def check_size(subject: str, headers: Mapping[str, str], body: bytes, *, limit: int) -> None:
    """Raise :class:`PublishRefusedError` for a message the server would refuse (it closes the
    connection over one), before anything is sent."""
    size = message_size(headers, body)
    if size > limit:
        raise PublishRefusedError(
            f"a message of {size} bytes to {subject!r} exceeds the limit of {limit} bytes",
            size=size,
            limit=limit,
        )


@dataclass(frozen=True, slots=True)
class PublishAck:
    """Where a published message was stored; ``duplicate`` if JetStream already had its id."""

    stream: str
    sequence: int
    duplicate: bool


@dataclass(frozen=True, slots=True)
class ConsumerPosition:
    """Where a durable consumer stands in its stream, as the server reports it."""

    first_sequence: int
    """The stream's oldest stored message (last + 1 when the stream is empty)."""
    last_sequence: int
    delivered_sequence: int
    """The last stream sequence delivered to the consumer (0: none yet)."""
    unsettled: int
    """Messages not yet acknowledged: still to be delivered, or delivered and pending."""


@dataclass(frozen=True, slots=True)
class StoredMessage:
    stream: str
    sequence: int
    subject: str
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery of a stored message to a consumer (``attempt`` counts from 1)."""

    stream: str
    consumer: str
    stream_sequence: int
    attempt: int
    subject: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""

    def envelope(self, payload: type[T]) -> Envelope[T]:
        """The envelope with a typed payload, checked against the subject it came on; any
        problem with it raises :class:`EnvelopeFormatError` and nothing else
        (:func:`~kaiwo_contracts.events.decoding.decode_envelope`)."""
        return decode_envelope(self.headers, self.body, payload, subject=self.subject)

    @property
    def message_id(self) -> str | None:
        return _header(self.headers, NATS_MSG_ID_HEADER)


Handler = Callable[[Delivery], Awaitable[None]]


class Bus(Protocol):
    """What services need from the message bus."""

    topology: BusTopology

    async def ensure_streams(self) -> None:
        """Create or update every stream and consumer of the topology (idempotent)."""
        ...

    async def ensure_consumer(self, spec: ConsumerSpec) -> None:
        """Create or update one durable consumer (e.g. a replica's cluster-facts consumer)."""
        ...

    async def publish(self, envelope: Envelope[Any], subject: str) -> PublishAck:
        """Publish in binary mode with ``Nats-Msg-Id`` = ``envelope.id``."""
        ...

    async def publish_raw(
        self, subject: str, *, body: bytes, headers: Mapping[str, str]
    ) -> PublishAck:
        """Publish bytes as given (dead letters, foreign producers, tests of bad input)."""
        ...

    async def read_stored(self, stream: str, sequence: int) -> StoredMessage | None:
        """A stored message by sequence, or None when it is gone (aged out, deleted)."""
        ...

    async def read_next_stored(
        self, stream: str, sequence: int, *, subjects: str
    ) -> StoredMessage | None:
        """The first stored message at ``sequence`` or after whose subject matches
        ``subjects`` (a NATS filter), or None when there is none yet. Skips what aged out or
        was deleted, so a reader that follows a stream by sequence never stalls on a gap."""
        ...

    async def process(
        self,
        consumer: ConsumerSpec,
        handler: Handler,
        *,
        max_messages: int = 16,
        wait_seconds: float = 1.0,
        lanes: Lanes | None = None,
    ) -> int:
        """Pull once (waiting up to ``wait_seconds``), handle in stream order, settle each message.

        Returns how many messages were handled. With ``lanes`` (a consumer ``ordered_by_uid``),
        at most their free slots are fetched, and each message is started in its lane and
        settled when it is done: the call returns without waiting for them.
        """
        ...

    async def close(self) -> None: ...


def _header(headers: Mapping[str, str], name: str) -> str | None:
    lowered = name.lower()
    return next((value for key, value in headers.items() if key.lower() == lowered), None)
