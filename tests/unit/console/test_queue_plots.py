"""Queue depth and wait time over time, folded from the recorded Kueue Workloads and drawn
on the queues page. Expected series worked out by hand from the times below."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kaiwo_console.domain.cluster import ClusterState, everything
from kaiwo_console.domain.history import (
    DepthStep,
    QueueRecords,
    Waiting,
    WaitPoint,
    depth_over_time,
    waits_in,
)
from kaiwo_console.domain.pages.queues import depth_chart, queues_body, wait_chart
from kaiwo_console.domain.queues import queue_views

from tests.unit.console.objects import cluster_queue, kueue_workload, local_queue

START = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
NOW = datetime(2026, 11, 28, 11, 0, tzinfo=UTC)


def at(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 11, 28, hour, minute, second, tzinfo=UTC)


def four_workloads() -> QueueRecords:
    """d waits from 08:00 (before the window) to 09:05; a 09:10 to 09:40; b 09:20 to 10:20;
    c from 09:30 and still waits. d is first seen already admitted."""
    records = QueueRecords()
    for name, created, admitted in (
        ("a", at(9, 10), at(9, 40)),
        ("b", at(9, 20), at(10, 20)),
        ("c", at(9, 30), None),
    ):
        records.apply(event="ADDED", obj=kueue_workload(name, created=created), recorded=created)
        if admitted is not None:
            records.apply(
                event="MODIFIED",
                obj=kueue_workload(
                    name, created=created, admitted_to="research", admitted_at=admitted, version=2
                ),
                recorded=admitted + timedelta(seconds=2),
            )
    records.apply(
        event="ADDED",
        obj=kueue_workload("d", created=at(8, 0), admitted_to="research", admitted_at=at(9, 5)),
        recorded=at(9, 6),
    )
    return records


def research(records: QueueRecords) -> list[Waiting]:
    return records.stretches(lambda _local: "research")["research"]


def test_depth_steps_at_each_queueing_and_admission_from_the_window_start_to_now() -> None:
    depth = depth_over_time(research(four_workloads()), start=START, now=NOW)

    assert depth == (
        DepthStep(at(9, 0), 1),
        DepthStep(at(9, 5), 0),
        DepthStep(at(9, 10), 1),
        DepthStep(at(9, 20), 2),
        DepthStep(at(9, 30), 3),
        DepthStep(at(9, 40), 2),
        DepthStep(at(10, 20), 1),
        DepthStep(at(11, 0), 1),
    )


def test_a_wait_point_per_admission_in_the_window_from_queueing_to_admission() -> None:
    waits = waits_in(research(four_workloads()), start=START, now=NOW)

    assert waits == (
        WaitPoint(at(9, 5), 65 * 60.0),
        WaitPoint(at(9, 40), 30 * 60.0),
        WaitPoint(at(10, 20), 60 * 60.0),
    )


def test_a_narrower_window_starts_from_the_depth_then_and_keeps_only_its_admissions() -> None:
    stretches = research(four_workloads())

    assert depth_over_time(stretches, start=at(9, 35), now=at(10, 0)) == (
        DepthStep(at(9, 35), 3),
        DepthStep(at(9, 40), 2),
        DepthStep(at(10, 0), 2),
    )
    assert waits_in(stretches, start=at(9, 35), now=at(10, 0)) == (WaitPoint(at(9, 40), 30 * 60.0),)


def test_two_changes_at_one_instant_make_one_step() -> None:
    stretches = [
        Waiting(("team-a", "research"), at(9, 0), at(9, 30), "research"),
        Waiting(("team-a", "research"), at(9, 30), None),
    ]

    assert depth_over_time(stretches, start=at(8, 0), now=at(10, 0)) == (
        DepthStep(at(8, 0), 0),
        DepthStep(at(9, 0), 1),
        DepthStep(at(9, 30), 1),
        DepthStep(at(10, 0), 1),
    )


def test_a_deleted_pending_workload_stops_waiting_without_a_wait_point() -> None:
    records = QueueRecords()
    pending = kueue_workload("gone", created=at(9, 10))
    records.apply(event="ADDED", obj=pending, recorded=at(9, 10))
    records.apply(event="DELETED", obj=pending, recorded=at(9, 50))

    stretches = research(records)

    assert depth_over_time(stretches, start=START, now=NOW) == (
        DepthStep(at(9, 0), 0),
        DepthStep(at(9, 10), 1),
        DepthStep(at(9, 50), 0),
        DepthStep(at(11, 0), 0),
    )
    assert waits_in(stretches, start=START, now=NOW) == ()


def test_an_evicted_workload_waits_again_from_its_eviction_not_from_its_creation() -> None:
    records = QueueRecords()
    admitted = kueue_workload("e", created=at(8, 0), admitted_to="research", admitted_at=at(8, 30))
    records.apply(event="ADDED", obj=admitted, recorded=at(8, 30))
    records.apply(
        event="MODIFIED", obj=kueue_workload("e", created=at(8, 0), version=2), recorded=at(9, 15)
    )
    again = kueue_workload(
        "e", created=at(8, 0), admitted_to="research", admitted_at=at(9, 45), version=3
    )
    records.apply(event="MODIFIED", obj=again, recorded=at(9, 45))

    assert waits_in(research(records), start=START, now=NOW) == (WaitPoint(at(9, 45), 1800.0),)


def test_a_pending_workload_counts_in_its_local_queues_cluster_queue() -> None:
    state = ClusterState()
    for obj in (cluster_queue("gpus"), local_queue("team-a", "research", "gpus")):
        state.apply(kind=obj["kind"], event="ADDED", obj=obj)
    records = QueueRecords()
    records.apply(event="ADDED", obj=kueue_workload("c", created=at(9, 30)), recorded=at(9, 30))

    (view,) = queue_views(state, records, now=NOW, visible=everything, hours=2, plots=True)

    assert view.depth == (
        DepthStep(at(9, 0), 0),
        DepthStep(at(9, 30), 1),
        DepthStep(at(11, 0), 1),
    )


def test_the_depth_is_one_step_line_and_each_wait_one_dot() -> None:
    records = four_workloads()
    stretches = research(records)

    depth = depth_chart(depth_over_time(stretches, start=START, now=NOW), width=120, height=30)
    waits = wait_chart(
        waits_in(stretches, start=START, now=NOW), start=START, now=NOW, width=120, height=30
    )

    # 2 h over 120 px: a minute a pixel; depth 3 at the top, 2 px below the top edge:
    # depth 1 at 30 - 28/3 = 20.7 (21), 2 at 11.3 (11), 0 at 30.
    assert depth.count("<polyline") == 1
    assert 'points="0,21 5,21 5,30 10,30 10,21 20,21 20,11 30,11 30,2 40,2 40,11 80,11 ' in depth
    assert "80,21 120,21" in depth
    assert "<title>most 3 waiting</title>" in depth
    # The longest wait (65 min) at the top, admitted at 09:05; 30 min at 09:40: 27 - 24 * 30/65.
    assert waits.count("<circle") == 3
    assert '<circle cx="5" cy="3" r="3"/>' in waits
    assert '<circle cx="40" cy="16" r="3"/>' in waits
    assert "<title>longest 65m</title>" in waits


def test_workloads_admitted_in_one_pixel_after_equal_waits_make_one_dot() -> None:
    points = [WaitPoint(at(9, 40), 600.0), WaitPoint(at(9, 40, 20), 600.0)]

    assert wait_chart(points, start=START, now=NOW, width=120).count("<circle") == 1


def test_the_queues_page_draws_both_charts_per_queue_with_their_summaries() -> None:
    state = ClusterState()
    for obj in (cluster_queue("research"), local_queue("team-a", "research", "research")):
        state.apply(kind=obj["kind"], event="ADDED", obj=obj)

    html = queues_body(
        queue_views(state, four_workloads(), now=NOW, visible=everything, hours=2, plots=True),
        now=NOW,
    )

    assert html.count("<svg class=depth") == 1
    assert html.count("<svg class=waits") == 1
    assert "Waiting over the same hours (now 1, most 3)" in html
    assert "Wait before admission (3 admitted, median 60m, longest 65m)" in html


def test_a_queue_without_admissions_says_so_instead_of_an_empty_chart() -> None:
    assert "No admission in this window." in wait_chart((), start=START, now=NOW)
