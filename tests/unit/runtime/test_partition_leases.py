"""Partition leases: replicas share the partitions, hand them over in order, take over the
partitions of a dead replica once its leases run out."""

from __future__ import annotations

import asyncio

from kaiwo_runtime.leases import MemoryLeaseStore
from kaiwo_runtime.partition_leases import PartitionLeases

DURATION = 15.0
PARTITIONS = 8


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Work:
    """Records what the replica was told, in order, and what the store said at each step."""

    def __init__(self, store: MemoryLeaseStore, name: str) -> None:
        self.store = store
        self.name = name
        self.events: list[tuple[str, int]] = []
        self.holder_while_releasing: list[str | None] = []

    async def gained(self, partition: int) -> None:
        self.events.append(("gained", partition))

    async def released(self, partition: int) -> None:
        self.events.append(("released", partition))
        self.holder_while_releasing.append(await self.store.holder(f"planner.p{partition}"))


def replica(store: MemoryLeaseStore, clock: Clock, name: str) -> tuple[PartitionLeases, Work]:
    work = Work(store, name)
    leases = PartitionLeases(
        store, role="planner", member=name, partitions=PARTITIONS, work=work, clock=clock
    )
    return leases, work


async def rounds(*replicas: PartitionLeases, count: int = 2) -> None:
    for _ in range(count):
        for leases in replicas:
            await leases.tick()


async def test_three_replicas_hold_disjoint_shares_covering_every_partition() -> None:
    clock = Clock()
    store = MemoryLeaseStore(duration_seconds=DURATION, clock=clock)
    (a, _), (b, _), (c, _) = (replica(store, clock, n) for n in ("a", "b", "c"))
    await rounds(a, b, c)
    # The shares of assign_partitions(8, [a, b, c]) (test_partition_assignment).
    assert (a.held, b.held, c.held) == ({2, 3, 6}, {1, 5, 7}, {0, 4})
    assert await store.holder("planner.p4") == "c"


async def test_a_joining_replica_gets_its_share_only_after_the_holder_let_go() -> None:
    clock = Clock()
    store = MemoryLeaseStore(duration_seconds=DURATION, clock=clock)
    (a, work_a), (c, _) = replica(store, clock, "a"), replica(store, clock, "c")
    await rounds(a, c)
    assert (a.held, c.held) == ({2, 3, 6, 7}, {0, 1, 4, 5})

    b, work_b = replica(store, clock, "b")
    await b.tick()  # a member now, but every partition is still held by another
    assert b.held == frozenset()
    await rounds(a, c, b, count=1)
    assert (a.held, b.held, c.held) == ({2, 3, 6}, {1, 5, 7}, {0, 4})
    # a finished its work on 7 while it still held the lease, then b started on it.
    assert ("released", 7) in work_a.events
    released = [p for kind, p in work_a.events if kind == "released"]
    assert released == [0, 1, 4, 5, 7]  # 0, 1, 4, 5 to c when c joined; 7 to b
    assert work_a.holder_while_releasing == ["a"] * 5
    assert work_b.events == [("gained", 1), ("gained", 5), ("gained", 7)]


async def test_a_dead_replicas_partitions_move_once_its_leases_run_out() -> None:
    clock = Clock()
    store = MemoryLeaseStore(duration_seconds=DURATION, clock=clock)
    (a, _), (b, _), (c, _) = (replica(store, clock, n) for n in ("a", "b", "c"))
    await rounds(a, b, c)

    # b dies: no release. Before its leases run out nobody may take its partitions.
    clock.now += DURATION - 1
    await rounds(a, c)
    assert a.held | c.held == {0, 2, 3, 4, 6}
    clock.now += 2
    await rounds(a, c)
    assert (a.held, c.held) == ({2, 3, 6, 7}, {0, 1, 4, 5})


async def test_a_graceful_stop_hands_everything_over_at_the_next_round() -> None:
    clock = Clock()
    store = MemoryLeaseStore(duration_seconds=DURATION, clock=clock)
    (a, _), (b, work_b) = replica(store, clock, "a"), replica(store, clock, "b")
    await rounds(a, b)
    stop = asyncio.Event()
    stop.set()
    await b.run(stop)  # stops at once: leaves
    assert b.held == frozenset()
    assert sorted(p for kind, p in work_b.events if kind == "released") == sorted(
        p for kind, p in work_b.events if kind == "gained"
    )
    assert await store.names("planner.member.") == ("planner.member.a",)
    await rounds(a)
    assert a.held == frozenset(range(PARTITIONS))


async def test_a_partition_whose_renewal_is_refused_is_dropped_without_release() -> None:
    clock = Clock()
    store = MemoryLeaseStore(duration_seconds=DURATION, clock=clock)
    a, work = replica(store, clock, "a")
    await a.tick()
    assert a.held == frozenset(range(PARTITIONS))
    # Paused past its lease (a long GC): another took partition 3 meanwhile.
    clock.now += DURATION + 1
    assert await store.claim("planner.p3", "intruder") is not None
    await a.tick()
    assert 3 not in a.held
    assert ("released", 3) in work.events
    assert await store.holder("planner.p3") == "intruder"


async def test_held_partitions_are_reported_on_every_change() -> None:
    clock = Clock()
    store = MemoryLeaseStore(duration_seconds=DURATION, clock=clock)
    seen: list[frozenset[int]] = []
    leases = PartitionLeases(
        store,
        role="executor",
        member="a",
        partitions=2,
        work=Work(store, "a"),
        clock=clock,
        on_change=seen.append,
    )
    await leases.tick()
    await leases.leave()
    assert seen == [frozenset({0}), frozenset({0, 1}), frozenset({1}), frozenset()]


class SlowToLetGo(Work):
    """Work whose in-hand message takes longer than the lease's renewal deadline."""

    def __init__(self, store: MemoryLeaseStore, name: str, *, seconds: float) -> None:
        super().__init__(store, name)
        self.seconds = seconds

    async def released(self, partition: int) -> None:
        await asyncio.sleep(self.seconds)
        await super().released(partition)


async def test_a_slow_hand_over_does_not_cost_the_other_partitions_their_leases() -> None:
    store = MemoryLeaseStore(duration_seconds=0.3)  # renewals every 0.04 s, deadline 0.2 s
    slow = SlowToLetGo(store, "a", seconds=0.5)
    a = PartitionLeases(store, role="planner", member="a", partitions=PARTITIONS, work=slow)
    b = PartitionLeases(
        store, role="planner", member="b", partitions=PARTITIONS, work=Work(store, "b")
    )
    stop_a, stop_b = asyncio.Event(), asyncio.Event()
    running_a = asyncio.create_task(a.run(stop_a))
    await asyncio.sleep(0.2)
    assert a.held == frozenset(range(PARTITIONS))
    running_b = asyncio.create_task(b.run(stop_b))
    for _ in range(100):
        await asyncio.sleep(0.05)
        if b.held == {0, 1, 4, 5} and not a.held & b.held:
            break
    # The shares of assign_partitions(8, [a, b]); a let go of b's four, slowly, all
    # at once (0.5 s) and lost none of its own meanwhile.
    assert (a.held, b.held) == ({2, 3, 6, 7}, {0, 1, 4, 5})
    assert sorted(p for kind, p in slow.events if kind == "released") == [0, 1, 4, 5]
    assert slow.holder_while_releasing == ["a"] * 4
    stop_a.set()
    stop_b.set()
    await asyncio.gather(running_a, running_b)


class Outage(MemoryLeaseStore):
    """A store that stops answering while ``down`` is set (a partitioned network)."""

    down = False

    async def renew(self, name: str, holder: str, *, revision: int) -> int | None:
        if self.down:
            raise ConnectionError("no answer")
        return await super().renew(name, holder, revision=revision)

    async def names(self, prefix: str) -> tuple[str, ...]:
        if self.down:
            raise ConnectionError("no answer")
        return await super().names(prefix)


async def test_an_unreachable_store_keeps_the_partitions_until_the_renewal_deadline() -> None:
    clock = Clock()
    store = Outage(duration_seconds=DURATION, clock=clock)
    a, work = replica(store, clock, "a")
    await a.tick()
    assert a.held == frozenset(range(PARTITIONS))

    store.down = True
    clock.now += 9  # within the deadline (2/3 of 15 s): kept, nothing claimed or let go
    await a.tick()
    assert a.held == frozenset(range(PARTITIONS))
    assert work.events == [("gained", p) for p in range(PARTITIONS)]

    clock.now += 2  # 11 s without a renewal: stop before anyone else may claim them
    await a.tick()
    assert a.held == frozenset()
    assert sorted(p for kind, p in work.events if kind == "released") == list(range(PARTITIONS))
