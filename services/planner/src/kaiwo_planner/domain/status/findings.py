"""The monitor's findings as planning inputs: the ``ResourceUnderutilization`` condition and
termination of workloads that stay underutilized.

The monitor publishes one ``UtilizationV1`` per workload and tick; the planner keeps the
latest per workload uid (:class:`WorkloadFinding`, in the projection, replayed from the
recorded ``KAIWO_MON`` stream like observations). Everything here is a pure function of the
finding, the KaiwoConfig, the workload's namespace, its last written status and ``now``.

**A finding is a measurement, not an order** (decision 0038). It contributes readings: the
utilization, the time of the reading and since when a stretch has lasted. Whether the
workload's namespace is monitored, the threshold, whether to terminate and after how long
are the planner's, from the KaiwoConfig it observes. A stretch counts only when the reading
is below the planner's threshold and the monitor judged it against a threshold no higher
than the planner's (below that one since then, so below the planner's as well); a finding
that says otherwise (forged, or from a monitor with another configuration) decides nothing.
The monitor starts a stretch anew when the threshold is lowered (decision 0213), so "judged
against T since S" means below T since S. Both sides compare the published (rounded) ratio
with the threshold as a ratio capped at 1 (:func:`threshold_ratio`; decision 0228): what the
monitor judged below the threshold the planner reads as below it too.

* **The condition** (upstream §12): ``ResourceUnderutilization`` True, reason
  ``GpuUtilizationLow``, while the finding has an open underutilized stretch that counts;
  False, reason ``GpuUtilizationNormal``, once a reading at or above the threshold ends it. A
  finding without a reading (no data) and a stretch that does not count leave the condition
  as it is. The message names the threshold and the stretch's start, never the reading
  itself nor the GPUs read (their count changes while a pod restarts), so a settled
  workload's status does not change tick after tick and a stretch is told in one Warning
  (decisions 0197, 0228).
* **A workload whose namespace is not monitored** (``targetNamespaces`` narrowed at runtime)
  is not judged: a condition it has is withdrawn, False with reason ``NamespaceNotMonitored``
  (decision 0213), whatever the findings say; a workload that never had the condition gets
  none (no status write). It is never terminated for underutilization.
* **Termination** when ``terminateUnderutilized`` is on and the *evidence* covers
  ``terminateUnderutilizedAfter``: the reading that last confirmed the stretch is at least
  that long after its start. Only evidence counts, not the clock alone: a monitor that stops
  reporting (or an endpoint that stops answering) never terminates anything.
* **Fresh findings only** act: a finding older than :data:`FRESH_FOR` at ``now`` is history
  (the monitor stopped, or the workload's pods are gone) and terminates or preempts nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoResourceMonitoringConfig
from kaiwo_contracts.utilization_threshold import capped_threshold_ratio

from kaiwo_planner.domain.state.durations import parse_duration
from kaiwo_planner.domain.state.workload_finding import WorkloadFinding
from kaiwo_planner.domain.status.conditions import ConditionSpec, condition_of
from kaiwo_planner.domain.status.workload_status import TerminationRequest

RESOURCE_UNDERUTILIZATION: Final = "ResourceUnderutilization"
REASON_LOW: Final = "GpuUtilizationLow"
REASON_NORMAL: Final = "GpuUtilizationNormal"
REASON_NOT_MONITORED: Final = "NamespaceNotMonitored"
EXCLUDED_BY_DEFAULT: Final = frozenset({"kube-system"})
"""Not monitored when ``targetNamespaces`` is empty (the API reference; the monitor's rule)."""


def monitored(monitoring: KaiwoResourceMonitoringConfig, namespace: str) -> bool:
    """Whether the KaiwoConfig has workloads of ``namespace`` monitored for underutilization."""
    if monitoring.target_namespaces:
        return namespace in monitoring.target_namespaces
    return namespace not in EXCLUDED_BY_DEFAULT


def threshold_ratio(monitoring: KaiwoResourceMonitoringConfig) -> float:
    """``lowUtilizationThreshold`` as a fraction, at most 1 (over 100 % flags everything)."""
    return capped_threshold_ratio(monitoring.low_utilization_threshold)


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
    finding: WorkloadFinding | None,
    monitoring: KaiwoResourceMonitoringConfig,
    namespace: str,
    *,
    previous_status: Mapping[str, Any],
) -> ConditionSpec | None:
    """``ResourceUnderutilization`` as the readings show it; None: leave the condition as is.

    ``previous_status``: the workload's status as last written, for a workload no longer
    monitored (module docstring)."""
    if not monitored(monitoring, namespace):
        return _not_monitored(previous_status, namespace)
    if finding is None or not finding.measured:
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
        f"GPU utilization has been below {_percent(threshold)} of the requested GPUs since "
        f"{_text(since)}",
    )


def _not_monitored(previous_status: Mapping[str, Any], namespace: str) -> ConditionSpec | None:
    """The condition withdrawn from a workload of a namespace not monitored; None when it has
    none (nothing to withdraw, nothing to write)."""
    if condition_of(previous_status, RESOURCE_UNDERUTILIZATION) is None:
        return None
    return ConditionSpec(
        RESOURCE_UNDERUTILIZATION,
        "False",
        REASON_NOT_MONITORED,
        f"Namespace {namespace} is not monitored (KaiwoConfig "
        "spec.resourceMonitoring.targetNamespaces): GPU utilization is not judged",
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
