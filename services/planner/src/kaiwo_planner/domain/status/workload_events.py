"""The Events a workload's status change tells people: one per phase entered, a Warning when
Kueue preempts it, and the reason of an early termination as an Event reason."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Literal

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus
from kaiwo_contracts.failure_conditions import failure_rank
from kaiwo_contracts.plans import EventIntent

from kaiwo_planner.domain.status.child_health import CHILD_HEALTHY
from kaiwo_planner.domain.status.conditions import (
    ConditionSpec,
    condition_of,
    observed_condition,
)
from kaiwo_planner.domain.status.kueue_admission import PREEMPTED, kueue_eviction

_DOWNLOAD_JOB_SUCCEEDED: Final = "DownloadJobSucceeded"
"""``storage_phase.DOWNLOAD_JOB_SUCCEEDED``, which imports this module."""

WORKLOAD_TERMINATED_EARLY: Final = "WorkloadTerminatedEarly"
"""The condition that says why a workload was stopped before its end."""

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


def preemption_events(
    previous: Mapping[str, Any], conditions: Sequence[ConditionSpec]
) -> tuple[EventIntent, ...]:
    """A Warning when Kueue's preemption of the child is first seen."""
    now = observed_condition(conditions, PREEMPTED)
    if now is None or now.status != "True":
        return ()
    before = condition_of(previous, PREEMPTED)
    if before is not None and before.get("status") == "True":
        return ()
    return (
        EventIntent(
            type="Warning",
            reason="WorkloadPreempted",
            message=f"Kueue preempted the workload ({now.reason}): {now.message}",
        ),
    )


_ADMITTED_PHASES = frozenset(
    {WorkloadStatus.STARTING, WorkloadStatus.RUNNING, WorkloadStatus.READY}
)
_PREEMPTION_EVICTION = "Preempted"
"""The reason of Kueue's ``Evicted`` condition for a preemption, told by
:func:`preemption_events` already."""


def eviction_events(
    previous_phase: WorkloadStatus,
    phase: WorkloadStatus,
    kueue_workloads: Sequence[Mapping[str, Any]],
) -> tuple[EventIntent, ...]:
    """A Warning when a workload Kueue had admitted waits again because Kueue evicted it for
    another reason than a preemption (a stopped ClusterQueue or LocalQueue, a pods-ready
    timeout...), with Kueue's reason and words (decision 0169). A preemption has its own
    Warning (:func:`preemption_events`)."""
    if phase is not WorkloadStatus.PENDING or previous_phase not in _ADMITTED_PHASES:
        return ()
    eviction = kueue_eviction(kueue_workloads)
    if eviction is None or eviction[0] == _PREEMPTION_EVICTION:
        return ()
    reason, message = eviction
    return (
        EventIntent(
            type="Warning",
            reason="WorkloadEvicted",
            message=f"Kueue evicted the workload ({reason}): {message}",
        ),
    )


def transition_events(
    previous_phase: WorkloadStatus,
    phase: WorkloadStatus,
    conditions: Sequence[ConditionSpec],
    *,
    replicas: tuple[int, int] | None = None,
) -> tuple[EventIntent, ...]:
    """The Event of entering ``phase``; for ERROR, a Warning with the message of the False
    condition that explains it (:func:`explaining_condition`); for FAILED, the child's cause
    when it told one. ``replicas``: a Deployment's ``(available, asked)``; a READY service
    that is RUNNING again (scaled up, or a replica lost) started long ago, and its Event says
    how many replicas serve instead of "Workload has started" (decision 0168)."""
    if phase == previous_phase:
        return ()
    if (
        previous_phase is WorkloadStatus.READY
        and phase is WorkloadStatus.RUNNING
        and replicas is not None
    ):
        available, asked = replicas
        return (
            EventIntent(
                type="Normal",
                reason="WorkloadRunning",
                message=f"Workload serves with {available} of {asked} replicas available; "
                f"{asked - available} not available yet",
            ),
        )
    explained = _explained(phase, conditions)
    if explained is not None:
        return (explained,)
    if phase in _EVENTS:
        kind, reason, message = _EVENTS[phase]
        return (EventIntent(type=kind, reason=reason, message=message),)
    return ()


def _explained(phase: WorkloadStatus, conditions: Sequence[ConditionSpec]) -> EventIntent | None:
    """The Event of entering ``phase`` with its cause, when a condition tells one."""
    health = observed_condition(conditions, CHILD_HEALTHY)
    if phase is WorkloadStatus.FAILED and (health is None or health.status != "False"):
        # A failed download fails the workload before any child of its own runs, and its
        # DownloadJobSucceeded condition tells why (decision 0248).
        download = observed_condition(conditions, _DOWNLOAD_JOB_SUCCEEDED)
        health = download if download is not None and download.reason == "JobFailed" else None
    if phase is WorkloadStatus.FAILED and health is not None and health.status == "False":
        return EventIntent(
            type="Warning",
            reason="WorkloadFailed",
            message=f"Workload has failed: {health.reason}: {health.message}",
        )
    if phase is WorkloadStatus.ERROR:
        cause = explaining_condition(conditions)
        return EventIntent(
            type="Warning",
            reason="WorkloadError",
            message=cause.message if cause else "Workload is in error",
        )
    if phase is WorkloadStatus.TERMINATED:
        # Entered at once only when the child says it was stopped (a Ray job stopped on its
        # cluster); the way through TERMINATING tells its own Events (decision 0188).
        early = observed_condition(conditions, WORKLOAD_TERMINATED_EARLY)
        why = f": {early.message}" if early is not None else ""
        return EventIntent(
            type="Normal", reason="WorkloadTerminated", message=f"Workload has been terminated{why}"
        )
    return None


def explaining_condition(conditions: Sequence[ConditionSpec]) -> ConditionSpec | None:
    """The False condition that says why the workload is in error: the first False of
    ``FAILURE_CONDITIONS``, as the public events and the CLI name it, else the first False
    one. Only the first False was named before, and a volume being deleted (``PvcReady``,
    listed before the children's conditions) hid a Deployment's own failure."""
    failing = [c for c in conditions if c.status == "False"]
    return min(failing, key=lambda c: failure_rank(c.type), default=None)


def health_events(
    previous: Mapping[str, Any], phase: WorkloadStatus, conditions: Sequence[ConditionSpec]
) -> tuple[EventIntent, ...]:
    """A Warning when ``ChildHealthy`` turns False while the phase stays what it was (a
    container crash-looping or unable to pull its image); FAILED and ERROR tell their cause
    in their own Event. Once per turn, never again while the trouble lasts."""
    now = observed_condition(conditions, CHILD_HEALTHY)
    if now is None or now.status != "False":
        return ()
    if phase in (WorkloadStatus.FAILED, WorkloadStatus.ERROR):
        return ()
    before = condition_of(previous, CHILD_HEALTHY)
    if before is not None and before.get("status") == "False":
        return ()
    return (
        EventIntent(
            type="Warning", reason="ChildUnhealthy", message=f"{now.reason}: {now.message}"
        ),
    )


def event_reason(text: str) -> str:
    """A PascalCase Event reason from a condition reason (which may contain , : or _)."""
    cleaned = "".join(ch for ch in text if ch.isalnum())
    if not cleaned or not cleaned[0].isalpha():
        return "WorkloadTerminatedEarly"
    return cleaned[0].upper() + cleaned[1:]
