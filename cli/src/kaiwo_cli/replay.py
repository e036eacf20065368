"""Replay: re-run the pure planner over recorded observations and compare with recorded plans.

Every recorded plan (``PlanDecidedV1``) says what it was computed from: ``obs_sequence``, the
``KAIWO_OBS`` stream sequence of the last observation the planner's projection had applied,
and ``planned_at``, the ``now`` it planned with. So, for each plan in order of
``obs_sequence``:

1. apply to a fresh :class:`~kaiwo_planner.domain.state.projection.Projection` every recorded
   observation — of *all* objects: nodes, configuration, other workloads, children — in order
   of its recorded stream sequence (the recorder keeps it in the event's metadata), up to and
   including ``obs_sequence``;
   and, likewise, every recorded monitor finding (``UtilizationV1`` of ``KAIWO_MON``) up to
   and including the plan's ``mon_sequence``, so decisions that depended on findings (the
   ``ResourceUnderutilization`` condition, terminations, idle preemption) are reproduced;
   and every recorded autoscaler decision (``ScaleDecidedV1`` of ``KAIWO_GATEWAY``) up to and
   including the plan's ``scale_sequence``, so a Model's plan scales it as it did;
2. call :func:`~kaiwo_planner.domain.planning.plan_object` with the plan's owner as the
   projection holds it, a *fresh* planning context of the projection's cluster state (the
   planner service carries its context from state to state, so a value it kept when it
   should have worked it out again shows as a difference) and ``now = planned_at``;
3. compare the replayed plan with the recorded one: equal fingerprints (the SHA-256 of the
   plan's canonical JSON) and observed resourceVersion, and every object the recorded plan
   named ``absent`` (``drifted``) is also one the projection does not hold (holds without
   what the plan asks): *reproduced*. (A plan names only the gaps that are new since its
   owner was last planned, which depends on that history; the projection confirms each.)
   Otherwise: *differs*, with a unified diff of the two as canonical YAML.

Plans without ``planned_at`` (made outside the planner service) and plans whose owner the
projection does not hold are *skipped*, with the reason.

Replay assumes one planner projection of the whole ``KAIWO_OBS`` stream, as the planner has
without partitions; with ``KAIWO_BUS_PARTITIONS`` > 1 a replica's projection holds only its
partitions and the cluster-scoped facts, and a replayed plan that depends on workloads of
other partitions may differ.

:func:`replay_recorded` is pure (events in, verdicts out) for tests and benchmarks;
:func:`replay_from_store` reads the events first.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal, TypeVar

import yaml
from kaiwo_contracts.confinement import preemption_target_ref
from kaiwo_contracts.events import ObservedObjectV1, PlanDecidedV1
from kaiwo_contracts.events.autoscaling import ScaleDecidedV1
from kaiwo_contracts.events.monitor import UtilizationV1
from kaiwo_contracts.plans import ObjectRef, Plan, canonical_json
from kaiwo_eventstore import EventStore, StoredEvent, cyclic_gc_paused
from kaiwo_planner.domain.models.autoscaling import ScaleRequest
from kaiwo_planner.domain.planning import PlanningResult, plan_object
from kaiwo_planner.domain.queues.default_objects import default_object_plans
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.state.projection import Projection
from kaiwo_planner.domain.status.findings import WorkloadFinding
from kaiwo_planner.domain.status.planned_status import owner_with_status
from pydantic import ValidationError

OBSERVED_TYPE: Final = ObservedObjectV1.EVENT_TYPE
PLAN_TYPE: Final = PlanDecidedV1.EVENT_TYPE
NATS_STREAM_KEY: Final = "natsStream"
NATS_SEQUENCE_KEY: Final = "natsSequence"
"""Metadata keys the recorder writes (``kaiwo_recorder.records``); a test keeps them equal."""
OBSERVED_STREAM: Final = "KAIWO_OBS"
FINDING_TYPE: Final = UtilizationV1.EVENT_TYPE
MONITOR_STREAM: Final = "KAIWO_MON"
SCALE_TYPE: Final = ScaleDecidedV1.EVENT_TYPE
GATEWAY_STREAM: Final = "KAIWO_GATEWAY"

Outcome = Literal["reproduced", "differs", "skipped"]
PlanFunction = Callable[..., PlanningResult]
Progress = Callable[[int, int], None]
"""Called with (plans done, plans in all) while replaying."""


@dataclass(frozen=True, slots=True)
class PlanReplay:
    """The verdict on one recorded plan."""

    event_id: str
    position: int
    owner: str
    trigger: str
    planned_at: datetime | None
    obs_sequence: int
    outcome: Outcome
    reason: str = ""
    diff: str = ""


@dataclass(frozen=True, slots=True)
class ReplayReport:
    plans: tuple[PlanReplay, ...]
    observations: int
    """Recorded observations applied (those at or below the last plan's obs_sequence)."""

    def count(self, outcome: Outcome) -> int:
        return sum(1 for plan in self.plans if plan.outcome == outcome)

    @property
    def reproduced(self) -> int:
        return self.count("reproduced")

    @property
    def differ(self) -> int:
        return self.count("differs")

    @property
    def skipped(self) -> int:
        return self.count("skipped")


@dataclass(frozen=True, slots=True)
class _Observation:
    sequence: int
    payload: ObservedObjectV1


# --------------------------------------------------------------------------- pure core


def observations_in_stream_order(events: Iterable[StoredEvent]) -> list[_Observation]:
    """Recorded observations of ``KAIWO_OBS`` with a readable payload, by stream sequence."""
    found: dict[int, _Observation] = {}
    for event in events:
        sequence = _obs_sequence_of(event)
        if event.type != OBSERVED_TYPE or sequence is None or sequence in found:
            continue
        try:
            found[sequence] = _Observation(sequence, ObservedObjectV1.model_validate(event.data))
        except ValidationError:
            continue  # the recorder would have stored it as malformed; nothing to apply
    return [found[sequence] for sequence in sorted(found)]


_Read = TypeVar("_Read")


def findings_in_stream_order(events: Iterable[StoredEvent]) -> list[tuple[int, WorkloadFinding]]:
    """Recorded monitor findings of ``KAIWO_MON`` with a readable payload, by stream sequence."""

    def read(event: StoredEvent) -> WorkloadFinding | None:
        reading = UtilizationV1.model_validate(event.data)
        return WorkloadFinding.of(reading, at=event.time) if reading.workload.uid else None

    return _in_stream_order(events, stream=MONITOR_STREAM, event_type=FINDING_TYPE, read=read)


def scale_requests_in_stream_order(
    events: Iterable[StoredEvent],
) -> list[tuple[int, ScaleRequest]]:
    """Recorded autoscaler decisions of ``KAIWO_GATEWAY`` with a readable payload, by stream
    sequence."""

    def read(event: StoredEvent) -> ScaleRequest | None:
        decision = ScaleDecidedV1.model_validate(event.data)
        return ScaleRequest.of(decision, at=event.time) if decision.model.uid else None

    return _in_stream_order(events, stream=GATEWAY_STREAM, event_type=SCALE_TYPE, read=read)


def _in_stream_order(
    events: Iterable[StoredEvent],
    *,
    stream: str,
    event_type: str,
    read: Callable[[StoredEvent], _Read | None],
) -> list[tuple[int, _Read]]:
    """What ``read`` makes of each recorded event of ``event_type`` in ``stream`` (once per
    stream sequence; unreadable payloads and None skipped), by stream sequence."""
    found: dict[int, _Read] = {}
    for event in events:
        sequence = _sequence_in(event, stream)
        if event.type != event_type or sequence is None or sequence in found:
            continue
        try:
            value = read(event)
        except ValidationError:
            continue
        if value is not None:
            found[sequence] = value
    return [(sequence, found[sequence]) for sequence in sorted(found)]


def replay_recorded(
    *,
    observations: Iterable[StoredEvent],
    plans: Iterable[StoredEvent],
    findings: Iterable[StoredEvent] = (),
    scale_decisions: Iterable[StoredEvent] = (),
    plan_fn: PlanFunction = plan_object,
    progress: Progress | None = None,
) -> ReplayReport:
    """Replay ``plans`` over ``observations``, ``findings`` and ``scale_decisions`` (as
    recorded; any order)."""
    with cyclic_gc_paused():  # every collection would walk the whole recorded history
        return _replay(
            observations,
            plans,
            _Inputs(findings=findings, scale_decisions=scale_decisions),
            plan_fn=plan_fn,
            progress=progress,
        )


@dataclass(frozen=True, slots=True)
class _Inputs:
    """The planning inputs besides observations."""

    findings: Iterable[StoredEvent]
    scale_decisions: Iterable[StoredEvent]


def _replay(
    observations: Iterable[StoredEvent],
    plans: Iterable[StoredEvent],
    inputs: _Inputs,
    *,
    plan_fn: PlanFunction,
    progress: Progress | None,
) -> ReplayReport:
    ordered = observations_in_stream_order(observations)
    readings = findings_in_stream_order(inputs.findings)
    requests = scale_requests_in_stream_order(inputs.scale_decisions)
    taken = scaled = 0
    # One planner moves every sequence forward only: ordering by them is publishing order.
    recorded = sorted(
        (event for event in plans if event.type == PLAN_TYPE),
        key=lambda event: (
            int(event.data.get("obsSequence") or 0),
            int(event.data.get("monSequence") or 0),
            int(event.data.get("scaleSequence") or 0),
            event.global_position,
        ),
    )
    # The observations are held in memory anyway: no copies with shared strings.
    projection = Projection(share_strings=False)
    applied = 0
    verdicts: list[PlanReplay] = []
    for done, event in enumerate(recorded, start=1):
        decided = _decided(event)
        if decided is None:
            verdicts.append(_skipped(event, "the recorded plan does not parse as PlanDecidedV1"))
        else:
            while applied < len(ordered) and ordered[applied].sequence <= decided.obs_sequence:
                projection.apply(ordered[applied].payload, sequence=ordered[applied].sequence)
                applied += 1
            while taken < len(readings) and readings[taken][0] <= decided.mon_sequence:
                projection.apply_finding(readings[taken][1], sequence=readings[taken][0])
                taken += 1
            while scaled < len(requests) and requests[scaled][0] <= decided.scale_sequence:
                projection.apply_scale_request(requests[scaled][1], sequence=requests[scaled][0])
                scaled += 1
            verdicts.append(_judge(event, decided, projection, plan_fn))
        if progress is not None:
            progress(done, len(recorded))
    return ReplayReport(plans=tuple(verdicts), observations=applied)


def _judge(
    event: StoredEvent, decided: PlanDecidedV1, projection: Projection, plan_fn: PlanFunction
) -> PlanReplay:
    if decided.planned_at is None:
        return _skipped(event, "planned outside the planner (no plannedAt)", decided)
    # A GpuWorkload created for a GPU workload's root was planned from that root.
    planned_from = preemption_target_ref(decided.plan) if decided.plan.create_only else None
    if decided.plan.create_only and decided.plan.owner.uid is None and planned_from is None:
        return _judge_default_object(event, decided, projection)
    uid = planned_from.uid if planned_from is not None else decided.plan.owner.uid
    owner = projection.by_uid(uid) if uid else None
    if owner is None:
        return _skipped(
            event,
            f"the owner {decided.plan.owner.display()} is not among the recorded observations "
            f"up to sequence {decided.obs_sequence}",
            decided,
        )
    # The planner planned from its own previous status when the observed one lagged behind.
    owner = owner_with_status(owner, decided.assumed_status)
    # A fresh context for every plan: the planner service carries its context from state
    # to state, so a value it failed to work out again shows here as a difference.
    context = PlanningContext.of(projection.cluster_state())
    replayed = plan_fn(owner=owner, context=context, now=decided.planned_at).plan
    if replayed is not None and _same_as_recorded(decided, replayed, projection):
        return _verdict(event, decided, "reproduced")
    recorded_doc = comparable(decided.plan, absent=decided.absent, drifted=decided.drifted)
    replayed_doc = (
        comparable(replayed, **_confirmed_gaps(decided, replayed, projection))
        if replayed
        else {"plan": None}
    )
    if canonical_json(recorded_doc) == canonical_json(replayed_doc):
        return _verdict(event, decided, "reproduced")
    return _verdict(event, decided, "differs", diff=unified_yaml_diff(recorded_doc, replayed_doc))


def _judge_default_object(
    event: StoredEvent, decided: PlanDecidedV1, projection: Projection
) -> PlanReplay:
    """A plan that creates a missing singleton: the cluster then lacked it, and the plan for
    it is the one recorded."""
    replayed = {
        plan.owner.kind: plan for plan in default_object_plans(projection.cluster_state())
    }.get(decided.plan.owner.kind)
    if replayed is not None and replayed.fingerprint() == decided.fingerprint:
        return _verdict(event, decided, "reproduced")
    recorded_doc = comparable(decided.plan, absent=decided.absent)
    replayed_doc = comparable(replayed, absent=decided.absent) if replayed else {"plan": None}
    return _verdict(event, decided, "differs", diff=unified_yaml_diff(recorded_doc, replayed_doc))


def _same_as_recorded(decided: PlanDecidedV1, replayed: Plan, projection: Projection) -> bool:
    """The replayed plan equals the recorded one: equal fingerprints (a hash of the canonical
    JSON of everything but the observed resourceVersion, checked against the recorded plan
    when it was parsed), that version, and the gaps it named are gaps of the projection."""
    confirmed = _confirmed_gaps(decided, replayed, projection)
    return (
        decided.fingerprint == replayed.fingerprint()
        and decided.plan.observed_resource_version == replayed.observed_resource_version
        and confirmed["absent"] == decided.absent
        and confirmed["drifted"] == decided.drifted
    )


def _confirmed_gaps(
    decided: PlanDecidedV1, replayed: Plan, projection: Projection
) -> dict[str, tuple[ObjectRef, ...]]:
    """The recorded ``absent`` and ``drifted`` refs that the projection confirms."""
    missing = set(projection.missing((*replayed.desired, *replayed.shared)))
    # A resync also names objects the operator wrote last: confirm against that wider set.
    drifted = set(projection.drifted(replayed.desired, ours_too=True))
    return {
        "absent": tuple(ref for ref in decided.absent if ref in missing),
        "drifted": tuple(ref for ref in decided.drifted if ref in drifted),
    }


def comparable(
    plan: Plan, *, absent: Sequence[ObjectRef], drifted: Sequence[ObjectRef] = ()
) -> dict[str, Any]:
    """What replay compares: the plan and the desired objects the cluster lacked or held
    without what the plan asks."""
    return {
        "plan": plan.model_dump(mode="json", by_alias=True),
        "absent": [ref.model_dump(mode="json", by_alias=True) for ref in absent],
        "drifted": [ref.model_dump(mode="json", by_alias=True) for ref in drifted],
    }


def unified_yaml_diff(recorded: Mapping[str, Any], replayed: Mapping[str, Any]) -> str:
    """A unified diff of the two documents as canonical YAML (sorted keys)."""

    def lines(document: Mapping[str, Any]) -> list[str]:
        return yaml.safe_dump(dict(document), sort_keys=True, default_flow_style=False).splitlines(
            keepends=True
        )

    return "".join(
        difflib.unified_diff(lines(recorded), lines(replayed), "recorded", "replayed", n=3)
    )


def _decided(event: StoredEvent) -> PlanDecidedV1 | None:
    try:
        return PlanDecidedV1.model_validate(event.data)
    except ValidationError:
        return None


def _verdict(
    event: StoredEvent,
    decided: PlanDecidedV1,
    outcome: Outcome,
    *,
    reason: str = "",
    diff: str = "",
) -> PlanReplay:
    return PlanReplay(
        event_id=event.event_id,
        position=event.global_position,
        owner=decided.plan.owner.display(),
        trigger=decided.trigger,
        planned_at=decided.planned_at,
        obs_sequence=decided.obs_sequence,
        outcome=outcome,
        reason=reason,
        diff=diff,
    )


def _skipped(event: StoredEvent, reason: str, decided: PlanDecidedV1 | None = None) -> PlanReplay:
    if decided is not None:
        return _verdict(event, decided, "skipped", reason=reason)
    return PlanReplay(
        event_id=event.event_id,
        position=event.global_position,
        owner=str(event.subject or "?"),
        trigger="?",
        planned_at=None,
        obs_sequence=0,
        outcome="skipped",
        reason=reason,
    )


def _obs_sequence_of(event: StoredEvent) -> int | None:
    return _sequence_in(event, OBSERVED_STREAM)


def _sequence_in(event: StoredEvent, stream: str) -> int | None:
    metadata = event.metadata
    if metadata.get(NATS_STREAM_KEY) != stream:
        return None
    sequence = metadata.get(NATS_SEQUENCE_KEY)
    return sequence if isinstance(sequence, int) and sequence > 0 else None


# --------------------------------------------------------------------------- the store


async def replay_from_store(
    store: EventStore,
    *,
    workload_uid: str | None = None,
    plan_fn: PlanFunction = plan_object,
    progress: Progress | None = None,
) -> ReplayReport:
    """Replay the recorded plans of one workload (every plan when ``workload_uid`` is None)."""
    observations = await store.read_by_type([OBSERVED_TYPE])
    findings = await store.read_by_type([FINDING_TYPE])
    scale_decisions = await store.read_by_type([SCALE_TYPE])
    plans = await store.read_by_type([PLAN_TYPE])
    if workload_uid is not None:
        plans = [event for event in plans if _owner_uid(event) == workload_uid]
    return replay_recorded(
        observations=observations,
        plans=plans,
        findings=findings,
        scale_decisions=scale_decisions,
        plan_fn=plan_fn,
        progress=progress,
    )


def _owner_uid(event: StoredEvent) -> str | None:
    owner = (event.data.get("plan") or {}).get("owner") or {}
    uid = owner.get("uid") if isinstance(owner, Mapping) else None
    return uid if isinstance(uid, str) else event.correlation_id
