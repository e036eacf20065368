"""Leader election against the fake API server: one leader, takeover on stop and on crash."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from kaiwo_kube import Retryable, resources
from kaiwo_monitor.leader import LeaseElector, LeaseTiming

if TYPE_CHECKING:  # conftest is not importable under --import-mode=importlib
    from conftest import Cluster

FAST = LeaseTiming(duration_seconds=1, renew_deadline=0.6, retry_period=0.1)
LEASE = "kaiwo-monitor"
NAMESPACE = "kaiwo-system"


def utc_now() -> datetime:
    return datetime.now(UTC)


def elector(cluster: Cluster, identity: str, **options: Any) -> LeaseElector:
    return LeaseElector(
        options.pop("kube", cluster.kube),
        name=LEASE,
        namespace=NAMESPACE,
        identity=identity,
        clock=options.pop("clock", utc_now),
        timing=FAST,
        **options,
    )


def holder(cluster: Cluster) -> str:
    return str(cluster.get(resources.LEASE, LEASE, NAMESPACE)["spec"].get("holderIdentity", ""))


@contextlib.asynccontextmanager
async def campaigning(
    candidate: LeaseElector,
) -> AsyncIterator[tuple[asyncio.Event, asyncio.Task[None]]]:
    stop = asyncio.Event()
    task = asyncio.create_task(candidate.run(stop))
    try:
        yield stop, task
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)


async def test_the_first_candidate_creates_the_lease_and_leads(cluster: Cluster) -> None:
    changes: list[bool] = []
    first = elector(cluster, "monitor-a", on_change=changes.append)

    assert await first.try_acquire_or_renew()

    lease = cluster.get(resources.LEASE, LEASE, NAMESPACE)
    assert lease["spec"]["holderIdentity"] == "monitor-a"
    assert lease["spec"]["leaseDurationSeconds"] == 1
    assert lease["spec"]["leaseTransitions"] == 0
    assert first.leading
    assert changes == [True]


async def test_of_two_monitors_only_one_leads(
    cluster: Cluster, wait_for: Callable[..., Awaitable[None]]
) -> None:
    a, b = elector(cluster, "monitor-a"), elector(cluster, "monitor-b")
    async with campaigning(a), campaigning(b):
        await wait_for(lambda: a.leading or b.leading)
        leader = a if a.leading else b
        loop = asyncio.get_running_loop()
        until = loop.time() + 1.5  # renewals across more than one lease duration
        while loop.time() < until:
            assert [a.leading, b.leading].count(True) == 1
            assert holder(cluster) == leader.identity
            await asyncio.sleep(0.05)


async def test_concurrent_claims_of_a_free_lease_have_one_winner(cluster: Cluster) -> None:
    a, b = elector(cluster, "monitor-a"), elector(cluster, "monitor-b")
    assert await a.try_acquire_or_renew()
    await a.release()  # free: both may claim at once

    outcomes = await asyncio.gather(a.try_acquire_or_renew(), b.try_acquire_or_renew())

    assert sorted(outcomes) == [False, True]
    assert holder(cluster) == (a if a.leading else b).identity


async def test_a_stopped_leader_releases_and_the_other_takes_over_at_once(
    cluster: Cluster, wait_for: Callable[..., Awaitable[None]]
) -> None:
    a, b = elector(cluster, "monitor-a"), elector(cluster, "monitor-b")
    async with campaigning(a) as (stop_a, task_a):
        await wait_for(lambda: a.leading)
        async with campaigning(b):
            await asyncio.sleep(0.3)
            assert not b.leading
            stop_a.set()
            await asyncio.wait_for(task_a, 5)
            stopped = time.monotonic()
            assert not a.leading
            await wait_for(lambda: b.leading, within=5)
            assert time.monotonic() - stopped < FAST.duration_seconds
            assert holder(cluster) == "monitor-b"


async def test_a_crashed_leader_is_replaced_after_the_lease_expires(
    cluster: Cluster, wait_for: Callable[..., Awaitable[None]]
) -> None:
    a, b = elector(cluster, "monitor-a"), elector(cluster, "monitor-b")
    crash = asyncio.Event()  # never set: the task is cancelled, so nothing is released
    task_a = asyncio.create_task(a.run(crash))
    await wait_for(lambda: a.leading)
    async with campaigning(b):
        await asyncio.sleep(0.3)
        assert not b.leading
        task_a.cancel()
        await asyncio.gather(task_a, return_exceptions=True)
        crashed = time.monotonic()
        assert holder(cluster) == "monitor-a"

        await wait_for(lambda: b.leading, within=5)

        waited = time.monotonic() - crashed
        # b counts a whole lease duration from the last renewal it saw (at most one retry
        # period before the crash).
        assert waited >= FAST.duration_seconds - FAST.retry_period
        lease = cluster.get(resources.LEASE, LEASE, NAMESPACE)
        assert lease["spec"]["holderIdentity"] == "monitor-b"
        assert lease["spec"]["leaseTransitions"] == 1


async def test_a_leader_whose_lease_was_taken_steps_down_on_its_next_try(
    cluster: Cluster,
) -> None:
    a = elector(cluster, "monitor-a")
    assert await a.try_acquire_or_renew()
    lease = cluster.get(resources.LEASE, LEASE, NAMESPACE)
    cluster.put(resources.LEASE, {**lease, "spec": {**lease["spec"], "holderIdentity": "x"}})

    assert not await a.try_acquire_or_renew()
    assert holder(cluster) == "x"


class Unreachable:
    """A port whose API server stops answering once ``broken`` is set."""

    def __init__(self, kube: Any) -> None:
        self._kube = kube
        self.broken = False

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._kube, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.broken:
                raise Retryable("the API server is down", code=503, reason="ServiceUnavailable")
            return await method(*args, **kwargs)

        return call


async def test_a_leader_that_cannot_renew_steps_down_at_the_renew_deadline(
    cluster: Cluster,
) -> None:
    now = [datetime(2026, 3, 1, 12, 0, tzinfo=UTC)]
    kube = Unreachable(cluster.kube)
    a = elector(cluster, "monitor-a", kube=kube, clock=lambda: now[0])
    assert await a.try_acquire_or_renew()
    kube.broken = True

    now[0] += timedelta(seconds=0.5)
    assert await a.try_acquire_or_renew()  # still within the renew deadline (0.6 s)
    now[0] += timedelta(seconds=0.1)
    assert not await a.try_acquire_or_renew()
    assert not a.leading


@pytest.mark.parametrize("bad", [0, -1])
def test_lease_timing_is_checked(bad: int) -> None:
    with pytest.raises(ValueError, match="whole number of seconds"):
        LeaseTiming(duration_seconds=bad)
    with pytest.raises(ValueError, match="retry_period < renew_deadline < duration"):
        LeaseTiming(duration_seconds=5, renew_deadline=6, retry_period=1)


def test_timing_from_a_duration() -> None:
    assert LeaseTiming.for_duration(15) == LeaseTiming(
        duration_seconds=15, renew_deadline=10.0, retry_period=2.0
    )
