"""Each queue's record folded from the recorded observations of Kueue Workloads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kaiwo_console.domain.history import QueueRecords

from tests.unit.console.objects import kueue_workload

T0 = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
LANE = ("research", "amd.com/gpu")


def test_an_admission_and_a_finish_make_one_run_with_the_conditions_times() -> None:
    records = QueueRecords()
    pending = kueue_workload("a")
    admitted = kueue_workload("a", admitted_to="research", admitted_at=T0, version=2)
    finished = kueue_workload(
        "a",
        admitted_to="research",
        admitted_at=T0,
        finished_at=T0 + timedelta(minutes=45),
        version=3,
    )

    for obj, recorded in ((pending, T0), (admitted, T0), (admitted, T0), (finished, T0)):
        records.apply(event="MODIFIED", obj=obj, recorded=recorded + timedelta(seconds=5))
    records.apply(event="DELETED", obj=finished, recorded=T0 + timedelta(hours=2))

    history = records.history(LANE)
    assert history.admissions == (T0,)
    assert history.run_seconds == (2700.0,)
    assert records.admissions_by_hour("research", now=T0 + timedelta(hours=1), hours=3) == [0, 1, 0]


def test_losing_the_admission_ends_the_run_and_a_new_admission_starts_another() -> None:
    records = QueueRecords()
    admitted = kueue_workload("a", admitted_to="research", admitted_at=T0)
    evicted = kueue_workload("a", version=2)
    again = kueue_workload(
        "a", admitted_to="research", admitted_at=T0 + timedelta(minutes=20), version=3
    )

    records.apply(event="ADDED", obj=admitted, recorded=T0)
    records.apply(event="MODIFIED", obj=evicted, recorded=T0 + timedelta(minutes=10))
    records.apply(event="MODIFIED", obj=again, recorded=T0 + timedelta(minutes=20))

    history = records.history(LANE)
    assert history.run_seconds == (600.0,)
    assert history.admissions == (T0, T0 + timedelta(minutes=20))
