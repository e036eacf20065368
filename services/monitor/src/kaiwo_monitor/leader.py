"""One active monitor: leader election by a ``coordination.k8s.io/v1`` Lease.

Every instance runs :meth:`LeaseElector.run`. Each ``retry_period`` it reads the Lease and,
when :func:`~kaiwo_monitor.domain.leases.may_claim` allows, writes itself in with the
resourceVersion it read: the API server accepts only one writer per version, so when two
instances try at once the other gets a Conflict and stays a follower. The leader renews the
same way; if it cannot renew for ``renew_deadline`` (API server unreachable, someone else
took the Lease) it stops leading *before* the Lease can expire for the others
(``renew_deadline < duration``), so two leaders never overlap.

On a graceful stop the leader clears the holder so a follower takes over on its next try;
a leader that dies without stopping is replaced once the Lease has not been renewed for its
duration (as the followers measure it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog
from kaiwo_kube import AlreadyExists, Conflict, KubeError, KubernetesPort, NotFound, resources

from kaiwo_monitor.domain.leases import (
    LeaseObservation,
    LeaseRecord,
    claimed,
    lease_manifest,
    may_claim,
    observe,
    released,
)

log = structlog.get_logger("kaiwo.monitor.leader")
FIELD_MANAGER = "kaiwo-monitor"


@dataclass(frozen=True, slots=True)
class LeaseTiming:
    """How long a claim lasts, how long a leader keeps trying to renew, how often all try."""

    duration_seconds: int = 15
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if self.duration_seconds < 1:
            raise ValueError("the lease duration is a whole number of seconds, at least 1")
        if not 0 < self.retry_period < self.renew_deadline < self.duration_seconds:
            raise ValueError("need 0 < retry_period < renew_deadline < duration")

    @classmethod
    def for_duration(cls, duration_seconds: int) -> LeaseTiming:
        """Renew deadline 2/3 and retry period 2/15 of the duration (15 s -> 10 s, 2 s)."""
        return cls(
            duration_seconds=duration_seconds,
            renew_deadline=duration_seconds * 2 / 3,
            retry_period=duration_seconds * 2 / 15,
        )


class LeaseElector:
    """Competes for one Lease; :attr:`leading` says whether this instance leads right now."""

    def __init__(
        self,
        kube: KubernetesPort,
        *,
        name: str,
        namespace: str,
        identity: str,
        clock: Callable[[], datetime],
        timing: LeaseTiming | None = None,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self._kube = kube
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self._clock = clock
        self.timing = timing or LeaseTiming()
        self._on_change = on_change
        self._observation: LeaseObservation | None = None
        self._resource_version: str | None = None
        self._last_renewal: datetime | None = None
        self._leading = asyncio.Event()
        self._following = asyncio.Event()
        self._following.set()

    @property
    def leading(self) -> bool:
        return self._leading.is_set()

    async def wait_until_leading(self, stop: asyncio.Event) -> bool:
        """Return True once this instance leads, False if ``stop`` is set first."""
        return await _first(self._leading, stop)

    async def wait_until_following(self, stop: asyncio.Event) -> bool:
        """Return True once this instance no longer leads, False if ``stop`` is set first."""
        return await _first(self._following, stop)

    # ------------------------------------------------------------------ the loop

    async def run(self, stop: asyncio.Event) -> None:
        """Try to acquire or renew every retry period until ``stop``; then release.

        Cancelling the task (a crash) does not release: the others wait for expiry.
        """
        while not stop.is_set():
            await self.try_acquire_or_renew()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.timing.retry_period)
        await self.release()

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this instance leads afterwards."""
        now = self._clock()
        try:
            won = await self._attempt(now)
        except KubeError as error:
            log.warning("lease attempt failed", lease=self.name, error=str(error))
            won = False
        if won:
            self._last_renewal = now
            self._set_leading(leading=True)
        elif self.leading and not self._within_renew_deadline(now):
            self._set_leading(leading=False)
        return self.leading

    async def release(self) -> None:
        """Step down and clear the holder if this instance holds the Lease."""
        if not self.leading:
            return
        self._set_leading(leading=False)
        try:
            lease = await self._kube.get(resources.LEASE, self.name, namespace=self.namespace)
            record = LeaseRecord.from_lease(lease)
            if record.holder == self.identity:
                await self._write(lease, released(record, now=self._clock()))
        except KubeError as error:
            log.warning("could not release the lease", lease=self.name, error=str(error))

    # ------------------------------------------------------------------ one attempt

    async def _attempt(self, now: datetime) -> bool:
        try:
            lease = await self._kube.get(resources.LEASE, self.name, namespace=self.namespace)
        except NotFound:
            return await self._create(now)
        record = LeaseRecord.from_lease(lease)
        self._observation = observe(self._observation, record, now)
        if record.holder != self.identity and self.leading:
            self._set_leading(leading=False)  # someone took it while we could not renew
        if not may_claim(self._observation, identity=self.identity, now=now):
            return False
        ours = claimed(
            record,
            identity=self.identity,
            now=now,
            duration_seconds=self.timing.duration_seconds,
        )
        try:
            written = await self._write(lease, ours)
        except Conflict:
            return False  # another instance wrote first; read again next time
        self._observation = observe(None, LeaseRecord.from_lease(written), now)
        return True

    async def _create(self, now: datetime) -> bool:
        record = claimed(
            LeaseRecord(),
            identity=self.identity,
            now=now,
            duration_seconds=self.timing.duration_seconds,
        )
        manifest = lease_manifest(name=self.name, namespace=self.namespace, record=record)
        try:
            created = await self._kube.create(manifest, field_manager=FIELD_MANAGER)
        except AlreadyExists:
            return False
        self._observation = observe(None, LeaseRecord.from_lease(created), now)
        return True

    async def _write(self, lease: dict[str, Any], record: LeaseRecord) -> dict[str, Any]:
        """Replace the Lease as read (its resourceVersion makes a concurrent write a Conflict)."""
        updated = {**lease, "spec": {**(lease.get("spec") or {}), **record.to_spec()}}
        return await self._kube.replace(updated, field_manager=FIELD_MANAGER)

    # ------------------------------------------------------------------ state

    def _within_renew_deadline(self, now: datetime) -> bool:
        if self._last_renewal is None:
            return False
        return now - self._last_renewal < timedelta(seconds=self.timing.renew_deadline)

    def _set_leading(self, *, leading: bool) -> None:
        if leading == self.leading:
            return
        if leading:
            self._leading.set()
            self._following.clear()
        else:
            self._leading.clear()
            self._following.set()
        log.info(
            "leadership changed",
            lease=f"{self.namespace}/{self.name}",
            identity=self.identity,
            leading=leading,
        )
        if self._on_change is not None:
            self._on_change(leading)


async def _first(wanted: asyncio.Event, stop: asyncio.Event) -> bool:
    if wanted.is_set():
        return True
    waiters = {asyncio.ensure_future(wanted.wait()), asyncio.ensure_future(stop.wait())}
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
    return wanted.is_set()
