"""The back-off of ``kaiwo up``'s supervisor and of the one process's members: doubling from
1 s to 30 s, back to 1 s after a run of a minute or more (like a pod's CrashLoopBackOff)."""

from __future__ import annotations

from kaiwo_cli.stack.processes import RestartBackOff


def test_quick_failures_wait_longer_each_time_up_to_thirty_seconds() -> None:
    back_off = RestartBackOff()

    assert [back_off.after(0.5) for _ in range(7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_a_stable_run_starts_the_back_off_again() -> None:
    back_off = RestartBackOff()
    for _ in range(4):
        back_off.after(0.5)

    assert back_off.after(60.0) == 1.0
    assert back_off.after(0.5) == 2.0
