"""The estimated start of pending workloads (decision 0050), with hand-computed answers.

Where every recorded run lasted the same time the replay is deterministic, so each expected
start is worked out by hand in the comment above it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kaiwo_contracts.queue_estimates.eta import (
    EtaSettings,
    Method,
    QueueHistory,
    QueueNow,
    Running,
    Waiting,
    admissions_per_hour,
    estimate_starts,
    naive_start,
)

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


def test_an_empty_queue_has_a_position_but_no_estimate() -> None:
    etas = estimate_starts(QueueHistory(), QueueNow(8, pending=(Waiting("a", 8),)), now=NOW)

    assert [(e.name, e.position, e.start) for e in etas] == [("a", 1, None)]
    assert etas[0].basis.method is Method.NO_HISTORY


def test_workloads_start_as_the_running_ones_end_and_as_their_gpus_free() -> None:
    history = QueueHistory(run_seconds=(3600.0,) * 10)
    queue = QueueNow(
        capacity_gpus=8,
        running=(Running(admitted_at=NOW - minutes(30), gpus=8),),
        pending=(Waiting("a", 8), Waiting("b", 4), Waiting("c", 4), Waiting("d", 8)),
    )

    etas = estimate_starts(history, queue, now=NOW)

    # Every run took 60 min: the running one ends in 30; a runs 30-90; b and c share the
    # GPUs 90-150; d starts at 150.
    assert [(e.name, e.position, e.start) for e in etas] == [
        ("a", 1, NOW + minutes(30)),
        ("b", 2, NOW + minutes(90)),
        ("c", 3, NOW + minutes(90)),
        ("d", 4, NOW + minutes(150)),
    ]
    assert all(e.earliest == e.start == e.latest for e in etas)
    assert etas[0].basis.method is Method.RUN_TIMES
    assert etas[0].basis.recorded_runs == 10
    assert etas[0].wait_seconds(NOW) == 1800.0


def test_a_declared_duration_bounds_the_run_plus_the_preemption_grace() -> None:
    history = QueueHistory(run_seconds=(7200.0,) * 3)
    queue = QueueNow(8, pending=(Waiting("a", 8, duration_seconds=1800.0), Waiting("b", 8)))

    etas = estimate_starts(
        history, queue, now=NOW, settings=EtaSettings(preemption_grace_seconds=300)
    )

    # Runs took 120 min, but a declared 30: preempted at 30 + 5 (others wait), b starts then.
    assert [e.start for e in etas] == [NOW, NOW + minutes(35)]
    assert etas[1].basis.declared == 1


def test_a_workload_running_longer_than_every_recorded_run_is_taken_to_run_as_long_again() -> None:
    history = QueueHistory(run_seconds=(600.0,) * 5)
    queue = QueueNow(8, running=(Running(NOW - minutes(30), 8),), pending=(Waiting("a", 8),))

    (eta,) = estimate_starts(history, queue, now=NOW)

    assert eta.start == NOW + minutes(30)


def test_a_running_workload_is_expected_to_run_as_long_as_the_runs_that_outlasted_it() -> None:
    # Runs of 10 and 100 min; the running one is at 20, so only the 100-minute runs predict it.
    history = QueueHistory(run_seconds=(600.0, 600.0, 600.0, 6000.0))
    queue = QueueNow(8, running=(Running(NOW - minutes(20), 8),), pending=(Waiting("a", 8),))

    (eta,) = estimate_starts(history, queue, now=NOW)

    assert eta.start == NOW + minutes(80)


def test_a_workload_larger_than_the_queue_never_starts_and_does_not_hold_up_the_rest() -> None:
    history = QueueHistory(run_seconds=(600.0,))
    queue = QueueNow(8, pending=(Waiting("huge", 16), Waiting("small", 8)))

    huge, small = estimate_starts(history, queue, now=NOW)

    assert (huge.position, huge.start, huge.basis.method) == (1, None, Method.NEVER_FITS)
    assert (small.position, small.start) == (2, NOW)


def test_without_recorded_runs_declared_durations_are_the_run_times() -> None:
    queue = QueueNow(
        8,
        running=(Running(NOW - minutes(10), 8, duration_seconds=3600.0),),
        pending=(Waiting("a", 8, duration_seconds=600.0), Waiting("b", 8, duration_seconds=600.0)),
    )

    etas = estimate_starts(QueueHistory(), queue, now=NOW)

    # The running one has 50 of its 60 minutes left; a runs 50-60; b starts at 60.
    assert [e.start for e in etas] == [NOW + minutes(50), NOW + minutes(60)]
    assert etas[0].basis.method is Method.DECLARED
    assert etas[1].basis.declared == 3


def test_without_run_times_the_admission_rate_is_the_basis_and_its_spread_brackets_it() -> None:
    admitted = (NOW - minutes(180), NOW - minutes(120), NOW - minutes(60))
    queue = QueueNow(8, pending=(Waiting("a", 8), Waiting("b", 8)))

    a, b = estimate_starts(QueueHistory(admissions=admitted), queue, now=NOW)

    # One admission an hour: a in 1 h, b in 2 h.
    assert (a.start, b.start) == (NOW + minutes(60), NOW + minutes(120))
    assert a.basis.method is Method.ADMISSION_RATE
    assert a.basis.admissions_per_hour == 1.0
    for eta in (a, b):
        assert eta.earliest is not None and eta.latest is not None and eta.start is not None
        assert eta.earliest < eta.start < eta.latest


def test_the_uncertainty_spans_the_recorded_run_times() -> None:
    # a starts now; b after a's run, 10 or 100 minutes: the 10% and 90% starts are those.
    history = QueueHistory(run_seconds=(600.0, 6000.0))
    queue = QueueNow(8, pending=(Waiting("a", 8), Waiting("b", 8)))

    a, b = estimate_starts(history, queue, now=NOW)

    assert a.earliest == a.start == a.latest == NOW
    assert (b.earliest, b.latest) == (NOW + minutes(10), NOW + minutes(100))


def test_the_estimate_is_a_function_of_its_inputs() -> None:
    history = QueueHistory(run_seconds=(60.0, 600.0, 6000.0, 60000.0))
    queue = QueueNow(8, pending=tuple(Waiting(str(i), 4) for i in range(6)))

    assert estimate_starts(history, queue, now=NOW) == estimate_starts(history, queue, now=NOW)


def test_only_the_most_recent_runs_count() -> None:
    # 100 old runs of 100 minutes, then 3 of 10: with recent_runs=3 only the 10-minute ones.
    history = QueueHistory(run_seconds=(6000.0,) * 100 + (600.0,) * 3)
    queue = QueueNow(8, pending=(Waiting("a", 8), Waiting("b", 8)))

    _, b = estimate_starts(history, queue, now=NOW, settings=EtaSettings(recent_runs=3))

    assert b.start == NOW + minutes(10)
    assert b.basis.recorded_runs == 3


def test_admissions_per_hour_counts_the_window_and_falls_back_to_everything() -> None:
    day = 24 * 3600.0
    old = (NOW - timedelta(days=3), NOW - timedelta(days=2))
    recent = (NOW - minutes(90), NOW - minutes(60), NOW - minutes(30))

    assert admissions_per_hour(old + recent, now=NOW, window=day) == 2.0
    assert admissions_per_hour(old, now=NOW, window=day) == 1.0 / 24
    assert admissions_per_hour(recent[-1:], now=NOW, window=day) is None


def test_the_naive_estimate_is_position_times_the_mean_admission_interval() -> None:
    assert naive_start(3, rate_per_hour=2.0, now=NOW) == NOW + minutes(90)
    assert naive_start(3, rate_per_hour=None, now=NOW) is None


def test_a_long_running_workload_counts_as_a_long_run_not_yet_recorded() -> None:
    # One recorded run of 10 min, and r running for 50 min already (longer than any run).
    # a's run is drawn from the 10-minute one or, half the time, from r's 50 minutes so far
    # (taken to double): b, waiting for a or r, starts at 10 min or at 50 when r ends.
    history = QueueHistory(run_seconds=(600.0,))
    queue = QueueNow(
        16,
        running=(Running(NOW - minutes(50), 8),),
        pending=(Waiting("a", 8), Waiting("b", 8)),
    )

    a, b = estimate_starts(history, queue, now=NOW)

    assert a.start == NOW
    assert (b.earliest, b.latest) == (NOW + minutes(10), NOW + minutes(50))
