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
    and 0066), which makes it a pressure for the ``OnPressure`` policy; ``Active``: at or
    above the threshold; ``Idle``: an idle stretch that counts
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
:data:`UTILIZATION_STEP` points: a settled workload's record is not rewritten tick after tick.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import API_VERSION
from kaiwo_contracts.gpu_preemption import DEFAULT_TTL, GpuPreemptionSettings
from kaiwo_contracts.gpu_workloads import (
    MANAGED_BY_LABEL,
    WORKLOAD_UID_LABEL,
    gpu_vendor,
    gpu_workload_name,
    held_gpus,
    is_gpu_root,
    preempt_action,
)
from kaiwo_contracts.plans import EventIntent, ObjectRef, Plan, PreemptIntent

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
    root_key,
    waiting_of,
)
from kaiwo_planner.domain.state.cluster_settings import kaiwo_config, parse_time
from kaiwo_planner.domain.state.durations import format_duration, parse_duration
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.status.workload_status import format_time

UTILIZATION_STEP: Final = 5
"""Percentage points the shown utilization must move by to be written again."""
REASON_IDLE_PREEMPTION: Final = "GpuIdlePreemption"
REASON_PREEMPTED: Final = "WorkloadPreempted"
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
    also = (_ref(record),) if record is not None else ()
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
    ref = _ref(record)
    metadata = record.get("metadata") or {}
    found = record.get("status")
    previous: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    defaults = kaiwo_config(context).spec.gpu_preemption
    named = _display(workload_reference(record))
    root = root_of(record, cluster)
    if root is None:
        return _gone(
            ref, metadata, previous, named, default_ttl=_ttl(defaults.default_ttl), now=now
        )
    settings = settings_of(root, cluster, defaults)
    if settings is None:  # opted out again: no longer tracked
        return GpuWorkloadPlanning(plan=_plan(ref, metadata, delete_owner=True))
    phase = previous.get("phase")
    if phase == PREEMPTING and _still_holds(root):
        return _preempting(ref, metadata, previous, root, settings)
    if phase == PREEMPTING or (phase == PREEMPTED and not _still_holds(root)):
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
        idle_preemption_decision(context, now=now).for_victim(root_key(root).ref())
        if reading.idle_since is not None
        else None
    )
    if chosen is not None:
        return _start_preemption(ref, metadata, root, settings, chosen, reading, now=now)
    waiting = waiting_of(root, cluster) if reading.percent is None else None
    return _judged(ref, metadata, previous, root, settings, reading, waiting=waiting)


def _judged(
    ref: ObjectRef,
    metadata: Mapping[str, Any],
    previous: Mapping[str, Any],
    root: Mapping[str, Any],
    settings: GpuPreemptionSettings,
    reading: Reading,
    *,
    waiting: GpuWait | None = None,
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
        **_tracked(root, settings),
        **_history(previous),
        "phase": phase,
        "utilization": _shown_utilization(previous, phase, reading.percent),
        "idleSince": format_time(reading.idle_since) if reading.idle_since else None,
        "verdict": (
            _waiting_verdict(root, waiting)
            if waiting is not None
            else _verdict(phase, settings, reading, vendor=gpu_vendor(root))
        ),
    }
    events: tuple[EventIntent, ...] = ()
    if waiting is not None and previous.get("phase") != PENDING_GPU:
        events = (
            EventIntent(
                type="Warning", reason=REASON_PENDING_GPU, message=_waiting_verdict(root, waiting)
            ),
        )
    if phase == IDLE and previous.get("phase") != IDLE and reading.idle_since is not None:
        events = (
            EventIntent(
                type="Normal",
                reason=REASON_IDLE,
                message=(
                    f"GPU utilization below {_percent(settings.threshold_percent)} since "
                    f"{format_time(reading.idle_since)}"
                ),
            ),
        )
    return GpuWorkloadPlanning(plan=_plan(ref, metadata, status=status, events=events))


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
        **_tracked(root, settings),
        "phase": PREEMPTING,
        "utilization": None if reading.percent is None else whole_percent(reading.percent),
        "idleSince": format_time(reading.idle_since) if reading.idle_since else None,
        "verdict": message,
        "preemptedAt": format_time(now),
        "preemptedFor": _beneficiary(beneficiary) if beneficiary is not None else None,
        "preemptionReason": message,
    }
    events = (EventIntent(type="Warning", reason=REASON_IDLE_PREEMPTION, message=message),)
    return GpuWorkloadPlanning(
        plan=_plan(ref, metadata, status=status, events=events, preempt=_preempt(root))
    )


def _preempting(
    ref: ObjectRef,
    metadata: Mapping[str, Any],
    previous: Mapping[str, Any],
    root: Mapping[str, Any],
    settings: GpuPreemptionSettings,
) -> GpuWorkloadPlanning:
    """Asked again, level-triggered, until the workload is gone or at zero replicas."""
    status = {**_tracked(root, settings), **_history(previous), **_kept(previous)}
    return GpuWorkloadPlanning(plan=_plan(ref, metadata, status=status, preempt=_preempt(root)))


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
        **_tracked(root, settings),
        **_history(previous),
        "phase": PREEMPTED,
        "verdict": _preempted_verdict(previous),
        "finishedAt": format_time(finished),
    }
    events = () if already else _preempted_event(named, previous)
    return GpuWorkloadPlanning(plan=_plan(ref, metadata, status=status, events=events))


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
    ttl = _ttl(previous.get("ttl")) if previous.get("ttl") else default_ttl
    if ttl > timedelta(0) and now >= finished + ttl:
        return GpuWorkloadPlanning(plan=_plan(ref, metadata, delete_owner=True))
    phase = PREEMPTED if preempted else DELETED
    status = {
        **{key: previous.get(key) for key in _TRACKED_KEYS},
        **_history(previous),
        "phase": phase,
        "utilization": None,
        "idleSince": None,
        "verdict": _preempted_verdict(previous) if preempted else f"{named} no longer exists",
        "finishedAt": format_time(finished),
    }
    events: tuple[EventIntent, ...] = ()
    if previous.get("phase") != phase:
        events = (
            _preempted_event(named, previous)
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
        plan=_plan(ref, metadata, status=status, events=events),
        replan_at=finished + ttl if ttl > timedelta(0) else None,
    )


def _finished_now(previous: Mapping[str, Any]) -> bool:
    """The record says the workload still runs: its end is this plan's ``now``."""
    return previous.get("phase") not in (PREEMPTED, DELETED)


# ------------------------------------------------------------------ pieces


_TRACKED_KEYS: Final = (
    "gpus",
    "vendor",
    "policy",
    "threshold",
    "aggregation",
    "gracePeriod",
    "ttl",
)
_HISTORY_KEYS: Final = ("preemptedAt", "preemptedFor", "preemptionReason")


def _tracked(root: Mapping[str, Any], settings: GpuPreemptionSettings) -> dict[str, Any]:
    return {
        "gpus": held_gpus(root),
        "vendor": gpu_vendor(root),
        "policy": settings.policy,
        "threshold": settings.threshold_percent,
        "aggregation": settings.aggregation,
        "gracePeriod": format_duration(settings.grace_period),
        "ttl": format_duration(settings.ttl),
    }


def _history(previous: Mapping[str, Any]) -> dict[str, Any]:
    return {key: previous.get(key) for key in _HISTORY_KEYS}


def _kept(previous: Mapping[str, Any]) -> dict[str, Any]:
    return {key: previous.get(key) for key in ("phase", "utilization", "idleSince", "verdict")}


def _still_holds(root: Mapping[str, Any]) -> bool:
    """The preemption is not done: a workload preempted by deletion exists (it is gone once
    done); one preempted by scaling still asks for replicas."""
    kind = (str(root.get("apiVersion")), str(root.get("kind")))
    if preempt_action(*kind) == "delete":
        return True
    return _replicas(root) > 0


def _preempt(root: Mapping[str, Any]) -> PreemptIntent:
    metadata = root.get("metadata") or {}
    api_version, kind = str(root.get("apiVersion")), str(root.get("kind"))
    action = preempt_action(api_version, kind) or "delete"
    return PreemptIntent(
        target=ObjectRef(
            api_version=api_version,
            kind=kind,
            name=str(metadata.get("name") or ""),
            namespace=str(metadata.get("namespace") or "") or None,
            uid=str(metadata.get("uid") or "") or None,
        ),
        action=action,
        from_replicas=_replicas(root) if action == "scale-to-zero" else None,
    )


def _replicas(root: Mapping[str, Any]) -> int:
    value = (root.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def _shown_utilization(
    previous: Mapping[str, Any], phase: str, percent: float | None
) -> int | None:
    if percent is None:
        return None
    current = whole_percent(percent)
    shown = previous.get("utilization")
    if (
        previous.get("phase") == phase
        and isinstance(shown, int)
        and abs(current - shown) < UTILIZATION_STEP
    ):
        return shown
    return current


def whole_percent(percent: float) -> int:
    """A utilization as a whole percentage, halves rounded up (92.5 % shows as 93, not as
    Python's round-half-to-even 92)."""
    return math.floor(percent + 0.5)


def _verdict(phase: str, settings: GpuPreemptionSettings, reading: Reading, *, vendor: str) -> str:
    threshold = _percent(settings.threshold_percent)
    if phase == ACTIVE:
        return f"Busy: at or above the idle threshold of {threshold}"
    if phase == UNKNOWN or reading.idle_since is None:
        return "No current GPU reading: not judged"
    due = format_time(reading.idle_since + settings.grace_period)
    if settings.policy == "Always":
        return f"Idle below {threshold}: preempted once idle until {due} (policy Always)"
    return (
        f"Idle below {threshold}: from {due} preempted when a pending workload needs "
        f"{vendor} GPUs (policy OnPressure)"
    )


def _waiting_verdict(root: Mapping[str, Any], waiting: GpuWait) -> str:
    return (
        f"Waiting for {waiting.gpus} {gpu_vendor(root)} GPUs since "
        f"{format_time(waiting.since)}: idle workloads under the OnPressure policy may be "
        "preempted for it"
    )


def _preempted_verdict(previous: Mapping[str, Any]) -> str:
    at = previous.get("preemptedAt") or "?"
    reason = previous.get("preemptionReason") or "GPU idle preemption"
    return f"Preempted at {at}: {reason}"


def _preempted_event(named: str, previous: Mapping[str, Any]) -> tuple[EventIntent, ...]:
    return (
        EventIntent(
            type="Warning",
            reason=REASON_PREEMPTED,
            message=(
                f"{named} was preempted to free GPUs; "
                f"reason: {previous.get('preemptionReason') or 'GPU idle preemption'}"
            ),
        ),
    )


def _display(reference: Mapping[str, Any]) -> str:
    return f"{reference.get('kind') or '?'}/{reference.get('name') or '?'}"


def _beneficiary(ref: ObjectRef) -> dict[str, Any]:
    found = {"kind": ref.kind, "name": ref.name, "namespace": ref.namespace, "uid": ref.uid}
    return {key: value for key, value in found.items() if value is not None}


def _percent(value: float) -> str:
    return f"{value:g}%"


def _ttl(value: object) -> timedelta:
    if not isinstance(value, str) or not value:
        return DEFAULT_TTL
    try:
        return parse_duration(value)
    except ValueError:
        return DEFAULT_TTL


def _plan(
    ref: ObjectRef,
    metadata: Mapping[str, Any],
    *,
    status: Mapping[str, Any] | None = None,
    events: tuple[EventIntent, ...] = (),
    preempt: PreemptIntent | None = None,
    delete_owner: bool = False,
) -> Plan:
    return Plan(
        owner=ref,
        observed_generation=metadata.get("generation"),
        observed_resource_version=metadata.get("resourceVersion"),
        status=None if status is None else {k: v for k, v in status.items() if v is not None},
        events=events,
        preempt=preempt,
        delete_owner=delete_owner,
    )


def _ref(record: Mapping[str, Any]) -> ObjectRef:
    metadata = record.get("metadata") or {}
    return ObjectRef(
        api_version=str(record.get("apiVersion") or API_VERSION),
        kind=GPU_WORKLOAD,
        name=str(metadata.get("name") or ""),
        namespace=str(metadata.get("namespace") or "") or None,
        uid=str(metadata.get("uid") or "") or None,
    )
