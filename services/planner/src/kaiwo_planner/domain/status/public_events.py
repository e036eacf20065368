"""Public workload events from observations (pure): what subscribers are told, and when.

:func:`derive_public_events` takes what subscribers were last told of a workload (its
:class:`PublicState`, from the previous observed version; None when it was never seen) and the
new observation, and returns the public events that version shows, in this order:

* ``submitted`` the first time the workload is seen (not for a deletion of an unseen one);
* ``admitted`` when the ``Admitted`` condition turns True;
* ``phase-changed`` when ``status.status`` changes (to PENDING after an eviction, with the
  reason of the workload's ``Evicted`` condition, Kueue's);
* ``underutilized`` / ``recovered`` when ``ResourceUnderutilization`` turns True / stops being
  True (the planner sets it from the monitor's findings);
* ``preempted`` when the workload starts stopping (``TERMINATING`` or ``TERMINATED``) and the
  ``WorkloadTerminatedEarly`` reason names a preemption (:data:`PREEMPTION_REASONS`, or any
  reason containing ``Preempt``), or a ``Preempted`` condition turns True; right after it the
  decision as a :class:`~kaiwo_contracts.events.public.PreemptionV1`: the victim, the
  beneficiary (``status.preemptedFor``, none under the idle policy Always) and the reason;
* ``terminated``, ``completed``, ``failed`` when the phase becomes ``TERMINATED``,
  ``COMPLETE``, ``FAILED``;
* ``deleted`` for a ``DELETED`` observation (alone, for a workload never seen before).

Everything is read from the observed object, so a workload first seen late (the planner
started without its snapshot) is told in one go: ``submitted``, then each transition its
status already shows relative to an empty status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final

from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.public import (
    MESSAGE_MAX_CHARS,
    PreemptionV1,
    WorkloadEventV1,
    WorkloadEventV2,
    WorkloadRef,
    WorkloadTransition,
    public_event_id,
    public_preemption_id,
)
from kaiwo_contracts.events.subjects import public_workload_subject
from kaiwo_contracts.failure_conditions import FAILURE_CONDITIONS

from kaiwo_planner.domain.settings.cluster_settings import KAIWO_GROUP, WORKLOAD_KINDS
from kaiwo_planner.domain.status.eviction import EVICTED

ADMITTED: Final = "Admitted"
RESOURCE_UNDERUTILIZATION: Final = "ResourceUnderutilization"
WORKLOAD_TERMINATED_EARLY: Final = "WorkloadTerminatedEarly"
PREEMPTED: Final = "Preempted"
PREEMPTED_FOR: Final = "preemptedFor"
PREEMPTION_LABEL: Final = "preemption"
"""How a :class:`PreemptionV1` is counted and logged beside the transitions' names."""
PREEMPTION_REASONS: Final = frozenset(
    {"DurationExceeded", "DurationExceededWithActiveGpuDemand", "GpuIdlePreemption"}
)
"""``WorkloadTerminatedEarly`` reasons that mean the workload is stopped for others' GPUs."""
STOPPING_PHASES: Final = frozenset({"TERMINATING", "TERMINATED"})

_PHASE_ENDINGS: Final = MappingProxyType(
    {
        "TERMINATED": WorkloadTransition.TERMINATED,
        "COMPLETE": WorkloadTransition.COMPLETED,
        "FAILED": WorkloadTransition.FAILED,
    }
)


@dataclass(frozen=True, slots=True)
class PublicState:
    """What subscribers have been told of one workload."""

    phase: str = ""
    admitted: bool = False
    underutilized: bool = False
    preempted: bool = False


NOTHING_TOLD: Final = PublicState()


@dataclass(frozen=True, slots=True)
class PublicEvent:
    """A public event ready to wrap in an envelope: its id, subject and payload."""

    id: str
    subject: str
    payload: WorkloadEventV1 | WorkloadEventV2 | PreemptionV1

    @property
    def workload(self) -> WorkloadRef:
        """The workload it is about (a preemption's victim)."""
        if isinstance(self.payload, PreemptionV1):
            return self.payload.victim
        return self.payload.workload

    @property
    def label(self) -> str:
        """The transition's name, or ``preemption``: for metrics and logs."""
        if isinstance(self.payload, PreemptionV1):
            return PREEMPTION_LABEL
        return self.payload.transition.value


def is_public_workload(obj: Mapping[str, Any]) -> bool:
    """A namespaced KaiwoJob or KaiwoService: the kinds public events are about."""
    api_version = str(obj.get("apiVersion") or "")
    metadata = _mapping(obj.get("metadata"))
    return (
        api_version.split("/", maxsplit=1)[0] == KAIWO_GROUP
        and obj.get("kind") in WORKLOAD_KINDS
        and bool(metadata.get("namespace"))
    )


def public_state(obj: Mapping[str, Any]) -> PublicState:
    """What an observed version of a workload tells subscribers."""
    status = _mapping(obj.get("status"))
    conditions = _conditions(status)
    phase = str(status.get("status") or "")
    return PublicState(
        phase=phase,
        admitted=_is_true(conditions.get(ADMITTED)),
        underutilized=_is_true(conditions.get(RESOURCE_UNDERUTILIZATION)),
        preempted=_is_preempted(phase, conditions),
    )


def derive_public_events(
    previous: PublicState | None,
    observed: ObservedObjectV1,
    *,
    observed_at: datetime,
    default_queue: str | None = None,
) -> tuple[PublicEvent, ...]:
    """The public events ``observed`` shows after ``previous`` (see the module docstring).

    ``default_queue`` is the cluster queue of workloads that name none (KaiwoConfig's).
    Objects that are not public workloads give none.
    """
    obj = observed.object
    if not is_public_workload(obj) or observed.namespace is None:
        return ()
    deleted = observed.event_type == "DELETED"
    if deleted and previous is None:  # never told anything: its past is not news now
        return (
            _event(
                WorkloadTransition.DELETED,
                observed,
                phase=public_state(obj).phase,
                previous_phase=None,
                condition=None,
                observed_at=observed_at,
                default_queue=default_queue,
            ),
        )
    current = public_state(obj)
    before = previous or NOTHING_TOLD
    conditions = _conditions(_mapping(obj.get("status")))
    told: list[tuple[WorkloadTransition, str | None, Mapping[str, Any] | None]] = []
    if previous is None:
        told.append((WorkloadTransition.SUBMITTED, None, None))
    if current.admitted and not before.admitted:
        told.append((WorkloadTransition.ADMITTED, None, conditions.get(ADMITTED)))
    if current.phase != before.phase:
        told.append((WorkloadTransition.PHASE_CHANGED, before.phase, _phase_condition(obj)))
    if current.underutilized != before.underutilized:
        transition = (
            WorkloadTransition.UNDERUTILIZED
            if current.underutilized
            else WorkloadTransition.RECOVERED
        )
        told.append((transition, None, conditions.get(RESOURCE_UNDERUTILIZATION)))
    if current.preempted and not before.preempted:
        told.append((WorkloadTransition.PREEMPTED, None, _preemption_condition(conditions)))
    ending = _PHASE_ENDINGS.get(current.phase)
    if ending is not None and current.phase != before.phase:
        told.append((ending, None, _phase_condition(obj)))
    if deleted:
        told.append((WorkloadTransition.DELETED, None, None))
    events: list[PublicEvent] = []
    for transition, previous_phase, condition in told:
        events.append(
            _event(
                transition,
                observed,
                phase=current.phase,
                previous_phase=previous_phase,
                condition=condition,
                observed_at=observed_at,
                default_queue=default_queue,
            )
        )
        if transition is WorkloadTransition.PREEMPTED:
            events.append(_preemption(observed, condition=condition, observed_at=observed_at))
    return tuple(events)


# ------------------------------------------------------------------ reading the object


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _conditions(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    found: dict[str, Mapping[str, Any]] = {}
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and isinstance(condition.get("type"), str):
            found[condition["type"]] = condition
    return found


def _is_true(condition: Mapping[str, Any] | None) -> bool:
    return condition is not None and condition.get("status") == "True"


def _is_preempted(phase: str, conditions: Mapping[str, Mapping[str, Any]]) -> bool:
    if _is_true(conditions.get(PREEMPTED)):
        return True
    if phase not in STOPPING_PHASES:
        return False
    reason = str(conditions.get(WORKLOAD_TERMINATED_EARLY, {}).get("reason") or "")
    return reason in PREEMPTION_REASONS or "Preempt" in reason


def _preemption_condition(
    conditions: Mapping[str, Mapping[str, Any]],
) -> Mapping[str, Any] | None:
    if _is_true(conditions.get(PREEMPTED)):
        return conditions[PREEMPTED]
    return conditions.get(WORKLOAD_TERMINATED_EARLY)


def _phase_condition(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The condition that explains the current phase, when one does."""
    status = _mapping(obj.get("status"))
    conditions = _conditions(status)
    phase = str(status.get("status") or "")
    if phase in STOPPING_PHASES:
        return conditions.get(WORKLOAD_TERMINATED_EARLY)
    if phase == "PENDING" and _is_true(conditions.get(EVICTED)):
        # Waiting again because Kueue evicted it: Kueue's reason (decision 0180).
        return conditions[EVICTED]
    if phase in ("FAILED", "ERROR"):
        return next(
            (
                conditions[kind]
                for kind in FAILURE_CONDITIONS
                if conditions.get(kind, {}).get("status") == "False"
            ),
            None,
        )
    return None


def _event(
    transition: WorkloadTransition,
    observed: ObservedObjectV1,
    *,
    phase: str,
    previous_phase: str | None,
    condition: Mapping[str, Any] | None,
    observed_at: datetime,
    default_queue: str | None,
) -> PublicEvent:
    obj = observed.object
    metadata = _mapping(obj.get("metadata"))
    spec = _mapping(obj.get("spec"))
    namespace = observed.namespace or ""
    reason = optional_text(condition.get("reason")) if condition is not None else None
    message = optional_text(condition.get("message")) if condition is not None else None
    queue = spec.get("clusterQueue")
    payload = WorkloadEventV1(
        transition=transition,
        workload=WorkloadRef(
            kind=observed.kind, namespace=namespace, name=observed.name, uid=observed.uid
        ),
        user=optional_text(spec.get("user")),
        queue=optional_text(queue) or default_queue,
        phase=phase,
        previous_phase=previous_phase,
        reason=reason,
        message=message[:MESSAGE_MAX_CHARS] if message else None,
        observed_at=observed_at,
        created_at=aware_timestamp(metadata.get("creationTimestamp")),
        resource_version=observed.resource_version,
    )
    return PublicEvent(
        id=public_event_id(
            uid=observed.uid,
            transition=transition,
            resource_version=observed.resource_version,
        ),
        subject=public_workload_subject(namespace=namespace, kind=observed.kind, uid=observed.uid),
        payload=payload,
    )


def _preemption(
    observed: ObservedObjectV1, *, condition: Mapping[str, Any] | None, observed_at: datetime
) -> PublicEvent:
    """The decision behind a ``preempted`` transition: victim, beneficiary, reason."""
    status = _mapping(observed.object.get("status"))
    namespace = observed.namespace or ""
    message = optional_text(condition.get("message")) if condition is not None else None
    victim = WorkloadRef(
        kind=observed.kind, namespace=namespace, name=observed.name, uid=observed.uid
    )
    payload = PreemptionV1(
        victim=victim,
        beneficiary=_beneficiary(_mapping(status.get(PREEMPTED_FOR))),
        reason=(optional_text(condition.get("reason")) if condition is not None else None)
        or PREEMPTED,
        message=message[:MESSAGE_MAX_CHARS] if message else None,
        observed_at=observed_at,
        resource_version=observed.resource_version,
    )
    return PublicEvent(
        id=public_preemption_id(uid=observed.uid, resource_version=observed.resource_version),
        subject=public_workload_subject(namespace=namespace, kind=observed.kind, uid=observed.uid),
        payload=payload,
    )


def _beneficiary(named: Mapping[str, Any]) -> WorkloadRef | None:
    """``status.preemptedFor`` as a reference; None when it is absent or incomplete."""
    fields = {key: optional_text(named.get(key)) for key in ("kind", "namespace", "name", "uid")}
    if any(value is None for value in fields.values()):
        return None
    return WorkloadRef.model_validate(fields)


def optional_text(value: Any) -> str | None:
    """A non-empty string, or None."""
    return value if isinstance(value, str) and value else None


def aware_timestamp(value: Any) -> datetime | None:
    """An ISO timestamp with its zone, or None (absent, malformed or naive)."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


__all__ = [
    "NOTHING_TOLD",
    "PREEMPTION_REASONS",
    "PublicEvent",
    "PublicState",
    "aware_timestamp",
    "derive_public_events",
    "is_public_workload",
    "optional_text",
    "public_state",
]
