"""The bus port: publish envelopes idempotently, consume durable pull consumers, dead letters.

Two adapters implement :class:`Bus` with the same behaviour, checked by one contract suite
(``tests/contract/test_bus_contract.py``): :class:`kaiwo_runtime.nats_bus.NatsBus` (nats-py
JetStream) and :class:`kaiwo_runtime.memory_bus.MemoryBus` (in memory, for unit tests).

Delivery policy (shared by both adapters, :func:`settle`):

* the handler returns -> ``ack``;
* the handler raises a *non-retryable* error (:class:`PoisonMessage`, an invalid envelope,
  a pydantic ``ValidationError``) -> the message is copied to the consumer's dead-letter
  subject ``kaiwo.dlq.<stream>.<consumer>`` with the reason and its original headers, then
  terminated (``term``: never redelivered);
* any other exception -> ``nak`` with the consumer's backoff for that attempt (or the delay
  of :class:`RetryLater`), until the last allowed delivery, which is dead-lettered instead;
* the handler is cancelled (shutdown, crash) -> nothing is sent; the server redelivers after
  the ack wait. When that exhausts ``max_deliver`` the server publishes a max-deliveries
  advisory, which the ``KAIWO_DLQ`` stream stores and :func:`dead_letter_relay` turns into a
  dead letter carrying the original message.

Why nats-py and not FastStream here: FastStream does not set ``Nats-Msg-Id`` and hides
``PubAck.duplicate``; the dead-letter path needs ``term`` after a publish, the delivery count
and the stream sequence, and the relay reads stored messages by sequence. Services may still
wire their subscribers with FastStream: :meth:`Envelope.to_nats` gives the headers (with
``Nats-Msg-Id``) and :meth:`Envelope.from_nats` parses them. See docs/decisions/0005.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

import structlog
from kaiwo_contracts.events.envelope import (
    NATS_MSG_ID_HEADER,
    Envelope,
    EnvelopeFormatError,
    envelope_class,
)
from kaiwo_contracts.events.streams import MAX_DELIVERIES_ADVISORY, BusTopology, ConsumerSpec
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
_MAX_REASON_LENGTH = 1024
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


NON_RETRYABLE: tuple[type[BaseException], ...] = (
    PoisonMessage,
    EnvelopeFormatError,
    ValidationError,
)


@dataclass(frozen=True, slots=True)
class PublishAck:
    """Where a published message was stored; ``duplicate`` if JetStream already had its id."""

    stream: str
    sequence: int
    duplicate: bool


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
        """The envelope with a typed payload; invalid input raises :class:`EnvelopeFormatError`."""
        parametrized = cast("type[Envelope[T]]", envelope_class(payload))
        return parametrized.from_nats(self.headers, self.body)

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


Settlement = Ack | Retry | DeadLetter


async def settle(handler: Handler, delivery: Delivery, consumer: ConsumerSpec) -> Settlement:
    """Run the handler and decide the message's fate (see the module docstring)."""
    try:
        await handler(delivery)
    except NON_RETRYABLE as error:
        reason = f"rejected: {_describe(error)}"
        _delivery_log(delivery).warning("message rejected", reason=reason)
        return DeadLetter(reason)
    except Exception as error:
        if delivery.attempt >= consumer.max_deliver:
            reason = f"max deliveries ({consumer.max_deliver}) exhausted: {_describe(error)}"
            _delivery_log(delivery).error("message dead-lettered", reason=reason)
            return DeadLetter(reason)
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
    delivery: Delivery | StoredMessage, *, consumer: str, reason: str, attempts: int
) -> tuple[str, dict[str, str], bytes]:
    """Subject, headers and body of the dead letter for a message of ``consumer``.

    Keeps the original headers (``ce-*`` included) and body; adds the reason and where the
    message came from. The ``Nats-Msg-Id`` is derived from stream, consumer and sequence so
    a relay and an in-process dead-lettering of the same message store it once.
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
    return dead_letter_subject(stream=stream, consumer=consumer), headers, delivery.body


def dead_letter_relay(bus: Bus) -> Handler:
    """A handler for the relay consumer: advisory in, dead letter with the message out."""

    async def relay(delivery: Delivery) -> None:
        if not delivery.subject.startswith(MAX_DELIVERIES_ADVISORY + "."):
            raise PoisonMessage(f"not a max-deliveries advisory: {delivery.subject}")
        try:
            advisory = json.loads(delivery.body)
            stream = str(advisory["stream"])
            consumer = str(advisory["consumer"])
            sequence = int(advisory["stream_seq"])
            deliveries = int(advisory.get("deliveries", 0))
        except (ValueError, KeyError, TypeError) as error:
            raise PoisonMessage(f"unreadable advisory: {_describe(error)}") from error
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
