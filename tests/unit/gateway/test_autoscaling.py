"""The autoscaling decision with an injected clock: up at once, down after the delay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from kaiwo_gateway.domain.autoscaling import (
    ScalingDecision,
    ScalingSpec,
    ScalingState,
    decide_scale,
    replicas_for_a_request,
    window_size,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TICK = timedelta(seconds=10)


def test_the_window_holds_window_over_interval_samples() -> None:
    assert window_size(window_seconds=600, interval_seconds=10) == 60
    assert window_size(window_seconds=5, interval_seconds=2) == 3


def test_load_scales_up_at_once_and_down_only_after_the_delay() -> None:
    spec = ScalingSpec(replicas=1, target_requests=10, scale_down_delay_seconds=30, max_replicas=5)
    state = ScalingState.starting(size=2)

    # 60 active requests with a window of two samples: average 30 -> 3 replicas at once.
    up = decide_scale(spec, state, active_requests=60, now=T0)
    assert up.replicas == 3
    assert up.state.samples == (0.0, 60)

    spec = ScalingSpec(replicas=3, target_requests=10, scale_down_delay_seconds=30, max_replicas=5)
    steady = decide_scale(spec, up.state, active_requests=0, now=T0 + TICK)  # average 30 -> 3
    assert steady.replicas is None
    # Idle: average 0 -> fewer wanted from T0+20s; kept until 30 s have passed.
    now = T0 + 2 * TICK
    decision = decide_scale(spec, steady.state, active_requests=0, now=now)
    assert (decision.replicas, decision.state.fewer_wanted_since) == (None, now)
    for step in (3, 4):
        decision = decide_scale(spec, decision.state, active_requests=0, now=T0 + step * TICK)
        assert decision.replicas is None
    down = decide_scale(spec, decision.state, active_requests=0, now=T0 + 5 * TICK)
    assert down.replicas == 0
    assert down.reason.startswith("scale down from 3 to 0")


def test_a_burst_while_waiting_to_scale_down_resets_the_delay() -> None:
    spec = ScalingSpec(replicas=2, target_requests=10, scale_down_delay_seconds=30)
    waiting = decide_scale(spec, ScalingState.starting(size=1), active_requests=5, now=T0)
    assert waiting.state.fewer_wanted_since == T0

    busy = decide_scale(spec, waiting.state, active_requests=20, now=T0 + TICK)
    assert (busy.replicas, busy.state.fewer_wanted_since) == (None, None)
    again = decide_scale(spec, busy.state, active_requests=5, now=T0 + 4 * TICK)
    assert (again.replicas, again.state.fewer_wanted_since) == (None, T0 + 4 * TICK)


def test_a_delay_longer_than_a_timedelta_holds_means_never_and_raises_nothing() -> None:
    # scaleDownDelaySeconds has no maximum in the CRD: 1e14 s overflowed a timedelta at every
    # tick that did not scale up, and the autoscaler (the gateway of every Model) stopped.
    spec = ScalingSpec(replicas=2, target_requests=10, scale_down_delay_seconds=10**14)
    state = ScalingState.starting(size=1)
    for step in range(3):
        decision = decide_scale(spec, state, active_requests=0, now=T0 + step * TICK)
        state = decision.state
        assert decision.replicas is None
    # A century at most: still waiting after 99 years, down after 101.
    later = decide_scale(spec, state, active_requests=0, now=T0 + timedelta(days=99 * 365))
    assert later.replicas is None
    assert (
        decide_scale(spec, state, active_requests=0, now=T0 + timedelta(days=101 * 365)).replicas
        == 0
    )


def test_bounds_hold_and_a_disabled_model_is_left_alone() -> None:
    bounded = ScalingSpec(replicas=2, min_replicas=2, max_replicas=4, target_requests=1)
    assert (
        decide_scale(bounded, ScalingState.starting(size=1), active_requests=50, now=T0).replicas
        == 4
    )
    assert (
        decide_scale(bounded, ScalingState.starting(size=1), active_requests=0, now=T0).replicas
        is None
    )

    disabled = ScalingSpec(replicas=0, autoscaling_disabled=True, target_requests=1)
    decision = decide_scale(disabled, ScalingState.starting(size=1), active_requests=50, now=T0)
    assert decision.replicas is None
    assert decision.reason == "autoscaling is disabled"


def test_a_restart_under_load_keeps_replicas_from_the_saved_average() -> None:
    spec = ScalingSpec(replicas=3, target_requests=10, scale_down_delay_seconds=0)
    resumed = ScalingState.starting(size=60, average=30.0)

    assert decide_scale(spec, resumed, active_requests=30, now=T0).replicas is None


def test_a_request_scales_an_autoscaled_model_from_zero_only() -> None:
    assert replicas_for_a_request(ScalingSpec(replicas=None)) == 1
    assert replicas_for_a_request(ScalingSpec(replicas=0)) == 1
    assert replicas_for_a_request(ScalingSpec(replicas=2)) is None
    assert replicas_for_a_request(ScalingSpec(replicas=0, autoscaling_disabled=True)) is None


def test_load_crossing_max_replicas_is_restated_once_each_way() -> None:
    """At ``maxReplicas`` nothing is to change, but the planner must hear that the load asks
    for more (and later that it no longer does): the replicas as they are, once per change
    (decision 0172)."""
    at_max = ScalingSpec(replicas=2, max_replicas=2, target_requests=1, scale_down_delay_seconds=30)
    # The decision that took it to 2 saw 2 wanted: not held back.
    start = ScalingState(samples=(2.0,))

    held = decide_scale(at_max, start, active_requests=5, now=T0)
    assert held == ScalingDecision(
        replicas=2,
        state=ScalingState(samples=(5.0,), held_back=True, told_demand=5, told_at=T0),
        reason="held at spec.maxReplicas 2, 5 wanted: average 5 active requests over 1 "
        "samples, target 1 per replica",
    )
    # The load stays above, a little lower (not half of 5, decision 0175): nothing more.
    still = decide_scale(at_max, held.state, active_requests=3, now=T0 + TICK)
    assert still.replicas is None
    assert still.state == ScalingState(samples=(3.0,), held_back=True, told_demand=5, told_at=T0)
    assert still.reason.startswith("steady: ")

    # Down to exactly 2: within again, said once.
    within = decide_scale(at_max, still.state, active_requests=2, now=T0 + 2 * TICK)
    assert within == ScalingDecision(
        replicas=2,
        state=ScalingState(samples=(2.0,)),
        reason="within spec.maxReplicas 2 again, 2 wanted: average 2 active requests over 1 "
        "samples, target 1 per replica",
    )
    assert decide_scale(at_max, within.state, active_requests=2, now=T0 + 3 * TICK).replicas is None


def test_the_demand_rising_while_held_back_is_restated_and_a_small_fall_is_not() -> None:
    """Held at ``maxReplicas: 2`` with 5 told: the load rising to 7 is told (the message
    would name 5 for good otherwise); back to 4 is not (above half of 7); down to 3 is
    (half of 7 or below); each tells its demand once (decision 0175)."""
    at_max = ScalingSpec(replicas=2, max_replicas=2, target_requests=1, scale_down_delay_seconds=30)
    told_five = ScalingState(samples=(5.0,), held_back=True, told_demand=5, told_at=T0 - TICK)

    rising = decide_scale(at_max, told_five, active_requests=7, now=T0)
    assert rising == ScalingDecision(
        replicas=2,
        state=ScalingState(samples=(7.0,), held_back=True, told_demand=7, told_at=T0),
        reason="still held at spec.maxReplicas 2, 7 wanted (5 told): average 7 active "
        "requests over 1 samples, target 1 per replica",
    )
    assert decide_scale(at_max, rising.state, active_requests=7, now=T0 + TICK).replicas is None

    wavering = decide_scale(at_max, rising.state, active_requests=4, now=T0 + 2 * TICK)
    assert wavering.replicas is None
    assert wavering.state == ScalingState(samples=(4.0,), held_back=True, told_demand=7, told_at=T0)

    halved = decide_scale(at_max, wavering.state, active_requests=3, now=T0 + 3 * TICK)
    assert halved == ScalingDecision(
        replicas=2,
        state=ScalingState(samples=(3.0,), held_back=True, told_demand=3, told_at=T0 + 3 * TICK),
        reason="still held at spec.maxReplicas 2, 3 wanted (7 told): average 3 active "
        "requests over 1 samples, target 1 per replica",
    )


def test_a_held_back_state_saved_without_its_demand_tells_the_demand_once() -> None:
    """A state saved before the demand was kept (0172) says only "held back": the demand
    told is unknown, so the next tick tells it, and then keeps it."""
    at_max = ScalingSpec(replicas=2, max_replicas=2, target_requests=1)
    saved = ScalingState.from_document(
        {"samples": [5.0], "fewerWantedSince": None, "heldBack": True}
    )
    assert saved == ScalingState(samples=(5.0,), held_back=True)

    told = decide_scale(at_max, saved, active_requests=5, now=T0)
    assert told == ScalingDecision(
        replicas=2,
        state=ScalingState(samples=(5.0,), held_back=True, told_demand=5, told_at=T0),
        reason="still held at spec.maxReplicas 2, 5 wanted: average 5 active requests over 1 "
        "samples, target 1 per replica",
    )
    assert decide_scale(at_max, told.state, active_requests=5, now=T0 + TICK).replicas is None


def test_the_demand_told_is_saved_and_restored() -> None:
    saved = ScalingState(samples=(5.0,), held_back=True, told_demand=5)
    assert saved.to_document() == {
        "samples": [5.0],
        "fewerWantedSince": None,
        "heldBack": True,
        "toldDemand": 5,
    }
    assert ScalingState.from_document(saved.to_document()) == saved
    assert saved.resized(2) == ScalingState(samples=(5.0, 5.0), held_back=True, told_demand=5)
    for damaged in ("5", 5.5, True):
        with pytest.raises(ValueError, match="toldDemand"):
            ScalingState.from_document({"samples": [5.0], "heldBack": True, "toldDemand": damaged})


def test_a_load_held_back_for_long_is_told_again_every_half_hour() -> None:
    """Held at ``maxReplicas: 2`` with 5 told, the load steady at 5: told again 30 minutes
    after it was told, and not before (decision 0238). The planner forgets a decision an
    hour older than the newest of any Model, and its condition would then say the load is
    within the cap; before, nothing was told again while the demand stayed."""
    at_max = ScalingSpec(replicas=2, max_replicas=2, target_requests=1)
    state = ScalingState(samples=(5.0,), held_back=True, told_demand=5, told_at=T0)

    told_again = []
    for tick in range(1, 2 * 180 + 1):  # an hour of ticks of 10 s
        now = T0 + tick * TICK
        decision = decide_scale(at_max, state, active_requests=5, now=now)
        state = decision.state
        if decision.replicas is not None:
            told_again.append((now - T0, decision.replicas, decision.reason))

    assert told_again == [
        (
            timedelta(minutes=30),
            2,
            "still held at spec.maxReplicas 2, 5 wanted (5 told): average 5 active requests "
            "over 1 samples, target 1 per replica",
        ),
        (
            timedelta(minutes=60),
            2,
            "still held at spec.maxReplicas 2, 5 wanted (5 told): average 5 active requests "
            "over 1 samples, target 1 per replica",
        ),
    ]
    assert state == ScalingState(
        samples=(5.0,), held_back=True, told_demand=5, told_at=T0 + timedelta(minutes=60)
    )
    assert state.to_document() == {
        "samples": [5.0],
        "fewerWantedSince": None,
        "heldBack": True,
        "toldDemand": 5,
        "toldAt": "2026-03-01T13:00:00+00:00",
    }
    assert ScalingState.from_document(state.to_document()) == state
    with pytest.raises(ValueError, match="toldAt"):
        ScalingState.from_document({"samples": [5.0], "toldAt": 5})


def test_load_falling_below_max_replicas_is_restated_while_the_delay_runs() -> None:
    at_max = ScalingSpec(replicas=2, max_replicas=2, target_requests=1, scale_down_delay_seconds=30)
    held = ScalingState(samples=(5.0,), held_back=True)

    now = T0 + TICK
    falling = decide_scale(at_max, held, active_requests=1, now=now)
    assert falling == ScalingDecision(
        replicas=2,
        state=ScalingState(samples=(1.0,), fewer_wanted_since=now),
        reason="within spec.maxReplicas 2 again, 1 wanted: average 1 active requests over 1 "
        "samples, target 1 per replica",
    )
    # The delay keeps running; the scale down comes after it as before.
    later = decide_scale(at_max, falling.state, active_requests=1, now=now + TICK)
    assert later.replicas is None
    down = decide_scale(at_max, later.state, active_requests=1, now=now + 3 * TICK)
    assert down.replicas == 1


def test_without_max_replicas_nothing_is_held_back_and_the_state_saves_it() -> None:
    unbounded = ScalingSpec(replicas=2, target_requests=1)
    more = decide_scale(unbounded, ScalingState(samples=(2.0,)), active_requests=9, now=T0)
    assert (more.replicas, more.state.held_back) == (9, False)

    saved = ScalingState(samples=(5.0,), held_back=True)
    assert saved.to_document() == {"samples": [5.0], "fewerWantedSince": None, "heldBack": True}
    assert ScalingState.from_document(saved.to_document()) == saved
    # A state saved before: not held back, and its document is as it was.
    assert ScalingState(samples=(1.0,)).to_document() == {
        "samples": [1.0],
        "fewerWantedSince": None,
    }
    assert (
        ScalingState.from_document({"samples": [1.0], "fewerWantedSince": None}).held_back is False
    )
    assert saved.resized(3) == ScalingState(samples=(5.0, 5.0, 5.0), held_back=True)


def test_a_scale_up_repeated_before_its_replicas_are_seen_leaves_the_restatement_to_come() -> None:
    """The decision 1 -> 2 was published from an average of 1.25 (2 wanted). Until the Model
    is seen at 2 the ticks decide 1 -> 2 again (not published again), now from 5 wanted:
    that must not count as told. At 2, the load above the cap is restated."""
    at_one = ScalingSpec(replicas=1, max_replicas=2, target_requests=1)
    again = decide_scale(at_one, ScalingState(samples=(1.25,)), active_requests=5, now=T0)
    assert (again.replicas, again.state.held_back) == (2, False)

    at_two = ScalingSpec(replicas=2, max_replicas=2, target_requests=1)
    seen = decide_scale(at_two, again.state, active_requests=5, now=T0 + TICK)
    assert (seen.replicas, seen.state.held_back) == (2, True)
    assert seen.reason.startswith("held at spec.maxReplicas 2, 5 wanted")
