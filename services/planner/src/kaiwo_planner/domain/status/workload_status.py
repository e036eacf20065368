"""The status of a KaiwoJob or KaiwoService, derived from what its children report.

:func:`derive_status` is the whole state machine: phase (``status.status``), conditions, start
and completion times, duration, observedGeneration and the Events that tell people about a
change. It reads the previous status and the observed children and returns the new status; it
never looks at a clock (``now`` is given).

Phases (upstream Kaiwo §7, with the API reference's READY):

* ``""`` -> PENDING (or DOWNLOADING / ERROR) on the first plan, before any child exists.
* DOWNLOADING while the download Job fills the volumes; its failure is FAILED.
* PENDING until Kueue admits the child; then STARTING, RUNNING, and COMPLETE or FAILED.
* A KaiwoService is READY once every replica is available (Deployment) or its RayService
  reports Ready, as the API reference defines READY; RUNNING means some pods are up.
  (Upstream no longer writes READY for services; the reference wins.)
* ERROR is recoverable: not schedulable, or a Deployment past its progress deadline.
* TERMINATING (a preemption or termination decision) is followed by TERMINATED on the next
  plan.
* COMPLETE, FAILED and TERMINATED are final: only observedGeneration still moves.

Choices that differ from upstream, on purpose:

* ``startTime`` is set once, when the workload first runs (the reference: "when the first pod
  started running"); upstream resets it each time RUNNING is re-entered.
* ``completionTime`` (KaiwoJob) and ``observedGeneration`` are written; upstream never does.
* ``duration`` is written with every status change (phase, conditions) and when the workload
  ends, never for itself: while it runs it is the time up to its last change, and
  ``now - startTime`` is the live figure (decision 0043). Refreshing it alone rewrote the
  status of every running workload at every resync and restart.
* Conditions are compared by status, reason and message; ``lastTransitionTime`` moves only when
  a condition's status changes. Conditions written by others are kept as they are.
* A Kueue-managed child is considered admitted when no Kueue Workload exists for it but it is
  visibly running (a namespace Kueue does not manage); upstream would wait in PENDING forever.
* While Kueue keeps the child waiting, the ``Admitted`` condition's message carries Kueue's own
  reason (its Workload's ``QuotaReserved``, or ``Evicted`` message: "couldn't assign flavors
  ... insufficient unused quota for amd.com/gpu ..."); upstream says only which queue. A
  Workload Kueue is evicting counts as waiting at once (upstream: admitted until Kueue has
  stopped the child and taken the quota back).
* When Kueue preempts the child, the workload shows it: a ``Preempted`` condition mirroring
  Kueue's (reason and message, e.g. ``InClusterQueue``) and a Warning Event when it turns True.
* Events are also emitted for DOWNLOADING, READY and ERROR (upstream emits none for these).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, Literal

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus
from kaiwo_contracts.plans import EventIntent, ObjectRef

from kaiwo_planner.domain.children.naming import child_name, main_child_name
from kaiwo_planner.domain.scheduling.schedulable import SCHEDULABLE, SchedulableVerdict
from kaiwo_planner.domain.state.cluster import ClusterState, object_uid
from kaiwo_planner.domain.state.index_entry import RUN_ID_LABEL

WorkloadKind = Literal["KaiwoJob", "KaiwoService"]
ChildKind = Literal["Job", "RayJob", "Deployment", "AppWrapper"]

ADMITTED = "Admitted"
PREEMPTED = "Preempted"
"""Kueue's Workload condition of that name, mirrored on the workload."""
KUEUE_QUOTA_RESERVED = "QuotaReserved"
KUEUE_EVICTED = "Evicted"
PVC_READY = "PvcReady"
DOWNLOAD_JOB_SUCCEEDED = "DownloadJobSucceeded"
PREEMPTABLE = "Preemptable"
PREEMPTED_FOR = "preemptedFor"
WORKLOAD_TERMINATED_EARLY = "WorkloadTerminatedEarly"

_RUNNING_PHASES = frozenset({WorkloadStatus.RUNNING, WorkloadStatus.READY})
_ACTIVE_CHILD_PHASES = frozenset(
    {WorkloadStatus.RUNNING, WorkloadStatus.READY, WorkloadStatus.COMPLETE, WorkloadStatus.FAILED}
)

_EVENTS: Mapping[WorkloadStatus, tuple[Literal["Normal", "Warning"], str, str]] = MappingProxyType(
    {
        WorkloadStatus.DOWNLOADING: ("Normal", "WorkloadDownloading", "Downloading data"),
        WorkloadStatus.PENDING: ("Normal", "WorkloadPending", "Workload is pending admission"),
        WorkloadStatus.STARTING: ("Normal", "WorkloadStarting", "Workload was admitted, starting"),
        WorkloadStatus.RUNNING: ("Normal", "WorkloadRunning", "Workload has started"),
        WorkloadStatus.READY: ("Normal", "WorkloadReady", "Workload is ready"),
        WorkloadStatus.COMPLETE: ("Normal", "WorkloadComplete", "Workload has completed"),
        WorkloadStatus.FAILED: ("Warning", "WorkloadFailed", "Workload has failed"),
        WorkloadStatus.TERMINATING: (
            "Normal",
            "WorkloadTermination",
            "Workload has been flagged for termination",
        ),
    }
)


# ------------------------------------------------------------------ inputs and outputs


@dataclass(frozen=True, slots=True)
class ObservedChildren:
    """What exists of one workload's children, as JSON objects (None: not created yet).

    ``child`` is the main child (``child_kind``); for a Ray KaiwoService it is the AppWrapper
    and ``ray_service`` the RayService the AppWrapper created. ``kueue_workloads`` are the
    Workloads Kueue made for the child (for a Deployment: for each of its pods).
    ``downloads_configured`` says whether a download Job is part of the workload at all.
    """

    child_kind: ChildKind
    child: Mapping[str, Any] | None = None
    ray_service: Mapping[str, Any] | None = None
    kueue_workloads: tuple[Mapping[str, Any], ...] = ()
    downloads_configured: bool = False
    download_job: Mapping[str, Any] | None = None
    pvcs: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class TerminationRequest:
    """Stop the workload early; ``reason`` becomes the WorkloadTerminatedEarly reason and
    ``beneficiary`` (a preemption's pending workload) ``status.preemptedFor``."""

    reason: str
    message: str
    beneficiary: ObjectRef | None = None


@dataclass(frozen=True, slots=True)
class StatusDecision:
    """The status to write, the Events to emit, and when to plan again at the latest.

    ``replan_after`` is set while a duration deadline is ahead, so the Preemptable condition
    flips on time.
    """

    status: dict[str, Any]
    events: tuple[EventIntent, ...] = ()
    replan_after: timedelta | None = None

    @property
    def phase(self) -> WorkloadStatus:
        return WorkloadStatus(self.status.get("status", ""))


@dataclass(frozen=True, slots=True)
class ConditionSpec:
    """A condition as a planner observes it; :func:`merge_conditions` adds times and generation."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str = ""


@dataclass(slots=True)
class _Observation:
    phase: WorkloadStatus
    conditions: list[ConditionSpec] = field(default_factory=list)


def observe_children(
    *,
    cluster: ClusterState,
    owner_uid: str,
    name: str,
    child_kind: ChildKind,
    downloads_configured: bool,
) -> ObservedChildren:
    """Collect a workload's children from the cluster state (children are named after it)."""
    child = cluster.child_of(owner_uid, kind=child_kind, name=main_child_name(name))
    child_uid = object_uid(child) if child else ""
    ray_service = None
    if child_kind == "AppWrapper":
        ray_service = (cluster.child_of(child_uid, kind="RayService") if child_uid else None) or (
            cluster.child_of(owner_uid, kind="RayService")
        )
    if child_kind == "Deployment":
        # Kueue admits a Deployment pod by pod: one Workload per pod carrying our run-id.
        pods = cluster.objects_labelled(RUN_ID_LABEL, owner_uid, kind="Pod")
        workloads = tuple(w for pod in pods for w in cluster.kueue_workloads_for(object_uid(pod)))
    else:
        workloads = cluster.kueue_workloads_for(child_uid) if child_uid else ()
    return ObservedChildren(
        child_kind=child_kind,
        child=child,
        ray_service=ray_service,
        kueue_workloads=workloads,
        downloads_configured=downloads_configured,
        download_job=cluster.child_of(owner_uid, kind="Job", name=child_name(name, "download")),
        pvcs=tuple(
            c for c in cluster.children_of(owner_uid) if c.get("kind") == "PersistentVolumeClaim"
        ),
    )


# ------------------------------------------------------------------ the state machine


def derive_status(
    *,
    workload_kind: WorkloadKind,
    generation: int,
    previous_status: Mapping[str, Any] | None,
    observed: ObservedChildren,
    schedulable: SchedulableVerdict,
    cluster_queue: str,
    now: datetime,
    duration: timedelta | None = None,
    termination: TerminationRequest | None = None,
    extra_conditions: Sequence[ConditionSpec] = (),
) -> StatusDecision:
    """The next status of one workload.

    ``duration`` is the workload's ``spec.duration``; ``termination`` a decision to stop it
    early (duration or idle preemption, underutilization), honoured only while it runs.
    ``extra_conditions`` are conditions other planning steps observed (for example that a
    Job change could not be applied); they are merged like the others, except while the
    workload is not schedulable (nothing else is planned then), TERMINATING or final.
    """
    previous = dict(previous_status or {})
    previous_phase = WorkloadStatus(previous.get("status", ""))
    if previous_phase.is_terminal:
        return StatusDecision(status={**previous, "observedGeneration": generation})
    if previous_phase is WorkloadStatus.TERMINATING:
        return _terminated(workload_kind, generation, previous, now)

    observation = _observe(
        previous_phase=previous_phase,
        previous=previous,
        observed=observed,
        schedulable=schedulable,
        cluster_queue=cluster_queue,
    )
    if schedulable.schedulable:
        observation.conditions.extend(extra_conditions)
    replan_after = None
    start_time = _time(previous.get("startTime"))
    if observation.phase in _RUNNING_PHASES and duration is not None:
        started = start_time or now
        remaining = duration - (now - started)
        observation.conditions.append(_preemptable(remaining))
        if remaining > timedelta(0):
            replan_after = remaining
    if termination is not None and observation.phase in _RUNNING_PHASES:
        observation.phase = WorkloadStatus.TERMINATING
        observation.conditions.append(
            ConditionSpec(
                WORKLOAD_TERMINATED_EARLY, "False", termination.reason, termination.message
            )
        )
    status = _write(
        workload_kind=workload_kind,
        generation=generation,
        previous=previous,
        observation=observation,
        now=now,
    )
    beneficiary = termination.beneficiary if termination is not None else None
    if observation.phase is WorkloadStatus.TERMINATING and beneficiary is not None:
        status[PREEMPTED_FOR] = _preempted_for(beneficiary)
    return StatusDecision(
        status=status,
        events=(
            *_transition_events(previous_phase, observation),
            *_preemption_events(previous, observation),
        ),
        replan_after=replan_after,
    )


def _observe(
    *,
    previous_phase: WorkloadStatus,
    previous: Mapping[str, Any],
    observed: ObservedChildren,
    schedulable: SchedulableVerdict,
    cluster_queue: str,
) -> _Observation:
    schedulable_condition = ConditionSpec(
        SCHEDULABLE,
        "True" if schedulable.schedulable else "False",
        schedulable.reason,
        schedulable.message,
    )
    if not schedulable.schedulable:
        return _Observation(WorkloadStatus.ERROR, [schedulable_condition])
    conditions = [schedulable_condition]
    pvc_phase, pvc_condition = _pvc_observation(observed.pvcs)
    if pvc_condition is not None:
        conditions.append(pvc_condition)
    if observed.downloads_configured:
        download_phase, download_condition = _download_observation(
            observed.download_job, _condition(previous, DOWNLOAD_JOB_SUCCEEDED)
        )
        if download_condition is not None:
            conditions.append(download_condition)
        if download_phase is WorkloadStatus.FAILED:
            return _Observation(WorkloadStatus.FAILED, conditions)
        if download_phase is not WorkloadStatus.COMPLETE:
            return _Observation(WorkloadStatus.DOWNLOADING, conditions)
    if pvc_phase is WorkloadStatus.FAILED:
        return _Observation(WorkloadStatus.FAILED, conditions)

    preemption = kueue_preemption(observed.kueue_workloads)
    if preemption is not None:
        conditions.append(preemption)
    if not _is_admitted(observed):
        why = kueue_waiting_reason(observed.kueue_workloads)
        conditions.append(
            ConditionSpec(
                ADMITTED,
                "False",
                "Pending",
                f"Workload is pending admission into '{cluster_queue}'"
                + (f": {why}" if why else ""),
            )
        )
        return _Observation(WorkloadStatus.PENDING, conditions)
    conditions.append(ConditionSpec(ADMITTED, "True", "Admitted", "Workload is admitted"))
    phase = child_phase(observed, previous_phase=previous_phase)
    return _Observation(phase or WorkloadStatus.STARTING, conditions)


def _preempted_for(beneficiary: ObjectRef) -> dict[str, Any]:
    named = {
        "kind": beneficiary.kind,
        "namespace": beneficiary.namespace,
        "name": beneficiary.name,
        "uid": beneficiary.uid,
    }
    return {key: value for key, value in named.items() if value is not None}


def _terminated(
    workload_kind: WorkloadKind, generation: int, previous: Mapping[str, Any], now: datetime
) -> StatusDecision:
    early = _condition(previous, WORKLOAD_TERMINATED_EARLY)
    reason = str(early.get("reason")) if early else "EarlyTermination"
    message = (
        str(early.get("message"))
        if early
        else "Workload terminated early (check events and other conditions for likely causes)"
    )
    observation = _Observation(
        WorkloadStatus.TERMINATED,
        [ConditionSpec(WORKLOAD_TERMINATED_EARLY, "True", reason, message)],
    )
    status = _write(
        workload_kind=workload_kind,
        generation=generation,
        previous=previous,
        observation=observation,
        now=now,
    )
    events = (
        EventIntent(
            type="Normal", reason="WorkloadTerminated", message="Workload has been terminated"
        ),
        EventIntent(type="Warning", reason=_event_reason(reason), message=message),
    )
    return StatusDecision(status=status, events=events)


# ------------------------------------------------------------------ writing the status


def _write(
    *,
    workload_kind: WorkloadKind,
    generation: int,
    previous: Mapping[str, Any],
    observation: _Observation,
    now: datetime,
) -> dict[str, Any]:
    phase = observation.phase
    phase_changed = phase != WorkloadStatus(previous.get("status", ""))
    conditions = merge_conditions(
        previous.get("conditions") or (),
        observation.conditions,
        generation=generation,
        now=now,
    )
    status: dict[str, Any] = {
        key: value
        for key, value in previous.items()
        if key not in {"status", "conditions", "observedGeneration"}
    }
    status["status"] = phase.value
    status["conditions"] = conditions
    status["observedGeneration"] = generation
    if phase in _RUNNING_PHASES and "startTime" not in status:
        status["startTime"] = format_time(now)
    final = phase.is_terminal
    if final and workload_kind == "KaiwoJob" and "completionTime" not in status:
        status["completionTime"] = format_time(now)
    started = _time(status.get("startTime"))
    if started is not None and (
        final or phase in _RUNNING_PHASES or phase is WorkloadStatus.TERMINATING
    ):
        ended = _time(status.get("completionTime")) if final else None
        elapsed = _whole_seconds((ended or now) - started)
        content_changed = phase_changed or conditions != list(previous.get("conditions") or ())
        if content_changed or "duration" not in previous:
            status["duration"] = elapsed
    return status


def merge_conditions(
    previous: Iterable[Mapping[str, Any]],
    observed: Sequence[ConditionSpec],
    *,
    generation: int,
    now: datetime,
) -> list[dict[str, Any]]:
    """Previous conditions updated with the observed ones (same order; new ones appended).

    ``lastTransitionTime`` changes only when a condition's status does.
    """
    merged = [dict(c) for c in previous]
    by_type = {c.get("type"): i for i, c in enumerate(merged)}
    for condition in observed:
        index = by_type.get(condition.type)
        old = merged[index] if index is not None else None
        transition = (
            old["lastTransitionTime"]
            if old is not None
            and old.get("status") == condition.status
            and old.get("lastTransitionTime")
            else format_time(now)
        )
        new = {
            "type": condition.type,
            "status": condition.status,
            "observedGeneration": generation,
            "lastTransitionTime": transition,
            "reason": condition.reason,
            "message": condition.message,
        }
        if index is None:
            by_type[condition.type] = len(merged)
            merged.append(new)
        else:
            merged[index] = new
    return merged


def _preemption_events(
    previous: Mapping[str, Any], observation: _Observation
) -> tuple[EventIntent, ...]:
    """A Warning when Kueue's preemption of the child is first seen."""
    now = next((c for c in observation.conditions if c.type == PREEMPTED), None)
    if now is None or now.status != "True":
        return ()
    before = _condition(previous, PREEMPTED)
    if before is not None and before.get("status") == "True":
        return ()
    return (
        EventIntent(
            type="Warning",
            reason="WorkloadPreempted",
            message=f"Kueue preempted the workload ({now.reason}): {now.message}",
        ),
    )


def _transition_events(
    previous_phase: WorkloadStatus, observation: _Observation
) -> tuple[EventIntent, ...]:
    phase = observation.phase
    if phase == previous_phase:
        return ()
    if phase is WorkloadStatus.ERROR:
        cause = next((c for c in observation.conditions if c.status == "False"), None)
        return (
            EventIntent(
                type="Warning",
                reason="WorkloadError",
                message=cause.message if cause else "Workload is in error",
            ),
        )
    if phase in _EVENTS:
        kind, reason, message = _EVENTS[phase]
        return (EventIntent(type=kind, reason=reason, message=message),)
    return ()


# ------------------------------------------------------------------ children -> phase


def child_phase(
    observed: ObservedChildren, *, previous_phase: WorkloadStatus
) -> WorkloadStatus | None:
    """The phase the main child reports, or None when it does not exist yet."""
    child = observed.child
    if child is None:
        return None
    if observed.child_kind == "Job":
        return batch_job_phase(child, previous_phase=previous_phase)
    if observed.child_kind == "RayJob":
        return _ray_job_phase(child)
    if observed.child_kind == "Deployment":
        return _deployment_phase(child)
    return _ray_service_phase(observed.ray_service)


def batch_job_phase(job: Mapping[str, Any], *, previous_phase: WorkloadStatus) -> WorkloadStatus:
    """A batch/v1 Job's state as a workload phase (upstream §7.3, also accepting Complete).

    First match wins; a Job that was RUNNING stays so while its pods finish.
    """
    status = job.get("status") or {}
    rules = (
        (_has_condition(status, "SuccessCriteriaMet"), WorkloadStatus.COMPLETE),
        (_has_condition(status, "Complete"), WorkloadStatus.COMPLETE),
        (_has_condition(status, "Failed"), WorkloadStatus.FAILED),
        (_has_condition(status, "Suspended"), WorkloadStatus.PENDING),
        (int(status.get("failed") or 0) > 0, WorkloadStatus.FAILED),
        (int(status.get("ready") or 0) > 0, WorkloadStatus.RUNNING),
        (previous_phase is WorkloadStatus.RUNNING, WorkloadStatus.RUNNING),
        (int(status.get("active") or 0) > 0, WorkloadStatus.STARTING),
    )
    return next((phase for matches, phase in rules if matches), WorkloadStatus.PENDING)


def _ray_job_phase(ray_job: Mapping[str, Any]) -> WorkloadStatus:
    status = ray_job.get("status") or {}
    if status.get("jobDeploymentStatus") == "Failed":
        return WorkloadStatus.FAILED
    return {
        "RUNNING": WorkloadStatus.RUNNING,
        "FAILED": WorkloadStatus.FAILED,
        "SUCCEEDED": WorkloadStatus.COMPLETE,
        "STOPPED": WorkloadStatus.TERMINATED,
    }.get(str(status.get("jobStatus") or ""), WorkloadStatus.STARTING)


def _deployment_phase(deployment: Mapping[str, Any]) -> WorkloadStatus:
    status = deployment.get("status") or {}
    meta = deployment.get("metadata") or {}
    for condition in status.get("conditions") or ():
        if (
            condition.get("type") == "Progressing"
            and condition.get("status") == "False"
            and condition.get("reason") == "ProgressDeadlineExceeded"
        ):
            return WorkloadStatus.ERROR
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        return WorkloadStatus.STARTING
    replicas = (deployment.get("spec") or {}).get("replicas")
    # The API server defaults a Deployment's replicas to 1 (found by fuzzing: a null one).
    wanted = replicas if isinstance(replicas, int) else 1
    available = int(status.get("availableReplicas") or 0)
    if available >= wanted:
        return WorkloadStatus.READY
    if available > 0 or int(status.get("readyReplicas") or 0) > 0:
        return WorkloadStatus.RUNNING
    return WorkloadStatus.STARTING


def _ray_service_phase(ray_service: Mapping[str, Any] | None) -> WorkloadStatus:
    if ray_service is None:
        return WorkloadStatus.STARTING
    status = ray_service.get("status") or {}
    if _has_condition(status, "Ready"):
        return WorkloadStatus.READY
    applications = ((status.get("activeServiceStatus") or {}).get("applicationStatuses")) or {}
    if any(
        (a or {}).get("status") in {"UNHEALTHY", "DEPLOY_FAILED"} for a in applications.values()
    ):
        return WorkloadStatus.FAILED
    cluster_state = ((status.get("activeServiceStatus") or {}).get("rayClusterStatus") or {}).get(
        "state"
    )
    if cluster_state == "ready":
        return WorkloadStatus.RUNNING
    return WorkloadStatus.STARTING


# ------------------------------------------------------------------ storage and admission


_DOWNLOAD_MAP: Mapping[
    WorkloadStatus, tuple[WorkloadStatus, Literal["True", "False"], str, str]
] = MappingProxyType(
    {
        WorkloadStatus.PENDING: (
            WorkloadStatus.RUNNING,
            "False",
            "JobPending",
            "Download job pending",
        ),
        WorkloadStatus.STARTING: (
            WorkloadStatus.STARTING,
            "False",
            "JobInProgress",
            "Download job starting",
        ),
        WorkloadStatus.RUNNING: (
            WorkloadStatus.RUNNING,
            "False",
            "JobInProgress",
            "Download job in progress",
        ),
        WorkloadStatus.FAILED: (WorkloadStatus.FAILED, "False", "JobFailed", "Download job failed"),
        WorkloadStatus.COMPLETE: (
            WorkloadStatus.COMPLETE,
            "True",
            "JobCompleted",
            "Download job succeeded",
        ),
    }
)


def _download_observation(
    job: Mapping[str, Any] | None, previous: Mapping[str, Any] | None
) -> tuple[WorkloadStatus, ConditionSpec | None]:
    if job is None:
        if previous is not None and previous.get("status") == "True":
            # Finished earlier and since removed: the data is there.
            return WorkloadStatus.COMPLETE, None
        return WorkloadStatus.NEW, None
    job_phase = batch_job_phase(job, previous_phase=WorkloadStatus.NEW)
    storage_phase, status, reason, message = _DOWNLOAD_MAP[job_phase]
    return storage_phase, ConditionSpec(DOWNLOAD_JOB_SUCCEEDED, status, reason, message)


def _pvc_observation(
    pvcs: Sequence[Mapping[str, Any]],
) -> tuple[WorkloadStatus, ConditionSpec | None]:
    if not pvcs:
        return WorkloadStatus.NEW, None
    phases = [str((p.get("status") or {}).get("phase") or "Pending") for p in pvcs]
    names = [str((p.get("metadata") or {}).get("name", "")) for p in pvcs]
    if "Lost" in phases:
        name = names[phases.index("Lost")]
        return WorkloadStatus.FAILED, ConditionSpec(
            PVC_READY, "False", "Lost", f"PersistentVolumeClaim {name} is Lost"
        )
    waiting = [(n, p) for n, p in zip(names, phases, strict=True) if p != "Bound"]
    if waiting:
        name, phase = waiting[0]
        return WorkloadStatus.PENDING, ConditionSpec(
            PVC_READY, "False", _event_reason(phase), f"PersistentVolumeClaim {name} is {phase}"
        )
    return WorkloadStatus.COMPLETE, ConditionSpec(
        PVC_READY, "True", "Bound", "All PersistentVolumeClaims are bound"
    )


def kueue_waiting_reason(workloads: Sequence[Mapping[str, Any]]) -> str:
    """Why Kueue keeps a Workload of the child waiting, in Kueue's words: the message of its
    ``Evicted`` condition (a preemption, a stop) while that holds, else of ``QuotaReserved``
    when False (no quota, no such queue); "" when none says."""
    for workload in workloads:
        status = workload.get("status") or {}
        if _kueue_admitted(status):
            continue
        conditions = {c.get("type"): c for c in status.get("conditions") or ()}
        evicted = conditions.get(KUEUE_EVICTED) or {}
        reserved = conditions.get(KUEUE_QUOTA_RESERVED) or {}
        if evicted.get("status") == "True" and evicted.get("message"):
            return str(evicted["message"])
        if reserved.get("status") == "False" and reserved.get("message"):
            return str(reserved["message"])
    return ""


def kueue_preemption(workloads: Sequence[Mapping[str, Any]]) -> ConditionSpec | None:
    """Kueue's ``Preempted`` condition of the child's Workloads (a True one first), as the
    workload's own; None when Kueue has never preempted them."""
    found = [
        c
        for workload in workloads
        for c in (workload.get("status") or {}).get("conditions") or ()
        if c.get("type") == PREEMPTED and c.get("status") in ("True", "False")
    ]
    if not found:
        return None
    chosen = next((c for c in found if c.get("status") == "True"), found[0])
    return ConditionSpec(
        PREEMPTED,
        "True" if chosen.get("status") == "True" else "False",
        str(chosen.get("reason") or "Preempted"),
        str(chosen.get("message") or ""),
    )


def _is_admitted(observed: ObservedChildren) -> bool:
    if observed.kueue_workloads:
        return all(_kueue_admitted(w.get("status") or {}) for w in observed.kueue_workloads)
    child = observed.child
    if child is None or (child.get("spec") or {}).get("suspend") is True:
        return False
    # No Workload: Kueue does not manage this namespace; believe the child once it runs.
    return child_phase(observed, previous_phase=WorkloadStatus.NEW) in _ACTIVE_CHILD_PHASES


def _kueue_admitted(status: Mapping[str, Any]) -> bool:
    """Kueue admitted the Workload and is not taking it back: while Kueue evicts (a
    preemption), the Workload stays Admitted until the child has stopped, but the child is
    already suspended and waiting again (Kueue resets ``Evicted`` when it admits anew)."""
    return _has_condition(status, "Admitted") and not _has_condition(status, KUEUE_EVICTED)


# ------------------------------------------------------------------ small helpers


def _preemptable(remaining: timedelta) -> ConditionSpec:
    if remaining > timedelta(0):
        return ConditionSpec(
            PREEMPTABLE,
            "False",
            "DurationNotExceeded",
            "Workload is running and the duration has not been exceeded",
        )
    return ConditionSpec(PREEMPTABLE, "True", "DurationExceeded", "Workload duration has exceeded")


def _has_condition(status: Mapping[str, Any], condition_type: str) -> bool:
    return any(
        c.get("type") == condition_type and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )


def _condition(status: Mapping[str, Any], condition_type: str) -> Mapping[str, Any] | None:
    return next(
        (c for c in status.get("conditions") or () if c.get("type") == condition_type), None
    )


def _event_reason(text: str) -> str:
    """A PascalCase Event reason from a condition reason (which may contain , : or _)."""
    cleaned = "".join(ch for ch in text if ch.isalnum())
    if not cleaned or not cleaned[0].isalpha():
        return "WorkloadTerminatedEarly"
    return cleaned[0].upper() + cleaned[1:]


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with second precision, as metav1.Time is written."""
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    t = aware if aware.tzinfo is UTC else aware.astimezone(UTC)
    if t.year < 1000:  # strftime's %Y does not pad these the same on every platform
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{t.year}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}Z"


def _time(value: object) -> datetime | None:
    if not value:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _whole_seconds(delta: timedelta) -> int:
    return max(int(delta.total_seconds()), 0)
