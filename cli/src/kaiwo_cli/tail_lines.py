"""The lines ``kaiwo events tail`` prints: which events a filter keeps, the kind an event is
about, what changed and the phase it shows, and the one line per event. Pure functions of
the event, so the live and the stored events print alike."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from kaiwo_contracts.events.subjects import SubjectError, parse_subject

TYPE_PREFIX: Final = "ai.silogen.kaiwo."


@dataclass(frozen=True, slots=True)
class TailFilter:
    namespace: str | None = None
    name: str | None = None
    kind: str | None = None
    type: str | None = None

    def matches(self, *, event_type: str, subject: str | None, kind: str | None) -> bool:
        namespace, _, name = (subject or "").rpartition("/")
        if self.namespace is not None and namespace != self.namespace:
            return False
        if self.name is not None and name != self.name:
            return False
        if self.kind is not None and (kind or "").lower() != self.kind.lower():
            return False
        return self.type is None or self.type in event_type


def kind_of(nats_subject: str | None, data: Mapping[str, Any]) -> str | None:
    """The object kind an event is about, from its subject or its payload."""
    if nats_subject:
        with contextlib.suppress(SubjectError):
            parsed = parse_subject(nats_subject)
            if parsed.kind:
                return parsed.kind
    return payload_kind(data)


def payload_kind(data: Mapping[str, Any]) -> str | None:
    """The kind the payload names (observed object, plan or result owner, workload)."""
    for path in (("kind",), ("plan", "owner", "kind"), ("owner", "kind"), ("workload", "kind")):
        value: Any = data
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, str) and value:
            return value
    return None


def display_kind(nats_subject: str | None, data: Mapping[str, Any]) -> str:
    """The kind as Kubernetes spells it (the payload's), else the subject's lower-case one."""
    return payload_kind(data) or kind_of(nats_subject, data) or "-"


def change_and_phase(event_type: str, data: Mapping[str, Any]) -> tuple[str, str]:
    """What happened (a watch event, a plan and its trigger, a result's outcome, a public
    transition) and the phase it shows (the workload's ``status.status``, a Pod's or PVC's
    phase, a Job's end)."""
    short = event_type.removeprefix(TYPE_PREFIX)
    for prefix, read in _CHANGES:
        if short.startswith(prefix):
            return read(data)
    return "-", "-"


def _observed_change(data: Mapping[str, Any]) -> tuple[str, str]:
    return str(data.get("eventType") or "-"), _object_phase(_mapping(data.get("object")))


def _plan_change(data: Mapping[str, Any]) -> tuple[str, str]:
    status = _mapping(_mapping(data.get("plan")).get("status"))
    return f"plan/{data.get('trigger') or '-'}", str(status.get("status") or "-")


_CHANGES: Final[tuple[tuple[str, Callable[[Mapping[str, Any]], tuple[str, str]]], ...]] = (
    ("obs.observed", _observed_change),
    ("plan.decided", _plan_change),
    ("res.refused", lambda _data: ("refused", "-")),
    ("res.", lambda data: (str(data.get("outcome") or "-"), "-")),
    (
        "public.workload",
        lambda data: (str(data.get("transition") or "-"), str(data.get("phase") or "-")),
    ),
    ("dlq.", lambda _data: ("dead-lettered", "-")),
)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _object_phase(obj: Mapping[str, Any]) -> str:
    status = _mapping(obj.get("status"))
    for condition in status.get("conditions") or []:
        if (
            isinstance(condition, Mapping)
            and obj.get("kind") == "Job"
            and condition.get("type") in ("Complete", "Failed")
            and condition.get("status") == "True"
        ):
            return str(condition["type"])
    return str(status.get("status") or status.get("phase") or "-")


def tail_line(
    *,
    time: datetime,
    event_type: str,
    kind: str,
    subject: str | None,
    change: str,
    phase: str,
    event_id: str,
    correlation_id: str,
    causation_id: str | None,
) -> str:
    """One line per event: time, short type, kind, subject, change, phase, short ids."""
    short_type = event_type.removeprefix(TYPE_PREFIX)
    return (
        f"{time.astimezone(UTC).strftime('%H:%M:%S.%f')[:-3]}  {short_type:<24} {kind:<22} "
        f"{subject or '-':<36} {change:<18} {phase:<12} id={event_id[:8]} "
        f"corr={correlation_id[:8]} cause={(causation_id or '-')[:8]}"
    )
