"""The projection keeps the monitor's latest finding per workload, in its snapshot too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kaiwo_planner.domain.state.projection import Projection
from kaiwo_planner.domain.state.workload_finding import WorkloadFinding

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def finding(uid: str, *, at: datetime = NOW, since: datetime | None = None) -> WorkloadFinding:
    return WorkloadFinding(
        uid=uid,
        at=at,
        measured=True,
        vendor="amd",
        gpu_count=2,
        threshold_ratio=0.01,
        underutilized_since=since,
        idle_threshold_ratio=0.05,
        idle_since=since,
        utilization_ratio=0.0,
        idle_utilization_ratio=0.0,
        idle_aggregation="Max",
    )


def test_the_latest_finding_is_kept_and_snapshotted() -> None:
    projection = Projection()
    low = finding("a", since=NOW - timedelta(minutes=3))
    assert projection.apply_finding(low, sequence=1)
    assert projection.cluster_state().findings == {"a": low}
    # A redelivered older message changes nothing.
    assert not projection.apply_finding(finding("a"), sequence=1)
    restored = Projection.from_document(projection.to_document())
    assert restored.findings.last_sequence == 1
    assert restored.cluster_state().findings == {"a": low}


def test_findings_not_renewed_for_an_hour_are_forgotten() -> None:
    projection = Projection()
    projection.apply_finding(finding("old", since=NOW), sequence=1)
    later = finding("new", at=NOW + timedelta(hours=1, seconds=1), since=NOW)
    projection.apply_finding(later, sequence=2)
    assert set(projection.cluster_state().findings) == {"new"}
