"""``kaiwo gpus``: the GPU workloads GPU idle preemption tracks, as a table. Pure: objects in,
text out.

* GPU workloads no Kaiwo kind owns: their GpuWorkload records (decision 0047);
* KaiwoJobs and KaiwoServices that opted in (their annotations or their namespace's): each is
  its own record (decision 0056). Phase, utilization, idle since and verdict come from their
  ``GpuIdle`` condition (the planner's judgement of the monitor's reading: ``<5%`` while an
  idle stretch counts, ``>=5%`` while busy; the condition carries no reading, so a settled
  workload's status is not rewritten tick after tick), or, preempted, from their
  ``WorkloadTerminatedEarly`` condition; policy and grace as the planner resolves them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Final

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoGpuPreemptionConfig
from kaiwo_contracts.gpu_preemption import GpuPreemptionSettings, gpu_preemption_settings

from kaiwo_cli.text_tables import render_table

HEADERS = ("NAMESPACE", "WORKLOAD", "PHASE", "GPUS", "UTIL", "IDLE SINCE", "POLICY", "VERDICT")
NONE_TRACKED = (
    "No GPU workload is tracked: GPU idle preemption tracks KaiwoJobs, KaiwoServices, Pods, "
    "Jobs (a CronJob's too), Deployments, StatefulSets, RayJobs and RayClusters whose "
    "annotations or namespace opt in "
    "(kaiwo.silogen.ai/gpu-preemption.*; docs/operations.md)"
)


GPU_IDLE: Final = "GpuIdle"
TERMINATED_EARLY: Final = "WorkloadTerminatedEarly"
IDLE_PREEMPTION: Final = "GpuIdlePreemption"
_IDLE_SINCE: Final = re.compile(r"^Idle since (\S+):")


def gpu_workload_table(
    records: Sequence[Mapping[str, Any]],
    workloads: Sequence[Mapping[str, Any]] = (),
    *,
    namespaces: Mapping[str, Mapping[str, Any]] | None = None,
    defaults: KaiwoGpuPreemptionConfig | None = None,
    nodes: Sequence[Mapping[str, Any]] = (),
    children: Sequence[Mapping[str, Any]] = (),
    kueue_workloads: Sequence[Mapping[str, Any]] = (),
    exclude_control_plane: bool = False,
) -> str:
    """One row per record and per opted-in KaiwoJob or KaiwoService (``namespaces``: the
    Namespaces by name, for their annotations), by namespace and workload; ``-`` where
    nothing is known yet. A Kaiwo workload's GPUs are those its allocation gives its pods,
    by the planner's rule on ``nodes`` (decision 0118): ``gpus: 30`` on 8-GPU nodes holds 28;
    without nodes, the GPUs it asks for. A running one holds the split by node size its
    main child (among ``children``: Deployments, RayJobs, AppWrappers) was made with, as
    the planner counts it (decision 0137); a running batch Job does not hold the pods whose
    quota Kueue released (its Job among ``children``, their ``reclaimablePods`` among
    ``kueue_workloads``, decision 0152). ``exclude_control_plane``: the KaiwoConfig's
    ``excludeMasterNodesFromNodePools``, which leaves control-plane nodes' GPUs out of the
    split as the planner does (decision 0224)."""
    from kaiwo_planner.domain.scheduling.gpu_allocation import (
        allocated_gpus,
        gpu_stats,
        released_pods_among,
        running_child_among,
    )
    from kaiwo_planner.domain.state.nodes import NodeInfo

    parsed = [NodeInfo.from_wire(node) for node in nodes]
    # Once per vendor, not per workload: every row reads the same nodes.
    stats_of = functools.cache(
        lambda vendor: gpu_stats(parsed, vendor, exclude_control_plane=exclude_control_plane)
    )

    def gpus_of(workload: Mapping[str, Any]) -> int:
        return allocated_gpus(
            workload,
            stats_of,
            running_child=running_child_among(children, workload),
            released=released_pods_among(children, kueue_workloads, workload),
        )

    config = defaults or KaiwoGpuPreemptionConfig()
    rows = [_row(record) for record in records]
    for workload in workloads:
        namespace = str((workload.get("metadata") or {}).get("namespace") or "")
        settings = gpu_preemption_settings(
            workload_annotations=_annotations(workload),
            namespace_annotations=_annotations((namespaces or {}).get(namespace) or {}),
            config=config,
        )
        if settings is not None:
            rows.append(_kaiwo_row(workload, settings, gpus=gpus_of(workload)))
    if not rows:
        return NONE_TRACKED
    return render_table(HEADERS, sorted(rows, key=lambda row: (row[0], row[1])))


def _kaiwo_row(
    workload: Mapping[str, Any], settings: GpuPreemptionSettings, *, gpus: int
) -> list[str]:
    metadata = workload.get("metadata") or {}
    status = workload.get("status") or {}
    idle = _condition(status, GPU_IDLE)
    early = _condition(status, TERMINATED_EARLY)
    threshold = f"{settings.threshold_percent:g}%"
    phase, utilization, since, verdict = str(status.get("status") or "-"), "-", "-", "-"
    if early is not None and early.get("reason") == IDLE_PREEMPTION:
        phase, verdict = "Preempted", str(early.get("message") or "-")
    elif status.get("status") in ("RUNNING", "READY") and idle is not None:
        busy = idle.get("status") != "True"
        phase, utilization = ("Active", f">={threshold}") if busy else ("Idle", f"<{threshold}")
        verdict = str(idle.get("message") or "-")
        found = _IDLE_SINCE.match(verdict)
        since = found.group(1) if found and not busy else "-"
    return [
        str(metadata.get("namespace") or ""),
        f"{workload.get('kind', '?')}/{metadata.get('name', '?')}",
        phase,
        _text(gpus or None),
        utilization,
        since,
        f"{settings.policy} ({_duration(settings.grace_period)})",
        verdict,
    ]


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for found in status.get("conditions") or ():
        if isinstance(found, Mapping) and found.get("type") == kind:
            return found
    return None


def _annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    found = (obj.get("metadata") or {}).get("annotations") or {}
    return {str(key): str(value) for key, value in found.items()}


def _duration(value: timedelta) -> str:
    """Go's form, as the planner writes a record's grace period (``10m0s``, ``1h30m0s``)."""
    hours, rest = divmod(int(value.total_seconds()), 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{seconds}s"
    return f"{minutes}m{seconds}s" if minutes else f"{seconds}s"


def _row(record: Mapping[str, Any]) -> list[str]:
    metadata = record.get("metadata") or {}
    reference = (record.get("spec") or {}).get("workloadRef") or {}
    status = record.get("status") or {}
    utilization = status.get("utilization")
    policy = status.get("policy")
    grace = status.get("gracePeriod")
    return [
        str(metadata.get("namespace") or ""),
        f"{reference.get('kind', '?')}/{reference.get('name', '?')}",
        str(status.get("phase") or "-"),
        _text(status.get("gpus")),
        "-" if utilization is None else f"{utilization}%",
        _text(status.get("idleSince")),
        "-" if policy is None else f"{policy} ({grace})" if grace else str(policy),
        _text(status.get("verdict")),
    ]


def _text(value: object) -> str:
    return "-" if value is None or value == "" else str(value)
