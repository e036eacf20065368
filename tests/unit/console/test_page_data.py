"""The workload page's GPU utilization and early stop, the Models page's requests in flight
and autoscaler decisions: folded and drawn from hand-made readings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kaiwo_console.domain.model_load import LoadPoint, ModelLoads, ScaleDecision
from kaiwo_console.domain.pages.models import ModelLoad, load_chart
from kaiwo_console.domain.pages.workloads import (
    Ending,
    UtilizationPoint,
    ending_section,
    utilization_chart,
)
from kaiwo_console.domain.workload_rows import ending_of

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MODEL = ("serving", "llama")


def test_utilization_is_a_line_from_0_to_100_percent_broken_where_no_sample_came() -> None:
    points = [
        UtilizationPoint(T0, 0.5, threshold=0.2),
        UtilizationPoint(T0 + timedelta(minutes=1), 1.0, threshold=0.2),
        UtilizationPoint(T0 + timedelta(minutes=2), None, threshold=0.2),
        UtilizationPoint(T0 + timedelta(minutes=3), 0.0, threshold=0.2),
        UtilizationPoint(T0 + timedelta(minutes=4), 0.25, threshold=0.2),
    ]

    svg = utilization_chart(points, width=400, height=100)

    # x: 4 minutes over 400 px; y: 100 px for 0%, 0 px for 100%.
    assert '<polyline points="0.0,50.0 100.0,0.0"' in svg
    assert '<polyline points="300.0,100.0 400.0,75.0"' in svg
    assert 'y1="80.0" y2="80.0"' in svg  # the 20% threshold, dashed
    assert "5 readings; last 25% at 12:04:00" in svg


def test_no_reading_says_so() -> None:
    assert "No GPU utilization recorded" in utilization_chart([UtilizationPoint(T0, None)])
    assert "No GPU utilization recorded" in utilization_chart([])


def test_a_preempted_workload_shows_the_reason_and_the_beneficiary() -> None:
    victim = {
        "status": {
            "status": "TERMINATED",
            "conditions": [
                {
                    "type": "WorkloadTerminatedEarly",
                    "status": "True",
                    "reason": "GpuIdlePreemption",
                    "message": "idle for 30m",
                }
            ],
            "preemptedFor": {"kind": "KaiwoJob", "namespace": "team-b", "name": "next"},
        }
    }

    ending = ending_of(victim)

    assert ending == ("GpuIdlePreemption", "idle for 30m", "KaiwoJob team-b/next")
    assert ending_section(Ending(*ending)) == (
        "<section><h3>Stopped early</h3><p id=ending><b>GpuIdlePreemption</b> for "
        "<b id=beneficiary>KaiwoJob team-b/next</b>: idle for 30m</p></section>"
    )


def test_a_workload_stopped_for_nobody_or_not_at_all() -> None:
    always = {
        "status": {
            "conditions": [
                {"type": "WorkloadTerminatedEarly", "status": "True", "reason": "DurationExceeded"}
            ]
        }
    }
    running = {"status": {"conditions": [{"type": "Preempted", "status": "False"}]}}

    assert ending_of(always) == ("DurationExceeded", "", "")
    assert ending_of(running) is None
    assert ending_section(None) == ""


def test_requests_in_flight_sum_the_live_replicas_latest_reports() -> None:
    loads = ModelLoads()
    loads.report(gateway="gw-a", time=T0, interval_seconds=5, models={MODEL: (3, 1)})
    loads.report(
        gateway="gw-b", time=T0 + timedelta(seconds=2), interval_seconds=5, models={MODEL: (4, 0)}
    )
    # gw-a reports again: none for the Model now.
    loads.report(gateway="gw-a", time=T0 + timedelta(seconds=5), interval_seconds=5, models={})
    # An older report of gw-a read late changes nothing.
    loads.report(gateway="gw-a", time=T0, interval_seconds=5, models={MODEL: (9, 9)})

    assert loads.points(MODEL) == (
        LoadPoint(T0, 3, 1),
        LoadPoint(T0 + timedelta(seconds=2), 7, 1),
        LoadPoint(T0 + timedelta(seconds=5), 4, 0),
    )
    assert loads.in_flight(MODEL, now=T0 + timedelta(seconds=10)) == (4, 0)
    # gw-b's last report is older than 3 intervals (15 s): it stopped.
    assert loads.in_flight(MODEL, now=T0 + timedelta(seconds=18)) == (0, 0)


def test_the_load_chart_marks_each_decision_with_the_new_replica_count() -> None:
    decision = ScaleDecision(
        time=T0 + timedelta(seconds=50),
        from_replicas=1,
        replicas=3,
        cause="load",
        average_active_requests=12.5,
        reason="12.5 active requests over target 5",
    )
    load = ModelLoad(
        in_flight=(10, 0),
        points=(LoadPoint(T0, 0, 0), LoadPoint(T0 + timedelta(seconds=100), 10, 0)),
        decisions=(decision,),
    )

    svg = load_chart(load.points, load.decisions, width=200, height=40)

    assert '<polyline points="0.0,40.0 200.0,0.0"' in svg
    assert '<line x1="100.0" x2="100.0"' in svg
    assert "1 → 3: 12.5 active requests over target 5" in svg
    assert '<text x="102.0" y="10" font-size="10">3</text>' in svg
