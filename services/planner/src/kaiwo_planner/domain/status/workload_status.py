"""The status of a KaiwoJob or KaiwoService, derived from what its children report.

:func:`derive_status` is the whole state machine: phase (``status.status``), conditions, start
and completion times, duration, observedGeneration and the Events that tell people about a
change. It reads the previous status and the observed children and returns the new status; it
never looks at a clock (``now`` is given). What it reads comes from its neighbours in this
package: the children and the phase they show (:mod:`.child_phase`), Kueue's admission
(:mod:`.kueue_admission`), the storage it waits for (:mod:`.storage_phase`); the Events it
emits are in :mod:`.workload_events`, and conditions merge as :mod:`.conditions` says.

Phases (upstream Kaiwo §7, with the API reference's READY):

* ``""`` -> PENDING (or DOWNLOADING / ERROR) on the first plan, before any child exists.
* DOWNLOADING while the download Job fills the volumes; its failure is FAILED.
* PENDING until Kueue admits the child; then STARTING, RUNNING, and COMPLETE or FAILED.
* A KaiwoService is READY once every replica is available (Deployment) or its RayService
  reports Ready, as the API reference defines READY; RUNNING means some pods are up, not
  yet all ready: a Deployment with a replica available or Ready, or a pod of it in phase
  Running (decision 0214); a Ray service whose cluster is up (decision 0186). STARTING
  until then, and ``startTime`` is set when RUNNING (or READY) is first seen.
  (Upstream no longer writes READY for services; the reference wins.)
* ERROR is recoverable: not schedulable, or a Deployment past its progress deadline (not
  when all it waits for is Kueue's admission of new pods while others serve, decision 0168),
  or a rolling Deployment's pod Kueue admitted and not Ready ``progressDeadlineSeconds``
  after its admission, whatever else waits (decision 0176; the plan asks to be planned
  again when a pod still within its time runs out of it).
* TERMINATING (a preemption or termination decision) is followed by TERMINATED on the next
  plan.
* COMPLETE, FAILED and TERMINATED are final: only observedGeneration still moves. A
  condition judged only while the workload runs (``GpuIdle``) is withdrawn in the write of
  the final phase, and once on a workload that ended before that rule (decision 0242).

Choices that differ from upstream, on purpose:

* ``startTime`` is set once, when the workload first runs (the reference: "when the first pod
  started running"); upstream resets it each time RUNNING is re-entered. A workload that
  finishes without RUNNING ever observed (a short run, observations coalesced, the operator
  down) takes its main child's own start instead (:class:`.child_phase.ChildRunTimes`), and
  a KaiwoJob's ``completionTime`` is its child's own finish when the child records one, else
  ``now`` (decision 0114).
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
  Evicted for another reason (a stopped queue...), it gets a Warning ``WorkloadEvicted`` with
  Kueue's reason and words when it waits again (decision 0169).
* A workload Kueue evicted after admitting it has an ``Evicted`` condition mirroring Kueue's
  (its reason and message) while it waits, kept from its previous status when the Workloads
  that said it are gone (a service's pods replaced by fresh ones), and False ``Readmitted``
  once admitted again (:mod:`.eviction`, decision 0180).
* A workload Kueue admits again after an eviction starts a new run (its pods start over):
  ``spec.duration``'s deadline counts from the readmission, the moment its ``Admitted``
  condition turned True again (:func:`.kueue_admission.run_start`); ``startTime`` stays the
  first run's (decision 0169). Its ``Preemptable`` condition says so meanwhile: False
  ``Evicted`` while it waits, ``Readmitted`` while it starts again (decision 0171; upstream
  writes it only while running, so it kept "Workload is running").
* Events are also emitted for DOWNLOADING, READY and ERROR (upstream emits none for these).
* A batch Job's failed pod is a failure only past the Job's ``backoffLimit``, which is kept
  (upstream forced 0, so ``failed > 0`` meant the end); a RayJob KubeRay is retrying is
  STARTING (decision 0119).
* Why the children fail is told (decision 0134): a ``ChildHealthy`` condition, False with the
  child's reason and its pods' exit codes when it failed, a Deployment's message past its
  progress deadline, a container that cannot start or keeps crashing
  (:mod:`.child_health`); the ``WorkloadFailed`` Event carries the cause, and a Warning
  ``ChildUnhealthy`` tells trouble that leaves the phase as it is. Upstream says only
  "Workload has failed".
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus
from kaiwo_contracts.plans import EventIntent, ObjectRef

from kaiwo_planner.domain.scheduling.schedulable import SCHEDULABLE, SchedulableVerdict
from kaiwo_planner.domain.settings.cluster_settings import parse_time
from kaiwo_planner.domain.status.child_health import child_health
from kaiwo_planner.domain.status.child_phase import (
    ChildRunTimes,
    ObservedChildren,
    child_phase,
    deployment_replicas,
    deployment_serving_phase,
)
from kaiwo_planner.domain.status.conditions import (
    ConditionSpec,
    condition_of,
    format_time,
    merge_conditions,
)
from kaiwo_planner.domain.status.eviction import eviction_condition
from kaiwo_planner.domain.status.kueue_admission import (
    ADMITTED,
    NOT_QUEUED_MESSAGE,
    is_admitted,
    kueue_eviction,
    kueue_preemption,
    kueue_waiting_reason,
    partially_admitted_pods,
    pods_still_waiting,
    run_start,
    runs_on_existing_ray_cluster,
)
from kaiwo_planner.domain.status.rollout import (
    rollout_events,
    rollout_waiting_condition,
    rollout_waiting_for_quota,
)
from kaiwo_planner.domain.status.rollout_deadline import (
    AdmittedPodsDeadline,
    admitted_pods_deadline,
)
from kaiwo_planner.domain.status.storage_phase import (
    DOWNLOAD_JOB_SUCCEEDED,
    download_observation,
    pvc_observation,
)
from kaiwo_planner.domain.status.workload_events import (
    WORKLOAD_TERMINATED_EARLY,
    event_reason,
    eviction_events,
    health_events,
    preemption_events,
    transition_events,
)

WorkloadKind = Literal["KaiwoJob", "KaiwoService"]

PREEMPTABLE = "Preemptable"
PREEMPTED_FOR = "preemptedFor"

_RUNNING_PHASES = frozenset({WorkloadStatus.RUNNING, WorkloadStatus.READY})
_NOT_RUNNING_REASONS = frozenset({"Evicted", "Readmitted"})
"""``Preemptable`` reasons of a workload that ran and that Kueue evicted (decision 0171)."""


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
    flips on time, and while an admitted pod of a rolling Deployment has time left to become
    Ready, so its deadline is seen when it passes (decision 0176).
    """

    status: dict[str, Any]
    events: tuple[EventIntent, ...] = ()
    replan_after: timedelta | None = None

    @property
    def phase(self) -> WorkloadStatus:
        return WorkloadStatus(self.status.get("status", ""))


@dataclass(slots=True)
class _Observation:
    phase: WorkloadStatus
    conditions: list[ConditionSpec] = field(default_factory=list)


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
    ended_conditions: Mapping[str, ConditionSpec | None] | None = None,
    node_pools: Collection[str] | None = None,
) -> StatusDecision:
    """The next status of one workload.

    ``duration`` is the workload's ``spec.duration``; ``termination`` a decision to stop it
    early (duration or idle preemption, underutilization), honoured only while it runs.
    ``extra_conditions`` are conditions other planning steps observed (for example that a
    Job change could not be applied); they are merged like the others, except while the
    workload is not schedulable (nothing else is planned then), TERMINATING or final.
    ``ended_conditions`` are, by type, the conditions judged only while the workload runs as
    they stand once it has ended: written with the final phase in place of an extra
    condition of their type, and onto a final status that does not say them yet; None
    leaves the previous status's condition of that type as it is (decision 0242).
    ``node_pools`` are the node pools some node is in (``ChildHealthy`` tells a pod admitted
    into another, decision 0182).
    """
    previous = dict(previous_status or {})
    previous_phase = WorkloadStatus(previous.get("status", ""))
    ended = dict(ended_conditions or {})
    if previous_phase.is_terminal:
        return StatusDecision(status=_still_final(previous, generation, ended, now))
    if previous_phase is WorkloadStatus.TERMINATING:
        return _terminated(workload_kind, generation, previous, now, ended)

    pods_deadline = admitted_pods_deadline(observed, now=now)
    observation = _observe(
        previous_phase=previous_phase,
        previous=previous,
        observed=observed,
        schedulable=schedulable,
        cluster_queue=cluster_queue,
        pods_deadline=pods_deadline,
        node_pools=node_pools,
    )
    if schedulable.schedulable:
        observation.conditions.extend(extra_conditions)
    if observation.phase.is_terminal:
        # Nothing is written after this: a reading judged now would stay for good.
        observation.conditions = _as_ended(observation.conditions, ended)
    replan_after = None
    if observation.phase in _RUNNING_PHASES and duration is not None:
        # The deadline counts the current run: Kueue's eviction started the pods over, and
        # the time evicted is not the workload's (decision 0169). The Admitted condition this
        # plan writes is the one that tells when the run started.
        started = _run_started(previous, observation, now)
        remaining = duration - (now - started)
        observation.conditions.append(_preemptable(remaining))
        if remaining > timedelta(0):
            replan_after = remaining
    elif duration is not None and _waits_again(previous, observation.phase):
        # It ran with a duration and Kueue evicted it: it no longer runs, and its duration
        # counts again from its readmission (decision 0171; before, the condition kept
        # "Workload is running" while it waited).
        observation.conditions.append(
            _not_running(observation, previous, kueue_eviction(observed.kueue_workloads), now)
        )
    # Why it waits again, kept while it waits: a service's evicted pods are replaced by
    # pods whose fresh Workloads no longer say (decision 0180).
    evicted = eviction_condition(previous, observation.phase, observed.kueue_workloads)
    if evicted is not None:
        observation.conditions.append(evicted)
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
        child_times=observed.run_times,
    )
    beneficiary = termination.beneficiary if termination is not None else None
    if observation.phase is WorkloadStatus.TERMINATING and beneficiary is not None:
        status[PREEMPTED_FOR] = _preempted_for(beneficiary)
    return StatusDecision(
        status=status,
        events=(
            *transition_events(
                previous_phase,
                observation.phase,
                observation.conditions,
                replicas=_serving_replicas(observed),
            ),
            *preemption_events(previous, observation.conditions),
            *eviction_events(previous_phase, observation.phase, observed.kueue_workloads),
            *rollout_events(previous, observation.conditions),
            *health_events(previous, observation.phase, observation.conditions),
        ),
        replan_after=_earliest(replan_after, _until(pods_deadline.next_deadline, now)),
    )


def _until(moment: datetime | None, now: datetime) -> timedelta | None:
    return None if moment is None else moment - now


def _earliest(*delays: timedelta | None) -> timedelta | None:
    return min((d for d in delays if d is not None), default=None)


def _observe(
    *,
    previous_phase: WorkloadStatus,
    previous: Mapping[str, Any],
    observed: ObservedChildren,
    schedulable: SchedulableVerdict,
    cluster_queue: str,
    pods_deadline: AdmittedPodsDeadline,
    node_pools: Collection[str] | None,
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
    pvc_phase, pvc_condition = pvc_observation(observed.pvcs)
    if pvc_condition is not None:
        conditions.append(pvc_condition)
    if observed.downloads_configured:
        download_phase, download_condition = download_observation(
            observed.download_job,
            condition_of(previous, DOWNLOAD_JOB_SUCCEEDED),
            observed.pvcs,
            observed.pods,
        )
        if download_condition is not None:
            conditions.append(download_condition)
        if download_phase is WorkloadStatus.FAILED:
            return _Observation(WorkloadStatus.FAILED, conditions)
        if download_phase is not WorkloadStatus.COMPLETE:
            return _Observation(
                WorkloadStatus.DOWNLOADING,
                _with_health(
                    conditions, observed, WorkloadStatus.DOWNLOADING, previous, node_pools
                ),
            )
    if pvc_phase is WorkloadStatus.FAILED:
        return _Observation(WorkloadStatus.FAILED, conditions)

    preemption = kueue_preemption(observed.kueue_workloads)
    if preemption is not None:
        conditions.append(preemption)
    waiting_pods = pods_still_waiting(observed)
    if waiting_pods is not None:
        # A serving Deployment whose new pods wait (a rollout, a scale-up): it is admitted,
        # and its phase is what its pods do (upstream's all-or-nothing rule made a READY
        # service PENDING on every rollout, decision 0135).
        conditions.append(_partly_admitted(waiting_pods, observed, cluster_queue))
    elif not is_admitted(observed):
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
    else:
        conditions.append(_admitted(observed))
    return _admitted_child(
        previous_phase=previous_phase,
        previous=previous,
        observed=observed,
        conditions=conditions,
        cluster_queue=cluster_queue,
        pods_deadline=pods_deadline,
        node_pools=node_pools,
    )


def _admitted_child(
    *,
    previous_phase: WorkloadStatus,
    previous: Mapping[str, Any],
    observed: ObservedChildren,
    conditions: list[ConditionSpec],
    cluster_queue: str,
    pods_deadline: AdmittedPodsDeadline,
    node_pools: Collection[str] | None,
) -> _Observation:
    """What an admitted (or partly admitted) child shows: its own phase, unless a rollout
    is stuck on an admitted pod or waits only for quota."""
    phase = child_phase(observed, previous_phase=previous_phase) or WorkloadStatus.STARTING
    if phase is WorkloadStatus.TERMINATED:
        return _Observation(phase, [*conditions, _child_stopped(observed)])
    overdue = tuple(pod.told for pod in pods_deadline.overdue)
    if overdue:
        # A pod Kueue admitted is not Ready within the Deployment's deadline, counted from
        # its admission: the rollout is stuck whatever other pods wait for (decision 0176).
        phase = WorkloadStatus.ERROR
        health = _with_health(conditions, observed, phase, previous, node_pools, overdue)
        return _Observation(phase, health)
    rollout_waits_on = rollout_waiting_for_quota(observed)
    if rollout_waits_on and observed.child is not None:
        # Past its progress deadline only because its new pods wait for the quota its old
        # ones hold: what the pods do, not ERROR, and told as a wait (decision 0168).
        phase = deployment_serving_phase(observed.child, pods=observed.pods)
        waiting = rollout_waiting_condition(rollout_waits_on, observed, cluster_queue)
        conditions = [waiting if c.type == ADMITTED else c for c in conditions]
    return _Observation(phase, _with_health(conditions, observed, phase, previous, node_pools))


def _child_stopped(observed: ObservedChildren) -> ConditionSpec:
    """Why a workload whose child says it was stopped is TERMINATED: a RayJob whose Ray job
    someone stopped on its Ray cluster (``ray job stop``), with KubeRay's message. Nothing
    said so before: TERMINATED came with no condition and no Event (decision 0188)."""
    child = observed.child or {}
    name = str((child.get("metadata") or {}).get("name") or "")
    said = str((child.get("status") or {}).get("message") or "")
    return ConditionSpec(
        WORKLOAD_TERMINATED_EARLY,
        "True",
        "RayJobStopped",
        f"{observed.child_kind} {name}: its Ray job was stopped on its Ray cluster"
        + (f": {said}" if said else ""),
    )


def _run_started(previous: Mapping[str, Any], observation: _Observation, now: datetime) -> datetime:
    """When the current run started (:func:`.kueue_admission.run_start`); ``now`` for a
    first run, and for a workload that ran before and that this very observation sees Kueue
    admit again (its Admitted condition turns True now)."""
    if previous.get("startTime"):
        before = condition_of(previous, ADMITTED)
        seen = next((c for c in observation.conditions if c.type == ADMITTED), None)
        turned = before is not None and before.get("status") != "True"
        if turned and seen is not None and seen.status == "True":
            return now
    return run_start(previous) or now


def _with_health(
    conditions: list[ConditionSpec],
    observed: ObservedChildren,
    phase: WorkloadStatus,
    previous: Mapping[str, Any],
    node_pools: Collection[str] | None,
    overdue_pods: Sequence[str] = (),
) -> list[ConditionSpec]:
    health = child_health(
        observed, phase=phase, previous=previous, overdue_pods=overdue_pods, node_pools=node_pools
    )
    return conditions if health is None else [*conditions, health]


def _admitted(observed: ObservedChildren) -> ConditionSpec:
    if observed.child is not None and runs_on_existing_ray_cluster(observed.child):
        return ConditionSpec(ADMITTED, "True", "NotQueued", NOT_QUEUED_MESSAGE)
    partial = partially_admitted_pods(observed.kueue_workloads)
    if partial is None:
        return ConditionSpec(ADMITTED, "True", "Admitted", "Workload is admitted")
    admitted, asked = partial
    return ConditionSpec(
        ADMITTED,
        "True",
        "PartlyAdmitted",
        f"Kueue admitted {admitted} of {asked} pods of the Job (partial admission, "
        "kueue.x-k8s.io/job-min-parallelism): the Job runs "
        f"{admitted} pods at once while admitted, and spec.job.spec.parallelism is kept as "
        "Kueue set it",
    )


def _partly_admitted(
    waiting_pods: tuple[int, int], observed: ObservedChildren, cluster_queue: str
) -> ConditionSpec:
    waiting, total = waiting_pods
    why = kueue_waiting_reason(observed.kueue_workloads)
    return ConditionSpec(
        ADMITTED,
        "True",
        "PartlyAdmitted",
        f"{total - waiting} of {total} pods are admitted; {waiting} pending admission into "
        f"'{cluster_queue}'" + (f": {why}" if why else ""),
    )


def _serving_replicas(observed: ObservedChildren) -> tuple[int, int] | None:
    """``(available, asked)`` replicas of a Deployment child; None for other children."""
    if observed.child_kind != "Deployment" or observed.child is None:
        return None
    return deployment_replicas(observed.child)


def _preempted_for(beneficiary: ObjectRef) -> dict[str, Any]:
    named = {
        "kind": beneficiary.kind,
        "namespace": beneficiary.namespace,
        "name": beneficiary.name,
        "uid": beneficiary.uid,
    }
    return {key: value for key, value in named.items() if value is not None}


def _as_ended(
    conditions: Sequence[ConditionSpec], ended: Mapping[str, ConditionSpec | None]
) -> list[ConditionSpec]:
    """``conditions`` with those judged only while running replaced by what they are once
    the workload has ended (:func:`derive_status`)."""
    kept = [c for c in conditions if c.type not in ended]
    return [*kept, *(spec for spec in ended.values() if spec is not None)]


def _still_final(
    previous: Mapping[str, Any],
    generation: int,
    ended: Mapping[str, ConditionSpec | None],
    now: datetime,
) -> dict[str, Any]:
    """The status of a workload that had ended already: as it was, but for
    observedGeneration and a condition an earlier version left judging (decision 0242)."""
    status = {**previous, "observedGeneration": generation}
    due = _as_ended((), ended)
    if due:
        status["conditions"] = merge_conditions(
            previous.get("conditions") or (), due, generation=generation, now=now
        )
    return status


def _terminated(
    workload_kind: WorkloadKind,
    generation: int,
    previous: Mapping[str, Any],
    now: datetime,
    ended: Mapping[str, ConditionSpec | None],
) -> StatusDecision:
    early = condition_of(previous, WORKLOAD_TERMINATED_EARLY)
    reason = str(early.get("reason")) if early else "EarlyTermination"
    message = (
        str(early.get("message"))
        if early
        else "Workload terminated early (check events and other conditions for likely causes)"
    )
    observation = _Observation(
        WorkloadStatus.TERMINATED,
        _as_ended([ConditionSpec(WORKLOAD_TERMINATED_EARLY, "True", reason, message)], ended),
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
        EventIntent(type="Warning", reason=event_reason(reason), message=message),
    )
    return StatusDecision(status=status, events=events)


# ------------------------------------------------------------------ writing the status


_WRITTEN_ANEW: Final = frozenset({"status", "conditions", "observedGeneration"})


def _write(
    *,
    workload_kind: WorkloadKind,
    generation: int,
    previous: Mapping[str, Any],
    observation: _Observation,
    now: datetime,
    child_times: ChildRunTimes | None = None,
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
        key: value for key, value in previous.items() if key not in _WRITTEN_ANEW
    }
    status["status"] = phase.value
    status["conditions"] = conditions
    status["observedGeneration"] = generation
    if phase in _RUNNING_PHASES and "startTime" not in status:
        status["startTime"] = format_time(now)
    final = phase.is_terminal
    times = child_times or ChildRunTimes()
    if final and "startTime" not in status and times.started is not None:
        # Finished without RUNNING ever observed (a short run, observations coalesced, the
        # operator down): the child's own start is the best record of it (decision 0114).
        status["startTime"] = format_time(min(times.started, now))
    if final and workload_kind == "KaiwoJob" and "completionTime" not in status:
        status["completionTime"] = format_time(
            _finish(times.finished, started=parse_time(status.get("startTime")), now=now)
        )
    started = parse_time(status.get("startTime"))
    if started is not None and (
        final or phase in _RUNNING_PHASES or phase is WorkloadStatus.TERMINATING
    ):
        ended = parse_time(status.get("completionTime")) if final else None
        elapsed = _whole_seconds((ended or now) - started)
        content_changed = phase_changed or conditions != list(previous.get("conditions") or ())
        if content_changed or "duration" not in previous:
            status["duration"] = elapsed
    return status


def _finish(
    child_finished: datetime | None, *, started: datetime | None, now: datetime
) -> datetime:
    """When the workload finished: the child's own finish, not when the planner saw it (the
    planner may see it late), never after ``now`` and never before the recorded start, which
    the planner may have stamped from its own clock (the child's comes from the API server's
    controllers: a clock a little behind would put the end before the start)."""
    finished = min(child_finished or now, now)
    return max(finished, started) if started is not None else finished


def _preemptable(remaining: timedelta) -> ConditionSpec:
    if remaining > timedelta(0):
        return ConditionSpec(
            PREEMPTABLE,
            "False",
            "DurationNotExceeded",
            "Workload is running and the duration has not been exceeded",
        )
    return ConditionSpec(PREEMPTABLE, "True", "DurationExceeded", "Workload duration has exceeded")


def _waits_again(previous: Mapping[str, Any], phase: WorkloadStatus) -> bool:
    """The workload ran with a duration (it has a ``Preemptable`` condition) and Kueue evicted
    it: it waits again (PENDING), or starts again after that wait (STARTING, its condition
    said it was evicted); not a running workload whose pods start over in place."""
    before = condition_of(previous, PREEMPTABLE)
    if before is None:
        return False
    if phase is WorkloadStatus.PENDING:
        return True
    return phase is WorkloadStatus.STARTING and before.get("reason") in _NOT_RUNNING_REASONS


def _not_running(
    observation: _Observation,
    previous: Mapping[str, Any],
    eviction: tuple[str, str] | None,
    now: datetime,
) -> ConditionSpec:
    """``Preemptable`` of a workload that ran and that Kueue evicted: PENDING, it waits to be
    admitted again; STARTING, Kueue admitted it again and its current run counts from then
    (:func:`.kueue_admission.run_start`, decision 0169). Neither may be stopped for its
    duration: it holds no GPUs while it waits, and its new run has its whole duration."""
    if observation.phase is WorkloadStatus.PENDING:
        why = f" ({eviction[0]})" if eviction is not None else ""
        return ConditionSpec(
            PREEMPTABLE,
            "False",
            "Evicted",
            f"Workload is not running: Kueue evicted it{why} and it waits to be admitted "
            "again; its duration counts again from its readmission",
        )
    started = format_time(_run_started(previous, observation, now))
    return ConditionSpec(
        PREEMPTABLE,
        "False",
        "Readmitted",
        f"Workload was admitted again at {started} and is starting; its duration counts "
        "from its readmission",
    )


def _whole_seconds(delta: timedelta) -> int:
    return max(int(delta.total_seconds()), 0)
