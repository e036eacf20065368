"""One autoscaler tick over every Model, and scale from zero: pure, with ``now`` passed in.

Inputs: the Models the gateway serves (their scaling fields, current replicas and
generation), the latest load report of each gateway replica with the time it was received,
and each Model's saved :class:`~kaiwo_gateway.domain.autoscaling.ScalingState`.

* **Reports.** A replica reports every ``interval_seconds``; its latest report counts until
  :data:`STALE_AFTER_INTERVALS` of its intervals have passed since it was received (a
  replica that stopped, or lost its connection, counts no more). With no fresh report at all
  the tick is skipped (no sample, no decision), as upstream skips a tick whose scrape failed:
  a broken feed must not read as "no load" and scale everything down.
* **Tick.** Per autoscaled Model, the active requests summed over the fresh reports become
  one sample of its window (:func:`~kaiwo_gateway.domain.autoscaling.decide_scale`). A Model
  missing from a report has no requests at that replica.
* **Scale from zero.** A fresh report with requests *waiting* for an endpoint of an
  autoscaled Model at zero replicas asks for one replica at once, without a sample.
* **The messenger's backlog** (decision 0057). Requests stored in the request stream that
  no replica has in hand count too. The stream knows them per tenant namespace only (the
  Model is named in the body), so each namespace's backlog beyond the messenger requests in
  hand is split among its Models in proportion to those in hand (the head of the stream, read
  in order): exact for a namespace whose backlog is for one Model. A namespace with a backlog
  but no request in hand at any replica has nothing to split it by and adds nothing.
* A Model with ``autoscalingDisabled`` gets no decision and keeps no state.
* **A decision that failed to publish** leaves its Model's state as it was before the tick
  (:func:`states_after_publishing`, decision 0175): the state remembers what was told (the
  load held back) and when fewer replicas were first wanted, so advancing it would make the
  next tick take the decision as made (a restatement never sent again, a scale down waiting
  its whole delay anew). Kept as before, the next tick decides it again.

Decisions carry the Model's generation: the planner acts on one only while the Model is
still that generation (decision 0027).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final, Literal

from kaiwo_gateway.domain.autoscaling import (
    ScalingSpec,
    ScalingState,
    decide_scale,
    replicas_for_a_request,
    window_size,
)

STALE_AFTER_INTERVALS: Final = 3
"""A replica's report counts for this many of its reporting intervals after it arrived."""

Cause = Literal["load", "request"]


@dataclass(frozen=True, slots=True)
class LoadReport:
    """One gateway replica's latest report, as received."""

    gateway: str
    received_at: datetime
    interval_seconds: float
    active: Mapping[str, int] = field(default_factory=dict)
    """Model uid -> requests in flight (waiting ones included)."""
    waiting: Mapping[str, int] = field(default_factory=dict)
    """Model uid -> requests waiting for a ready endpoint."""
    messages: Mapping[str, int] = field(default_factory=dict)
    """Model uid -> messenger requests in hand (counted in ``active`` too)."""

    def fresh(self, now: datetime) -> bool:
        stale_after = timedelta(seconds=self.interval_seconds * STALE_AFTER_INTERVALS)
        return now - self.received_at <= stale_after


@dataclass(frozen=True, slots=True)
class AutoscaledModel:
    """What the autoscaler knows of one Model (from the watcher's observations)."""

    uid: str
    namespace: str
    name: str
    generation: int
    spec: ScalingSpec


@dataclass(frozen=True, slots=True)
class Decision:
    """Set ``model`` to ``replicas`` (it has ``from_replicas``), and why."""

    model: AutoscaledModel
    from_replicas: int
    replicas: int
    cause: Cause
    active_requests: float
    average: float
    samples: int
    reason: str

    @property
    def key(self) -> tuple[str, int, int, int]:
        """What makes two decisions the same: Model, generation, from and to."""
        return (self.model.uid, self.model.generation, self.from_replicas, self.replicas)


@dataclass(frozen=True, slots=True)
class Tick:
    decisions: tuple[Decision, ...]
    states: Mapping[str, ScalingState]
    """The state of every autoscaled Model after the tick (others have none)."""
    sampled: bool
    """False: no fresh report, the tick was skipped."""


def fresh_reports(reports: Iterable[LoadReport], *, now: datetime) -> tuple[LoadReport, ...]:
    return tuple(report for report in reports if report.fresh(now))


def summed(
    reports: Iterable[LoadReport], *, waiting: bool = False, messages: bool = False
) -> dict[str, int]:
    """Requests per Model uid over ``reports`` (waiting ones only, with ``waiting``; messenger
    requests only, with ``messages``)."""
    total: dict[str, int] = {}
    for report in reports:
        counts = report.waiting if waiting else report.messages if messages else report.active
        for uid, count in counts.items():
            total[uid] = total.get(uid, 0) + count
    return total


def backlog_shares(
    models: Iterable[AutoscaledModel],
    in_hand: Mapping[str, int],
    stored: Mapping[str, int],
) -> dict[str, float]:
    """Model uid -> the requests of its namespace's backlog that no replica has in hand,
    attributed to it (see the module docstring). ``in_hand``: messenger requests in hand per
    Model uid, summed over the fresh reports; ``stored``: requests stored in the request
    stream per namespace (those in hand included: they are acknowledged once answered)."""
    by_namespace: dict[str, list[tuple[str, int]]] = {}
    for model in models:
        count = in_hand.get(model.uid, 0)
        if count > 0:
            by_namespace.setdefault(model.namespace, []).append((model.uid, count))
    shares: dict[str, float] = {}
    for namespace, held in by_namespace.items():
        held_total = sum(count for _, count in held)
        left = stored.get(namespace, 0) - held_total
        if left <= 0:
            continue
        for uid, count in held:
            shares[uid] = left * count / held_total
    return shares


def autoscale(
    models: Iterable[AutoscaledModel],
    states: Mapping[str, ScalingState],
    reports: Iterable[LoadReport],
    *,
    now: datetime,
    interval_seconds: float,
    window_seconds: float,
    backlog: Mapping[str, int] | None = None,
) -> Tick:
    """One tick (see the module docstring). ``backlog``: the messenger's stored requests per
    namespace, None when the messenger is off or the stream could not be read."""
    models = tuple(models)
    autoscaled = [model for model in models if not model.spec.autoscaling_disabled]
    fresh = fresh_reports(reports, now=now)
    if not fresh:
        kept = {m.uid: states[m.uid] for m in autoscaled if m.uid in states}
        return Tick(decisions=(), states=kept, sampled=False)
    load: dict[str, float] = {uid: float(count) for uid, count in summed(fresh).items()}
    if backlog:
        shares = backlog_shares(models, summed(fresh, messages=True), backlog)
        for uid, share in shares.items():
            load[uid] = load.get(uid, 0.0) + share
    size = window_size(window_seconds=window_seconds, interval_seconds=interval_seconds)
    decisions: list[Decision] = []
    after: dict[str, ScalingState] = {}
    for model in autoscaled:
        before = states.get(model.uid)
        state = before.resized(size) if before is not None else ScalingState.starting(size=size)
        active = load.get(model.uid, 0.0)
        decided = decide_scale(model.spec, state, active_requests=active, now=now)
        after[model.uid] = decided.state
        if decided.replicas is not None:
            decisions.append(
                Decision(
                    model=model,
                    from_replicas=model.spec.replicas or 0,
                    replicas=decided.replicas,
                    cause="load",
                    active_requests=active,
                    average=decided.state.average,
                    samples=size,
                    reason=decided.reason,
                )
            )
    return Tick(decisions=tuple(decisions), states=after, sampled=True)


def scale_from_zero(
    models: Iterable[AutoscaledModel],
    reports: Iterable[LoadReport],
    states: Mapping[str, ScalingState],
    *,
    now: datetime,
) -> tuple[Decision, ...]:
    """One replica for each autoscaled Model at zero that a fresh report says requests wait
    for (see the module docstring)."""
    fresh = fresh_reports(reports, now=now)
    waiting = summed(fresh, waiting=True)
    active = summed(fresh)
    found = []
    for model in models:
        count = waiting.get(model.uid, 0)
        if count <= 0 or replicas_for_a_request(model.spec) is None:
            continue
        state = states.get(model.uid)
        noun = "request waits" if count == 1 else "requests wait"
        found.append(
            Decision(
                model=model,
                from_replicas=model.spec.replicas or 0,
                replicas=1,
                cause="request",
                active_requests=float(active.get(model.uid, count)),
                average=state.average if state is not None else 0.0,
                samples=len(state.samples) if state is not None else 1,
                reason=f"scale from zero: {count} {noun} for a ready endpoint",
            )
        )
    return tuple(found)


def states_after_publishing(
    tick: Tick, before: Mapping[str, ScalingState], unpublished: Collection[str]
) -> dict[str, ScalingState]:
    """The states to keep after ``tick``'s decisions were published: each Model's new state,
    but for the Models (uids) in ``unpublished``, whose decision failed to publish, the state
    from ``before`` the tick (none when it had none), so the next tick makes the decision
    again (see the module docstring). The tick's sample of such a Model is dropped with it:
    one sample less in a window, where keeping it would have to split what the state
    remembers of the load from what it remembers of the decisions."""
    kept = {uid: state for uid, state in tick.states.items() if uid not in unpublished}
    for uid in unpublished:
        if uid in tick.states and uid in before:
            kept[uid] = before[uid]
    return kept
