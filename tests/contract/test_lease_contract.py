"""One behavioural suite for the lease port: in memory and on a real nats-server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from kaiwo_runtime.leases import LeaseStore, MemoryLeaseStore, NatsLeaseStore
from kaiwo_runtime.nats_server import NatsServer
from nats.aio.client import Client

DURATION = 1.0
"""Seconds; JetStream expires keys by the second, so the suite waits about that long."""


@pytest.fixture(params=["memory", pytest.param("nats", marks=pytest.mark.nats)])
async def leases(request: pytest.FixtureRequest) -> AsyncIterator[LeaseStore]:
    if request.param == "memory":
        yield MemoryLeaseStore(duration_seconds=DURATION)
        return
    async with NatsServer() as server:
        client = Client()
        await client.connect(server.url)
        try:
            yield await NatsLeaseStore.open(client, "kaiwo-leases", duration_seconds=DURATION)
        finally:
            await client.close()


async def test_a_free_lease_goes_to_the_first_claimant(leases: LeaseStore) -> None:
    assert await leases.holder("planner") is None
    assert await leases.claim("planner", "pod-a") is not None
    assert await leases.holder("planner") == "pod-a"


async def test_a_held_lease_is_refused_to_others_and_to_a_second_claim(
    leases: LeaseStore,
) -> None:
    await leases.claim("planner", "pod-a")
    assert await leases.claim("planner", "pod-b") is None
    assert await leases.claim("planner", "pod-a") is None
    assert await leases.holder("planner") == "pod-a"


async def test_leases_of_different_names_are_independent(leases: LeaseStore) -> None:
    assert await leases.claim("planner", "pod-a") is not None
    assert await leases.claim("executor-0", "pod-b") is not None
    assert await leases.holder("executor-0") == "pod-b"


async def test_renewing_at_the_revision_held_gives_a_new_revision(leases: LeaseStore) -> None:
    first = await leases.claim("planner", "pod-a")
    assert first is not None
    second = await leases.renew("planner", "pod-a", revision=first)
    assert second is not None and second != first
    assert await leases.renew("planner", "pod-a", revision=first) is None
    assert await leases.renew("planner", "pod-a", revision=second) is not None


async def test_a_released_lease_can_be_claimed_by_another(leases: LeaseStore) -> None:
    revision = await leases.claim("planner", "pod-a")
    assert revision is not None
    await leases.release("planner", revision=revision)
    assert await leases.holder("planner") is None
    assert await leases.claim("planner", "pod-b") is not None
    assert await leases.holder("planner") == "pod-b"


async def test_releasing_a_lease_another_holds_since_leaves_it_alone(
    leases: LeaseStore,
) -> None:
    stale = await leases.claim("planner", "pod-a")
    assert stale is not None
    await leases.release("planner", revision=stale)
    await leases.claim("planner", "pod-b")
    await leases.release("planner", revision=stale)
    assert await leases.holder("planner") == "pod-b"


@pytest.mark.slow
async def test_a_lease_not_renewed_for_its_duration_is_free_again(leases: LeaseStore) -> None:
    revision = await leases.claim("planner", "pod-a")
    assert revision is not None
    await asyncio.sleep(DURATION * 2.5)
    assert await leases.holder("planner") is None
    assert await leases.renew("planner", "pod-a", revision=revision) is None
    assert await leases.claim("planner", "pod-b") is not None


@pytest.mark.slow
async def test_a_renewed_lease_outlives_its_first_duration(leases: LeaseStore) -> None:
    revision = await leases.claim("planner", "pod-a")
    for _ in range(4):
        await asyncio.sleep(DURATION / 3)
        assert revision is not None
        revision = await leases.renew("planner", "pod-a", revision=revision)
    assert revision is not None
    assert await leases.holder("planner") == "pod-a"
    assert await leases.claim("planner", "pod-b") is None


async def test_names_lists_the_held_leases_under_a_prefix(leases: LeaseStore) -> None:
    assert await leases.names("planner.member.") == ()
    await leases.claim("planner.member.pod-b/7", "pod-b/7")
    await leases.claim("planner.member.pod-a/3", "pod-a/3")
    await leases.claim("planner.p0", "pod-a/3")
    released = await leases.claim("planner.member.pod-c/1", "pod-c/1")
    assert released is not None
    await leases.release("planner.member.pod-c/1", revision=released)
    assert await leases.names("planner.member.") == (
        "planner.member.pod-a/3",
        "planner.member.pod-b/7",
    )
