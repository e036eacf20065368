"""The bus port: publish envelopes idempotently, consume durable pull consumers, dead letters.

Two adapters implement :class:`Bus` with the same behaviour, checked by one contract suite
(``tests/contract/test_bus_contract.py``): :class:`kaiwo_runtime.nats_bus.NatsBus` (nats-py
JetStream) and :class:`kaiwo_runtime.memory_bus.MemoryBus` (in memory, for unit tests).

Delivery policy (shared by both adapters, :func:`settle`):

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
  advisory, which the ``KAIWO_DLQ`` stream stores and :func:`dead_letter_relay` turns into a
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

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import structlog
from kaiwo_contracts.events.decoding import decode_envelope
from kaiwo_contracts.events.envelope import (
    MAX_MESSAGE_BYTES,
    NATS_MSG_ID_HEADER,
    Envelope,
    EnvelopeFormatError,
    parse_body,
)
from kaiwo_contracts.events.streams import (
    DEAD_LETTER_STREAM,
    MAX_DELIVERIES_ADVISORY,
    BusTopology,
    ConsumerSpec,
)
from kaiwo_contracts.events.subjects import SubjectError, dead_letter_subject, parse_subject
from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)


class _Addressed(Protocol):
    @property
    def subject(self) -> str: ...


M = TypeVar("M", bound=_Addressed)

log = structlog.get_logger("kaiwo.bus")

DLQ_REASON = "Kaiwo-Dlq-Reason"
DLQ_STREAM = "Kaiwo-Dlq-Stream"
DLQ_CONSUMER = "Kaiwo-Dlq-Consumer"
DLQ_SUBJECT = "Kaiwo-Dlq-Subject"
DLQ_SEQUENCE = "Kaiwo-Dlq-Sequence"
DLQ_DELIVERIES = "Kaiwo-Dlq-Deliveries"
DLQ_BODY_BYTES = "Kaiwo-Dlq-Body-Bytes"
"""Set when the dead letter carries only the start of the body: the original's size (the
original is still in its own stream, and the recorder has stored it there)."""
_MAX_REASON_LENGTH = 1024
_KEPT_WHEN_CROWDED = ("ce-id", "ce-type", "ce-source", "ce-subject", "ce-correlationid")
# Headers that steer JetStream on publish; copying them into a dead letter would misfire.
_PUBLISH_CONTROL_PREFIXES = ("nats-expected-", "nats-msg-id", "nats-rollup", "nats-ttl")


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
    ) -> int:
        """Pull once (waiting up to ``wait_seconds``), handle in stream order, settle each message.

        Returns how many messages were handled.
        """
        ...

    async def close(self) -> None: ...


# --------------------------------------------------------------------------- settlement


@dataclass(frozen=True, slots=True)
class Ack:
    pass


@dataclass(frozen=True, slots=True)
class Retry:
    delay: float


@dataclass(frozen=True, slots=True)
class DeadLetter:
    reason: str


@dataclass(frozen=True, slots=True)
class Terminate:
    """Give up on the message without a dead letter: it is a dead letter already."""

    reason: str


Settlement = Ack | Retry | DeadLetter | Terminate


async def settle(handler: Handler, delivery: Delivery, consumer: ConsumerSpec) -> Settlement:
    """Run the handler and decide the message's fate (see the module docstring)."""
    try:
        await handler(delivery)
    except NON_RETRYABLE as error:
        reason = f"rejected: {_describe(error)}"
        _delivery_log(delivery).warning("message rejected", reason=reason)
        return _give_up(delivery, reason)
    except Exception as error:
        if delivery.attempt >= consumer.max_deliver:
            reason = f"max deliveries ({consumer.max_deliver}) exhausted: {_describe(error)}"
            _delivery_log(delivery).error("message dead-lettered", reason=reason)
            return _give_up(delivery, reason)
        delay = (
            error.delay
            if isinstance(error, RetryLater) and error.delay is not None
            else consumer.retry_delay(delivery.attempt)
        )
        _delivery_log(delivery).warning(
            "message will be retried", delay=delay, error=_describe(error)
        )
        return Retry(delay)
    return Ack()


def _give_up(delivery: Delivery, reason: str) -> DeadLetter | Terminate:
    if delivery.stream == DEAD_LETTER_STREAM:
        return Terminate(reason)
    return DeadLetter(reason)


def _delivery_log(delivery: Delivery) -> Any:
    """The logger for a delivery's fate. Bound only when there is something to say: binding
    (and finding the message id among the headers) for every message cost more than the
    rest of the settlement."""
    return log.bind(
        stream=delivery.stream,
        consumer=delivery.consumer,
        seq=delivery.stream_sequence,
        attempt=delivery.attempt,
        event_id=delivery.message_id,
    )


async def handle_batch(
    messages: Sequence[M], consumer: ConsumerSpec, handle_one: Callable[[M], Awaitable[None]]
) -> None:
    """Handle one fetched batch: in stream order, or, for a consumer ``ordered_by_uid``, in
    one lane per uid, the lanes concurrently (so one owner's slow API calls do not hold up
    the others). Every lane runs to its end; the first error is raised afterwards."""
    if not consumer.ordered_by_uid or len(messages) < 2:
        for message in messages:
            await handle_one(message)
        return
    lanes: dict[str, list[M]] = {}
    for message in messages:
        lanes.setdefault(ordering_key(message.subject), []).append(message)

    async def run(lane: list[M]) -> None:
        for message in lane:
            await handle_one(message)

    outcomes = await asyncio.gather(*(run(lane) for lane in lanes.values()), return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


def ordering_key(subject: str) -> str:
    """The uid a subject is about (a subject that is not ours is its own key)."""
    try:
        return parse_subject(subject).uid or subject
    except SubjectError:
        return subject


def dead_letter(
    delivery: Delivery | StoredMessage,
    *,
    consumer: str,
    reason: str,
    attempts: int,
    max_bytes: int = MAX_MESSAGE_BYTES,
) -> tuple[str, dict[str, str], bytes]:
    """Subject, headers and body of the dead letter for a message of ``consumer``.

    Keeps the original headers (``ce-*`` included) and body; adds the reason and where the
    message came from. The ``Nats-Msg-Id`` is derived from stream, consumer and sequence so
    a relay and an in-process dead-lettering of the same message store it once.

    A dead letter must fit where the original barely did: when the added headers push it
    over ``max_bytes``, the body is cut (its size is in ``Kaiwo-Dlq-Body-Bytes``), and when
    even the headers crowd it, only the identifying ``ce-*`` headers are kept.
    """
    stream = delivery.stream
    sequence = delivery.stream_sequence if isinstance(delivery, Delivery) else delivery.sequence
    headers = {
        key: value
        for key, value in delivery.headers.items()
        if not key.lower().startswith(_PUBLISH_CONTROL_PREFIXES)
    }
    headers.update(
        {
            DLQ_REASON: _single_line(reason),
            DLQ_STREAM: stream,
            DLQ_CONSUMER: consumer,
            DLQ_SUBJECT: delivery.subject,
            DLQ_SEQUENCE: str(sequence),
            DLQ_DELIVERIES: str(attempts),
            NATS_MSG_ID_HEADER: f"dlq:{stream}:{consumer}:{sequence}",
        }
    )
    return dead_letter_subject(stream=stream, consumer=consumer), *_fitted(
        headers, delivery.body, max_bytes=max_bytes
    )


def _fitted(
    headers: dict[str, str], body: bytes, *, max_bytes: int
) -> tuple[dict[str, str], bytes]:
    if message_size(headers, body) <= max_bytes:
        return headers, body
    cut = {**headers, DLQ_BODY_BYTES: str(len(body))}
    room = max_bytes - message_size(cut, b"")
    if room >= 0:
        return cut, body[:room]
    ours = {DLQ_REASON, DLQ_STREAM, DLQ_CONSUMER, DLQ_SUBJECT, DLQ_SEQUENCE, DLQ_DELIVERIES}
    kept = {
        key: value[:256]
        for key, value in cut.items()
        if key in ours or key == NATS_MSG_ID_HEADER or key.lower() in _KEPT_WHEN_CROWDED
    }
    return kept, body[: max(0, max_bytes - message_size(kept, b""))]


def dead_letter_relay(bus: Bus) -> Handler:
    """A handler for the relay consumer: advisory in, dead letter with the message out."""

    async def relay(delivery: Delivery) -> None:
        if not delivery.subject.startswith(MAX_DELIVERIES_ADVISORY + "."):
            raise PoisonMessage(f"not a max-deliveries advisory: {delivery.subject}")
        try:
            advisory = parse_body(delivery.body)
            stream = str(advisory["stream"])
            consumer = str(advisory["consumer"])
            sequence = int(advisory["stream_seq"])
            deliveries = int(advisory.get("deliveries", 0))
        except (ValueError, KeyError, TypeError) as error:
            raise PoisonMessage(f"unreadable advisory: {_describe(error)}") from error
        if stream == DEAD_LETTER_STREAM:
            # A reader of the dead letters gave up on one: it stays where it is. Relaying it
            # would make a dead letter of a dead letter, which its reader may give up on too.
            log.info(
                "max deliveries on a dead letter; not relayed",
                consumer=consumer,
                seq=sequence,
                deliveries=deliveries,
            )
            return
        reason = f"max deliveries ({deliveries}) exhausted without an acknowledgement"
        stored = await bus.read_stored(stream, sequence)
        if stored is None:
            stored = StoredMessage(
                stream=stream, sequence=sequence, subject="", headers={}, body=b""
            )
            reason += "; the message is no longer in the stream"
        subject, headers, body = dead_letter(
            stored, consumer=consumer, reason=reason, attempts=deliveries
        )
        await bus.publish_raw(subject, body=body, headers=headers)

    return relay


async def run_consumer(
    bus: Bus,
    consumer: ConsumerSpec,
    handler: Handler,
    *,
    stop: asyncio.Event | None = None,
    poll_timeout: float = 5.0,
) -> None:
    """Process ``consumer`` until ``stop`` is set or the task is cancelled."""
    stop = stop or asyncio.Event()
    while not stop.is_set():
        try:
            await bus.process(consumer, handler, wait_seconds=poll_timeout)
        except BusError as error:  # e.g. disconnected: wait for the client to reconnect
            log.warning("pull failed", consumer=consumer.durable_name, error=str(error))
            await asyncio.sleep(min(poll_timeout, 1.0))
        except Exception:  # a bug or an unforeseen client error must not end the loop
            log.exception("consumer loop failed; retrying", consumer=consumer.durable_name)
            await asyncio.sleep(min(poll_timeout, 1.0))


# --------------------------------------------------------------------------- helpers


def _header(headers: Mapping[str, str], name: str) -> str | None:
    lowered = name.lower()
    return next((value for key, value in headers.items() if key.lower() == lowered), None)


def _single_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat[:_MAX_REASON_LENGTH]


def _describe(error: BaseException) -> str:
    return _single_line(f"{type(error).__name__}: {error}")
