"""The events one tick publishes: envelopes built from an assessment (pure, ``now`` given).

Ids are derived from the fact, so publishing the same fact twice (a retried tick, a new
leader repeating the old one's last tick) gives one message inside JetStream's duplicate
window: a utilization reading by workload and time, an underutilized stretch by workload
and the stretch's start.

The monitor decides nothing: ``UtilizationV1`` carries each workload's reading and the
stretches it is part of, and the planner decides what follows (``kaiwo_planner.domain.
findings``). ``UnderutilizedV1`` announces a stretch once, for people and subscribers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kaiwo_contracts.events.envelope import (
    Envelope,
    derived_event_id,
    object_subject,
    service_source,
)
from kaiwo_contracts.events.monitor import UnderutilizedV1, UtilizationV1
from kaiwo_contracts.events.subjects import MonitorTopic, monitor_subject
from kaiwo_contracts.plans import ObjectRef

from kaiwo_monitor.domain.utilization import (
    AGGREGATION,
    Assessment,
    Judgment,
    Underutilization,
    published_ratio,
)

SOURCE = service_source("monitor")
REASON_LOW_UTILIZATION = "GpuUtilizationLow"


@dataclass(frozen=True, slots=True)
class Finding:
    """One event to publish on ``subject``, about the workload with ``uid``."""

    uid: str
    topic: MonitorTopic
    subject: str
    envelope: Envelope[Any]


def findings(assessment: Assessment, *, now: datetime) -> tuple[Finding, ...]:
    """Every event of one tick, grouped by workload in uid order (utilization first)."""
    events = [
        *(_utilization(item, now=now) for item in assessment.judgments),
        *(_underutilized(item, now=now) for item in assessment.underutilized),
    ]
    # sorted() is stable: per workload the order above (utilization, finding) holds.
    return tuple(sorted(events, key=lambda finding: finding.uid))


def _utilization(judgment: Judgment, *, now: datetime) -> Finding:
    item = judgment.utilization
    idle = judgment.idle
    payload = UtilizationV1(
        workload=item.workload,
        vendor=item.vendor,
        gpu_count=item.gpu_count,
        pod_count=item.pod_count,
        utilization_ratio=item.ratio,
        aggregation=AGGREGATION,
        window_start=item.window_start,
        window_end=item.window_end,
        low_utilization_threshold_ratio=judgment.threshold_ratio,
        underutilized_since=judgment.underutilized_since,
        idle_threshold_ratio=idle.settings.threshold_ratio if idle else None,
        idle_aggregation=idle.settings.aggregation if idle else None,
        idle_policy=idle.settings.policy if idle else None,
        idle_grace_seconds=idle.settings.grace_period.total_seconds() if idle else None,
        idle_utilization_ratio=published_ratio(idle.percent) if idle else None,
        idle_since=idle.since if idle else None,
    )
    event_id = derived_event_id("mon-utilization", item.workload.uid or "", now.isoformat())
    return _finding(item.workload, "utilization", payload, event_id=event_id, now=now)


def _underutilized(item: Underutilization, *, now: datetime) -> Finding:
    used = item.utilization
    payload = UnderutilizedV1(
        workload=used.workload,
        vendor=used.vendor,
        gpu_count=used.gpu_count,
        utilization_ratio=used.ratio or 0.0,
        threshold_ratio=item.threshold_ratio,
        idle_since=item.since,
        reason=REASON_LOW_UTILIZATION,
        message=(
            f"GPU utilization {_percent(used.ratio)} of the {used.gpu_count} requested GPU(s) "
            f"is below the threshold of {_percent(item.threshold_ratio)}"
        ),
    )
    event_id = derived_event_id(
        "mon-underutilized", used.workload.uid or "", item.since.isoformat()
    )
    return _finding(used.workload, "underutilized", payload, event_id=event_id, now=now)


def _finding(
    workload: ObjectRef,
    topic: MonitorTopic,
    payload: UtilizationV1 | UnderutilizedV1,
    *,
    event_id: str,
    now: datetime,
) -> Finding:
    uid = workload.uid or ""  # a monitored workload's reference always carries its uid
    envelope = Envelope.new(
        data=payload,
        source=SOURCE,
        time=now,
        correlationid=uid,
        subject=object_subject(namespace=workload.namespace, name=workload.name),
        id=event_id,
    )
    subject = monitor_subject(topic=topic, namespace=workload.namespace, uid=uid)
    return Finding(uid=uid, topic=topic, subject=subject, envelope=envelope)


def _percent(ratio: float | None) -> str:
    return "unknown" if ratio is None else f"{ratio * 100:.2f}%"
