"""How many replicas a Model should have, from its active requests: a pure decision.

Upstream's algorithm (`kubeai-upstream-behaviour.md` §7.2), with time passed in:

* every tick, the Model's active requests (summed over the gateway's replicas) go into a
  window of ``ceil(window / interval)`` samples (the oldest drops out); the window starts
  full of the last saved average (zeros for a new Model), so a restart under load keeps its
  replicas;
* desired = ``ceil(average / targetRequests)``, clamped into ``[minReplicas, maxReplicas]``;
* more than now: scale up at once; fewer: only once fewer has been wanted for
  ``scaleDownDelaySeconds`` (upstream counts ticks; here it is the time since the first tick
  that wanted fewer, so the delay does not depend on the interval); the same or more resets
  that time;
* ``autoscalingDisabled``: nothing is decided, the user owns ``spec.replicas``.

:func:`replicas_for_a_request` is scale from zero: a request for an autoscaled Model at zero
replicas asks for one.

A :class:`ScalingState` is kept across restarts and leader changes as a small document
(:meth:`ScalingState.to_document`); restored with another window size it starts again filled
with its saved average, as upstream does after a restart.

The load held back by ``maxReplicas`` is restated (decision 0172) when it crosses the cap,
and again while it stays above when it rises above the demand last told or falls to half of
it or below (decision 0175): the Model's condition follows the load without a write for every
small move. While it stays above, it is also told again every
:data:`RETELL_HELD_BACK_SECONDS` (decision 0238): the planner forgets a decision an hour
older than the newest of any Model, and would then say the load is within the cap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Final

LONGEST_SCALE_DOWN_DELAY_SECONDS: Final = 100 * 365 * 24 * 3600
"""A century: ``scaleDownDelaySeconds`` has no maximum in the CRD, and a value past what a
``timedelta`` holds (about 8.6e13 s) raised at every tick that did not scale up, stopping
the autoscaler and with it the gateway of every Model. Any longer delay means "never"."""


RETELL_HELD_BACK_SECONDS: Final = 30 * 60
"""How often a load held back by ``maxReplicas`` is told again while nothing else is told:
half the planner's retention of a decision (``SCALE_REQUEST_RETENTION``, an hour after the
newest decision of any Model), so the decision it tells from is never forgotten while the
load holds."""


@dataclass(frozen=True, slots=True)
class ScalingSpec:
    """The Model's fields that scaling reads (:data:`LONGEST_SCALE_DOWN_DELAY_SECONDS` bounds the
    delay)."""

    replicas: int | None
    min_replicas: int = 0
    max_replicas: int | None = None
    autoscaling_disabled: bool = False
    target_requests: int = 100
    scale_down_delay_seconds: int = 30


@dataclass(frozen=True, slots=True)
class ScalingState:
    """What one Model's scaling remembers between ticks (and across restarts)."""

    samples: tuple[float, ...]
    fewer_wanted_since: datetime | None = None
    held_back: bool = False
    """The load last asked for more replicas than ``maxReplicas`` (decision 0172): a change
    of this is restated to the planner, which tells it on the Model."""
    told_demand: int | None = None
    """The demand the last restatement while held back told (decision 0175); None when not
    held back, or when the state was saved before this was kept (the demand told unknown)."""
    told_at: datetime | None = None
    """When that restatement was made (decision 0238); None when not held back, or when the
    state was saved before this was kept (then it is told again at the next held tick)."""

    @classmethod
    def starting(cls, *, size: int, average: float = 0.0) -> ScalingState:
        return cls(samples=(average,) * size)

    @property
    def average(self) -> float:
        return sum(self.samples) / len(self.samples) if self.samples else 0.0

    def resized(self, size: int) -> ScalingState:
        """This state for a window of ``size`` samples: as it is when the size is the same,
        else filled with its average (the interval or window changed)."""
        if len(self.samples) == size:
            return self
        return ScalingState(
            samples=(self.average,) * size,
            fewer_wanted_since=self.fewer_wanted_since,
            held_back=self.held_back,
            told_demand=self.told_demand,
            told_at=self.told_at,
        )

    def to_document(self) -> dict[str, Any]:
        return {
            "samples": list(self.samples),
            "fewerWantedSince": (
                None if self.fewer_wanted_since is None else self.fewer_wanted_since.isoformat()
            ),
            **({"heldBack": True} if self.held_back else {}),
            **({"toldDemand": self.told_demand} if self.told_demand is not None else {}),
            **({"toldAt": self.told_at.isoformat()} if self.told_at is not None else {}),
        }

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> ScalingState:
        """The state saved by :meth:`to_document`; ValueError when it is not one."""
        samples = document.get("samples")
        since = document.get("fewerWantedSince")
        if not isinstance(samples, list) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in samples
        ):
            raise ValueError("samples must be a list of non-negative numbers")
        if since is not None and not isinstance(since, str):
            raise ValueError("fewerWantedSince must be a time or null")
        told = document.get("toldDemand")
        if told is not None and (not isinstance(told, int) or isinstance(told, bool)):
            raise ValueError("toldDemand must be a whole number or absent")
        told_at = document.get("toldAt")
        if told_at is not None and not isinstance(told_at, str):
            raise ValueError("toldAt must be a time or absent")
        return cls(
            samples=tuple(float(v) for v in samples),
            fewer_wanted_since=None if since is None else datetime.fromisoformat(since),
            held_back=document.get("heldBack") is True,
            told_demand=told,
            told_at=None if told_at is None else datetime.fromisoformat(told_at),
        )


@dataclass(frozen=True, slots=True)
class ScalingDecision:
    replicas: int | None
    """The replicas to set through the scale subresource; None: leave them."""
    state: ScalingState
    reason: str


def window_size(*, window_seconds: float, interval_seconds: float) -> int:
    return max(1, math.ceil(window_seconds / interval_seconds))


def desired_replicas(spec: ScalingSpec, average: float) -> int:
    wanted = math.ceil(average / spec.target_requests)
    wanted = max(wanted, spec.min_replicas)
    if spec.max_replicas is not None:
        wanted = min(wanted, spec.max_replicas)
    return wanted


def decide_scale(
    spec: ScalingSpec, state: ScalingState, *, active_requests: float, now: datetime
) -> ScalingDecision:
    """The replicas the load wants, up at once, down after the delay; and, when the load
    starts or stops asking for more than ``maxReplicas`` while nothing is to change, the
    current replicas restated (``replicas`` equal to them) so the planner can tell the
    Model (decision 0172): once per change, not every tick. While it stays above, the
    demand is restated when it rises above the one told or falls to half of it or below
    (decision 0175), and every :data:`RETELL_HELD_BACK_SECONDS` (decision 0238)."""
    if spec.autoscaling_disabled:
        return ScalingDecision(replicas=None, state=state, reason="autoscaling is disabled")
    samples = (*state.samples[1:], active_requests) if state.samples else (active_requests,)
    sampled = ScalingState(samples=samples, fewer_wanted_since=state.fewer_wanted_since)
    average = sampled.average
    current = spec.replicas or 0
    wanted = desired_replicas(spec, average)
    asked = math.ceil(average / spec.target_requests)
    held = spec.max_replicas is not None and asked > spec.max_replicas
    summary = (
        f"average {average:g} active requests over {len(samples)} samples, "
        f"target {spec.target_requests} per replica"
    )
    # ``held_back`` and ``told_demand`` change only with a restatement: a decision that
    # changes the replicas may be one already published (the Model's new replicas not yet
    # observed) and then tells nothing.
    remembered = ScalingState(
        samples=samples,
        held_back=state.held_back,
        told_demand=state.told_demand,
        told_at=state.told_at,
    )
    if wanted > current:
        return ScalingDecision(
            replicas=wanted,
            state=remembered,
            reason=f"scale up from {current} to {wanted}: {summary}",
        )
    since = (state.fewer_wanted_since or now) if wanted < current else None
    delay = timedelta(seconds=min(spec.scale_down_delay_seconds, LONGEST_SCALE_DOWN_DELAY_SECONDS))
    if since is not None and now - since >= delay:
        return ScalingDecision(
            replicas=wanted,
            state=remembered,
            reason=f"scale down from {current} to {wanted}: {summary}",
        )
    if _to_restate(state, held=held, asked=asked, now=now):
        restated = ScalingState(
            samples=samples,
            fewer_wanted_since=since,
            held_back=held,
            told_demand=asked if held else None,
            told_at=now if held else None,
        )
        return ScalingDecision(
            replicas=current, state=restated, reason=_restated(spec, state, asked, held, summary)
        )
    kept = replace(remembered, fewer_wanted_since=since)
    if since is None:
        return ScalingDecision(replicas=None, state=kept, reason=f"steady: {summary}")
    return ScalingDecision(
        replicas=None,
        state=kept,
        reason=(
            f"{wanted} wanted, {current} kept until fewer has been wanted for "
            f"{spec.scale_down_delay_seconds}s: {summary}"
        ),
    )


def _to_restate(state: ScalingState, *, held: bool, asked: int, now: datetime) -> bool:
    """Whether the load held back by ``maxReplicas`` is to be told (again): it crossed the
    cap either way (0172), or, still above it, the demand ``asked`` rose above the one told
    or fell to half of it or below (0175; a smaller fall is not told, so a load wavering
    around one number writes nothing), or it was told :data:`RETELL_HELD_BACK_SECONDS` ago
    (0238). A demand, or its time, told before it was kept is told again."""
    if held != state.held_back:
        return True
    if not held:
        return False
    told, told_at = state.told_demand, state.told_at
    if told is None or told_at is None or asked > told or 2 * asked <= told:
        return True
    return now - told_at >= timedelta(seconds=RETELL_HELD_BACK_SECONDS)


def _restated(spec: ScalingSpec, state: ScalingState, asked: int, held: bool, summary: str) -> str:
    cap = f"spec.maxReplicas {spec.max_replicas}"
    if not held:
        return f"within {cap} again, {asked} wanted: {summary}"
    if not state.held_back:
        return f"held at {cap}, {asked} wanted: {summary}"
    if state.told_demand is None:
        return f"still held at {cap}, {asked} wanted: {summary}"
    return f"still held at {cap}, {asked} wanted ({state.told_demand} told): {summary}"


def replicas_for_a_request(spec: ScalingSpec) -> int | None:
    """Scale from zero: 1 for an autoscaled Model at zero replicas, else None."""
    if spec.autoscaling_disabled or (spec.replicas or 0) > 0:
        return None
    return 1
