"""Who is idle, who waits for GPUs and what is being freed, read from the cluster state and
the monitor's findings: the inputs of
:func:`~kaiwo_planner.domain.scheduling.idle_preemption.decide_idle_preemptions`.

* idle: RUNNING (or READY) KaiwoJobs/KaiwoServices that opted in to GPU idle preemption and
  whose fresh finding shows an idle stretch that counts. The planner resolves the opt-in,
  threshold, aggregation, policy and grace period itself, from the annotations of the
  workload and of its Namespace as it observes them and the KaiwoConfig
  (:func:`kaiwo_contracts.gpu_preemption.gpu_preemption_settings`); the finding contributes
  readings only: the stretch counts when the reading (combined with the workload's own
  aggregation) is below the workload's threshold and the monitor judged it against a
  threshold no higher (decision 0038). A forged finding cannot opt a workload in, shorten its
  grace period or change its policy;
* waiting: PENDING ones with GPUs, pending for longer than
  ``KaiwoConfig.spec.scheduling.pendingThresholdForPreemption`` (every new workload passes
  through PENDING briefly; that is not pressure), since their ``creationTimestamp``;
* in flight: workloads this planner preempted for idleness (``WorkloadTerminatedEarly``
  reason ``GpuIdlePreemption``) that are TERMINATING, or TERMINATED with pods still observed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoGpuPreemptionConfig
from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus
from kaiwo_contracts.gpu_preemption import GpuPreemptionSettings, gpu_preemption_settings

from kaiwo_planner.domain.scheduling.idle_preemption import (
    REASON_IDLE,
    GpuDemand,
    IdlePreemptionDecision,
    IdleWorkload,
    decide_idle_preemptions,
)
from kaiwo_planner.domain.scheduling.preemption_candidates import workload_key
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.cluster_settings import (
    kaiwo_config,
    parse_time,
    pending_threshold,
    requested_gpus,
    workloads,
)
from kaiwo_planner.domain.state.object_index import RUN_ID_LABEL
from kaiwo_planner.domain.state.planning_context import EVERY_KIND, PlanningContext
from kaiwo_planner.domain.status.findings import WorkloadFinding
from kaiwo_planner.domain.status.workload_status import WORKLOAD_TERMINATED_EARLY

_RUNNING = frozenset({WorkloadStatus.RUNNING.value, WorkloadStatus.READY.value})


def idle_preemption_decision(context: PlanningContext, *, now: datetime) -> IdlePreemptionDecision:
    """The idle-preemption decision at ``now`` (worked out once per state and time)."""
    return context.derived(
        ("idle-preemption", now), reads=EVERY_KIND, compute=lambda: _decide(context, now)
    )


def _decide(context: PlanningContext, now: datetime) -> IdlePreemptionDecision:
    cluster = context.cluster
    threshold = pending_threshold(context)
    defaults = kaiwo_config(context).spec.gpu_preemption
    idle: list[IdleWorkload] = []
    pending: list[GpuDemand] = []
    in_flight: dict[str, int] = defaultdict(int)
    for obj in workloads(cluster):
        status, spec = obj.get("status"), obj.get("spec")
        if not isinstance(status, Mapping) or not isinstance(spec, Mapping):
            continue
        phase, gpus = status.get("status"), requested_gpus(spec)
        vendor = str(spec.get("gpuVendor") or "amd").lower()
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        if phase in _RUNNING:
            settings = _settings(obj, cluster, defaults)
            finding = cluster.findings.get(uid)
            found = _idle(obj, finding, settings, vendor=vendor, gpus=gpus, now=now)
            idle.extend([found] if found else [])
        elif phase == WorkloadStatus.PENDING.value and gpus > 0:
            since = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
            if since is not None and now - since > threshold:
                pending.append(GpuDemand(workload_key(obj), vendor, gpus, since))
        elif _preempted_for_idleness(status) and (
            phase == WorkloadStatus.TERMINATING.value
            or cluster.objects_labelled(RUN_ID_LABEL, uid, kind="Pod")
        ):
            in_flight[vendor] += gpus
    return decide_idle_preemptions(idle=idle, pending=pending, in_flight=in_flight, now=now)


def _settings(
    obj: Mapping[str, Any], cluster: ClusterState, defaults: KaiwoGpuPreemptionConfig
) -> GpuPreemptionSettings | None:
    """The workload's idle-preemption settings as the planner observes them (None: it has
    not opted in)."""
    metadata = obj.get("metadata") or {}
    namespace = cluster.find_object(
        group="", kind="Namespace", name=str(metadata.get("namespace") or "")
    )
    return gpu_preemption_settings(
        workload_annotations=_annotations(obj),
        namespace_annotations=_annotations(namespace or {}),
        config=defaults,
    )


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    found = (obj.get("metadata") or {}).get("annotations")
    if not isinstance(found, Mapping):
        return {}
    return {str(key): str(value) for key, value in found.items()}


def _idle(
    obj: Mapping[str, Any],
    finding: WorkloadFinding | None,
    settings: GpuPreemptionSettings | None,
    *,
    vendor: str,
    gpus: int,
    now: datetime,
) -> IdleWorkload | None:
    if (
        settings is None
        or finding is None
        or finding.idle_since is None
        or not finding.fresh(now)
        or not _idle_stretch_counts(finding, settings)
    ):
        return None
    return IdleWorkload(
        key=workload_key(obj),
        vendor=vendor,
        gpus=gpus,
        idle_since=finding.idle_since,
        evidence_at=finding.at,
        grace=settings.grace_period,
        policy=settings.policy,
    )


def _idle_stretch_counts(finding: WorkloadFinding, settings: GpuPreemptionSettings) -> bool:
    """The reading is the workload's own measure (its aggregation), below its threshold, and
    the stretch was judged against a threshold no higher than that."""
    threshold = settings.threshold_ratio
    reading, judged_against = finding.idle_utilization_ratio, finding.idle_threshold_ratio
    return (
        finding.idle_aggregation == settings.aggregation
        and reading is not None
        and reading < threshold
        and judged_against is not None
        and judged_against <= threshold
    )


def _preempted_for_idleness(status: Mapping[str, Any]) -> bool:
    return any(
        isinstance(c, Mapping)
        and c.get("type") == WORKLOAD_TERMINATED_EARLY
        and c.get("reason") == REASON_IDLE
        for c in status.get("conditions") or ()
    )
