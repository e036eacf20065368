"""One active replica per role: standby, hand-over on stop, take-over after a crash, loss.

Leases expire and renewal deadlines pass on a :class:`ManualClock` that only the test moves,
not on the wall clock: a loaded machine that runs the event loop late cannot make a lease run
out (or fail to) behind the test's back. Only the renewal rhythm (every 0.04 s) is real time.
"""

from __future__ import annotations

import asyncio

from kaiwo_runtime.leases import MemoryLeaseStore
from kaiwo_runtime.single_active import LeaseTiming, SingleActive

from tests.waiting import eventually

DURATION = 0.3
"""Seconds: renewals every 0.04 s, a leader gives up 0.2 s after its last renewal."""


class ManualClock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def __call__(self) -> float:
        return self.now


class Replica:
    """A replica whose work counts the moments it runs, until told to stop."""

    def __init__(self, store: MemoryLeaseStore, name: str, clock: ManualClock) -> None:
        self.stop = asyncio.Event()
        self.working = asyncio.Event()
        self.finished = asyncio.Event()
        self.single = SingleActive(store, name="planner", holder=name, clock=clock)
        self.task = asyncio.create_task(self.single.run(self.work, self.stop))

    async def work(self, until: asyncio.Event) -> None:
        self.working.set()
        await until.wait()
        self.finished.set()


def lease_store(clock: ManualClock) -> MemoryLeaseStore:
    return MemoryLeaseStore(duration_seconds=DURATION, clock=clock)


def test_timing_follows_the_lease_duration() -> None:
    assert LeaseTiming.for_duration(15) == LeaseTiming(renew_every=2.0, renew_deadline=10.0)


async def test_only_one_replica_works_and_the_other_waits() -> None:
    clock = ManualClock()
    store = lease_store(clock)
    first = Replica(store, "pod-a", clock)
    await eventually(first.working.is_set)
    second = Replica(store, "pod-b", clock)
    await asyncio.sleep(DURATION * 3)  # several renewals and claim attempts
    assert first.single.active
    assert not second.working.is_set() and not second.single.active
    assert await store.holder("planner") == "pod-a"
    for replica in (first, second):
        replica.stop.set()
    assert await first.task is False and await second.task is False


async def test_a_stopped_leader_hands_over_at_the_standbys_next_try() -> None:
    # The clock stands still: the leader's lease never expires, so the standby can only get
    # it because the leader released it on stopping, not by waiting for the expiry.
    clock = ManualClock()
    store = lease_store(clock)
    first = Replica(store, "pod-a", clock)
    await eventually(first.working.is_set)
    second = Replica(store, "pod-b", clock)
    await asyncio.sleep(0.1)  # the standby has tried
    assert not second.working.is_set()
    first.stop.set()
    assert await first.task is False
    assert first.finished.is_set()
    await eventually(second.working.is_set)
    assert clock.now == 0.0
    assert await store.holder("planner") == "pod-b"
    second.stop.set()
    await second.task


async def test_a_crashed_leader_is_replaced_once_its_lease_runs_out() -> None:
    clock = ManualClock()
    store = lease_store(clock)
    # A leader that claimed the lease and then crashed: it neither renews nor releases. (A
    # cancelled SingleActive is no crash: on the way out it releases, as on a stop.)
    await store.claim("planner", "pod-a")
    second = Replica(store, "pod-b", clock)
    await asyncio.sleep(0.1)  # the standby tries again and again: the lease is still held
    assert not second.working.is_set()
    clock.advance(DURATION)  # ... until it runs out
    await eventually(second.working.is_set)
    assert await store.holder("planner") == "pod-b"
    second.stop.set()
    assert await second.task is False


async def test_a_leader_whose_lease_was_taken_stops_working_and_says_so() -> None:
    clock = ManualClock()
    store = lease_store(clock)
    first = Replica(store, "pod-a", clock)
    await eventually(first.working.is_set)
    clock.advance(DURATION)  # its lease ran out unseen (a pause, a partition) ...
    assert await store.claim("planner", "pod-b") is not None  # ... and another took it
    await eventually(first.finished.is_set)
    assert await first.task is True
    assert not first.single.active
    assert await store.holder("planner") == "pod-b"


async def test_a_leader_that_cannot_renew_stops_before_its_lease_runs_out() -> None:
    clock = ManualClock()
    store = UnreachableAfterClaim(duration_seconds=DURATION, clock=clock)
    replica = Replica(store, "pod-a", clock)
    await eventually(replica.working.is_set)
    await asyncio.sleep(0.1)  # renewals fail, but its renewal deadline has not passed
    assert not replica.finished.is_set()
    clock.advance(DURATION * 0.8)  # past the deadline (2/3 of the lease), not past the lease
    await eventually(replica.finished.is_set)
    assert await replica.task is True
    # It stopped while its lease still stood: before another replica could claim it.
    assert await store.holder("planner") == "pod-a"


async def test_a_replica_stopped_while_waiting_never_works() -> None:
    clock = ManualClock()
    store = lease_store(clock)
    await store.claim("planner", "someone")
    replica = Replica(store, "pod-a", clock)
    await asyncio.sleep(DURATION / 4)
    replica.stop.set()
    assert await replica.task is False
    assert not replica.working.is_set()
    assert await store.holder("planner") == "someone"


class UnreachableAfterClaim(MemoryLeaseStore):
    """A store that answers the claim and then nothing (NATS went away)."""

    async def renew(self, name: str, holder: str, *, revision: int) -> int | None:
        raise ConnectionError("nats: no servers available for connection")
