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
   projection holds it, the planning context of the projection's cluster state and
   ``now = planned_at``. The context is carried from plan to plan as the planner service
   carries it, and a plan that differs is judged again from a fresh one; with
   ``fresh_contexts`` every plan gets a fresh one, so a value the planner service kept when
   it should have worked it out again shows as a difference (decision 0052);
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
import gc
import heapq
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Generic, Literal, TypeVar

import yaml
from kaiwo_contracts.confinement import preemption_target_ref
from kaiwo_contracts.events import ObservedObjectV1, PlanDecidedV1
from kaiwo_contracts.events.autoscaling import ScaleDecidedV1
from kaiwo_contracts.events.monitor import UtilizationV1
from kaiwo_contracts.events.plans import FINGERPRINT_CHECKED_BY_READER
from kaiwo_contracts.plans import ObjectRef, Plan, canonical_json
from kaiwo_eventstore import EventStore, StoredEvent, cyclic_gc_paused
from kaiwo_planner.domain.planning import PlanningResult, plan_object
from kaiwo_planner.domain.queues.default_objects import default_object_plans
from kaiwo_planner.domain.state.context_keeper import PlanningContextKeeper
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.state.projection import Projection
from kaiwo_planner.domain.state.scale_request import ScaleRequest
from kaiwo_planner.domain.state.workload_finding import WorkloadFinding
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
Progress = Callable[[int, int | None], None]
"""Called with (plans done, plans in all, or None when not known: a streamed replay) while
replaying."""


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
    """The verdicts kept: every one, unless the caller asked to keep only some (a replay of
    a large store keeps the differences and prints the rest as they come)."""
    observations: int
    """Recorded observations applied (those at or below the last plan's obs_sequence)."""
    tally: Mapping[Outcome, int] | None = None
    """Verdicts by outcome, kept or not; None: count :attr:`plans`."""
    late_observations: int = 0
    """Observations recorded after the replay had passed their stream sequence (not
    applied; see :func:`replay_from_store`)."""

    def count(self, outcome: Outcome) -> int:
        if self.tally is not None:
            return self.tally.get(outcome, 0)
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
    fresh_contexts: bool = False,
) -> ReplayReport:
    """Replay ``plans`` over ``observations``, ``findings`` and ``scale_decisions`` (as
    recorded; any order). See :func:`replay_from_store` for ``fresh_contexts``."""
    with cyclic_gc_paused():  # every collection would walk the whole recorded history
        return _replay(
            observations,
            plans,
            _Inputs(findings=findings, scale_decisions=scale_decisions),
            replayer=_Replayer(plan_fn, fresh_contexts=fresh_contexts),
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
    replayer: _Replayer,
    progress: Progress | None,
) -> ReplayReport:
    ordered = [(o.sequence, o.payload) for o in observations_in_stream_order(observations)]
    readings = findings_in_stream_order(inputs.findings)
    requests = scale_requests_in_stream_order(inputs.scale_decisions)
    recorded = sorted((event for event in plans if event.type == PLAN_TYPE), key=plan_order)
    applied = taken = scaled = 0
    for done, event in enumerate(recorded, start=1):
        decided = _decided(event)
        if decided is not None:
            upto = applied
            while upto < len(ordered) and ordered[upto][0] <= decided.obs_sequence:
                upto += 1
            replayer.apply_observations(ordered[applied:upto])
            applied = upto
            upto = taken
            while upto < len(readings) and readings[upto][0] <= decided.mon_sequence:
                upto += 1
            replayer.apply_findings(readings[taken:upto])
            taken = upto
            upto = scaled
            while upto < len(requests) and requests[upto][0] <= decided.scale_sequence:
                upto += 1
            replayer.apply_scale_requests(requests[scaled:upto])
            scaled = upto
        replayer.judge(event, decided)
        if progress is not None:
            progress(done, len(recorded))
    return replayer.report()


def plan_order(event: StoredEvent) -> tuple[int, int, int, int]:
    """The order one planner published its plans in: every sequence only moves forward."""
    data = event.data
    try:
        return (
            int(data.get("obsSequence") or 0),
            int(data.get("monSequence") or 0),
            int(data.get("scaleSequence") or 0),
            event.global_position,
        )
    except (TypeError, ValueError):  # unparsable: judged (and skipped) in recorded order
        return (0, 0, 0, event.global_position)


VerdictSink = Callable[[PlanReplay], None]


def _fresh_context(projection: Projection) -> PlanningContext:
    return PlanningContext.of(projection.cluster_state())


class _Replayer:
    """The projection a replay builds, the verdicts on the plans it is handed in order, and
    their tally. Plans are judged as they come, so a caller may keep only some verdicts."""

    def __init__(
        self,
        plan_fn: PlanFunction,
        *,
        keep: Callable[[PlanReplay], bool] | None = None,
        on_verdict: VerdictSink | None = None,
        fresh_contexts: bool = False,
    ) -> None:
        self._plan_fn = plan_fn
        self._fresh_contexts = fresh_contexts
        self._contexts = PlanningContextKeeper()
        self._keep = keep
        self._on_verdict = on_verdict
        # The observations are not shared with anything else: no copies with shared strings.
        self.projection = Projection(share_strings=False)
        self.observations = 0
        self.obs_through = 0
        self._kept: list[PlanReplay] = []
        self._tally: dict[Outcome, int] = {"reproduced": 0, "differs": 0, "skipped": 0}

    def apply_observations(self, items: Iterable[tuple[int, ObservedObjectV1]]) -> None:
        for sequence, payload in items:
            self.projection.apply(payload, sequence=sequence)
            self.observations += 1
            self.obs_through = sequence

    def apply_findings(self, items: Iterable[tuple[int, WorkloadFinding]]) -> None:
        for sequence, finding in items:
            self.projection.apply_finding(finding, sequence=sequence)

    def apply_scale_requests(self, items: Iterable[tuple[int, ScaleRequest]]) -> None:
        for sequence, request in items:
            self.projection.apply_scale_request(request, sequence=sequence)

    def judge(self, event: StoredEvent, decided: PlanDecidedV1 | None) -> PlanReplay:
        if decided is None:
            verdict = _skipped(event, _UNPARSABLE)
        elif self._fresh_contexts:
            verdict = _judge(event, decided, self.projection, self._plan_fn, _fresh_context)
        else:
            verdict = _judge(event, decided, self.projection, self._plan_fn, self._contexts.context)
            if verdict.outcome == "differs":  # confirmed from scratch: the reference
                verdict = _judge(event, decided, self.projection, self._plan_fn, _fresh_context)
        self.record(verdict)
        return verdict

    def record(self, verdict: PlanReplay) -> None:
        self._tally[verdict.outcome] += 1
        if self._on_verdict is not None:
            self._on_verdict(verdict)
        if self._keep is None or self._keep(verdict):
            self._kept.append(verdict)

    def report(self, *, late_observations: int = 0) -> ReplayReport:
        return ReplayReport(
            plans=tuple(self._kept),
            observations=self.observations,
            tally=dict(self._tally),
            late_observations=late_observations,
        )


def _judge(
    event: StoredEvent,
    decided: PlanDecidedV1,
    projection: Projection,
    plan_fn: PlanFunction,
    context_of: Callable[[Projection], PlanningContext],
) -> PlanReplay:
    """The verdict on ``decided``, read without its fingerprint check (:func:`_decided`).

    A replayed plan that is the recorded one exactly and has its fingerprint proves the
    recorded fingerprint right; any other verdict is given only once the recorded plan has
    passed the check, and a plan that fails it is skipped as not parsing, as before.
    """
    verdict, proven = _judge_unchecked(event, decided, projection, plan_fn, context_of)
    if proven or decided.fingerprint_holds():
        return verdict
    return _skipped(event, _UNPARSABLE)


_UNPARSABLE: Final = "the recorded plan does not parse as PlanDecidedV1"


def _judge_unchecked(
    event: StoredEvent,
    decided: PlanDecidedV1,
    projection: Projection,
    plan_fn: PlanFunction,
    context_of: Callable[[Projection], PlanningContext],
) -> tuple[PlanReplay, bool]:
    """The verdict, and whether the replayed plan proved the recorded fingerprint right."""
    if decided.planned_at is None:
        return _skipped(event, "planned outside the planner (no plannedAt)", decided), False
    # A GpuWorkload created for a GPU workload's root was planned from that root.
    planned_from = preemption_target_ref(decided.plan) if decided.plan.create_only else None
    if decided.plan.create_only and decided.plan.owner.uid is None and planned_from is None:
        return _judge_default_object(event, decided, projection), False
    uid = planned_from.uid if planned_from is not None else decided.plan.owner.uid
    owner = projection.by_uid(uid) if uid else None
    if owner is None:
        return _skipped(
            event,
            f"the owner {decided.plan.owner.display()} is not among the recorded observations "
            f"up to sequence {decided.obs_sequence}",
            decided,
        ), False
    # The planner planned from its own previous status when the observed one lagged behind.
    owner = owner_with_status(owner, decided.assumed_status)
    replayed = plan_fn(owner=owner, context=context_of(projection), now=decided.planned_at).plan
    if replayed is not None and _same_as_recorded(decided, replayed, projection):
        return _verdict(event, decided, "reproduced"), _same_plan_exactly(replayed, decided.plan)
    recorded_doc = comparable(decided.plan, absent=decided.absent, drifted=decided.drifted)
    replayed_doc = (
        comparable(replayed, **_confirmed_gaps(decided, replayed, projection))
        if replayed
        else {"plan": None}
    )
    if canonical_json(recorded_doc) == canonical_json(replayed_doc):
        return _verdict(event, decided, "reproduced"), False
    diff = unified_yaml_diff(recorded_doc, replayed_doc)
    return _verdict(event, decided, "differs", diff=diff), False


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


def _same_plan_exactly(replayed: Plan, recorded: Plan) -> bool:
    """The two plans are equal, types included: so they have one fingerprint.

    The typed fields hold validated strings, integers and booleans, which ``==`` compares
    exactly; in the free-form documents (desired and shared objects, the status) ``==``
    takes ``1``, ``1.0`` and ``True`` (and ``0.0`` and ``-0.0``) for one value, which the
    canonical JSON the fingerprint hashes does not: there the types are compared too.
    """
    return all(
        getattr(replayed, name) == getattr(recorded, name) for name in _TYPED_PLAN_FIELDS
    ) and _strictly_equal(_documents(replayed), _documents(recorded))


_DOCUMENT_FIELDS: Final = ("desired", "status", "shared")
_TYPED_PLAN_FIELDS: Final = tuple(
    name for name in Plan.model_fields if name not in _DOCUMENT_FIELDS
)


def _documents(plan: Plan) -> tuple[object, ...]:
    return tuple(getattr(plan, name) for name in _DOCUMENT_FIELDS)


def _strictly_equal(one: object, other: object) -> bool:
    """Equal JSON values, and of the same types all the way down (keys in any order)."""
    kind = type(one)
    if kind is not type(other):
        return False
    if kind is str:
        return one == other
    if kind is dict:
        assert isinstance(one, dict) and isinstance(other, dict)  # for mypy
        return len(one) == len(other) and all(
            type(key) is str and key in other and _strictly_equal(value, other[key])
            for key, value in one.items()
        )
    if kind is list or kind is tuple:
        assert isinstance(one, list | tuple) and isinstance(other, list | tuple)  # for mypy
        return len(one) == len(other) and all(map(_strictly_equal, one, other))
    if kind is float:
        return repr(one) == repr(other)
    return one == other


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
    """The recorded decision, its fingerprint not checked yet: :func:`_judge` checks it, most
    often by finding the replayed plan equal to it, which spares hashing the plan twice."""
    try:
        return PlanDecidedV1.model_validate(
            event.data, context={FINGERPRINT_CHECKED_BY_READER: True}
        )
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


READ_BATCH: Final = 2000
"""Events of one type read per round trip."""
PLAN_WINDOW: Final = 4096
"""Plans read ahead and put in publishing order before each is judged (see below)."""


async def replay_from_store(
    store: EventStore,
    *,
    workload_uid: str | None = None,
    plan_fn: PlanFunction = plan_object,
    progress: Progress | None = None,
    on_verdict: VerdictSink | None = None,
    keep: Callable[[PlanReplay], bool] | None = None,
    plan_window: int = PLAN_WINDOW,
    batch_size: int = READ_BATCH,
    fresh_contexts: bool = False,
) -> ReplayReport:
    """Replay the recorded plans of one workload (every plan when ``workload_uid`` is None).

    Streamed, in memory that does not grow with the store: the plans, observations, findings
    and scale decisions are each read as a stream of their own type
    (:meth:`~kaiwo_eventstore.EventStore.iter_by_type`, in recording order, in batches), and
    each input is read only as far as the plan being judged needs. No event of another type
    is read or decoded. ``on_verdict`` sees every verdict as it is made; the report keeps
    those ``keep`` accepts (all by default) and counts every one.

    Order. The recorder stores each NATS stream through one consumer, in stream order, batch
    by batch; one planner publishes its plans with every sequence moving forward. So
    recording order is stream order, give or take a redelivered batch: each input is put in
    stream-sequence order over what has been read (at least one batch past the plan's
    sequence), and plans over a window of ``plan_window``. An observation recorded after the
    replay has passed its sequence cannot be applied any more: it is counted in
    ``late_observations``; a plan that comes after the replay applied observations past its
    ``obsSequence`` is *skipped*, saying so. Neither happens to a store one recorder wrote.

    Planning contexts. By default replay carries one planning context along the projection,
    as the planner service does (:class:`PlanningContextKeeper`: values whose inputs did not
    change are kept), and judges a plan that differs again with a fresh context, whose
    verdict is the one reported: a difference is always one from scratch. Working
    everything out afresh for every plan (``fresh_contexts``, ``--fresh-contexts``) is
    several times slower, and also finds a value the planner service kept when it should
    have worked it out again (it shows as a difference).
    """
    replayer = _Replayer(plan_fn, keep=keep, on_verdict=on_verdict, fresh_contexts=fresh_contexts)

    def batches(event_type: str) -> AsyncGenerator[Sequence[StoredEvent], None]:
        return store.iter_by_type(event_type, batch_size=batch_size)

    observations = _InStreamOrder(batches(OBSERVED_TYPE), read=_observation_of)
    findings = _InStreamOrder(batches(FINDING_TYPE), read=_finding_of)
    requests = _InStreamOrder(batches(SCALE_TYPE), read=_scale_request_of)
    done = 0
    with cyclic_gc_paused():  # see kaiwo_eventstore.bulk; collected every few thousand plans
        try:
            async for event in _plans_in_order(
                batches(PLAN_TYPE), window=plan_window, owner_uid=workload_uid
            ):
                decided = _decided(event)
                if (
                    decided is not None
                    and decided.obs_sequence < replayer.obs_through
                    and not decided.fingerprint_holds()
                ):
                    decided = None  # judged as not parsing, as a plan that failed validation
                if decided is not None and decided.obs_sequence < replayer.obs_through:
                    replayer.record(
                        _skipped(
                            event,
                            f"recorded out of order: the replay had applied observations up "
                            f"to {replayer.obs_through}, past this plan's {decided.obs_sequence}",
                            decided,
                        )
                    )
                else:
                    if decided is not None:
                        replayer.apply_observations(
                            await observations.take_through(decided.obs_sequence)
                        )
                        replayer.apply_findings(await findings.take_through(decided.mon_sequence))
                        replayer.apply_scale_requests(
                            await requests.take_through(decided.scale_sequence)
                        )
                    replayer.judge(event, decided)
                done += 1
                if done % _COLLECT_EVERY == 0:
                    gc.collect()
                if progress is not None:
                    progress(done, None)
        finally:
            for source in (observations, findings, requests):
                await source.close()
    return replayer.report(late_observations=observations.late)


_COLLECT_EVERY: Final = 5000
_Item = TypeVar("_Item")


class _InStreamOrder(Generic[_Item]):
    """One input of replay, read from the store batch by batch, handed out in stream-sequence
    order up to a bound. Holds only what was read past the last bound (a batch or so)."""

    def __init__(
        self,
        batches: AsyncGenerator[Sequence[StoredEvent], None],
        *,
        read: Callable[[StoredEvent], tuple[int, Callable[[], _Item | None]] | None],
    ) -> None:
        self._batches = batches
        self._read = read
        self._heap: list[int] = []
        self._pending: dict[int, Callable[[], _Item | None]] = {}
        self._read_through = 0
        self._taken_through = 0
        self._exhausted = False
        self.late = 0

    async def take_through(self, bound: int) -> list[tuple[int, _Item]]:
        """Every item with a sequence up to ``bound`` not handed out yet, in sequence order."""
        while not self._exhausted and self._read_through <= bound:
            batch = await anext(self._batches, None)
            if batch is None:
                self._exhausted = True
                break
            for event in batch:
                self._add(event)
        taken: list[tuple[int, _Item]] = []
        while self._heap and self._heap[0] <= bound:
            sequence = heapq.heappop(self._heap)
            item = self._pending.pop(sequence)()
            if item is not None:
                taken.append((sequence, item))
        self._taken_through = max(self._taken_through, bound)
        return taken

    def _add(self, event: StoredEvent) -> None:
        found = self._read(event)
        if found is None:
            return
        sequence, item = found
        self._read_through = max(self._read_through, sequence)
        if sequence <= self._taken_through:
            self.late += 1
        elif sequence not in self._pending:  # the first recording of a sequence counts
            self._pending[sequence] = item
            heapq.heappush(self._heap, sequence)

    async def close(self) -> None:
        await self._batches.aclose()


def _observation_of(
    event: StoredEvent,
) -> tuple[int, Callable[[], ObservedObjectV1 | None]] | None:
    """The observation's stream sequence, and how to read its payload (only when applied:
    an observation past the last plan is never validated)."""
    sequence = _obs_sequence_of(event)
    if sequence is None:
        return None

    def payload() -> ObservedObjectV1 | None:
        try:
            return ObservedObjectV1.model_validate(event.data)
        except ValidationError:  # the recorder would have stored it as malformed
            return None

    return sequence, payload


def _finding_of(
    event: StoredEvent,
) -> tuple[int, Callable[[], WorkloadFinding | None]] | None:
    sequence = _sequence_in(event, MONITOR_STREAM)
    if sequence is None:
        return None

    def finding() -> WorkloadFinding | None:
        try:
            reading = UtilizationV1.model_validate(event.data)
        except ValidationError:
            return None
        return WorkloadFinding.of(reading, at=event.time) if reading.workload.uid else None

    return sequence, finding


def _scale_request_of(
    event: StoredEvent,
) -> tuple[int, Callable[[], ScaleRequest | None]] | None:
    sequence = _sequence_in(event, GATEWAY_STREAM)
    if sequence is None:
        return None

    def request() -> ScaleRequest | None:
        try:
            decision = ScaleDecidedV1.model_validate(event.data)
        except ValidationError:
            return None
        return ScaleRequest.of(decision, at=event.time) if decision.model.uid else None

    return sequence, request


async def _plans_in_order(
    batches: AsyncGenerator[Sequence[StoredEvent], None],
    *,
    window: int,
    owner_uid: str | None,
) -> AsyncIterator[StoredEvent]:
    """The recorded plans (of ``owner_uid``, or all) in publishing order over a window."""
    heap: list[tuple[tuple[int, int, int, int], StoredEvent]] = []
    try:
        async for batch in batches:
            for event in batch:
                if owner_uid is not None and _owner_uid(event) != owner_uid:
                    continue
                heapq.heappush(heap, (plan_order(event), event))
                if len(heap) > window:
                    yield heapq.heappop(heap)[1]
    finally:
        await batches.aclose()
    while heap:
        yield heapq.heappop(heap)[1]


def _owner_uid(event: StoredEvent) -> str | None:
    owner = (event.data.get("plan") or {}).get("owner") or {}
    uid = owner.get("uid") if isinstance(owner, Mapping) else None
    return uid if isinstance(uid, str) else event.correlation_id
