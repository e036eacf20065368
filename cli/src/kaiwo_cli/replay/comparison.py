"""Comparing a replayed plan with the recorded one, and the verdicts: reproduced, differs (with
a unified diff of the two as canonical YAML) or skipped (with the reason)."""

from __future__ import annotations

import difflib
from collections.abc import (
    Callable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal, get_args

import yaml
from kaiwo_contracts.confinement import preemption_target_ref
from kaiwo_contracts.events import PlanDecidedV1
from kaiwo_contracts.plans import ObjectRef, Plan, canonical_json
from kaiwo_eventstore import StoredEvent
from kaiwo_planner.domain.planning import PlanningResult
from kaiwo_planner.domain.queues.default_objects import default_object_plans
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.state.projection import Projection
from kaiwo_planner.domain.status.planned_status import owner_with_status

from kaiwo_cli.replay.recorded import PlanOrder, plan_order

Outcome = Literal["reproduced", "differs", "skipped"]
PlanFunction = Callable[..., PlanningResult]
"""The planner's ``plan_object`` (a benchmark passes a counting stand-in)."""


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
    order: PlanOrder = (0, 0, 0, 0)
    """Where the plan stands in publishing order: the order verdicts are given in, also when
    several processes judge them (:mod:`kaiwo_cli.replay.processes`)."""


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


VerdictSink = Callable[[PlanReplay], None]


def no_verdicts() -> dict[Outcome, int]:
    """A tally of verdicts by outcome, every outcome at 0."""
    return dict.fromkeys(get_args(Outcome), 0)


@dataclass(frozen=True, slots=True)
class _Recorded:
    """A recorded decision whose fingerprint holds, and the bytes it hashes
    (:meth:`~kaiwo_contracts.plans.Plan.fingerprint_bytes`)."""

    decided: PlanDecidedV1
    fingerprint_bytes: bytes

    def reproduced_by(self, replayed: Plan) -> bool:
        return replayed.fingerprint_bytes() == self.fingerprint_bytes


def judge_plan(
    event: StoredEvent,
    decided: PlanDecidedV1,
    projection: Projection,
    plan_fn: PlanFunction,
    context_of: Callable[[Projection], PlanningContext],
) -> PlanReplay:
    """The verdict on ``decided``, read without its fingerprint check (:func:`decided_plan`).

    The check comes first: a recorded plan whose fingerprint is not its own is skipped as
    not parsing, as a plan that failed validation. Hashing it costs less than proving it
    by walking the replayed plan and the recorded one side by side, types included (1 and
    1.0 are equal to ``==`` and not to the hash), which replay did before decision 0081.
    The bytes hashed are kept: the replayed plan's are compared with them, equal exactly
    when the fingerprints are, without hashing a second time. They are written from the
    recorded JSON, not from the validated plan dumped again: the same bytes for a plan as its
    planner published it, for less work (decision 0101); a recorded plan whose JSON gives
    other bytes is checked as validated, as before.
    """
    recorded = PlanDecidedV1.checked_wire_fingerprint_bytes(event.data)
    if recorded is None:
        recorded = decided.checked_fingerprint_bytes()
    if recorded is None:
        return skipped_verdict(event, UNPARSABLE)
    return _judge(event, _Recorded(decided, recorded), projection, plan_fn, context_of)


UNPARSABLE: Final = "the recorded plan does not parse as PlanDecidedV1"


def _judge(
    event: StoredEvent,
    recorded: _Recorded,
    projection: Projection,
    plan_fn: PlanFunction,
    context_of: Callable[[Projection], PlanningContext],
) -> PlanReplay:
    """The verdict on the recorded decision, whose fingerprint holds."""
    decided = recorded.decided
    if decided.planned_at is None:
        return skipped_verdict(event, "planned outside the planner (no plannedAt)", decided)
    # A GpuWorkload created for a GPU workload's root was planned from that root.
    planned_from = preemption_target_ref(decided.plan) if decided.plan.create_only else None
    if decided.plan.create_only and decided.plan.owner.uid is None and planned_from is None:
        return _judge_default_object(event, recorded, projection)
    uid = planned_from.uid if planned_from is not None else decided.plan.owner.uid
    owner = projection.by_uid(uid) if uid else None
    if owner is None:
        return skipped_verdict(
            event,
            f"the owner {decided.plan.owner.display()} is not among the recorded observations "
            f"up to sequence {decided.obs_sequence}",
            decided,
        )
    # The planner planned from its own previous status when the observed one lagged behind.
    owner = owner_with_status(owner, decided.assumed_status)
    # And counted the preemptions it had published and not observed yet as under way.
    context = context_of(projection).with_preempting(frozenset(decided.preempting))
    replayed = plan_fn(owner=owner, context=context, now=decided.planned_at).plan
    if replayed is not None and _same_as_recorded(recorded, replayed, projection):
        return _verdict(event, decided, "reproduced")
    recorded_doc = comparable(decided.plan, absent=decided.absent, drifted=decided.drifted)
    replayed_doc = (
        comparable(replayed, **_confirmed_gaps(decided, replayed, projection))
        if replayed
        else {"plan": None}
    )
    if canonical_json(recorded_doc) == canonical_json(replayed_doc):
        return _verdict(event, decided, "reproduced")
    diff = unified_yaml_diff(recorded_doc, replayed_doc)
    return _verdict(event, decided, "differs", diff=diff)


def _judge_default_object(
    event: StoredEvent, recorded: _Recorded, projection: Projection
) -> PlanReplay:
    """A plan that creates a missing singleton: the cluster then lacked it, and the plan for
    it is the one recorded."""
    decided = recorded.decided
    replayed = {
        plan.owner.kind: plan for plan in default_object_plans(projection.cluster_state())
    }.get(decided.plan.owner.kind)
    if replayed is not None and recorded.reproduced_by(replayed):
        return _verdict(event, decided, "reproduced")
    recorded_doc = comparable(decided.plan, absent=decided.absent)
    replayed_doc = comparable(replayed, absent=decided.absent) if replayed else {"plan": None}
    return _verdict(event, decided, "differs", diff=unified_yaml_diff(recorded_doc, replayed_doc))


def _same_as_recorded(recorded: _Recorded, replayed: Plan, projection: Projection) -> bool:
    """The replayed plan equals the recorded one: equal fingerprints (equal canonical JSON
    of everything but the observed resourceVersion), that version, and the gaps it named
    are gaps of the projection."""
    decided = recorded.decided
    if decided.plan.observed_resource_version != replayed.observed_resource_version:
        return False
    if not recorded.reproduced_by(replayed):
        return False
    confirmed = _confirmed_gaps(decided, replayed, projection)
    return confirmed["absent"] == decided.absent and confirmed["drifted"] == decided.drifted


def _confirmed_gaps(
    decided: PlanDecidedV1, replayed: Plan, projection: Projection
) -> dict[str, tuple[ObjectRef, ...]]:
    """The recorded ``absent`` and ``drifted`` refs that the projection confirms (most plans
    name none: then the projection is not searched)."""
    absent: tuple[ObjectRef, ...] = ()
    drifted: tuple[ObjectRef, ...] = ()
    if decided.absent:
        missing = set(projection.missing((*replayed.desired, *replayed.shared)))
        absent = tuple(ref for ref in decided.absent if ref in missing)
    if decided.drifted:
        # A resync also names objects the operator wrote last: confirm against that wider set.
        differing = set(projection.drifted(replayed.desired, ours_too=True))
        drifted = tuple(ref for ref in decided.drifted if ref in differing)
    return {"absent": absent, "drifted": drifted}


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
        order=plan_order(event),
    )


def skipped_verdict(
    event: StoredEvent, reason: str, decided: PlanDecidedV1 | None = None
) -> PlanReplay:
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
        order=plan_order(event),
    )
