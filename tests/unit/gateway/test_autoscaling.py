"""The autoscaling decision with an injected clock: up at once, down after the delay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kaiwo_gateway.domain.autoscaling import (
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
