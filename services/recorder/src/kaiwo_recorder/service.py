"""The recorder: every message of every stream into the event store, once, never lost.

One durable consumer per NATS stream (``recorder-obs``, ``recorder-plan``, ``recorder-res``,
``recorder-mon``, ``recorder-gateway``, ``recorder-dlq``; see
:mod:`kaiwo_contracts.events.streams`). Each consumer is pumped in its own loop:

1. pull up to ``batch_size`` messages;
2. turn each into a row (:func:`kaiwo_recorder.records.record_of`): the event as published,
   a dead letter, an advisory, or a raw record of a malformed message;
3. append the rows in **one** transaction with ``append_next`` (the store does thousands of
   events per second only when batched); the store skips event ids it already holds, so a
   redelivered or re-published message is one row;
4. only after the commit, ``ack`` every message of the batch.

When the store cannot write (connection refused, lock timeout, disk full, read-only: the
store's :class:`~kaiwo_eventstore.StoreUnavailableError`, or any error while a read fails too)
the batch is *held*: nothing is acknowledged, ``/readyz`` fails with the reason,
``kaiwo_recorder_held_messages`` counts what waits, and the messages are kept "in progress" on
the server so they are neither redelivered nor counted towards ``max_deliver``, and the append
is retried with backoff until it commits. On stop, held messages are nak'ed for immediate
redelivery. A full disk is told apart by the error, not by probing: a read still works on a
full disk.

Gaps and lag. Each consumer's position is checked at start and every ``position_interval``
seconds: ``kaiwo_recorder_lag_messages`` is what the stream holds that is not stored yet.
A message JetStream dropped (the stream's byte or age limit) before the recorder read it can
never be stored; such a gap (:mod:`kaiwo_recorder.gaps`: a jump in the first deliveries'
sequences, or the stream's first sequence past the position) is logged and counted in
``kaiwo_recorder_gap_messages_total``.

When the store answers but refuses the batch (a row it cannot take, e.g. PostgreSQL refusing
``\\u0000`` in JSON), the rows are appended one by one; a refused row is stored raw (body as
base64); a message that cannot be stored at all is dead-lettered (its copy in ``KAIWO_DLQ``
keeps it) — except messages of ``KAIWO_DLQ`` itself, which are only terminated since the
stream already holds them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import structlog
from kaiwo_contracts.events.streams import (
    DEAD_LETTER_RELAY,
    DEAD_LETTER_STREAM,
    BusTopology,
    ConsumerSpec,
)
from kaiwo_eventstore import EventStore, StoreUnavailableError
from kaiwo_runtime.batch_consumer import MessagePuller, PulledMessage, puller_for
from kaiwo_runtime.bus import Bus, BusError
from kaiwo_runtime.dead_letters import dead_letter, dead_letter_relay
from kaiwo_runtime.logging import bound_context
from kaiwo_runtime.settlement import run_consumer

from kaiwo_recorder.appending import BatchAppender, Row
from kaiwo_recorder.gaps import Gap, SequenceTracker
from kaiwo_recorder.keep_alive import extend_all, kept_in_progress
from kaiwo_recorder.metrics import RecorderMetrics
from kaiwo_recorder.records import (
    MALFORMED_TYPE,
    UnrecordableError,
    record_of,
)

log = structlog.get_logger("kaiwo.recorder")

RECORDER_PREFIX = "recorder-"
DEFAULT_RETRY_DELAYS = (0.2, 0.5, 1.0, 2.0)
"""Pauses between append attempts while the store is down; the last one repeats. They stay
below the consumers' first ack wait (5 s) so the held messages are extended in time."""


def recorder_consumers(topology: BusTopology) -> tuple[ConsumerSpec, ...]:
    """The recorder's durable consumers in ``topology`` (one per stream, the DLQ included)."""
    return tuple(c for c in topology.consumers if c.durable_name.startswith(RECORDER_PREFIX))


@dataclass(frozen=True, slots=True)
class PumpResult:
    """What one pump of one consumer did."""

    messages: int
    appended: int = 0
    duplicates: int = 0
    malformed: int = 0
    dead_lettered: int = 0
    held: bool = False


class RecorderService:
    """Records every stream; drive it with :meth:`run` or step it with :meth:`pump`."""

    def __init__(
        self,
        *,
        bus: Bus,
        store: EventStore,
        clock: Callable[[], datetime],
        metrics: RecorderMetrics | None = None,
        puller: MessagePuller | None = None,
        batch_size: int = 256,
        fetch_wait_seconds: float = 1.0,
        linger_seconds: float = 0.0,
        extend_interval: float = 2.0,
        retry_delays: Sequence[float] = DEFAULT_RETRY_DELAYS,
        position_interval: float = 10.0,
    ) -> None:
        self.bus = bus
        self.store = store
        self.metrics = metrics or RecorderMetrics()
        self.consumers = recorder_consumers(bus.topology)
        self._clock = clock
        self._puller = puller or puller_for(bus)
        self._batch_size = batch_size
        self._fetch_wait = fetch_wait_seconds
        self._linger = linger_seconds
        self._extend_interval = extend_interval
        self._retry_delays = tuple(retry_delays) or DEFAULT_RETRY_DELAYS
        self._position_interval = position_interval
        self._held: dict[str, Sequence[PulledMessage]] = {}
        self._unavailable: dict[str, str] = {}
        """Consumer -> why the store could not take its held batch (readiness says it)."""
        self._trackers = {c.durable_name: SequenceTracker() for c in self.consumers}
        self._appender = BatchAppender(store, self.metrics)

    # ------------------------------------------------------------------ running

    async def run(self, stop: asyncio.Event) -> None:
        """Pump every recorder consumer, and relay max-deliveries advisories, until ``stop``.

        The relay runs here because the recorder already owns the dead-letter stream: an
        advisory (a handler that never answered) becomes a dead letter carrying the original
        message, which the recorder then stores like any other.
        """
        async with asyncio.TaskGroup() as group:
            for consumer in self.consumers:
                group.create_task(self._consume(consumer, stop))
            group.create_task(
                run_consumer(
                    self.bus,
                    self.bus.topology.consumer(DEAD_LETTER_RELAY),
                    dead_letter_relay(self.bus),
                    stop=stop,
                    poll_timeout=1.0,
                )
            )

    async def _consume(self, consumer: ConsumerSpec, stop: asyncio.Event) -> None:
        failures = 0
        loop = asyncio.get_running_loop()
        next_check = loop.time()
        try:
            while not stop.is_set():
                if loop.time() >= next_check:
                    next_check = loop.time() + self._position_interval
                    try:
                        await self.check_position(consumer)
                    except BusError as error:  # the next round asks again
                        log.warning(
                            "position unknown", consumer=consumer.durable_name, error=str(error)
                        )
                try:
                    result = await self.pump(consumer)
                except BusError as error:
                    log.warning("pull failed", consumer=consumer.durable_name, error=str(error))
                    await _pause(stop, 1.0)
                    continue
                except Exception:  # a bug must not stop the other messages: log, retry later
                    log.exception("recording failed", consumer=consumer.durable_name)
                    await _pause(stop, 1.0)
                    continue
                failures = failures + 1 if result.held else 0
                if result.held:
                    await _pause(
                        stop, self._retry_delays[min(failures, len(self._retry_delays)) - 1]
                    )
        finally:
            await self.release(consumer)

    async def check_position(self, consumer: ConsumerSpec) -> Gap | None:
        """Update the lag of ``consumer`` and report a gap if its stream now starts past the
        next message the recorder expects (see the module docstring)."""
        position = await self._puller.position(consumer)
        tracker = self._trackers[consumer.durable_name]
        tracker.start(delivered=position.delivered_sequence)
        self.metrics.lag.labels(stream=consumer.stream).set(position.unsettled)
        gap = tracker.stream_starts_at(position.first_sequence)
        if gap is not None:
            self._report_gap(consumer, gap, noticed="the stream starts past the position")
        return gap

    def _track(self, consumer: ConsumerSpec, batch: Sequence[PulledMessage]) -> None:
        tracker = self._trackers[consumer.durable_name]
        for message in batch:
            delivery = message.delivery
            gap = tracker.delivered(delivery.stream_sequence, attempt=delivery.attempt)
            if gap is not None:
                self._report_gap(consumer, gap, noticed="the deliveries skipped sequences")

    def _report_gap(self, consumer: ConsumerSpec, gap: Gap, *, noticed: str) -> None:
        self.metrics.gap_messages.labels(stream=consumer.stream).inc(gap.messages)
        log.error(
            "messages lost before they were recorded: the stream dropped them (byte or age "
            "limit) before the recorder read them",
            stream=consumer.stream,
            consumer=consumer.durable_name,
            first_sequence=gap.first,
            last_sequence=gap.last,
            messages=gap.messages,
            noticed=noticed,
        )

    async def store_ready(self) -> bool:
        """Readiness: no batch is held for want of the store, and the store answers a read."""
        if self._unavailable:
            reason = next(iter(self._unavailable.values()))
            held = sum(len(batch) for batch in self._held.values())
            msg = f"{held} messages held, not recorded: {reason}"
            raise StoreUnavailableError(msg)
        await self.store.last_position()
        return True

    # ------------------------------------------------------------------ one step

    async def pump(
        self, consumer: ConsumerSpec, *, wait_seconds: float | None = None
    ) -> PumpResult:
        """Record one batch of ``consumer`` (the held batch first, if the store was down)."""
        batch = self._held.get(consumer.durable_name)
        if batch is None:
            batch = await self._pull_batch(
                consumer, wait_seconds=self._fetch_wait if wait_seconds is None else wait_seconds
            )
        if not batch:
            return PumpResult(messages=0)
        try:
            async with kept_in_progress(batch, every=self._extend_interval):
                result = await self._record(consumer, batch)
        except StoreUnavailableError as error:
            self._hold(consumer, batch, reason=" ".join(str(error).split())[:1024])
            await extend_all(batch)
            return PumpResult(messages=len(batch), held=True)
        self._release_hold(consumer, result)
        return result

    def _hold(self, consumer: ConsumerSpec, batch: Sequence[PulledMessage], *, reason: str) -> None:
        self.metrics.store_unavailable.inc()
        if self._unavailable.get(consumer.durable_name) != reason:
            log.error(
                "event store cannot write; holding the batch unacknowledged until it can",
                consumer=consumer.durable_name,
                messages=len(batch),
                reason=reason,
            )
        self._unavailable[consumer.durable_name] = reason
        self._held[consumer.durable_name] = batch
        self._set_held_gauge()

    def _release_hold(self, consumer: ConsumerSpec, result: PumpResult) -> None:
        self._held.pop(consumer.durable_name, None)
        if self._unavailable.pop(consumer.durable_name, None) is not None:
            log.warning(
                "event store writes again; the held batch is recorded",
                consumer=consumer.durable_name,
                messages=result.messages,
                appended=result.appended,
            )
        self._set_held_gauge()

    def _set_held_gauge(self) -> None:
        self.metrics.held_messages.set(sum(len(batch) for batch in self._held.values()))

    async def _pull_batch(
        self, consumer: ConsumerSpec, *, wait_seconds: float
    ) -> Sequence[PulledMessage]:
        """A batch; when the first pull brings less than a full one, wait ``linger`` for more.

        At a trickle every message would otherwise cost a transaction of its own: the
        recorder is off the path from a change to its children, so it trades a few tens of
        milliseconds before recording for many times fewer commits.
        """
        batch = await self._puller.pull(
            consumer, max_messages=self._batch_size, wait_seconds=wait_seconds
        )
        # Tracked as soon as pulled (no await in between): a position check running meanwhile
        # must not count what is in hand as lost.
        self._track(consumer, batch)
        if not batch or len(batch) >= self._batch_size or self._linger <= 0:
            return batch
        await asyncio.sleep(self._linger)
        more = await self._puller.pull(
            consumer, max_messages=self._batch_size - len(batch), wait_seconds=0
        )
        self._track(consumer, more)
        return (*batch, *more)

    async def release(self, consumer: ConsumerSpec) -> None:
        """Give a held batch back to the server for immediate redelivery (on stop)."""
        batch = self._held.pop(consumer.durable_name, None)
        self._unavailable.pop(consumer.durable_name, None)
        for message in batch or ():
            with contextlib.suppress(Exception):  # the connection may be gone already
                await message.nak(delay=0)

    # ------------------------------------------------------------------ recording

    async def _record(self, consumer: ConsumerSpec, batch: Sequence[PulledMessage]) -> PumpResult:
        rows = [self._row(message) for message in batch]
        appended = await self._appender.append(rows)
        for index, reason in appended.refused.items():
            rows[index].event, rows[index].problem = None, reason
        stream = consumer.stream
        malformed = sum(1 for row in rows if row.event and row.event.type == MALFORMED_TYPE)
        dead = [row for row in rows if row.event is None]
        for row in rows:
            if row.event is not None:
                await row.message.ack()
        for row in dead:
            await self._dead_letter(consumer, row)
        await self._puller.flush()
        self.metrics.events_appended.labels(stream=stream).inc(appended.stored)
        self.metrics.duplicates.labels(stream=stream).inc(appended.duplicates)
        self.metrics.malformed.labels(stream=stream).inc(malformed)
        self.metrics.dead_lettered.labels(stream=stream).inc(len(dead))
        return PumpResult(
            messages=len(batch),
            appended=appended.stored,
            duplicates=appended.duplicates,
            malformed=malformed,
            dead_lettered=len(dead),
        )

    def _row(self, message: PulledMessage) -> Row:
        delivery = message.delivery
        try:
            event = record_of(delivery, now=self._clock())
        except UnrecordableError as error:
            return Row(message=message, event=None, problem=f"unrecordable: {error}")
        if event.type == MALFORMED_TYPE:
            with bound_context(
                {"event_id": event.event_id, "correlation_id": event.correlation_id}
            ):
                log.warning(
                    "malformed message recorded raw",
                    stream=delivery.stream,
                    seq=delivery.stream_sequence,
                    reason=event.data.get("reason"),
                )
        return Row(message=message, event=event)

    async def _dead_letter(self, consumer: ConsumerSpec, row: Row) -> None:
        delivery = row.message.delivery
        reason = row.problem or "unrecordable"
        log.error(
            "message cannot be recorded",
            stream=delivery.stream,
            seq=delivery.stream_sequence,
            reason=reason,
        )
        if delivery.stream == DEAD_LETTER_STREAM:
            # Re-dead-lettering a dead letter would loop; KAIWO_DLQ keeps the message anyway.
            await row.message.term()
            return
        subject, headers, body = dead_letter(
            delivery,
            consumer=consumer.durable_name,
            reason=f"recorder: {reason}",
            attempts=delivery.attempt,
        )
        try:
            await self.bus.publish_raw(subject, body=body, headers=headers)
        except BusError:
            await row.message.nak(delay=consumer.retry_delay(delivery.attempt))
            return
        await row.message.term()


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
