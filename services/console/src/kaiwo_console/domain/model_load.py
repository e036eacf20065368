"""Each Model's requests in flight over time and the autoscaler's decisions, folded from the
gateway's events in the event store: pure.

Every gateway replica reports its requests in flight per Model (``ActiveRequestsV1``) at a
fixed interval; a Model left out of a report has none at that replica, and a replica whose
last report is older than ``stale_intervals`` intervals has stopped and counts no more. The
fold keeps, per Model, the total in flight after each report (the sum of every live
replica's latest), at most ``keep`` points, and the autoscaler's ``ScaleDecidedV1``
decisions (at most ``keep``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta

ModelKey = tuple[str, str]
"""(namespace, name)."""


@dataclass(frozen=True, slots=True)
class LoadPoint:
    time: datetime
    active: int
    waiting: int


@dataclass(frozen=True, slots=True)
class ScaleDecision:
    time: datetime
    from_replicas: int
    replicas: int
    cause: str
    average_active_requests: float
    reason: str


@dataclass(frozen=True, slots=True)
class _Report:
    time: datetime
    interval_seconds: float
    models: dict[ModelKey, tuple[int, int]]


@dataclass
class ModelLoads:
    keep: int = 360
    stale_intervals: float = 3.0
    reports: dict[str, _Report] = field(default_factory=dict)
    """The latest report of each gateway replica."""
    series: dict[ModelKey, deque[LoadPoint]] = field(default_factory=dict)
    decisions: dict[ModelKey, deque[ScaleDecision]] = field(default_factory=dict)

    def report(
        self,
        *,
        gateway: str,
        time: datetime,
        interval_seconds: float,
        models: dict[ModelKey, tuple[int, int]],
    ) -> None:
        """A replica's report: (namespace, name) -> (active, waiting) requests."""
        known = self.reports.get(gateway)
        if known is not None and known.time > time:
            return  # an older report read late changes nothing
        touched = set(models) | (set(known.models) if known is not None else set())
        self.reports[gateway] = _Report(time, interval_seconds, dict(models))
        for model in sorted(touched):
            active, waiting = self.in_flight(model, now=time)
            points = self.series.setdefault(model, deque(maxlen=self.keep))
            points.append(LoadPoint(time, active, waiting))

    def decided(self, model: ModelKey, decision: ScaleDecision) -> None:
        self.decisions.setdefault(model, deque(maxlen=self.keep)).append(decision)

    def in_flight(self, model: ModelKey, *, now: datetime) -> tuple[int, int]:
        """(active, waiting) requests for ``model`` over the live replicas' latest reports."""
        active = waiting = 0
        for report in self.reports.values():
            if now - report.time > timedelta(
                seconds=report.interval_seconds * self.stale_intervals
            ):
                continue
            found = report.models.get(model)
            if found is not None:
                active += found[0]
                waiting += found[1]
        return active, waiting

    def points(self, model: ModelKey) -> tuple[LoadPoint, ...]:
        return tuple(self.series.get(model, ()))

    def decisions_of(self, model: ModelKey) -> tuple[ScaleDecision, ...]:
        return tuple(self.decisions.get(model, ()))
