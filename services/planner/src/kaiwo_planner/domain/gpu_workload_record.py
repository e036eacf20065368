"""What a GpuWorkload's status says, field by field, and the words of its verdicts and Events.

The status carries the settings it tracks the workload under (:data:`TRACKED_KEYS`), the
history of its preemption, the utilization shown (rewritten only when it moved by
:data:`UTILIZATION_STEP` points), and a verdict in words. The plan
(:mod:`~kaiwo_planner.domain.gpu_workload_plan`) decides the phase; this module says it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Final

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import API_VERSION
from kaiwo_contracts.gpu_preemption import DEFAULT_TTL, GpuPreemptionSettings
from kaiwo_contracts.gpu_workloads import gpu_vendor, held_gpus
from kaiwo_contracts.plans import EventIntent, ObjectRef, Plan, PreemptIntent

from kaiwo_planner.domain.scheduling.gpu_waiting import GpuWait
from kaiwo_planner.domain.scheduling.gpu_workload_state import (
    ACTIVE,
    GPU_WORKLOAD,
    UNKNOWN,
    Reading,
)
from kaiwo_planner.domain.state.durations import format_duration, parse_duration
from kaiwo_planner.domain.status.conditions import format_time

UTILIZATION_STEP: Final = 5
"""Percentage points the shown utilization must move by to be written again."""
REASON_PREEMPTED: Final = "WorkloadPreempted"

TRACKED_KEYS: Final = (
    "gpus",
    "vendor",
    "policy",
    "threshold",
    "aggregation",
    "gracePeriod",
    "ttl",
)
_HISTORY_KEYS: Final = ("preemptedAt", "preemptedFor", "preemptionReason")


def tracked(root: Mapping[str, Any], settings: GpuPreemptionSettings) -> dict[str, Any]:
    """The settings the workload is tracked under, as the status shows them."""
    return {
        "gpus": held_gpus(root),
        "vendor": gpu_vendor(root),
        "policy": settings.policy,
        "threshold": settings.threshold_percent,
        "aggregation": settings.aggregation,
        "gracePeriod": format_duration(settings.grace_period),
        "ttl": format_duration(settings.ttl),
    }


def history(previous: Mapping[str, Any]) -> dict[str, Any]:
    """The preemption's history, kept from the previous status."""
    return {key: previous.get(key) for key in _HISTORY_KEYS}


def kept(previous: Mapping[str, Any]) -> dict[str, Any]:
    """The phase, reading and verdict as they were (nothing new was judged)."""
    return {key: previous.get(key) for key in ("phase", "utilization", "idleSince", "verdict")}


def shown_utilization(previous: Mapping[str, Any], phase: str, percent: float | None) -> int | None:
    """The utilization to show: the previous one while the phase holds and the reading
    moved by less than :data:`UTILIZATION_STEP` points."""
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


def verdict(phase: str, settings: GpuPreemptionSettings, reading: Reading, *, vendor: str) -> str:
    """The verdict on a workload judged by its reading: busy, not judged, or idle and when
    it may be preempted."""
    threshold = percent_text(settings.threshold_percent)
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


def waiting_verdict(root: Mapping[str, Any], waiting: GpuWait, *, placeable: bool = True) -> str:
    """The verdict on a workload waiting for GPUs: a pressure under ``OnPressure``, unless no
    node could hold one of its pods however many GPUs were freed (decisions 0256, 0260)."""
    waits = f"Waiting for {waiting.gpus} {gpu_vendor(root)} GPUs since {format_time(waiting.since)}"
    if not placeable:
        return (
            f"{waits}: no schedulable node has enough GPUs and matches its node selector and "
            "affinity, so no idle workload is preempted for it"
        )
    return f"{waits}: idle workloads under the OnPressure policy may be preempted for it"


def preempted_verdict(previous: Mapping[str, Any]) -> str:
    """The verdict on a preempted workload: when, and why."""
    at = previous.get("preemptedAt") or "?"
    reason = previous.get("preemptionReason") or "GPU idle preemption"
    return f"Preempted at {at}: {reason}"


def preempted_event(named: str, previous: Mapping[str, Any]) -> tuple[EventIntent, ...]:
    """The Warning that the workload was preempted."""
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


def display_name(reference: Mapping[str, Any]) -> str:
    """``<kind>/<name>`` of the workload a record names, for people."""
    return f"{reference.get('kind') or '?'}/{reference.get('name') or '?'}"


def named_beneficiary(ref: ObjectRef) -> dict[str, Any]:
    """``status.preemptedFor``: the pending workload the preemption is for."""
    found = {"kind": ref.kind, "name": ref.name, "namespace": ref.namespace, "uid": ref.uid}
    return {key: value for key, value in found.items() if value is not None}


def percent_text(value: float) -> str:
    """A threshold as people read it (``12.5%``)."""
    return f"{value:g}%"


def ttl_of(value: object) -> timedelta:
    """A TTL as written on the record; the default when it is not a valid duration."""
    if not isinstance(value, str) or not value:
        return DEFAULT_TTL
    try:
        return parse_duration(value)
    except ValueError:
        return DEFAULT_TTL


def record_plan(
    ref: ObjectRef,
    metadata: Mapping[str, Any],
    *,
    status: Mapping[str, Any] | None = None,
    events: tuple[EventIntent, ...] = (),
    preempt: PreemptIntent | None = None,
    delete_owner: bool = False,
) -> Plan:
    """The record's plan: its status (unset fields left out), Events, the preemption to ask
    for, or its deletion."""
    return Plan(
        owner=ref,
        observed_generation=metadata.get("generation"),
        observed_resource_version=metadata.get("resourceVersion"),
        status=None if status is None else {k: v for k, v in status.items() if v is not None},
        events=events,
        preempt=preempt,
        delete_owner=delete_owner,
    )


def record_ref(record: Mapping[str, Any]) -> ObjectRef:
    """The reference to a GpuWorkload record."""
    metadata = record.get("metadata") or {}
    return ObjectRef(
        api_version=str(record.get("apiVersion") or API_VERSION),
        kind=GPU_WORKLOAD,
        name=str(metadata.get("name") or ""),
        namespace=str(metadata.get("namespace") or "") or None,
        uid=str(metadata.get("uid") or "") or None,
    )
