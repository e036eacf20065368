"""The durable feed's reads in a round: findings and scale decisions are taken without
waiting, and while observations keep coming, at most every ``SIDE_STREAMS_SECONDS``."""

from __future__ import annotations

from typing import Any

from kaiwo_contracts.events.streams import (
    PLANNER_FINDINGS_CONSUMER,
    PLANNER_SCALE_CONSUMER,
    ConsumerSpec,
    bus_topology,
)
from kaiwo_planner.feeds import OBSERVATION_CONSUMER, SIDE_STREAMS_SECONDS, DurableFeed


class ReadingBus:
    """A bus whose consumers hold ``waiting`` messages each; it notes every read."""

    def __init__(self, waiting: dict[str, int]) -> None:
        self.topology = bus_topology()
        self.waiting = dict(waiting)
        self.reads: list[tuple[str, float]] = []

    async def process(
        self, consumer: ConsumerSpec, handler: Any, *, max_messages: int, wait_seconds: float
    ) -> int:
        self.reads.append((consumer.durable_name, wait_seconds))
        taken = min(1, self.waiting.get(consumer.durable_name, 0))  # max_ack_pending 1
        self.waiting[consumer.durable_name] = self.waiting.get(consumer.durable_name, 0) - taken
        return taken


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Loop:
    """What the feed hands reads to; the reading bus never calls them."""

    async def handle_observation(self, delivery: Any) -> None: ...
    async def handle_finding(self, delivery: Any) -> None: ...
    async def handle_scale_decision(self, delivery: Any) -> None: ...


async def nothing() -> None:
    return None


SIDE = {PLANNER_FINDINGS_CONSUMER, PLANNER_SCALE_CONSUMER}


def side_reads(bus: ReadingBus) -> list[tuple[str, float]]:
    return [read for read in bus.reads if read[0] in SIDE]


async def test_a_round_waits_only_for_its_first_observation() -> None:
    bus = ReadingBus({OBSERVATION_CONSUMER: 2})
    feed = DurableFeed(bus, monotonic=Clock())  # type: ignore[arg-type]

    handled = await feed.round(Loop(), nothing, wait_seconds=1.5)  # type: ignore[arg-type]

    assert handled == 2
    assert bus.reads == [
        (OBSERVATION_CONSUMER, 1.5),
        (OBSERVATION_CONSUMER, 0),
        (OBSERVATION_CONSUMER, 0),
        (PLANNER_FINDINGS_CONSUMER, 0),
        (PLANNER_SCALE_CONSUMER, 0),
    ]


async def test_while_observations_keep_coming_side_streams_are_read_at_most_every_interval() -> (
    None
):
    clock = Clock()
    bus = ReadingBus({OBSERVATION_CONSUMER: 100})
    feed = DurableFeed(bus, monotonic=clock)  # type: ignore[arg-type]
    loop = Loop()

    await feed.round(loop, nothing, wait_seconds=1.0)  # type: ignore[arg-type]
    first = len(side_reads(bus))
    bus.waiting[OBSERVATION_CONSUMER] = 1
    clock.now += SIDE_STREAMS_SECONDS / 2
    await feed.round(loop, nothing, wait_seconds=1.0)  # type: ignore[arg-type]
    soon_after = len(side_reads(bus))
    bus.waiting[OBSERVATION_CONSUMER] = 1
    clock.now += SIDE_STREAMS_SECONDS / 2
    await feed.round(loop, nothing, wait_seconds=1.0)  # type: ignore[arg-type]

    assert (first, soon_after, len(side_reads(bus))) == (2, 2, 4)


async def test_a_round_without_observations_always_reads_the_side_streams() -> None:
    """A quiet planner (and a test that steps it once) sees a finding in the next round."""
    bus = ReadingBus({OBSERVATION_CONSUMER: 1, PLANNER_FINDINGS_CONSUMER: 1})
    feed = DurableFeed(bus, monotonic=Clock())  # type: ignore[arg-type]
    loop = Loop()

    first = await feed.round(loop, nothing, wait_seconds=1.0)  # type: ignore[arg-type]
    bus.waiting[PLANNER_FINDINGS_CONSUMER] = 1
    second = await feed.round(loop, nothing, wait_seconds=1.0)  # type: ignore[arg-type]

    assert (first, second) == (2, 1)
    assert side_reads(bus)[-2:] == [(PLANNER_FINDINGS_CONSUMER, 0), (PLANNER_SCALE_CONSUMER, 0)]
