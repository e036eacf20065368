"""Conditions as the planner writes them: observed specs merged into a status's list.

Every owner kind's status step (workloads, Models, the KaiwoQueueConfig, invalid owners)
observes :class:`ConditionSpec` values and merges them with :func:`merge_conditions`, which
adds the times and the generation. Conditions are compared by status, reason and message;
``lastTransitionTime`` moves only when a condition's status changes, and conditions written
by others are kept as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class ConditionSpec:
    """A condition as a planner observes it; :func:`merge_conditions` adds times and generation."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str = ""


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
    stamp = ""  # ``now`` written once, when a condition first needs it
    for condition in observed:
        index = by_type.get(condition.type)
        old = merged[index] if index is not None else None
        if (
            old is not None
            and old.get("status") == condition.status
            and old.get("lastTransitionTime")
        ):
            transition = old["lastTransitionTime"]
        else:
            transition = stamp = stamp or format_time(now)
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


def has_condition(status: Mapping[str, Any], condition_type: str) -> bool:
    """Whether ``status`` has the condition ``condition_type`` with status True."""
    for condition in status.get("conditions") or ():
        if condition.get("type") == condition_type and condition.get("status") == "True":
            return True
    return False


def condition_of(status: Mapping[str, Any], condition_type: str) -> Mapping[str, Any] | None:
    """The condition ``condition_type`` of ``status`` (None: it has none)."""
    # A loop, not next() over a generator: asked about sixteen times a plan.
    for condition in status.get("conditions") or ():
        if condition.get("type") == condition_type:
            return condition  # type: ignore[no-any-return]
    return None


def observed_condition(
    conditions: Iterable[ConditionSpec], condition_type: str
) -> ConditionSpec | None:
    """The observed condition ``condition_type`` (None: none is observed), as
    :func:`condition_of` finds one in a written status."""
    return next((c for c in conditions if c.type == condition_type), None)


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with second precision, as metav1.Time is written."""
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    t = aware if aware.tzinfo is UTC else aware.astimezone(UTC)
    if t.year < 1000:  # strftime's %Y does not pad these the same on every platform
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{t.year}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}Z"
