"""What the planner knows of the GPU workloads no Kaiwo kind owns (decision 0047), pure.

Each is a *root* the watcher observes (``kaiwo_contracts.gpu_workloads.is_gpu_root``: a Pod,
Job, Deployment, StatefulSet, RayJob or RayCluster controlled by nothing, asking for GPUs)
and, once it opted in, the operator's **GpuWorkload** record of it. The planner resolves the
settings itself, from the root's and its Namespace's annotations as it observes them and the
KaiwoConfig (:func:`kaiwo_contracts.gpu_preemption.gpu_preemption_settings`): the monitor's
finding gives readings only (:class:`Reading`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoGpuPreemptionConfig
from kaiwo_contracts.gpu_preemption import GpuPreemptionSettings, gpu_preemption_settings
from kaiwo_contracts.gpu_workloads import gpu_workload_name, is_gpu_root, kind_of

from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.index_entry import KAIWO_GROUP
from kaiwo_planner.domain.state.workload_finding import WorkloadFinding

GPU_WORKLOAD: Final = "GpuWorkload"
PREEMPTING: Final = "Preempting"
PREEMPTED: Final = "Preempted"
DELETED: Final = "Deleted"
IDLE: Final = "Idle"
ACTIVE: Final = "Active"
UNKNOWN: Final = "Unknown"
PENDING_GPU: Final = "PendingGpu"


def gpu_workloads(cluster: ClusterState) -> tuple[Mapping[str, Any], ...]:
    """Every observed GpuWorkload, in plan order."""
    return cluster.objects_of_kind(group=KAIWO_GROUP, kind=GPU_WORKLOAD)


def workload_reference(record: Mapping[str, Any]) -> Mapping[str, Any]:
    found = (record.get("spec") or {}).get("workloadRef")
    return found if isinstance(found, Mapping) else {}


def root_of(record: Mapping[str, Any], cluster: ClusterState) -> Mapping[str, Any] | None:
    """The root a GpuWorkload names, while it exists and still is a GPU root."""
    reference = workload_reference(record)
    root = cluster.by_uid(str(reference.get("uid") or ""))
    if root is None or not is_gpu_root(root):
        return None
    if kind_of(root) != (reference.get("apiVersion"), reference.get("kind")):
        return None
    return root


def record_of(root: Mapping[str, Any], cluster: ClusterState) -> Mapping[str, Any] | None:
    """The GpuWorkload tracking ``root``, when observed."""
    metadata = root.get("metadata") or {}
    name = gpu_workload_name(
        kind=str(root.get("kind") or ""),
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
    )
    return cluster.find_object(
        group=KAIWO_GROUP,
        kind=GPU_WORKLOAD,
        name=name,
        namespace=str(metadata.get("namespace") or ""),
    )


def settings_of(
    root: Mapping[str, Any], cluster: ClusterState, config: KaiwoGpuPreemptionConfig
) -> GpuPreemptionSettings | None:
    """The root's settings as the planner observes it and its Namespace (None: not opted in)."""
    namespace = str((root.get("metadata") or {}).get("namespace") or "")
    found = cluster.find_object(group="", kind="Namespace", name=namespace)
    return gpu_preemption_settings(
        workload_annotations=annotations_of(root),
        namespace_annotations=annotations_of(found or {}),
        config=config,
    )


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    found = (obj.get("metadata") or {}).get("annotations")
    if not isinstance(found, Mapping):
        return {}
    return {str(key): str(value) for key, value in found.items()}


@dataclass(frozen=True, slots=True)
class Reading:
    """What the monitor's finding says of a root, judged against the planner's settings.

    ``percent``: the pods' utilizations combined with the workload's aggregation (0-100), None
    without a fresh reading. ``idle_since``: the start of an idle stretch that counts (module
    docstring of :func:`reading_of`), else None. ``at``: the time of the reading.
    """

    percent: float | None = None
    idle_since: datetime | None = None
    at: datetime | None = None


def reading_of(
    finding: WorkloadFinding | None,
    settings: GpuPreemptionSettings,
    *,
    now: datetime,
    not_before: datetime | None = None,
) -> Reading:
    """The finding's reading; its idle stretch counts when the reading is the workload's own
    measure (its aggregation), below its threshold, judged by the monitor against a threshold
    no higher than that, and begun after ``not_before`` (the last preemption: a stretch of
    the pods that were stopped says nothing of those started since)."""
    if finding is None or not finding.fresh(now) or finding.idle_utilization_ratio is None:
        return Reading()
    percent = finding.idle_utilization_ratio * 100.0
    since = finding.idle_since
    judged_against = finding.idle_threshold_ratio
    counts = (
        since is not None
        and finding.idle_aggregation == settings.aggregation
        # The ratios, as the monitor judged them and as preemption compares them (capped
        # threshold): percents differ at the boundary (0.29 * 100 < 29, decision 0228).
        and finding.idle_utilization_ratio < settings.threshold_ratio
        and judged_against is not None
        and judged_against <= settings.threshold_ratio
        and (not_before is None or since > not_before)
    )
    return Reading(percent=percent, idle_since=since if counts else None, at=finding.at)
