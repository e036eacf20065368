"""One active replica per role: the others wait, ready to take over.

The planner and the executor each pull from one durable JetStream consumer, and a second
replica on it would take every other message: a planner would plan from half a cluster and
two executors would apply one owner's plans out of order. So a replica works only while it
holds the role's lease (:mod:`kaiwo_runtime.leases`):

* it claims the lease every ``renew_every`` until it gets it (a *standby* until then);
* it renews every ``renew_every`` while it works; a renewal refused (someone else holds the
  lease) or none accepted for ``renew_deadline`` ends the work. The deadline is shorter than
  the lease's duration, so the work has stopped before any other replica can claim it;
* on a graceful stop it releases the lease, so a standby takes over at its next try
  instead of after the whole duration.

A replica whose work ended because it lost the lease exits with a failure status: its
restart rejoins as a standby, with a fresh projection or memo read from the buckets.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import structlog

from kaiwo_runtime.leases import LeaseStore

log = structlog.get_logger("kaiwo.single_active")
_T = TypeVar("_T")

Work = Callable[[asyncio.Event], Awaitable[None]]
"""The replica's work: runs until the event it is given is set."""


@dataclass(frozen=True, slots=True)
class LeaseTiming:
    """How often to claim or renew, and how long a leader goes on without a renewal."""

    renew_every: float
    renew_deadline: float

    @classmethod
    def for_duration(cls, duration_seconds: float) -> LeaseTiming:
        """2/15 and 2/3 of the lease duration (15 s -> every 2 s, deadline 10 s)."""
        return cls(renew_every=duration_seconds * 2 / 15, renew_deadline=duration_seconds * 2 / 3)


def this_replica() -> str:
    """A name for this process among the replicas: its host (the pod's name) and pid."""
    return f"{socket.gethostname()}/{os.getpid()}"


class SingleActive:
    """Runs work only while this replica holds the lease ``name`` (module docstring)."""

    def __init__(
        self,
        store: LeaseStore,
        *,
        name: str,
        holder: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._name = name
        self._holder = holder
        self._clock = clock
        self._timing = LeaseTiming.for_duration(store.duration_seconds)
        self._active = False
        self._log = log.bind(lease=name, holder=holder)

    @property
    def name(self) -> str:
        return self._name

    @property
    def active(self) -> bool:
        """This replica holds the lease and works."""
        return self._active

    async def run(self, work: Work, stop: asyncio.Event) -> bool:
        """Wait for the lease, then ``work`` while holding it, until ``stop``.

        True when the work ended because the lease was lost (the caller should exit with a
        failure status); False after ``stop``.
        """
        revision = await self._claim(stop)
        if revision is None:
            return False
        self._active = True
        self._log.info("active: holding the lease")
        work_stop = asyncio.Event()
        renewals = asyncio.create_task(self._renew(revision, stop=stop, work_stop=work_stop))
        try:
            await work(work_stop)
        finally:
            work_stop.set()
            lost = await renewals
            self._active = False
        return lost

    async def _claim(self, stop: asyncio.Event) -> int | None:
        waiting_logged = False
        while not stop.is_set():
            revision = await self._attempt(self._store.claim(self._name, self._holder))
            if revision is not None:
                return revision
            if not waiting_logged:
                holder = await self._attempt(self._store.holder(self._name))
                self._log.info("standby: another replica is active", active_holder=holder)
                waiting_logged = True
            await _wait_any(stop, seconds=self._timing.renew_every)
        return None

    async def _renew(self, revision: int, *, stop: asyncio.Event, work_stop: asyncio.Event) -> bool:
        """Renew until the work stops; True if the lease was lost."""
        renewed_at = self._clock()
        while True:
            await _wait_any(stop, work_stop, seconds=self._timing.renew_every)
            if stop.is_set() or work_stop.is_set():
                work_stop.set()
                await self._attempt(self._store.release(self._name, revision=revision))
                return False
            sent_at = self._clock()
            left = renewed_at + self._timing.renew_deadline - sent_at
            try:
                # A renewal that hangs must not carry the work past the deadline.
                renewed = await asyncio.wait_for(
                    self._store.renew(self._name, self._holder, revision=revision), left
                )
            except Exception as error:  # out of reach: retry until the deadline
                if self._clock() - renewed_at < self._timing.renew_deadline:
                    self._log.warning("lease renewal failed; retrying", error=str(error))
                    continue
                renewed = None
            if renewed is None:
                self._log.error("lease lost: stopping the work so another replica can take over")
                work_stop.set()
                return True
            revision, renewed_at = renewed, sent_at

    async def _attempt(self, step: Awaitable[_T]) -> _T | None:
        try:
            return await step
        except Exception as error:  # the store is out of reach: the caller tries again later
            self._log.warning("lease store unavailable", error=str(error))
            return None


async def _wait_any(*events: asyncio.Event, seconds: float) -> None:
    waiters = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
