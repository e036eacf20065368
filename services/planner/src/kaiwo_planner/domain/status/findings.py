"""The monitor's findings as planning inputs: the ``ResourceUnderutilization`` condition and
termination of workloads that stay underutilized.

The monitor publishes one ``UtilizationV1`` per workload and tick; the planner keeps the
latest per workload uid (:class:`WorkloadFinding`, in the projection, replayed from the
recorded ``KAIWO_MON`` stream like observations). Everything here is a pure function of the
finding, the KaiwoConfig, the workload's namespace and ``now``.

**A finding is a measurement, not an order** (decision 0038). It contributes readings: the
utilization, the time of the reading and since when a stretch has lasted. Whether the
workload's namespace is monitored, the threshold, whether to terminate and after how long
are the planner's, from the KaiwoConfig it observes. A stretch counts only when the reading
is below the planner's threshold and the monitor judged it against a threshold no higher
than the planner's (below that one since then, so below the planner's as well); a finding
that says otherwise (forged, or from a monitor with another configuration) decides nothing.

* **The condition** (upstream §12): ``ResourceUnderutilization`` True, reason
  ``GpuUtilizationLow``, while the finding has an open underutilized stretch that counts;
  False, reason ``GpuUtilizationNormal``, once a reading at or above the threshold ends it. A
  finding without a reading (no data), a stretch that does not count and a workload whose
  namespace is not monitored leave the condition as it is. The message names the threshold
  and the stretch's start, never the reading itself, so a settled workload's status does not
  change tick after tick.
* **Termination** when ``terminateUnderutilized`` is on and the *evidence* covers
  ``terminateUnderutilizedAfter``: the reading that last confirmed the stretch is at least
  that long after its start. Only evidence counts, not the clock alone: a monitor that stops
  reporting (or an endpoint that stops answering) never terminates anything.
* **Fresh findings only** act: a finding older than :data:`FRESH_FOR` at ``now`` is history
  (the monitor stopped, or the workload's pods are gone) and terminates or preempts nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoResourceMonitoringConfig
from kaiwo_contracts.events.monitor import UtilizationV1

from kaiwo_planner.domain.state.durations import parse_duration
from kaiwo_planner.domain.status.conditions import ConditionSpec
from kaiwo_planner.domain.status.workload_status import TerminationRequest

RESOURCE_UNDERUTILIZATION: Final = "ResourceUnderutilization"
REASON_LOW: Final = "GpuUtilizationLow"
REASON_NORMAL: Final = "GpuUtilizationNormal"
FRESH_FOR: Final = timedelta(minutes=5)
"""How long a finding counts as current evidence (ten default monitor ticks)."""
EXCLUDED_BY_DEFAULT: Final = frozenset({"kube-system"})
"""Not monitored when ``targetNamespaces`` is empty (the API reference; the monitor's rule)."""


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


def monitored(monitoring: KaiwoResourceMonitoringConfig, namespace: str) -> bool:
    """Whether the KaiwoConfig has workloads of ``namespace`` monitored for underutilization."""
    if monitoring.target_namespaces:
        return namespace in monitoring.target_namespaces
    return namespace not in EXCLUDED_BY_DEFAULT


def threshold_ratio(monitoring: KaiwoResourceMonitoringConfig) -> float:
    """``lowUtilizationThreshold`` as a fraction, at most 1 (over 100 % flags everything)."""
    return min(monitoring.low_utilization_threshold / 100.0, 1.0)


def underutilized_since(
    finding: WorkloadFinding | None, monitoring: KaiwoResourceMonitoringConfig, namespace: str
) -> datetime | None:
    """The start of the finding's underutilized stretch when it counts (module docstring)."""
    if finding is None or not finding.measured or not monitored(monitoring, namespace):
        return None
    threshold = threshold_ratio(monitoring)
    reading, judged_against = finding.utilization_ratio, finding.threshold_ratio
    if reading is None or reading >= threshold:
        return None
    if judged_against is None or judged_against > threshold:
        return None
    return finding.underutilized_since


def underutilization_condition(
    finding: WorkloadFinding | None, monitoring: KaiwoResourceMonitoringConfig, namespace: str
) -> ConditionSpec | None:
    """``ResourceUnderutilization`` as the readings show it; None: leave the condition as is."""
    if finding is None or not finding.measured or not monitored(monitoring, namespace):
        return None
    threshold = threshold_ratio(monitoring)
    if finding.utilization_ratio is not None and finding.utilization_ratio >= threshold:
        return ConditionSpec(
            RESOURCE_UNDERUTILIZATION,
            "False",
            REASON_NORMAL,
            f"GPU utilization is at or above {_percent(threshold)} of the requested GPUs",
        )
    since = underutilized_since(finding, monitoring, namespace)
    if since is None:
        return None
    return ConditionSpec(
        RESOURCE_UNDERUTILIZATION,
        "True",
        REASON_LOW,
        f"GPU utilization has been below {_percent(threshold)} of the {finding.gpu_count} "
        f"requested GPU(s) since {_text(since)}",
    )


def underutilization_termination(
    finding: WorkloadFinding | None,
    monitoring: KaiwoResourceMonitoringConfig,
    namespace: str,
    *,
    now: datetime,
) -> TerminationRequest | None:
    """Terminate the workload: it stayed underutilized for ``terminateUnderutilizedAfter``."""
    since = underutilized_since(finding, monitoring, namespace)
    if (
        finding is None
        or since is None
        or not monitoring.terminate_underutilized
        or not finding.fresh(now)
    ):
        return None
    after = parse_duration(monitoring.terminate_underutilized_after)
    if finding.at - since < after:
        return None
    return TerminationRequest(
        reason=REASON_LOW,
        message=(
            "Terminating workload due to underutilized GPU resources: below "
            f"{_percent(threshold_ratio(monitoring))} since "
            f"{_text(since)}, longer than "
            f"terminateUnderutilizedAfter ({monitoring.terminate_underutilized_after})"
        ),
    )


def _percent(ratio: float) -> str:
    return f"{ratio * 100:g}%"


def _text(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.isoformat().replace("+00:00", "Z")


def _moment(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None
