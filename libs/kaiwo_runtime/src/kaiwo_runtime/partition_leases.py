"""Active-active replicas: each holds the leases of its share of the partitions.

With ``KAIWO_BUS_PARTITIONS`` > 1 the planner and the executor run every replica at once;
one partition is worked by one replica at a time, so the events of one workload (all in one
partition) are still handled in order by one process. Every ``renew_every`` a replica:

1. keeps its membership entry ``<role>.member.<member>`` (a lease of its own, so it
   vanishes ``duration`` after the replica died);
2. lists the live members and computes its share with
   :func:`~kaiwo_runtime.partition_assignment.assign_partitions` (the same answer on every
   replica);
3. renews the partition leases ``<role>.p<k>`` it holds; one refused (someone else holds it
   now) or not renewed for ``renew_deadline`` is dropped at once;
4. lets go of the partitions no longer its share: first the work on them ends (what is in
   hand is finished), then the lease is released, so the next holder never overlaps;
5. claims the partitions of its share it lacks; a claim refused (the previous holder is
   still finishing, or died and its lease has not run out) is tried again next time.

A replica that joins takes over partitions only after their holders let go of them, and a
dead replica's partitions move once its leases expire (at most the lease duration).
On stop every partition is let go of and released, and the membership entry deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar

import structlog

from kaiwo_runtime.leases import LeaseStore
from kaiwo_runtime.partition_assignment import (
    assign_partitions,
    member_lease,
    member_prefix,
    partition_lease,
)
from kaiwo_runtime.single_active import LeaseTiming

log = structlog.get_logger("kaiwo.partitions")
_T = TypeVar("_T")


class PartitionWork(Protocol):
    """What a replica does with the partitions it holds."""

    async def gained(self, partition: int) -> None:
        """Start working on ``partition`` (its lease is held)."""
        ...

    async def released(self, partition: int) -> None:
        """Stop working on ``partition``; return once nothing of it is in hand any more."""
        ...


@dataclass(frozen=True, slots=True)
class _Held:
    revision: int
    renewed_at: float


class PartitionLeases:
    """Claims, renews and lets go of one role's partition leases (module docstring).

    Renewals run on their own (:meth:`run`): letting go of a partition waits for the work in
    hand on it, and that wait must not hold up the renewal of the others.
    """

    def __init__(
        self,
        store: LeaseStore,
        *,
        role: str,
        member: str,
        partitions: int,
        work: PartitionWork,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[frozenset[int]], None] | None = None,
    ) -> None:
        if partitions < 1:
            raise ValueError("partitions must be >= 1")
        self._store = store
        self._role = role
        self._member = member
        self._partitions = partitions
        self._work = work
        self._clock = clock
        self._on_change = on_change
        self._timing = LeaseTiming.for_duration(store.duration_seconds)
        self._held: dict[int, _Held] = {}
        self._leaving: set[int] = set()
        """Partitions being let go of: still renewed until their work has stopped."""
        self._stopping: dict[int, asyncio.Task[None]] = {}
        """Work on lost partitions being stopped; such a partition is not claimed meanwhile."""
        self._writes = asyncio.Lock()
        """A renewal and a release of one lease must not cross (the revision changes)."""
        self._membership: int | None = None
        self._log = log.bind(role=role, member=member)

    @property
    def held(self) -> frozenset[int]:
        """The partitions this replica holds and works on now."""
        return frozenset(self._held)

    async def run(self, stop: asyncio.Event) -> None:
        """Keep this replica's share until ``stop``; then let go of everything."""
        left = asyncio.Event()
        renewals = asyncio.create_task(self._keep_renewing(left))
        try:
            while not stop.is_set():
                members = await self._announce()
                if members is not None:
                    await self._rebalance(members)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self._timing.renew_every)
        finally:
            try:
                await self.leave()
            finally:
                left.set()
                await renewals

    async def tick(self) -> None:
        """One round, every step in turn: membership, renewals, releases, claims."""
        members = await self._announce()
        await self._renew()
        await self._stopped()
        if members is not None:  # else the store is out of reach: keep, claim nothing
            await self._rebalance(members)

    async def leave(self) -> None:
        """Let go of every partition and of the membership (a graceful stop)."""
        await asyncio.gather(*(self._let_go(p, reason="stopping") for p in sorted(self._held)))
        await self._stopped()
        async with self._writes:
            if self._membership is not None:
                revision, self._membership = self._membership, None
                await self._attempt(
                    self._store.release(member_lease(self._role, self._member), revision=revision)
                )

    async def _keep_renewing(self, until: asyncio.Event) -> None:
        while not until.is_set():
            await self._renew()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(until.wait(), self._timing.renew_every)

    async def _rebalance(self, members: tuple[str, ...]) -> None:
        share = assign_partitions(partitions=self._partitions, members=members).get(
            self._member, frozenset()
        )
        # At once: each waits for the work in hand on its partition (a fetch, a message).
        surplus = sorted(set(self._held) - share - self._leaving)
        await asyncio.gather(*(self._let_go(p, reason="rebalanced") for p in surplus))
        for partition in sorted(share - set(self._held)):
            stopping = self._stopping.get(partition)
            if stopping is not None and not stopping.done():
                continue  # the work of a lost lease is still stopping: next round
            await self._claim(partition)

    async def _announce(self) -> tuple[str, ...] | None:
        """Write the membership entry if it is not held (the renewals keep it); the live
        members, None if unknown."""
        async with self._writes:
            if self._membership is None:
                self._membership = await self._attempt(
                    self._store.claim(member_lease(self._role, self._member), self._member)
                )
            if self._membership is None:
                return None
        prefix = member_prefix(self._role)
        names = await self._attempt(self._store.names(prefix))
        if names is None:
            return None
        members = {entry.removeprefix(prefix) for entry in names}
        # Our own entry is written: count us even if the listing raced with the write.
        return tuple(sorted(members | {self._member}))

    async def _renew(self) -> None:
        # The membership first: a partition taken on may take long (the planner reads to the
        # stream's end), and the others must not count this replica out meanwhile.
        async with self._writes:
            if self._membership is not None:
                try:
                    self._membership = await self._store.renew(
                        member_lease(self._role, self._member),
                        self._member,
                        revision=self._membership,
                    )
                except Exception as error:  # out of reach: the same revision next time
                    self._log.warning("membership renewal failed", error=str(error))
        for partition in sorted(self._held):
            async with self._writes:
                held = self._held.get(partition)
                if held is None:  # let go of meanwhile
                    continue
                sent_at = self._clock()
                revision = await self._renewed(partition, held)
                if revision == _UNREACHABLE:
                    if self._clock() - held.renewed_at < self._timing.renew_deadline:
                        continue  # kept until the deadline
                elif revision is not None:
                    self._held[partition] = _Held(revision=revision, renewed_at=sent_at)
                    continue
                # Lost (taken over, or not renewed in time): stop at once, release nothing.
                self._log.error("partition lease lost", partition=partition)
                del self._held[partition]
                self._changed()
                if partition not in self._leaving:  # else its let-go is stopping it already
                    self._stopping[partition] = asyncio.create_task(self._work.released(partition))

    async def _renewed(self, partition: int, held: _Held) -> int | None:
        """The new revision; None when refused or, past the deadline, unanswered."""
        left = held.renewed_at + self._timing.renew_deadline - self._clock()
        try:
            return await asyncio.wait_for(
                self._store.renew(
                    partition_lease(self._role, partition), self._member, revision=held.revision
                ),
                max(left, 0.001),
            )
        except Exception as error:  # out of reach: kept until the deadline
            self._log.warning(
                "partition lease renewal failed; retrying", partition=partition, error=str(error)
            )
            return _UNREACHABLE

    async def _stopped(self) -> None:
        """Wait for the work of lost partitions to stop."""
        for partition, task in sorted(self._stopping.items()):
            try:
                await task
            finally:
                del self._stopping[partition]

    async def _claim(self, partition: int) -> None:
        claimed_at = self._clock()
        revision = await self._attempt(
            self._store.claim(partition_lease(self._role, partition), self._member)
        )
        if revision is None:
            return
        self._held[partition] = _Held(revision=revision, renewed_at=claimed_at)
        self._log.info("partition gained", partition=partition)
        self._changed()
        try:
            await self._work.gained(partition)
        except Exception:  # e.g. the bus is away: let it go, claim it again next round
            self._log.exception("taking the partition on failed", partition=partition)
            await self._let_go(partition, reason="failed to start")
        except BaseException:
            await self._let_go(partition, reason="stopping")
            raise

    async def _let_go(self, partition: int, *, reason: str) -> None:
        """Stop the work on ``partition`` (renewing its lease meanwhile), then release it."""
        if partition not in self._held:
            return
        self._leaving.add(partition)
        try:
            await self._work.released(partition)
        finally:
            self._leaving.discard(partition)
            async with self._writes:
                held = self._held.pop(partition, None)
                if held is not None:  # not lost meanwhile
                    await self._attempt(
                        self._store.release(
                            partition_lease(self._role, partition), revision=held.revision
                        )
                    )
            self._log.info("partition released", partition=partition, reason=reason)
            self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self.held)

    async def _attempt(self, step: Awaitable[_T]) -> _T | None:
        try:
            return await step
        except Exception as error:  # the store is out of reach: the next round tries again
            self._log.warning("lease store unavailable", error=str(error))
            return None


_UNREACHABLE: Final = -1
"""What :meth:`PartitionLeases._renewed` answers when the store did not (a revision is > 0)."""
