"""Where the planning loop's inputs come from: one :class:`Feed` protocol, two feeds.

- :class:`DurableFeed` (one active replica): the durable consumers ``planner-obs`` (stream
  ``KAIWO_OBS``), ``planner-mon`` (``KAIWO_MON``, the monitor's findings) and
  ``planner-scale`` (``KAIWO_GATEWAY``, the autoscaler's scale decisions).
- :class:`~kaiwo_planner.partitioned_feed.PartitionedFeed` (active-active, decision 0030):
  every stream read by sequence, leases of partitions gained and released, and a scan for
  the preemption victims of the partitions held.

``__main__`` chooses the feed (:func:`kaiwo_planner.service.feed_for`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Final, Protocol

import structlog
from kaiwo_contracts.events.streams import (
    PLANNER_FINDINGS_CONSUMER,
    PLANNER_SCALE_CONSUMER,
    ConsumerSpec,
)
from kaiwo_contracts.events.subjects import ANY_TAIL, ANY_TOKEN
from kaiwo_runtime.bus import NON_RETRYABLE, Bus, BusError, Delivery, StoredMessage

from kaiwo_planner.planning_loop import PlanningLoop

log = structlog.get_logger("kaiwo.planner")

OBSERVATION_CONSUMER: Final = "planner-obs"
TAKE_WHAT_IS_THERE: Final = 0.0
"""The wait of every read of a round but its first: what the stream holds, without waiting,
so that neither findings nor scale decisions hold up the next observation."""
SIDE_STREAMS_SECONDS: Final = 0.1
"""While observations keep coming, findings and scale decisions are read at most this often
(a round that read no observation always reads them): under load a round plans about one
observation, and two reads that find nothing cost more than its planning."""
OBSERVATIONS_PER_ROUND: Final = 256
"""Observations handled in one round while they keep coming, before findings, timers, resync
and snapshots have their turn. The consumer hands them out one at a time
(``max_ack_pending=1``, for per-object order): a round per observation waited for findings
and scale decisions after each one, a minute of waiting for a relist of 3,000 objects."""

RoundTail = Callable[[], Awaitable[None]]
"""What a round does after reading: defaults, timers, scans, resync and snapshot."""


class Feed(Protocol):
    """Delivers the planning loop's inputs, round by round."""

    def holds(self, uid: str) -> bool:
        """Whether this replica plans the owner ``uid``."""
        ...

    @property
    def writes_snapshots(self) -> bool:
        """Whether this replica writes the shared snapshot now."""
        ...

    @property
    def keeps_restored_records(self) -> bool:
        """Whether the owner records and timers of a restored snapshot are this replica's."""
        ...

    async def catch_up(self, loop: PlanningLoop) -> int:
        """Hand the loop what the streams hold after the restored projection; how many."""
        ...

    async def round(self, loop: PlanningLoop, tail: RoundTail, *, wait_seconds: float) -> int:
        """Hand the loop what came in (waiting at most ``wait_seconds``), then run ``tail``;
        returns how many inputs were handled."""
        ...

    async def scan(self, loop: PlanningLoop, now: datetime) -> None:
        """What the feed plans on its own each round, after the timers."""
        ...


class DurableFeed:
    """The durable consumers: one replica, every owner. ``consumer`` replaces
    ``planner-obs``."""

    writes_snapshots: Final = True
    keeps_restored_records: Final = True

    def __init__(
        self,
        bus: Bus,
        *,
        consumer: ConsumerSpec | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._bus = bus
        self._monotonic = monotonic
        consumers = bus.topology.consumers
        self._observations = consumer or bus.topology.consumer(OBSERVATION_CONSUMER)
        self._findings = next(
            (c for c in consumers if c.durable_name == PLANNER_FINDINGS_CONSUMER), None
        )
        self._scale = next((c for c in consumers if c.durable_name == PLANNER_SCALE_CONSUMER), None)
        self._side_streams_due = -math.inf
        """When findings and scale decisions are read next while observations keep coming
        (on ``monotonic``)."""

    def holds(self, uid: str) -> bool:  # noqa: ARG002 -- every owner is this replica's
        return True

    async def scan(self, loop: PlanningLoop, now: datetime) -> None:
        """Nothing: one replica plans every owner, preemption victims with their beneficiary."""

    async def round(self, loop: PlanningLoop, tail: RoundTail, *, wait_seconds: float) -> int:
        handled = await self._read_observations(loop, wait_seconds=wait_seconds)
        now = self._monotonic()
        if handled == 0 or now >= self._side_streams_due:
            self._side_streams_due = now + SIDE_STREAMS_SECONDS
            handled += await self._read_side_streams(loop)
        await tail()
        return handled

    async def _read_side_streams(self, loop: PlanningLoop) -> int:
        """The findings and scale decisions that are there (without waiting); how many."""
        handled = 0
        for consumer, handle in (
            (self._findings, loop.handle_finding),
            (self._scale, loop.handle_scale_decision),
        ):
            if consumer is None:
                continue
            try:
                handled += await self._bus.process(
                    consumer, handle, max_messages=64, wait_seconds=TAKE_WHAT_IS_THERE
                )
            except BusError as error:  # they wait; timers, resync and snapshots must not
                log.warning(
                    "side stream unavailable", consumer=consumer.durable_name, error=str(error)
                )
        return handled

    async def _read_observations(self, loop: PlanningLoop, *, wait_seconds: float) -> int:
        """Handle the observations that are there, up to :data:`OBSERVATIONS_PER_ROUND`
        (waiting ``wait_seconds`` for the first); returns how many."""
        consumer, handle = self._observations, loop.handle_observation
        handled = await self._bus.process(
            consumer, handle, max_messages=64, wait_seconds=wait_seconds
        )
        while 0 < handled < OBSERVATIONS_PER_ROUND:
            more = await self._bus.process(
                consumer, handle, max_messages=64, wait_seconds=TAKE_WHAT_IS_THERE
            )
            if more == 0:
                break
            handled += more
        return handled

    async def catch_up(self, loop: PlanningLoop) -> int:
        """Read the stream from the projection's sequence + 1 to its end (from its start for
        an empty projection): observations acknowledged after the snapshot was taken, or
        before a crash that left none, would otherwise be lost (the consumer only continues
        after its ack floor). Messages aged out or deleted are passed over. Whatever the
        consumer delivers later at or below the projection's sequence is skipped."""
        consumer = self._observations
        sequence = loop.projection.last_sequence + 1
        handled = 0
        while (
            stored := await self._bus.read_next_stored(consumer.stream, sequence, subjects=">")
        ) is not None:
            if any(subject_matches(f, stored.subject) for f in consumer.filter_subjects):
                delivery = first_delivery(stored, consumer=consumer.durable_name)
                try:
                    await loop.handle_observation(delivery)
                    handled += 1
                except NON_RETRYABLE as error:  # the consumer dead-letters it, if it still can
                    log.warning(
                        "unreadable observation while catching up",
                        seq=stored.sequence,
                        error=str(error),
                    )
            sequence = stored.sequence + 1
        return handled


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: ``*`` is one token, ``>`` one or more trailing tokens."""
    wanted, given = pattern.split("."), subject.split(".")
    for index, token in enumerate(wanted):
        if token == ANY_TAIL:
            return len(given) > index
        if index >= len(given) or token not in (ANY_TOKEN, given[index]):
            return False
    return len(given) == len(wanted)


def first_delivery(stored: StoredMessage, *, consumer: str) -> Delivery:
    """A stored message handed to a handler as its first delivery: read by sequence, not
    delivered by a consumer."""
    return Delivery(
        stream=stored.stream,
        consumer=consumer,
        stream_sequence=stored.sequence,
        attempt=1,
        subject=stored.subject,
        headers=stored.headers,
        body=stored.body,
    )
