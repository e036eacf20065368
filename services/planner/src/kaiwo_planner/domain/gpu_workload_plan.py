"""The plans of GPU workloads no Kaiwo kind owns (upstream §11, decision 0047), pure.

Two owners plan here:

* **The root** (a Pod, Job, Deployment, StatefulSet, RayJob or RayCluster controlled by
  nothing, asking for GPUs; the watcher observes only those): once it opted in, as the
  planner observes it and its Namespace, its plan is that its GpuWorkload exists
  (``createOnly``: created when missing, never changed), named ``<kind>-<name>-<uid[:8]>`` in
  its namespace, naming it by uid; and its GpuWorkload is planned too. (Level-triggered: a
  record deleted by hand is made again on the root's next observation or finding.)
* **The GpuWorkload**: its status, and the preemption of its workload
  (``Plan.preempt``). Phases:

  - ``Unknown``: no fresh reading; ``PendingGpu``: waiting for GPUs (Kueue does not admit
    it for GPUs, or the scheduler cannot place it or one of its pods for GPUs, decisions 0056
    and 0066), which makes it a pressure for the ``OnPressure`` policy, unless no node could
    hold one of its pods (decision 0256: the verdict says nobody is preempted for it, decision
    0260); ``Active``: at or above the threshold; ``Idle``: an idle stretch that counts
    (:func:`~kaiwo_planner.domain.scheduling.gpu_workload_state.reading_of`);
  - ``Preempting``: the idle-preemption decision
    (:mod:`~kaiwo_planner.domain.scheduling.idle_preemption`, the one that preempts idle
    KaiwoJobs, with these workloads among its candidates) chose it. The plan writes the
    reason on the status, Warns, and preempts: a Pod, Job, RayJob or RayCluster is deleted,
    a Deployment or StatefulSet scaled to zero. It stays Preempting, the same preemption
    asked again, until that is done;
  - ``Preempted``: the workload deleted, or its replicas at zero; ``Deleted``: gone without
    being preempted. Once the workload is gone the record stays for its TTL (``ttl``
    annotation, ``KaiwoConfig.spec.gpuPreemption.defaultTTL``, 24h; ``0``: forever), then
    its plan deletes it. A Deployment scaled up again after a preemption is judged anew:
    only an idle stretch begun after ``preemptedAt`` counts.

  A workload no longer opted in (the annotations removed) is no longer tracked: the plan
  deletes its GpuWorkload.

The status changes with the phase, and the utilization it shows only when it moved by
:data:`~kaiwo_planner.domain.gpu_workload_record.UTILIZATION_STEP` points: a settled
workload's record is not rewritten tick after tick.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import API_VERSION
from kaiwo_contracts.gpu_preemption import GpuPreemptionSettings
from kaiwo_contracts.gpu_workloads import (
    MANAGED_BY_LABEL,
    WORKLOAD_UID_LABEL,
    gpu_vendor,
    gpu_workload_name,
    is_gpu_root,
)
from kaiwo_contracts.plans import EventIntent, ObjectRef, Plan

from kaiwo_planner.domain.gpu_root_preemption import preempt_intent, still_holds
from kaiwo_planner.domain.gpu_workload_record import (
    TRACKED_KEYS,
    display_name,
    history,
    kept,
    named_beneficiary,
    percent_text,
    preempted_event,
    preempted_verdict,
    record_plan,
    record_ref,
    shown_utilization,
    tracked,
    ttl_of,
    verdict,
    waiting_verdict,
    whole_percent,
)
from kaiwo_planner.domain.scheduling.gpu_waiting import GpuWait
from kaiwo_planner.domain.scheduling.gpu_workload_state import (
    ACTIVE,
    DELETED,
    GPU_WORKLOAD,
    IDLE,
    PENDING_GPU,
    PREEMPTED,
    PREEMPTING,
    UNKNOWN,
    Reading,
    reading_of,
    record_of,
    root_of,
    settings_of,
    workload_reference,
)
from kaiwo_planner.domain.scheduling.idle_preemption import IdlePreemption
from kaiwo_planner.domain.scheduling.idle_preemption_inputs import (
    idle_preemption_decision,
    waiting_of,
)
from kaiwo_planner.domain.scheduling.placeable import could_be_placed
from kaiwo_planner.domain.settings.cluster_settings import kaiwo_config, parse_time
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.status.conditions import format_time

REASON_IDLE_PREEMPTION: Final = "GpuIdlePreemption"
REASON_IDLE: Final = "WorkloadIdle"
REASON_DELETED: Final = "WorkloadDeleted"
REASON_PENDING_GPU: Final = "WorkloadPendingGpu"
"""Upstream's reason for the same transition."""


@dataclass(frozen=True, slots=True)
class GpuWorkloadPlanning:
    """A plan (None: nothing to do), when to plan again, and other owners to plan now."""

    plan: Plan | None
    replan_at: datetime | None = None
    also_replan: tuple[ObjectRef, ...] = ()


# ------------------------------------------------------------------ the root


def plan_gpu_root(
    *, root: Mapping[str, Any], context: PlanningContext, now: datetime
) -> GpuWorkloadPlanning:
    """The root's plan: create its GpuWorkload, or plan the one it has (module docstring)."""
    del now  # the same at any moment: whether it opted in and has its record
    cluster = context.cluster
    if not is_gpu_root(root):
        return GpuWorkloadPlanning(plan=None)
    record = record_of(root, cluster)
    also = (record_ref(record),) if record is not None else ()
    if settings_of(root, cluster, kaiwo_config(context).spec.gpu_preemption) is None:
        return GpuWorkloadPlanning(plan=None, also_replan=also)
    manifest = gpu_workload_manifest(root)
    metadata = manifest["metadata"]
    owner = ObjectRef(
        api_version=API_VERSION,
        kind=GPU_WORKLOAD,
        name=metadata["name"],
        namespace=metadata["namespace"],
    )
    plan = Plan(owner=owner, desired=(manifest,), create_only=True)
    return GpuWorkloadPlanning(plan=plan, also_replan=also)


def gpu_workload_manifest(root: Mapping[str, Any]) -> dict[str, Any]:
    """The GpuWorkload recording ``root``: its name, labels and the root by uid."""
    metadata = root.get("metadata") or {}
    kind, name, uid = str(root.get("kind")), str(metadata.get("name")), str(metadata.get("uid"))
    return {
        "apiVersion": API_VERSION,
        "kind": GPU_WORKLOAD,
        "metadata": {
            "name": gpu_workload_name(kind=kind, name=name, uid=uid),
            "namespace": str(metadata.get("namespace") or ""),
            "labels": {MANAGED_BY_LABEL: "kaiwo", WORKLOAD_UID_LABEL: uid},
        },
        "spec": {
            "workloadRef": {
                "apiVersion": str(root.get("apiVersion")),
                "kind": kind,
                "name": name,
                "uid": uid,
            }
        },
    }


# ------------------------------------------------------------------ the GpuWorkload


def plan_gpu_workload(
    *, record: Mapping[str, Any], context: PlanningContext, now: datetime
) -> GpuWorkloadPlanning:
    """The GpuWorkload's plan (module docstring)."""
    cluster = context.cluster
    ref = record_ref(record)
    metadata = record.get("metadata") or {}
    found = record.get("status")
    previous: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    defaults = kaiwo_config(context).spec.gpu_preemption
    named = display_name(workload_reference(record))
    root = root_of(record, cluster)
    if root is None:
        return _gone(
            ref, metadata, previous, named, default_ttl=ttl_of(defaults.default_ttl), now=now
        )
    settings = settings_of(root, cluster, defaults)
    if settings is None:  # opted out again: no longer tracked
        return GpuWorkloadPlanning(plan=record_plan(ref, metadata, delete_owner=True))
    phase = previous.get("phase")
    if phase == PREEMPTING and still_holds(root):
        return _preempting(ref, metadata, previous, root, settings)
    if phase == PREEMPTING or (phase == PREEMPTED and not still_holds(root)):
        # Scaled to zero (and not scaled up again): preempted, the object kept.
        return _preempted_in_place(ref, metadata, previous, root, settings, named, now=now)
    root_metadata = root.get("metadata") or {}
    reading = reading_of(
        cluster.findings.get(str(root_metadata.get("uid") or "")),
        settings,
        now=now,
        not_before=parse_time(previous.get("preemptedAt")),
    )
    chosen = (
        idle_preemption_decision(context, now=now).for_victim(ObjectRef.of(root))
        if reading.idle_since is not None
        else None
    )
    if chosen is not None:
        return _start_preemption(ref, metadata, root, settings, chosen, reading, now=now)
    waiting = waiting_of(root, cluster) if reading.percent is None else None
    # The idle-preemption decision presses for no pod no node could hold (decision 0256);
    # the record says so rather than promise a preemption that never comes (decision 0260).
    placeable = waiting is None or could_be_placed(root, cluster.nodes)
    return _judged(
        ref, metadata, previous, root, settings, reading, waiting=waiting, placeable=placeable
    )


def _judged(
    ref: ObjectRef,
    metadata: Mapping[str, Any],
    previous: Mapping[str, Any],
    root: Mapping[str, Any],
    settings: GpuPreemptionSettings,
    reading: Reading,
    *,
    waiting: GpuWait | None = None,
    placeable: bool = True,
) -> GpuWorkloadPlanning:
    if waiting is not None:
        phase = PENDING_GPU
    elif reading.idle_since is not None:
        phase = IDLE
    elif reading.percent is not None:
        phase = ACTIVE
    else:
        phase = UNKNOWN
    status = {
        **tracked(root, settings),
        **history(previous),
        "phase": phase,
        "utilization": shown_utilization(previous, phase, reading.percent),
        "idleSince": format_time(reading.idle_since) if reading.idle_since else None,
        "verdict": (
            waiting_verdict(root, waiting, placeable=placeable)
            if waiting is not None
            else verdict(phase, settings, reading, vendor=gpu_vendor(root))
        ),
    }
    events: tuple[EventIntent, ...] = ()
    if waiting is not None and previous.get("phase") != PENDING_GPU:
        events = (
            EventIntent(
                type="Warning",
                reason=REASON_PENDING_GPU,
                message=waiting_verdict(root, waiting, placeable=placeable),
            ),
        )
    if phase == IDLE and previous.get("phase") != IDLE and reading.idle_since is not None:
        events = (
            EventIntent(
                type="Normal",
                reason=REASON_IDLE,
                message=(
                    f"GPU utilization below {percent_text(settings.threshold_percent)} since "
                    f"{format_time(reading.idle_since)}"
                ),
            ),
        )
    return GpuWorkloadPlanning(plan=record_plan(ref, metadata, status=status, events=events))


def _start_preemption(
    ref: ObjectRef,
    metadata: Mapping[str, Any],
    root: Mapping[str, Any],
    settings: GpuPreemptionSettings,
    chosen: IdlePreemption,
    reading: Reading,
    *,
    now: datetime,
) -> GpuWorkloadPlanning:
    message = chosen.request.message
    beneficiary = chosen.beneficiary
    status = {
        **tracked(root, settings),
        "phase": PREEMPTING,
        "utilization": None if reading.percent is None else whole_percent(reading.percent),
        "idleSince": format_time(reading.idle_since) if reading.idle_since else None,
        "verdict": message,
        "preemptedAt": format_time(now),
        "preemptedFor": named_beneficiary(beneficiary) if beneficiary is not None else None,
        "preemptionReason": message,
    }
    events = (EventIntent(type="Warning", reason=REASON_IDLE_PREEMPTION, message=message),)
    return GpuWorkloadPlanning(
        plan=record_plan(ref, metadata, status=status, events=events, preempt=preempt_intent(root))
    )


def _preempting(
    ref: ObjectRef,
    metadata: Mapping[str, Any],
    previous: Mapping[str, Any],
    root: Mapping[str, Any],
    settings: GpuPreemptionSettings,
) -> GpuWorkloadPlanning:
    """Asked again, level-triggered, until the workload is gone or at zero replicas."""
    status = {**tracked(root, settings), **history(previous), **kept(previous)}
    return GpuWorkloadPlanning(
        plan=record_plan(ref, metadata, status=status, preempt=preempt_intent(root))
    )


def _preempted_in_place(
    ref: ObjectRef,
    metadata: Mapping[str, Any],
    previous: Mapping[str, Any],
    root: Mapping[str, Any],
    settings: GpuPreemptionSettings,
    named: str,
    *,
    now: datetime,
) -> GpuWorkloadPlanning:
    """A Deployment or StatefulSet the preemption scaled to zero: kept, judged anew once
    scaled up again."""
    already = previous.get("phase") == PREEMPTED
    finished = (parse_time(previous.get("finishedAt")) if already else None) or now
    status = {
        **tracked(root, settings),
        **history(previous),
        "phase": PREEMPTED,
        "verdict": preempted_verdict(previous),
        "finishedAt": format_time(finished),
    }
    events = () if already else preempted_event(named, previous)
    return GpuWorkloadPlanning(plan=record_plan(ref, metadata, status=status, events=events))


def _gone(
    ref: ObjectRef,
    metadata: Mapping[str, Any],
    previous: Mapping[str, Any],
    named: str,
    *,
    default_ttl: timedelta,
    now: datetime,
) -> GpuWorkloadPlanning:
    """The workload no longer exists (or no longer is a GPU root): the record stays its TTL."""
    preempted = previous.get("phase") in (PREEMPTING, PREEMPTED)
    finished = parse_time(previous.get("finishedAt")) if not _finished_now(previous) else None
    finished = finished or now
    ttl = ttl_of(previous.get("ttl")) if previous.get("ttl") else default_ttl
    if ttl > timedelta(0) and now >= finished + ttl:
        return GpuWorkloadPlanning(plan=record_plan(ref, metadata, delete_owner=True))
    phase = PREEMPTED if preempted else DELETED
    status = {
        **{key: previous.get(key) for key in TRACKED_KEYS},
        **history(previous),
        "phase": phase,
        "utilization": None,
        "idleSince": None,
        "verdict": preempted_verdict(previous) if preempted else f"{named} no longer exists",
        "finishedAt": format_time(finished),
    }
    events: tuple[EventIntent, ...] = ()
    if previous.get("phase") != phase:
        events = (
            preempted_event(named, previous)
            if preempted
            else (
                EventIntent(
                    type="Normal",
                    reason=REASON_DELETED,
                    message=f"{named} no longer exists; tracking ends",
                ),
            )
        )
    return GpuWorkloadPlanning(
        plan=record_plan(ref, metadata, status=status, events=events),
        replan_at=finished + ttl if ttl > timedelta(0) else None,
    )


def _finished_now(previous: Mapping[str, Any]) -> bool:
    """The record says the workload still runs: its end is this plan's ``now``."""
    return previous.get("phase") not in (PREEMPTED, DELETED)
