"""The monitor's latest reading of one workload, as the projection keeps it: a fact.

What a finding changes (the ``ResourceUnderutilization`` condition, termination, idle GPU
preemption) is decided above the ground, in
:mod:`kaiwo_planner.domain.status.findings` and :mod:`kaiwo_planner.domain.scheduling`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from kaiwo_contracts.events.monitor import UtilizationV1

FRESH_FOR: Final = timedelta(minutes=5)
"""How long a finding counts as current evidence (ten default monitor ticks)."""


@dataclass(frozen=True, slots=True)
class WorkloadFinding:
    """The latest ``UtilizationV1`` of one workload, reduced to its readings.

    ``at``: the time of the reading (the end of its window). ``measured``: the reading had
    samples (False: the endpoint knew none of the workload's pods). ``utilization_ratio``:
    the reading (average over pods); ``threshold_ratio``: the threshold the monitor judged
    ``underutilized_since`` against. ``idle_utilization_ratio``: the reading combined with
    ``idle_aggregation``, which the monitor judged ``idle_since`` against
    ``idle_threshold_ratio`` with. The policy and grace period the monitor resolved are not
    kept: the planner resolves them itself (:mod:`kaiwo_contracts.gpu_preemption`).
    """

    uid: str
    at: datetime
    measured: bool
    vendor: str
    gpu_count: int
    threshold_ratio: float | None = None
    underutilized_since: datetime | None = None
    idle_threshold_ratio: float | None = None
    idle_since: datetime | None = None
    utilization_ratio: float | None = None
    idle_utilization_ratio: float | None = None
    idle_aggregation: str | None = None

    @classmethod
    def of(cls, event: UtilizationV1, *, at: datetime) -> WorkloadFinding:
        return cls(
            uid=event.workload.uid or "",
            at=at,
            measured=event.utilization_ratio is not None,
            vendor=event.vendor,
            gpu_count=event.gpu_count,
            threshold_ratio=event.low_utilization_threshold_ratio,
            underutilized_since=event.underutilized_since,
            idle_threshold_ratio=event.idle_threshold_ratio,
            idle_since=event.idle_since,
            utilization_ratio=event.utilization_ratio,
            idle_utilization_ratio=event.idle_utilization_ratio,
            idle_aggregation=event.idle_aggregation,
        )

    def fresh(self, now: datetime) -> bool:
        return self.measured and now - self.at <= FRESH_FOR

    def to_document(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "at": self.at.isoformat(),
            "measured": self.measured,
            "vendor": self.vendor,
            "gpuCount": self.gpu_count,
            "thresholdRatio": self.threshold_ratio,
            "underutilizedSince": _text(self.underutilized_since),
            "idleThresholdRatio": self.idle_threshold_ratio,
            "idleSince": _text(self.idle_since),
            "utilizationRatio": self.utilization_ratio,
            "idleUtilizationRatio": self.idle_utilization_ratio,
            "idleAggregation": self.idle_aggregation,
        }

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> WorkloadFinding:
        return cls(
            uid=str(document["uid"]),
            at=datetime.fromisoformat(str(document["at"])),
            measured=bool(document["measured"]),
            vendor=str(document["vendor"]),
            gpu_count=int(document["gpuCount"]),
            threshold_ratio=document.get("thresholdRatio"),
            underutilized_since=_moment(document.get("underutilizedSince")),
            idle_threshold_ratio=document.get("idleThresholdRatio"),
            idle_since=_moment(document.get("idleSince")),
            utilization_ratio=document.get("utilizationRatio"),
            idle_utilization_ratio=document.get("idleUtilizationRatio"),
            idle_aggregation=document.get("idleAggregation"),
        )

    def decides_differently_from(self, other: WorkloadFinding | None) -> bool:
        """Whether planning may come out differently with this finding than with ``other``.

        Readings of a settled, busy workload change nothing; an open stretch may become due
        with any new reading, so such a workload is planned on every one.
        """
        if other is None or self.underutilized_since or self.idle_since:
            return True
        if other.underutilized_since or other.idle_since:
            return True  # a stretch just ended
        return (
            self.measured,
            self.threshold_ratio,
            self.idle_threshold_ratio,
            self.idle_aggregation,
        ) != (
            other.measured,
            other.threshold_ratio,
            other.idle_threshold_ratio,
            other.idle_aggregation,
        )


def _text(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.isoformat().replace("+00:00", "Z")


def _moment(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None
