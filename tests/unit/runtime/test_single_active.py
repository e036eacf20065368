"""One active replica per role: standby, hand-over on stop, take-over after a crash, loss."""

from __future__ import annotations

import asyncio
import time

import pytest
from kaiwo_runtime.leases import MemoryLeaseStore
from kaiwo_runtime.single_active import LeaseTiming, SingleActive

DURATION = 0.3
"""Seconds: renewals every 0.04 s, a leader gives up 0.2 s after its last renewal."""


class Replica:
    """A replica whose work counts the moments it runs, until told to stop."""

    def __init__(self, store: MemoryLeaseStore, name: str) -> None:
        self.stop = asyncio.Event()
        self.working = asyncio.Event()
        self.finished = asyncio.Event()
        self.single = SingleActive(store, name="planner", holder=name)
        self.task = asyncio.create_task(self.single.run(self.work, self.stop))

    async def work(self, until: asyncio.Event) -> None:
        self.working.set()
        await until.wait()
        self.finished.set()


async def eventually(event: asyncio.Event, within: float = 2.0) -> None:
    await asyncio.wait_for(event.wait(), within)


def test_timing_follows_the_lease_duration() -> None:
    assert LeaseTiming.for_duration(15) == LeaseTiming(renew_every=2.0, renew_deadline=10.0)


async def test_only_one_replica_works_and_the_other_waits() -> None:
    store = MemoryLeaseStore(duration_seconds=DURATION)
    first = Replica(store, "pod-a")
    await eventually(first.working)
    second = Replica(store, "pod-b")
    await asyncio.sleep(DURATION * 3)  # several renewals and claim attempts
    assert first.single.active
    assert not second.working.is_set() and not second.single.active
    assert await store.holder("planner") == "pod-a"
    for replica in (first, second):
        replica.stop.set()
    assert await first.task is False and await second.task is False


async def test_a_stopped_leader_hands_over_at_the_standbys_next_try() -> None:
    duration = 3.0  # claims every 0.4 s; the hand-over must not wait for the 3 s expiry
    store = MemoryLeaseStore(duration_seconds=duration)
    first = Replica(store, "pod-a")
    await eventually(first.working)
    second = Replica(store, "pod-b")
    await asyncio.sleep(0.1)  # the standby has tried once
    loop = asyncio.get_running_loop()
    stopped_at = loop.time()
    first.stop.set()
    assert await first.task is False
    assert first.finished.is_set()
    await eventually(second.working)
    assert loop.time() - stopped_at < duration / 2
    assert await store.holder("planner") == "pod-b"
    second.stop.set()
    await second.task


async def test_a_crashed_leader_is_replaced_once_its_lease_runs_out() -> None:
    store = MemoryLeaseStore(duration_seconds=DURATION)
    first = Replica(store, "pod-a")
    await eventually(first.working)
    second = Replica(store, "pod-b")
    first.task.cancel()  # dies without releasing
    with pytest.raises(asyncio.CancelledError):
        await first.task
    await eventually(second.working)
    assert await store.holder("planner") == "pod-b"
    second.stop.set()
    assert await second.task is False


async def test_a_leader_whose_lease_was_taken_stops_working_and_says_so() -> None:
    clock = ShiftedClock()
    store = MemoryLeaseStore(duration_seconds=DURATION, clock=clock)
    first = Replica(store, "pod-a")
    await eventually(first.working)
    clock.shift(DURATION)  # its lease ran out unseen (a pause, a partition) ...
    assert await store.claim("planner", "pod-b") is not None  # ... and another took it
    await eventually(first.finished)
    assert await first.task is True
    assert not first.single.active
    assert await store.holder("planner") == "pod-b"


async def test_a_leader_that_cannot_renew_stops_before_its_lease_runs_out() -> None:
    store = UnreachableAfterClaim(duration_seconds=DURATION)
    replica = Replica(store, "pod-a")
    await eventually(replica.working)
    started = asyncio.get_running_loop().time()
    await eventually(replica.finished)
    stopped_after = asyncio.get_running_loop().time() - started
    assert await replica.task is True
    assert stopped_after < DURATION  # before another replica could claim it


async def test_a_replica_stopped_while_waiting_never_works() -> None:
    store = MemoryLeaseStore(duration_seconds=DURATION)
    await store.claim("planner", "someone")
    replica = Replica(store, "pod-a")
    await asyncio.sleep(DURATION / 4)
    replica.stop.set()
    assert await replica.task is False
    assert not replica.working.is_set()
    assert await store.holder("planner") == "someone"


class ShiftedClock:
    """The monotonic clock, moved forward at will."""

    def __init__(self) -> None:
        self._shift = 0.0

    def shift(self, seconds: float) -> None:
        self._shift += seconds

    def __call__(self) -> float:
        return time.monotonic() + self._shift


class UnreachableAfterClaim(MemoryLeaseStore):
    """A store that answers the claim and then nothing (NATS went away)."""

    async def renew(self, name: str, holder: str, *, revision: int) -> int | None:
        raise ConnectionError("nats: no servers available for connection")
