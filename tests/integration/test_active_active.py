"""Active-active partitions as processes: 3 planners, 2 executors and 2 watchers on a bus of
6 partitions, against the fake API server and the real one. While KaiwoJobs go through their
whole life one of each is killed for good (no restart: the survivors must take its
partitions over once its leases run out). Afterwards every workload has converged, the
store holds every message of the streams exactly once, no plan was carried out twice, and
each workload's plans and results keep its order (decision 0030)."""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kaiwo_contracts.events.permissions import LEASE_BUCKET
from kaiwo_runtime.leases import NatsLeaseStore
from kaiwo_runtime.partition_assignment import member_prefix, partition_lease

from tests.integration.conftest import real_cluster_if
from tests.integration.pipeline.harness import Pending, Pipeline, eventually, running_pipeline
from tests.integration.test_faults import has_all_children

pytestmark = [pytest.mark.nats, pytest.mark.slow, pytest.mark.timeout(420)]

PARTITIONS = 6
REPLICAS = {"planner": 3, "executor": 2, "watcher": 2}
KILLED = ("planner-1", "executor-0", "watcher-1")
WORKLOADS = 8
LEASE_SECONDS = 2.0
"""The harness's ``KAIWO_LEASE_SECONDS``: a killed replica's partitions move after that."""
PLANNED = "ai.silogen.kaiwo.plan.decided.v1"
APPLIED = "ai.silogen.kaiwo.res.applied.v1"
LIFE = ["DOWNLOADING", "PENDING", "STARTING", "RUNNING", "COMPLETE"]


def member(pipeline: Pipeline, process: str) -> str:
    """How a process names itself in the lease bucket (``this_replica()``)."""
    pid = pipeline.stack.services[process].pid
    return f"{socket.gethostname()}/{pid}"


async def holders(leases: NatsLeaseStore, role: str) -> list[str | None]:
    return [await leases.holder(partition_lease(role, p)) for p in range(PARTITIONS)]


async def every_partition_held_by(
    leases: NatsLeaseStore, role: str, members: set[str]
) -> list[str | None]:
    """Wait until each of ``role``'s partitions is held by one of ``members`` and each of
    them holds at least one; returns the holders by partition."""

    async def check() -> list[str | None] | Pending:
        found = await holders(leases, role)
        if set(found) == members:
            return found
        return Pending(f"{role} partitions held by {found}, expected {sorted(members)}")

    return await eventually(check, what=f"{role} partitions shared", within=60)


async def members_are(leases: NatsLeaseStore, role: str, members: set[str]) -> None:
    """Wait until the live membership entries of ``role`` are those of ``members`` (a dead
    replica's runs out with its lease)."""

    async def check() -> bool | Pending:
        listed = {
            entry.removeprefix(member_prefix(role))
            for entry in await leases.names(member_prefix(role))
        }
        return listed == members or Pending(f"{role} members {sorted(listed)}")

    await eventually(check, what=f"{role} members", within=30)


@pytest.mark.parametrize("backend", ["fake", pytest.param("real", marks=pytest.mark.k8s)])
async def test_three_planners_and_two_executors_lose_one_each_and_every_workload_converges(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str
) -> None:
    async with running_pipeline(
        tmp_path / "kaiwo",
        real=real_cluster_if(request, backend),
        partitions=PARTITIONS,
        replicas=REPLICAS,
    ) as pipeline:
        leases = await NatsLeaseStore.open(
            pipeline.nats, LEASE_BUCKET, duration_seconds=LEASE_SECONDS
        )
        planners = {member(pipeline, f"planner-{i}") for i in range(3)}
        executors = {member(pipeline, f"executor-{i}") for i in range(2)}
        await every_partition_held_by(leases, "planner", planners)
        await every_partition_held_by(leases, "executor", executors)
        killed_members = {member(pipeline, name) for name in KILLED}

        names = [f"aa-{index}" for index in range(WORKLOADS)]
        lives = [asyncio.create_task(pipeline.run_to_completion(name)) for name in names]
        try:
            # Mid-stream: the first workloads are on their way, the others just created.
            await pipeline.reaches(names[0], "PENDING", within=60)
            for process in KILLED:
                await pipeline.stack.services[process].kill_for_good()
            finished = await asyncio.gather(*lives)
        finally:
            for life in lives:
                life.cancel()
            await asyncio.gather(*lives, return_exceptions=True)

        # The survivors hold every partition; the dead replicas' entries ran out.
        await every_partition_held_by(leases, "planner", planners - killed_members)
        await every_partition_held_by(leases, "executor", executors - killed_members)
        await members_are(leases, "planner", planners - killed_members)
        await members_are(leases, "executor", executors - killed_members)

        for job in finished:
            await has_all_children(pipeline, job)
        await pipeline.settled(within=90)
        assert await pipeline.dead_letters() == 0
        async with pipeline.store() as store:
            for job in finished:
                story = await store.read_stream(f"workload/{job['metadata']['uid']}")
                assert_kept_in_order_and_once(story, job["metadata"]["name"])


def assert_kept_in_order_and_once(story: list[Any], name: str) -> None:
    """Each plan carried out at most once, the last one carried out, results in the order of
    their plans, and the phases the plans set in the order of a workload's life."""
    plans = [e for e in story if e.type == PLANNED]
    results = [e for e in story if e.type == APPLIED]
    plan_index = {plan.event_id: index for index, plan in enumerate(plans)}
    carried_out = [plan_index[result.causation_id] for result in results]

    assert Counter(carried_out).most_common(1)[0][1] == 1, f"{name}: a plan applied twice"
    assert carried_out == sorted(carried_out), f"{name}: results out of plan order"
    # A plan with no result was superseded by a later one of its owner (a redelivery that
    # came back after it); the last plan always has its result.
    assert carried_out[-1] == len(plans) - 1, f"{name}: the last plan was not carried out"
    phases = [p.data["plan"]["status"]["status"] for p in plans]
    assert [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p] == LIFE, name
