"""Pending re-plan times (kaiwo_planner.replan_timers)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kaiwo_planner.replan_timers import ReplanTimers

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_timers_come_due_earliest_first_and_a_new_time_replaces_the_old() -> None:
    timers = ReplanTimers()
    timers.arm("a", T0 + timedelta(minutes=5))
    timers.arm("b", T0 + timedelta(minutes=1))
    timers.arm("a", T0 + timedelta(minutes=2))  # replaces a's 5 minutes
    timers.arm("c", T0 + timedelta(minutes=3))
    timers.cancel("c")
    assert len(timers) == 2
    assert timers.next_due == T0 + timedelta(minutes=1)
    assert timers.pop_due(T0) is None
    later = T0 + timedelta(minutes=10)
    assert timers.pop_due(later) == (T0 + timedelta(minutes=1), "b")
    assert timers.pop_due(later) == (T0 + timedelta(minutes=2), "a")
    assert timers.pop_due(later) is None
    assert timers.next_due is None


def test_timers_survive_their_document() -> None:
    timers = ReplanTimers()
    timers.arm("b", T0 + timedelta(minutes=1))
    timers.arm("a", T0 + timedelta(minutes=2))
    document = timers.to_document()
    assert document == {"a": "2026-03-01T12:02:00+00:00", "b": "2026-03-01T12:01:00+00:00"}
    restored = ReplanTimers.from_document(document)
    assert restored.pop_due(T0 + timedelta(hours=1)) == (T0 + timedelta(minutes=1), "b")
    assert "a" in restored
