"""Each queue's record, folded from the event store's observations of Kueue Workloads: pure.

A Kueue Workload is admitted when its ``Admitted`` (or ``QuotaReserved``) condition turns
True and holds its quota until ``Finished`` turns True, or until it loses its admission
(evicted, preempted) or is deleted. The fold keeps, per ClusterQueue and GPU resource, when
workloads were admitted and how long each finished one held its quota: the inputs of
:func:`~kaiwo_contracts.queue_estimates.eta.estimate_starts`. Times are the conditions'
``lastTransitionTime`` (when the API server says it happened), else the time the observation
was recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from kaiwo_contracts.queue_estimates.eta import QueueHistory

from kaiwo_console.domain.cluster import (
    admitted_at,
    condition,
    is_admitted,
    is_finished,
    kueue_gpus,
    meta,
    parse_time,
    status,
)

Lane = tuple[str, str]
"""(ClusterQueue, GPU resource): the workloads that compete for the same GPUs."""


@dataclass(frozen=True, slots=True)
class Admission:
    lane: Lane
    at: datetime


@dataclass
class QueueRecords:
    admissions: dict[Lane, list[datetime]] = field(default_factory=dict)
    runs: dict[Lane, list[float]] = field(default_factory=dict)
    open: dict[str, Admission] = field(default_factory=dict)
    """Admitted, unfinished Workloads by uid."""
    ended: set[str] = field(default_factory=set)
    hourly: dict[str, dict[datetime, int]] = field(default_factory=dict)
    """Admissions per ClusterQueue per hour (for the plot)."""
    version: int = 0
    """Counts changes of the admissions and run times (what the estimates read)."""

    def apply(self, *, event: str, obj: Mapping[str, Any], recorded: datetime) -> None:
        uid = str(meta(obj).get("uid") or "")
        if not uid or uid in self.ended:
            return
        admitted = is_admitted(obj) and event != "DELETED"
        known = self.open.get(uid)
        if known is None and admitted and not is_finished(obj):
            queue = str((status(obj).get("admission") or {}).get("clusterQueue") or "")
            resource, _ = kueue_gpus(obj)
            at = admitted_at(obj) or recorded
            lane = (queue, resource)
            self.open[uid] = Admission(lane, at)
            self.admissions.setdefault(lane, []).append(at)
            hour = at.replace(minute=0, second=0, microsecond=0)
            per_hour = self.hourly.setdefault(queue, {})
            per_hour[hour] = per_hour.get(hour, 0) + 1
            self.version += 1
            return
        if known is not None and (is_finished(obj) or not admitted):
            finished = condition(obj, "Finished")
            at = (parse_time(finished.get("lastTransitionTime")) if finished else None) or recorded
            self.runs.setdefault(known.lane, []).append(max((at - known.at).total_seconds(), 0.0))
            del self.open[uid]
            self.version += 1
            if is_finished(obj) or event == "DELETED":
                self.ended.add(uid)

    def history(self, lane: Lane) -> QueueHistory:
        return QueueHistory(
            admissions=tuple(self.admissions.get(lane, ())),
            run_seconds=tuple(self.runs.get(lane, ())),
        )

    def admissions_by_hour(self, queue: str, *, now: datetime, hours: int) -> list[int]:
        """Admissions to ``queue`` in each of the last ``hours`` hours, oldest first."""
        top = now.replace(minute=0, second=0, microsecond=0)
        per_hour = self.hourly.get(queue, {})
        return [per_hour.get(top - timedelta(hours=back), 0) for back in range(hours - 1, -1, -1)]
