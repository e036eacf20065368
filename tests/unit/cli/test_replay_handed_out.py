"""The ring replay tells a late event from a second one at a sequence by (decisions 0231, 0243)."""

from __future__ import annotations

import pytest
from kaiwo_cli.replay.handed_out import SEQUENCES_REMEMBERED, HandedOut


def test_sequences_passed_over_are_not_handed_out_and_later_ones_are_unknown_yet() -> None:
    ring = HandedOut(remembered=8)
    for sequence in (1, 2, 5, 6):
        ring.hand_out(sequence)

    assert [ring.was_handed_out(s) for s in range(1, 9)] == [
        True, True, False, False, True, True, False, False,
    ]  # fmt: skip


def test_the_ring_wraps_and_forgets_what_it_held_for_older_sequences() -> None:
    ring = HandedOut(remembered=8)
    for sequence in range(1, 9):
        ring.hand_out(sequence)
    ring.hand_out(11)  # 9 and 10 passed over: their slots held 1 and 2, handed out
    ring.hand_out(12)

    assert [ring.was_handed_out(s) for s in range(5, 13)] == [
        True, True, True, True, False, False, True, True,
    ]  # fmt: skip


def test_a_gap_longer_than_the_ring_clears_all_of_it() -> None:
    ring = HandedOut(remembered=8)
    for sequence in range(1, 9):
        ring.hand_out(sequence)
    ring.hand_out(30)

    assert [ring.was_handed_out(s) for s in range(23, 31)] == [False] * 7 + [True]


def test_a_sequence_older_than_the_ring_counts_as_handed_out() -> None:
    # Only another lifetime of the stream puts an event that far back (the recorder holds
    # 256 messages unacknowledged at most), so replay refuses it rather than call it late.
    ring = HandedOut(remembered=8)
    ring.hand_out(3)
    ring.hand_out(20)

    assert ring.was_handed_out(12) is True
    assert ring.was_handed_out(13) is False


def test_sequences_must_rise() -> None:
    ring = HandedOut(remembered=8)
    ring.hand_out(4)

    with pytest.raises(ValueError, match="sequence 4 is not above 4"):
        ring.hand_out(4)


def test_the_ring_holds_a_million_sequences_in_a_mebibyte() -> None:
    assert SEQUENCES_REMEMBERED == 1_048_576
    ring = HandedOut()
    ring.hand_out(5_000_000)
    ring.hand_out(5_000_002)

    assert [ring.was_handed_out(s) for s in (5_000_000, 5_000_001, 5_000_002)] == [
        True, False, True,
    ]  # fmt: skip
    assert ring.was_handed_out(5_000_002 - SEQUENCES_REMEMBERED) is True
    assert ring.was_handed_out(5_000_003 - SEQUENCES_REMEMBERED) is False
