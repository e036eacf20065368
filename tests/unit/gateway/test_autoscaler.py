"""The autoscaler's tick over every Model, with an injected clock: reports summed across
gateway replicas, stale ones dropped, the window's average, bounds, the scale-down delay,
disabled Models, scale from zero, and the state saved and restored."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from kaiwo_gateway.domain.autoscaler import (
    AutoscaledModel,
    LoadReport,
    Tick,
    autoscale,
    scale_from_zero,
)
from kaiwo_gateway.domain.autoscaling import ScalingSpec, ScalingState
from kaiwo_gateway.domain.load import RequestCounts, model_ref

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
INTERVAL = 10.0
WINDOW = 30.0  # three samples


def llm(
    replicas: int | None,
    *,
    generation: int = 1,
    min_replicas: int = 0,
    max_replicas: int | None = None,
    disabled: bool = False,
    delay: int = 30,
) -> AutoscaledModel:
    spec = ScalingSpec(
        replicas=replicas,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        autoscaling_disabled=disabled,
        target_requests=10,
        scale_down_delay_seconds=delay,
    )
    return AutoscaledModel(uid="m-1", namespace="ai", name="llm", generation=generation, spec=spec)


def report(gateway: str, at: datetime, **active: int) -> LoadReport:
    return LoadReport(
        gateway=gateway, received_at=at, interval_seconds=INTERVAL, active=dict(active)
    )


def tick(
    model: AutoscaledModel,
    states: dict[str, ScalingState],
    reports: list[LoadReport],
    now: datetime,
) -> Tick:
    return autoscale(
        [model],
        states,
        reports,
        now=now,
        interval_seconds=INTERVAL,
        window_seconds=WINDOW,
    )


def test_requests_are_summed_across_gateway_replicas_into_the_window() -> None:
    # 25 + 35 = 60 active; a window of 3 samples starting empty: average 20 -> 2 replicas.
    reports = [report("gw-a", T0, **{"m-1": 25}), report("gw-b", T0, **{"m-1": 35})]
    done = tick(llm(1), {}, reports, T0)

    [decision] = done.decisions
    assert (decision.from_replicas, decision.replicas, decision.cause) == (1, 2, "load")
    assert (decision.active_requests, decision.average, decision.samples) == (60.0, 20.0, 3)
    assert decision.reason == (
        "scale up from 1 to 2: average 20 active requests over 3 samples, target 10 per replica"
    )
    assert done.states["m-1"].samples == (0.0, 0.0, 60.0)


def test_the_window_average_climbs_one_sample_per_tick() -> None:
    states: dict[str, ScalingState] = {}
    replicas = []
    model = llm(1, max_replicas=10)
    for step in range(3):
        now = T0 + step * INTERVAL * SECOND
        done = tick(model, states, [report("gw-a", now, **{"m-1": 90})], now)
        states = dict(done.states)
        replicas.append([d.replicas for d in done.decisions])
        if done.decisions:
            model = llm(done.decisions[0].replicas, max_replicas=10)
    # Averages 30, 60, 90 with target 10: 3, 6, 9 replicas.
    assert replicas == [[3], [6], [9]]


def test_a_stale_report_no_longer_counts_and_without_any_the_tick_is_skipped() -> None:
    old = report("gw-gone", T0, **{"m-1": 100})
    now = T0 + 31 * SECOND  # three intervals of 10 s and one second: stale
    done = tick(llm(1), {}, [old, report("gw-a", now, **{"m-1": 30})], now)
    # Only gw-a's 30: average 10 -> 1 replica, which the Model has.
    assert done.decisions == ()
    assert done.states["m-1"].samples == (0.0, 0.0, 30.0)

    just_in_time = tick(llm(1), {}, [old], T0 + 30 * SECOND)
    assert just_in_time.states["m-1"].samples == (0.0, 0.0, 100.0)

    saved = {"m-1": ScalingState(samples=(40.0, 40.0, 40.0))}
    skipped = tick(llm(4), saved, [old], now)
    assert (skipped.sampled, skipped.decisions, skipped.states) == (False, (), saved)


def test_down_only_after_the_delay_and_never_below_the_minimum() -> None:
    model = llm(4, min_replicas=1, delay=30)
    states = {"m-1": ScalingState(samples=(40.0, 0.0, 0.0))}
    quiet = [report("gw-a", T0)]
    first = tick(model, states, quiet, T0)  # average 0 -> min 1 wanted, kept until T0 + 30 s
    assert first.decisions == ()
    assert first.states["m-1"].fewer_wanted_since == T0

    later = T0 + 29 * SECOND
    waiting = tick(model, dict(first.states), [report("gw-a", later)], later)
    assert waiting.decisions == ()

    due = T0 + 30 * SECOND
    down = tick(model, dict(waiting.states), [report("gw-a", due)], due)
    [decision] = down.decisions
    assert (decision.from_replicas, decision.replicas) == (4, 1)
    assert decision.reason.startswith("scale down from 4 to 1")


def test_up_is_capped_at_the_maximum() -> None:
    done = tick(llm(1, max_replicas=3), {}, [report("gw-a", T0, **{"m-1": 3000})], T0)
    assert [d.replicas for d in done.decisions] == [3]


def test_a_disabled_model_gets_no_decision_and_no_state() -> None:
    model = llm(0, disabled=True)
    done = tick(
        model, {"m-1": ScalingState(samples=(5.0,))}, [report("gw-a", T0, **{"m-1": 50})], T0
    )
    assert (done.decisions, dict(done.states)) == ((), {})
    waiting = LoadReport(
        gateway="gw-a",
        received_at=T0,
        interval_seconds=INTERVAL,
        active={"m-1": 1},
        waiting={"m-1": 1},
    )
    assert scale_from_zero([model], [waiting], {}, now=T0) == ()


def test_a_waiting_request_scales_a_model_at_zero_to_one_at_once() -> None:
    waiting = LoadReport(
        gateway="gw-a",
        received_at=T0,
        interval_seconds=INTERVAL,
        active={"m-1": 2},
        waiting={"m-1": 2},
    )
    [decision] = scale_from_zero([llm(0, generation=7)], [waiting], {}, now=T0)
    assert (decision.from_replicas, decision.replicas, decision.cause) == (0, 1, "request")
    assert decision.key == ("m-1", 7, 0, 1)
    assert decision.reason == "scale from zero: 2 requests wait for a ready endpoint"

    # A Model with replicas already, or a report gone stale, asks for nothing.
    assert scale_from_zero([llm(2)], [waiting], {}, now=T0) == ()
    assert scale_from_zero([llm(0)], [waiting], {}, now=T0 + 31 * SECOND) == ()


def test_a_restart_resumes_from_the_saved_state_and_a_new_window_keeps_its_average() -> None:
    first = tick(llm(1), {}, [report("gw-a", T0, **{"m-1": 60})], T0)
    saved = {uid: json.dumps(state.to_document()) for uid, state in first.states.items()}

    restored = {uid: ScalingState.from_document(json.loads(text)) for uid, text in saved.items()}
    assert restored == dict(first.states)
    now = T0 + 10 * SECOND
    resumed = tick(llm(2), restored, [report("gw-a", now, **{"m-1": 60})], now)
    # (0 + 60 + 60) / 3 = 40 -> 4 replicas: the first sample was not forgotten.
    assert [d.replicas for d in resumed.decisions] == [4]

    assert ScalingState(samples=(10.0, 20.0)).resized(4).samples == (15.0, 15.0, 15.0, 15.0)
    since = ScalingState(samples=(1.0,), fewer_wanted_since=T0)
    assert ScalingState.from_document(since.to_document()) == since


@pytest.mark.parametrize(
    "document",
    [
        {"samples": "0"},
        {"samples": [-1.0]},
        {"samples": [True]},
        {"samples": [], "fewerWantedSince": 5},
    ],
)
def test_a_damaged_saved_state_is_refused(document: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"samples|fewerWantedSince"):
        ScalingState.from_document(document)


def test_request_counts_follow_requests_and_say_when_a_model_first_waits() -> None:
    counts = RequestCounts()
    llm_key, other = (
        model_ref(uid="m-1", namespace="ai", name="llm"),
        model_ref(uid="m-2", namespace="ai", name="chat"),
    )
    counts.started(llm_key)
    counts.started(llm_key)
    counts.started(other)
    assert counts.wait_started(llm_key) is True
    assert counts.wait_started(llm_key) is False
    counts.wait_ended(llm_key)
    counts.finished(other)

    [only] = counts.current()
    assert (only.model, only.active, only.waiting) == (llm_key, 2, 1)
    counts.wait_ended(llm_key)
    counts.finished(llm_key)
    counts.finished(llm_key)
    assert counts.current() == ()
    assert counts.wait_started(llm_key) is True


# ---------------------------------------------------------------- the messenger's backlog


def model_in(namespace: str, uid: str, *, target: int = 10) -> AutoscaledModel:
    spec = ScalingSpec(
        replicas=0,
        min_replicas=0,
        max_replicas=None,
        autoscaling_disabled=False,
        target_requests=target,
        scale_down_delay_seconds=30,
    )
    return AutoscaledModel(uid=uid, namespace=namespace, name=uid, generation=1, spec=spec)


def messenger_report(gateway: str, **in_hand: int) -> LoadReport:
    """A replica whose requests are all messenger requests (so active == messages)."""
    return LoadReport(
        gateway=gateway,
        received_at=T0,
        interval_seconds=INTERVAL,
        active=dict(in_hand),
        messages=dict(in_hand),
    )


def test_a_namespaces_backlog_beyond_the_requests_in_hand_counts_for_its_model() -> None:
    # 1,000 stored in team-a's requests, 4 + 6 of them in hand at two replicas: the other
    # 990 are attributed to the one Model they are for. Window of 3 starting empty:
    # average 1000 / 3 = 333.3 -> ceil(333.3 / 10) = 34 replicas.
    crowd = model_in("team-a", "crowd")
    reports = [messenger_report("gw-a", crowd=4), messenger_report("gw-b", crowd=6)]

    done = autoscale(
        [crowd],
        {},
        reports,
        now=T0,
        interval_seconds=INTERVAL,
        window_seconds=WINDOW,
        backlog={"team-a": 1000},
    )

    [decision] = done.decisions
    assert (decision.active_requests, decision.replicas) == (1000.0, 34)
    # Without the backlog the same reports count 10 in hand: ceil(10 / 3 / 10) = 1.
    [alone] = tick(crowd, {}, reports, T0).decisions
    assert (alone.active_requests, alone.replicas) == (10.0, 1)


def test_a_backlog_is_split_by_the_mix_in_hand_and_other_namespaces_are_left_alone() -> None:
    # team-a: 100 stored, 20 in hand (15 for a1, 5 for a2): 80 left, split 60 / 20.
    # team-b: 7 stored, 7 in hand: nothing left to add. team-c: 50 stored, nothing in hand:
    # nothing to split it by. HTTP requests (active but not messages) are not a sample.
    a1, a2 = model_in("team-a", "a1"), model_in("team-a", "a2")
    b1, c1 = model_in("team-b", "b1"), model_in("team-c", "c1")
    mixed = LoadReport(
        gateway="gw",
        received_at=T0,
        interval_seconds=INTERVAL,
        active={"a1": 15, "a2": 5 + 30, "b1": 7, "c1": 9},
        messages={"a1": 15, "a2": 5, "b1": 7},
    )

    done = autoscale(
        [a1, a2, b1, c1],
        {},
        [mixed],
        now=T0,
        interval_seconds=INTERVAL,
        window_seconds=WINDOW,
        backlog={"team-a": 100, "team-b": 7, "team-c": 50},
    )

    assert done.states["a1"].samples[-1] == 15 + 60
    assert done.states["a2"].samples[-1] == 35 + 20
    assert done.states["b1"].samples[-1] == 7
    assert done.states["c1"].samples[-1] == 9


def test_messenger_requests_are_counted_apart_in_the_replicas_counts() -> None:
    counts = RequestCounts()
    key = model_ref(uid="m-1", namespace="ai", name="llm")
    counts.started(key)
    counts.started(key, message=True)
    counts.started(key, message=True)
    counts.finished(key, message=True)

    [found] = counts.current()
    assert (found.active, found.messages) == (2, 1)
