"""The Events a workload's status change tells people: one per phase entered, a Warning when
Kueue preempts it, and the reason of an early termination as an Event reason."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus
from kaiwo_contracts.plans import EventIntent

from kaiwo_planner.domain.status.conditions import ConditionSpec, condition_of
from kaiwo_planner.domain.status.kueue_admission import PREEMPTED

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
    now = next((c for c in conditions if c.type == PREEMPTED), None)
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


def transition_events(
    previous_phase: WorkloadStatus, phase: WorkloadStatus, conditions: Sequence[ConditionSpec]
) -> tuple[EventIntent, ...]:
    """The Event of entering ``phase``; for ERROR, a Warning with the first False condition's
    message (what is wrong)."""
    if phase == previous_phase:
        return ()
    if phase is WorkloadStatus.ERROR:
        cause = next((c for c in conditions if c.status == "False"), None)
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


def event_reason(text: str) -> str:
    """A PascalCase Event reason from a condition reason (which may contain , : or _)."""
    cleaned = "".join(ch for ch in text if ch.isalnum())
    if not cleaned or not cleaned[0].isalpha():
        return "WorkloadTerminatedEarly"
    return cleaned[0].upper() + cleaned[1:]
