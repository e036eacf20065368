"""A queue's estimates are replayed again only when what they read changed, or grew old
(the console's :class:`EstimateMemo`, shared by every page and reader): a change elsewhere
in the cluster or in another queue does not replay it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kaiwo_console.domain.cluster import ClusterState, everything, only
from kaiwo_console.domain.history import QueueRecords
from kaiwo_console.domain.queues import EstimateMemo, queue_views

from tests.unit.console.objects import (
    cluster_queue,
    gpu_node,
    kaiwojob,
    kueue_workload,
    local_queue,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def versioned(obj: dict[str, Any], version: str) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": version}}


def cluster() -> ClusterState:
    state = ClusterState()
    for obj in (
        cluster_queue("research", amd=16),
        cluster_queue("other", amd=8),
        local_queue("team-a", "research", "research"),
        local_queue("team-b", "other", "other"),
        kaiwojob("eval"),
        versioned(kueue_workload("eval", gpus=8, created=NOW - timedelta(minutes=4)), "1"),
        kaiwojob("side", "team-b", queue="other"),
        versioned(
            kueue_workload(
                "side", "team-b", gpus=8, local_queue="other", created=NOW - timedelta(minutes=2)
            ),
            "2",
        ),
    ):
        state.apply(kind=obj["kind"], event="ADDED", obj=obj)
    return state


def test_a_queue_is_replayed_again_only_when_what_it_reads_changed() -> None:
    state, records, memo = cluster(), QueueRecords(), EstimateMemo(max_age_seconds=30)

    queue_views(state, records, now=NOW, visible=everything, memo=memo)
    assert memo.computed == 2  # both queues
    queue_views(state, records, now=NOW + timedelta(seconds=10), visible=everything, memo=memo)
    node = gpu_node("spare")
    state.apply(kind=node["kind"], event="ADDED", obj=node)
    queue_views(state, records, now=NOW + timedelta(seconds=20), visible=everything, memo=memo)
    assert memo.computed == 2  # nothing a queue reads changed

    moved = versioned(
        kueue_workload("side", "team-b", gpus=4, local_queue="other", created=NOW), "3"
    )
    state.apply(kind=moved["kind"], event="MODIFIED", obj=moved)
    views = queue_views(
        state, records, now=NOW + timedelta(seconds=21), visible=everything, memo=memo
    )
    assert memo.computed == 3  # only the queue whose Workload changed
    assert [e.gpus for v in views for e in v.pending if v.name == "other"] == [4]

    queue_views(state, records, now=NOW + timedelta(seconds=60), visible=everything, memo=memo)
    assert memo.computed == 5  # too old: both again from the new now


def test_remembered_estimates_still_hide_what_a_reader_may_not_see() -> None:
    state, records, memo = cluster(), QueueRecords(), EstimateMemo()
    queue_views(state, records, now=NOW, visible=everything, memo=memo)

    views = queue_views(state, records, now=NOW, visible=only(["team-a"]), memo=memo)

    names = {v.name: [(e.namespace, e.name) for e in v.pending] for v in views}
    assert names == {"other": [("team-b", "")], "research": [("team-a", "eval")]}
