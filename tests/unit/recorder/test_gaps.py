"""Gaps: stream sequences a recorder consumer never received."""

from __future__ import annotations

from kaiwo_recorder.gaps import Gap, SequenceTracker


def test_consecutive_deliveries_leave_no_gap() -> None:
    tracker = SequenceTracker()
    tracker.start(delivered=0)

    assert [tracker.delivered(sequence, attempt=1) for sequence in (1, 2, 3)] == [None] * 3
    assert tracker.expected == 4


def test_a_jump_in_first_deliveries_is_a_gap_of_the_sequences_skipped() -> None:
    tracker = SequenceTracker()
    tracker.start(delivered=10)

    assert tracker.delivered(11, attempt=1) is None
    gap = tracker.delivered(15, attempt=1)

    assert gap == Gap(12, 14)
    assert gap is not None and gap.messages == 3
    assert tracker.delivered(16, attempt=1) is None


def test_redeliveries_never_count() -> None:
    tracker = SequenceTracker()
    tracker.start(delivered=5)

    assert tracker.delivered(3, attempt=2) is None
    assert tracker.delivered(9, attempt=2) is None
    assert tracker.expected == 6


def test_a_stream_that_starts_past_the_position_is_a_gap_once() -> None:
    tracker = SequenceTracker()
    tracker.start(delivered=0)

    assert tracker.stream_starts_at(1) is None
    assert tracker.stream_starts_at(241) == Gap(1, 240)
    assert tracker.stream_starts_at(241) is None
    assert tracker.delivered(241, attempt=1) is None


def test_without_a_known_start_the_first_delivery_sets_the_position() -> None:
    tracker = SequenceTracker()

    assert tracker.stream_starts_at(50) is None
    assert tracker.delivered(70, attempt=1) is None
    tracker.start(delivered=3)  # too late: the position is known

    assert tracker.delivered(72, attempt=1) == Gap(71, 71)
