"""Active-active planners (partitions): every replica reads everything, each plans the owners
of the partitions it holds, and a partition that changes hands is planned by its new holder.

With two partitions, ``uid-train`` is in partition 0 and ``uid-serve`` in partition 1
(FNV-1a of the uid token, mod 2, as ``{{partition(2, uid)}}`` stores them)."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_planner.snapshot_store import SNAPSHOT_KEY

PARTITIONS = 2


@pytest.fixture
def harness(clock: Any) -> Any:
    from tests.unit.planner_service.conftest import PlannerHarness

    return PlannerHarness(clock=clock, topology=bus_topology(partitions=PARTITIONS))


def plans_by_owner(harness: Any) -> list[str]:
    return [plan.data.plan.owner.name for plan in harness.plans()]


async def replicas(harness: Any) -> tuple[Any, Any]:
    first, second = harness.service(), harness.service()
    for service in (first, second):
        await service.start()
    await first.gained(0)
    await second.gained(1)
    return first, second


async def test_each_replica_plans_only_its_partitions_but_sees_every_object(
    harness: Any, build: Any
) -> None:
    first, second = await replicas(harness)
    await harness.observe(build.kaiwo_job("train"), "10", "ADDED")
    await harness.observe(build.kaiwo_job("serve"), "11", "ADDED")

    assert await harness.drain(first) == 2
    assert plans_by_owner(harness) == ["train"]
    assert await harness.drain(second) == 2
    assert plans_by_owner(harness) == ["train", "serve"]
    for service in (first, second):
        assert len(service.projection) == 2
        assert service.projection.last_sequence == 2
    assert (first.partitions_held, second.partitions_held) == ({0}, {1})
    assert first.metrics.partitions_held._value.get() == 1


async def test_a_node_change_replans_each_workload_once_by_its_holder(
    harness: Any, build: Any
) -> None:
    first, second = await replicas(harness)
    await harness.observe(build.kaiwo_job("train"), "10", "ADDED")
    await harness.observe(build.kaiwo_job("serve"), "11", "ADDED")
    await harness.drain(first)
    await harness.drain(second)

    # A cluster-scoped input: it reaches both replicas, and each replans its own workload.
    await harness.observe(build.gpu_node("gpu-1", gpus=8), "12", "ADDED")
    await harness.drain(first)
    await harness.drain(second)

    assert plans_by_owner(harness) == ["train", "serve", "train", "serve"]
    assert [p.data.plan.status["clusterGpus"] for p in harness.plans()[2:]] == [8, 8]


async def test_a_partition_handed_over_is_planned_by_its_new_holder_from_then_on(
    harness: Any, build: Any
) -> None:
    first, second = await replicas(harness)
    await harness.observe(build.kaiwo_job("serve"), "11", "ADDED")
    await harness.drain(first)
    await harness.drain(second)
    assert plans_by_owner(harness) == ["serve"]

    await second.released(1)
    await harness.observe(build.gpu_node("gpu-1", gpus=4), "12", "ADDED")
    await harness.drain(second)  # no longer its partition: nothing
    assert plans_by_owner(harness) == ["serve"]

    # The new holder reads to the end, then publishes the partition's plans once.
    await first.gained(1)
    assert plans_by_owner(harness) == ["serve", "serve"]
    [_, taken_on] = harness.plans()
    assert taken_on.data.trigger == "resync"
    assert taken_on.data.plan.status == {"clusterGpus": 4}
    assert taken_on.data.obs_sequence == 2

    await harness.observe(build.kaiwo_job("serve"), "13")
    await harness.drain(second)
    assert plans_by_owner(harness) == ["serve", "serve"]
    await harness.drain(first)
    assert plans_by_owner(harness) == ["serve", "serve", "serve"]
    assert harness.plans()[-1].data.plan.observed_resource_version == "13"
    assert first.partitions_held == {0, 1}
    assert second.partitions_held == frozenset()


async def test_only_the_holder_of_partition_0_writes_the_shared_snapshot(
    harness: Any, build: Any, clock: Any
) -> None:
    first, second = await replicas(harness)
    await harness.observe(build.kaiwo_job("train"), "10", "ADDED")
    clock.advance(120)  # past the snapshot interval
    await harness.drain(second)
    assert await harness.kv.get(SNAPSHOT_KEY) is None
    await harness.drain(first)
    assert await harness.kv.get(SNAPSHOT_KEY) is not None

    # A replica started from it has the projection, and no records of others' plans: it
    # publishes the owners of a partition it takes on.
    third = harness.service()
    await third.start()
    assert len(third.projection) == 1
    assert third.loop.records.fingerprint("uid-train") is None
    await first.released(0)
    await third.gained(0)
    assert plans_by_owner(harness) == ["train", "train"]


def gpu_job(name: str, status: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-03-01T11:00:00Z",
        },
        "spec": {"image": "busybox", "gpus": 4, **spec},
        "status": status,
    }


def planned(service: Any, outcome: str) -> float:
    value = service.metrics.registry.registry.get_sample_value(
        "kaiwo_planner_plans_total", {"kind": "KaiwoJob", "outcome": outcome}
    )
    return value or 0.0


async def test_a_victim_is_planned_by_its_holder_though_its_beneficiary_is_elsewhere(
    harness: Any, clock: Any
) -> None:
    # uid-victim is in partition 0 (first), uid-beneficiary in partition 1 (second). At 12:00
    # the victim ran past its hour (10:00-11:00) and the beneficiary has waited an hour.
    first, second = await replicas(harness)
    victim = gpu_job(
        "victim", {"status": "RUNNING", "startTime": "2026-03-01T10:00:00Z"}, duration="1h"
    )
    await harness.observe(victim, "10", "ADDED")
    await harness.observe(gpu_job("beneficiary", {"status": "PENDING"}), "11", "ADDED")

    await harness.drain(first)
    await harness.drain(second)

    # Each published its own workload's plan; the victim's holder planned it once more when
    # it found it a victim (the toy planner's plan does not change: nothing published).
    assert plans_by_owner(harness) == ["victim", "beneficiary"]
    assert (planned(first, "unchanged"), planned(second, "unchanged")) == (1, 0)
    clock.advance(5)  # the next look finds the same victim: not planned again
    await first.step(wait_seconds=0)
    assert planned(first, "unchanged") == 1


async def test_the_queue_config_is_planned_by_its_partitions_holder_alone(
    harness: Any, build: Any
) -> None:
    # uid-kqc is in partition 1: the second replica plans it, from the nodes both have seen.
    first, second = await replicas(harness)
    await harness.observe(build.queue_config(), "10", "ADDED")
    await harness.observe(build.gpu_node("gpu-1", gpus=8), "11", "ADDED")
    await harness.drain(first)
    assert plans_by_owner(harness) == []
    await harness.drain(second)

    assert plans_by_owner(harness) == ["kaiwo", "kaiwo"]
    assert [p.data.plan.status["clusterGpus"] for p in harness.plans()] == [0, 8]
    assert len(first.projection) == len(second.projection) == 2


async def test_taking_a_partition_on_ends_though_observations_keep_coming(
    harness: Any, build: Any
) -> None:
    # Every time the replica finds the end of the observations, the watcher has published
    # one more (a busy cluster): reading "until nothing new comes" would never end.
    from kaiwo_planner.metrics import PlannerMetrics
    from kaiwo_planner.service import PlannerService
    from kaiwo_planner.settings import PlannerSettings
    from kaiwo_runtime.memory_bus import MemoryBus

    from tests.unit.planner_service.conftest import toy_planner

    published = 0

    class BusyBus(MemoryBus):
        async def read_next_stored(self, stream: str, sequence: int, *, subjects: str) -> Any:
            nonlocal published
            found = await super().read_next_stored(stream, sequence, subjects=subjects)
            if found is None and stream == "KAIWO_OBS" and published < 50:
                published += 1
                await harness.observe(build.kaiwo_job("serve"), str(100 + published))
            return found

    service = PlannerService(
        BusyBus(server=harness.server, topology=harness.topology),
        harness.kv,
        clock=harness.clock,
        plan_fn=toy_planner,
        settings=PlannerSettings(),
        metrics=PlannerMetrics(),
    )
    await service.start()
    await harness.observe(build.kaiwo_job("serve"), "11", "ADDED")

    await service.gained(1)

    assert published < 5
    assert plans_by_owner(harness) == ["serve"]
