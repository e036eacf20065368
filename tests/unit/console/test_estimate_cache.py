"""The queues' estimates are computed once per version of the state and the history and
shared by every page and reader for a while (decision 0051): a change recomputes them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kaiwo_console.domain.cluster import ClusterState
from kaiwo_console.domain.history import QueueRecords
from kaiwo_console.domain.pages import WorkloadHistory
from kaiwo_console.http_api import Console
from kaiwo_console.metrics import ConsoleMetrics
from kaiwo_runtime.kubernetes_access import LOOPBACK_ONLY

from tests.unit.console.objects import cluster_queue, kaiwojob, kueue_workload, local_queue

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


async def no_history(_uid: str) -> WorkloadHistory:
    return WorkloadHistory()


def console() -> Console:
    state = ClusterState()
    for obj in (
        cluster_queue("research", amd=16),
        local_queue("team-a", "research", "research"),
        kaiwojob("eval"),
        kueue_workload("eval", gpus=8, created=NOW - timedelta(minutes=4)),
    ):
        state.apply(kind=obj["kind"], event="ADDED", obj=obj)
    return Console(
        state=state,
        records=QueueRecords(),
        workloads_access=LOOPBACK_ONLY,
        nodes_access=LOOPBACK_ONLY,
        metrics=ConsoleMetrics(),
        clock=lambda: NOW,
        timeline=no_history,
        estimates_max_age_seconds=30,
    )


def test_one_version_computes_the_estimates_once() -> None:
    shared = console()

    first = shared._queue_views(NOW)
    again = shared._queue_views(NOW + timedelta(seconds=29))

    assert again is first
    assert [e.name for e in first[0].pending] == ["eval"]


def test_a_change_or_age_recomputes_them() -> None:
    shared = console()
    first = shared._queue_views(NOW)

    assert shared._queue_views(NOW + timedelta(seconds=30)) is not first
    second = shared._queue_views(NOW + timedelta(seconds=30))
    obj = kaiwojob("late")
    shared.state.apply(kind=obj["kind"], event="ADDED", obj=obj)
    assert shared._queue_views(NOW + timedelta(seconds=31)) is not second
