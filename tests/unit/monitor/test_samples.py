"""Which GPU samples are current enough to judge (decision 0177)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kaiwo_monitor.domain.samples import GpuSample, current_samples

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TOLERANCE = timedelta(seconds=120)


def taken(at: datetime, pod: str = "train-0") -> GpuSample:
    return GpuSample(namespace="team-a", pod=pod, gpu="0", percent=3.0, at=at)


def test_samples_within_the_tolerance_are_current_up_to_its_edge() -> None:
    fresh = taken(datetime(2026, 3, 1, 11, 59, 50, tzinfo=UTC))
    at_the_edge = taken(datetime(2026, 3, 1, 11, 58, 0, tzinfo=UTC), pod="train-1")
    assert current_samples([fresh, at_the_edge], now=NOW, tolerance=TOLERANCE) == (
        fresh,
        at_the_edge,
    )


def test_a_frozen_sample_is_not_current() -> None:
    fresh = taken(datetime(2026, 3, 1, 11, 59, 59, tzinfo=UTC))
    frozen = taken(datetime(2026, 3, 1, 11, 57, 59, 900000, tzinfo=UTC), pod="train-1")
    assert current_samples([frozen, fresh], now=NOW, tolerance=TOLERANCE) == (fresh,)


def test_a_sample_from_far_ahead_is_not_current_a_little_ahead_is() -> None:
    a_little = taken(datetime(2026, 3, 1, 12, 0, 3, tzinfo=UTC))
    far = taken(datetime(2026, 3, 1, 12, 5, 0, tzinfo=UTC), pod="train-1")
    assert current_samples([a_little, far], now=NOW, tolerance=TOLERANCE) == (a_little,)


def test_no_samples_are_none_current() -> None:
    assert current_samples([], now=NOW, tolerance=TOLERANCE) == ()
