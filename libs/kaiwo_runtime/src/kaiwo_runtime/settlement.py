"""What becomes of a delivered message (the delivery policy in :mod:`kaiwo_runtime.bus`):
:func:`settle` runs the handler and decides, :func:`handle_batch` runs a fetched batch in
order (or one lane per uid), :func:`run_consumer` keeps a consumer going.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

import structlog
from kaiwo_contracts.events.streams import DEAD_LETTER_STREAM, ConsumerSpec
from kaiwo_contracts.events.subjects import SubjectError, parse_subject

from kaiwo_runtime.bus import NON_RETRYABLE, Bus, BusError, Delivery, Handler, RetryLater
from kaiwo_runtime.dead_letters import describe_error
from kaiwo_runtime.lanes import Lanes

log = structlog.get_logger("kaiwo.bus")


class _Addressed(Protocol):
    @property
    def subject(self) -> str: ...


M = TypeVar("M", bound=_Addressed)


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
        reason = f"rejected: {describe_error(error)}"
        _delivery_log(delivery).warning("message rejected", reason=reason)
        return _give_up(delivery, reason)
    except Exception as error:
        if delivery.attempt >= consumer.max_deliver:
            reason = f"max deliveries ({consumer.max_deliver}) exhausted: {describe_error(error)}"
            _delivery_log(delivery).error("message dead-lettered", reason=reason)
            return _give_up(delivery, reason)
        delay = (
            error.delay
            if isinstance(error, RetryLater) and error.delay is not None
            else consumer.retry_delay(delivery.attempt)
        )
        _delivery_log(delivery).warning(
            "message will be retried", delay=delay, error=describe_error(error)
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


async def fetch_size(consumer: ConsumerSpec, max_messages: int, lanes: Lanes | None) -> int:
    """How many messages to fetch: at most ``max_messages`` and the consumer's
    :attr:`~kaiwo_contracts.events.streams.ConsumerSpec.handled_at_once`, and, with
    ``lanes``, at most their free slots (waiting for one)."""
    size = max(1, min(max_messages, consumer.handled_at_once))
    return size if lanes is None else min(size, await lanes.free_slots())


async def handle_batch(
    messages: Sequence[M],
    consumer: ConsumerSpec,
    handle_one: Callable[[M], Awaitable[None]],
    *,
    lanes: Lanes | None = None,
) -> None:
    """Handle one fetched batch: in stream order, or, for a consumer ``ordered_by_uid``, in
    one lane per uid, the lanes concurrently (so one owner's slow API calls do not hold up
    the others). Every lane runs to its end; the first error is raised afterwards.

    With ``lanes`` (a consumer ``ordered_by_uid`` that :func:`run_consumer` reads), each
    message is only started in the lane of its uid, and the batch is not waited for: the
    next fetch need not wait for this batch's slowest message."""
    if lanes is not None:
        for message in messages:
            lanes.start(ordering_key(message.subject), partial(handle_one, message))
        return
    if not consumer.ordered_by_uid or len(messages) < 2:
        for message in messages:
            await handle_one(message)
        return
    by_uid: dict[str, list[M]] = {}
    for message in messages:
        by_uid.setdefault(ordering_key(message.subject), []).append(message)

    async def run(lane: list[M]) -> None:
        for message in lane:
            await handle_one(message)

    outcomes = await asyncio.gather(
        *(run(lane) for lane in by_uid.values()), return_exceptions=True
    )
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


def ordering_key(subject: str) -> str:
    """The uid a subject is about (a subject that is not ours is its own key)."""
    try:
        return parse_subject(subject).uid or subject
    except SubjectError:
        return subject


async def run_consumer(
    bus: Bus,
    consumer: ConsumerSpec,
    handler: Handler,
    *,
    stop: asyncio.Event | None = None,
    poll_timeout: float = 5.0,
) -> None:
    """Process ``consumer`` until ``stop`` is set or the task is cancelled.

    A consumer ``ordered_by_uid`` is read through :class:`~kaiwo_runtime.lanes.Lanes`: each
    message starts as soon as it is fetched, in the lane of its uid, up to its
    ``handled_at_once`` at once. On ``stop`` the messages in hand are finished; on
    cancellation they are cancelled (and redelivered, unacknowledged)."""
    stop = stop or asyncio.Event()
    lanes = Lanes(consumer.handled_at_once) if consumer.ordered_by_uid else None
    try:
        await _consume(bus, consumer, handler, stop=stop, poll_timeout=poll_timeout, lanes=lanes)
        if lanes is not None:
            await _finish(lanes, consumer)
    except BaseException:
        if lanes is not None:
            await lanes.abandon()
        raise


async def _finish(lanes: Lanes, consumer: ConsumerSpec) -> None:
    try:
        await lanes.drain()
    except Exception as error:  # as in the loop: logged, the message is redelivered
        log.warning("handling failed at stop", consumer=consumer.durable_name, error=repr(error))


async def _consume(
    bus: Bus,
    consumer: ConsumerSpec,
    handler: Handler,
    *,
    stop: asyncio.Event,
    poll_timeout: float,
    lanes: Lanes | None,
) -> None:
    while not stop.is_set():
        try:
            if lanes is not None:
                await lanes.free_slots()  # busy lanes: a stop meanwhile fetches nothing more
                if stop.is_set():
                    break
            await bus.process(consumer, handler, wait_seconds=poll_timeout, lanes=lanes)
        except BusError as error:  # e.g. disconnected: wait for the client to reconnect
            log.warning("pull failed", consumer=consumer.durable_name, error=str(error))
            await asyncio.sleep(min(poll_timeout, 1.0))
        except Exception:  # a bug or an unforeseen client error must not end the loop
            log.exception("consumer loop failed; retrying", consumer=consumer.durable_name)
            await asyncio.sleep(min(poll_timeout, 1.0))
