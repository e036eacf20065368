"""The planner's snapshot records the cluster its observations came from, and a planner of
another cluster refuses to load it (decision 0042): nothing loaded, nothing overwritten."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.service import ForeignSnapshotError, PlannerService
from kaiwo_planner.settings import PlannerSettings
from kaiwo_planner.snapshot_store import SnapshotStore


def planner_of(harness: Any, build: Any, cluster: str | None) -> PlannerService:
    return PlannerService(
        harness.bus(),
        harness.kv,
        clock=harness.clock,
        plan_fn=build.toy_planner,
        settings=PlannerSettings(resync_on_start=False),
        metrics=PlannerMetrics(),
        cluster=cluster,
    )


async def snapshot_of_cluster_a(harness: Any, build: Any) -> dict[str, Any]:
    service = planner_of(harness, build, "uid-of-cluster-a")
    await service.start()
    await harness.observe(build.kaiwo_job("train"), "10", "ADDED")
    await harness.drain(service)
    await service.save_snapshot()
    document = await SnapshotStore(harness.kv).load()
    assert document is not None
    return document


async def test_the_snapshot_records_the_cluster(harness: Any, build: Any) -> None:
    document = await snapshot_of_cluster_a(harness, build)
    assert document["cluster"] == "uid-of-cluster-a"


async def test_a_planner_of_another_cluster_refuses_the_snapshot(harness: Any, build: Any) -> None:
    before = await snapshot_of_cluster_a(harness, build)
    other = planner_of(harness, build, "uid-of-cluster-b")

    with pytest.raises(ForeignSnapshotError) as refused:
        await other.start()

    assert str(refused.value) == (
        "the planner's snapshot in kaiwo-planner holds the state of another cluster "
        "(kube-system uid uid-of-cluster-a), not of this one (uid-of-cluster-b); give this "
        "cluster its own NATS (or buckets), or delete kaiwo-planner to start it afresh"
    )
    assert len(other.projection) == 0
    assert not other.ready
    assert await SnapshotStore(harness.kv).load() == before


async def test_the_same_cluster_or_an_unknown_one_loads_the_snapshot(
    harness: Any, build: Any
) -> None:
    await snapshot_of_cluster_a(harness, build)
    for cluster in ("uid-of-cluster-a", None):
        again = planner_of(harness, build, cluster)
        await again.start()
        assert again.projection.by_uid("uid-train") is not None
