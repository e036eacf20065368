"""Each queue's record, folded from the event store's observations of Kueue Workloads: pure.

A Kueue Workload is admitted when its ``Admitted`` (or ``QuotaReserved``) condition turns
True and holds its quota until ``Finished`` turns True, or until it loses its admission
(evicted, preempted) or is deleted. The fold keeps, per ClusterQueue and GPU resource, when
workloads were admitted and how long each finished one held its quota: the inputs of
:func:`~kaiwo_contracts.queue_estimates.eta.estimate_starts`. Times are the conditions'
``lastTransitionTime`` (when the API server says it happened), else the time the observation
was recorded.

The fold also keeps each stretch a Workload spent queued (from its creation, or from losing
its admission, to its admission or its end): the queue depth and wait time plots read them
through :func:`depth_over_time` and :func:`waits_in`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
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
    spec,
    status,
)

Lane = tuple[str, str]
"""(ClusterQueue, GPU resource): the workloads that compete for the same GPUs."""


@dataclass(frozen=True, slots=True)
class Admission:
    lane: Lane
    at: datetime


LocalQueueKey = tuple[str, str]
"""(namespace, LocalQueue name): where a pending Workload waits before Kueue admits it to a
ClusterQueue (the console maps it to its ClusterQueue with the live LocalQueues)."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """A stretch one Workload spent queued, from ``start`` to ``end`` (None: still waits)."""

    local: LocalQueueKey
    start: datetime
    end: datetime | None = None
    admitted_to: str = ""
    """The ClusterQueue that admitted it ("": it still waits, or ended without admission)."""


@dataclass(frozen=True, slots=True)
class DepthStep:
    """From ``at`` on, ``depth`` workloads wait in the queue."""

    at: datetime
    depth: int


@dataclass(frozen=True, slots=True)
class WaitPoint:
    """A workload admitted at ``at`` after waiting ``seconds``."""

    at: datetime
    seconds: float


@dataclass
class QueueRecords:
    admissions: dict[Lane, list[datetime]] = field(default_factory=dict)
    runs: dict[Lane, list[float]] = field(default_factory=dict)
    open: dict[str, Admission] = field(default_factory=dict)
    """Admitted, unfinished Workloads by uid."""
    ended: set[str] = field(default_factory=set)
    hourly: dict[str, dict[datetime, int]] = field(default_factory=dict)
    """Admissions per ClusterQueue per hour (for the plot)."""
    waiting: dict[str, Waiting] = field(default_factory=dict)
    """Workloads waiting now by uid (their open stretch)."""
    waited: list[Waiting] = field(default_factory=list)
    """Closed stretches, in the order they closed."""
    version: int = 0
    """Counts changes of the admissions and run times (what the estimates read)."""

    def apply(self, *, event: str, obj: Mapping[str, Any], recorded: datetime) -> None:
        uid = str(meta(obj).get("uid") or "")
        if not uid or uid in self.ended:
            return
        admitted = is_admitted(obj) and event != "DELETED"
        known = self.open.get(uid)
        self._track_wait(uid, event=event, obj=obj, admitted=admitted, recorded=recorded)
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

    def _track_wait(
        self,
        uid: str,
        *,
        event: str,
        obj: Mapping[str, Any],
        admitted: bool,
        recorded: datetime,
    ) -> None:
        gone = event == "DELETED" or is_finished(obj)
        stretch = self.waiting.get(uid)
        if admitted and not gone and uid not in self.open:
            start = stretch.start if stretch else parse_time(meta(obj).get("creationTimestamp"))
            self.waiting.pop(uid, None)
            if start is not None:
                queue = str((status(obj).get("admission") or {}).get("clusterQueue") or "")
                end = max(admitted_at(obj) or recorded, start)
                self.waited.append(Waiting(_local_queue(obj), start, end, queue))
        elif not admitted and not gone and stretch is None:
            # Queued again after losing its admission: from then, not from its creation.
            again = uid in self.open
            created = parse_time(meta(obj).get("creationTimestamp"))
            start = recorded if again or created is None else created
            self.waiting[uid] = Waiting(_local_queue(obj), start)
        elif gone and stretch is not None:
            del self.waiting[uid]
            self.waited.append(Waiting(stretch.local, stretch.start, max(recorded, stretch.start)))

    def stretches(
        self, cluster_queue_of_local: Callable[[LocalQueueKey], str]
    ) -> dict[str, list[Waiting]]:
        """Every queued stretch by ClusterQueue: the one that admitted it, else its
        LocalQueue's now."""
        by_queue: dict[str, list[Waiting]] = {}
        resolved: dict[LocalQueueKey, str] = {}
        for stretch in (*self.waited, *self.waiting.values()):
            queue = stretch.admitted_to
            if not queue:
                if stretch.local not in resolved:
                    resolved[stretch.local] = cluster_queue_of_local(stretch.local)
                queue = resolved[stretch.local]
            by_queue.setdefault(queue, []).append(stretch)
        return by_queue

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


def _local_queue(obj: Mapping[str, Any]) -> LocalQueueKey:
    return (str(meta(obj).get("namespace") or ""), str(spec(obj).get("queueName") or ""))


def depth_over_time(
    stretches: Iterable[Waiting], *, start: datetime, now: datetime
) -> tuple[DepthStep, ...]:
    """How many workloads waited from ``start`` to ``now``: the depth at ``start``, a step at
    each change (changes at one instant merged), and the depth at ``now``."""
    depth = 0
    changes: list[tuple[datetime, int]] = []
    for stretch in stretches:
        end = stretch.end
        if stretch.start >= now or (end is not None and end <= start):
            continue
        if stretch.start <= start:
            depth += 1
        else:
            changes.append((stretch.start, 1))
        if end is not None and end <= now:
            changes.append((end, -1))
    steps = [DepthStep(start, depth)]
    for at, change in sorted(changes):
        depth += change
        if steps[-1].at == at:
            steps[-1] = DepthStep(at, depth)
        else:
            steps.append(DepthStep(at, depth))
    if steps[-1].at != now:
        steps.append(DepthStep(now, depth))
    return tuple(steps)


def waits_in(
    stretches: Iterable[Waiting], *, start: datetime, now: datetime
) -> tuple[WaitPoint, ...]:
    """How long each workload admitted from ``start`` to ``now`` had waited, by admission."""
    return tuple(
        sorted(
            (
                WaitPoint(s.end, (s.end - s.start).total_seconds())
                for s in stretches
                if s.admitted_to and s.end is not None and start <= s.end <= now
            ),
            key=lambda p: p.at,
        )
    )
