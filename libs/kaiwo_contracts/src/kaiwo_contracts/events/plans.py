"""Plan decisions: the planner's complete answer for one owner object."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal, Self

from pydantic import AwareDatetime, Field, ValidationInfo, model_validator

from kaiwo_contracts.events.envelope import EventPayload, event_type
from kaiwo_contracts.plans import (
    EventIntent,
    ObjectRef,
    Plan,
    PruneRule,
    ScaleIntent,
    fingerprint_bytes_of_wire,
    fingerprint_of,
)

__all__ = [
    "EventIntent",
    "ObjectRef",
    "Plan",
    "PlanDecidedV1",
    "PlanTrigger",
    "PruneRule",
    "ScaleIntent",
]

PlanTrigger = Literal["observation", "timer", "resync", "finding", "scale"]
"""Why the planner planned: an observed object changed, a planned time came (a deadline, a
preemption), the planner re-planned everything (start-up, periodic resync), a monitor
finding came in, or the autoscaler decided a Model's replicas."""


def _check_absent(plan: Plan, absent: tuple[ObjectRef, ...], *, name: str = "absent") -> None:
    """``absent`` (or ``drifted``) names only desired (or shared) objects, sorted."""
    if not absent:  # most plans name none: no set of the desired objects to build
        return
    desired = {
        _identity(
            ObjectRef(
                api_version=str(manifest.get("apiVersion", "")),
                kind=str(manifest.get("kind", "")),
                name=str((manifest.get("metadata") or {}).get("name", "")),
                namespace=(manifest.get("metadata") or {}).get("namespace"),
            )
        )
        for manifest in (*plan.desired, *plan.shared)
    }
    strays = [ref.display() for ref in absent if _identity(ref) not in desired]
    if strays:
        msg = f"{name} objects are not in the plan's desired objects: {', '.join(strays)}"
        raise ValueError(msg)
    if list(absent) != sorted(absent, key=ObjectRef.sort_key):
        raise ValueError(f"{name} must be sorted by apiVersion, kind, namespace, name")


def _identity(ref: ObjectRef) -> tuple[str, str, str, str]:
    group = ref.api_version.rpartition("/")[0]
    return (group, ref.kind, ref.namespace or "", ref.name)


FINGERPRINT_CHECKED_BY_READER: Final = "kaiwo.fingerprint-checked-by-reader"
"""Validation context key: ``PlanDecidedV1.model_validate(data, context={key: True})`` leaves
out the fingerprint check, for a reader that makes it itself before trusting the plan, in a
cheaper way of its own (replay: the plan it makes again is the recorded one exactly and has
the recorded fingerprint, decision 0059). Nothing that acts on a plan uses it."""
FINGERPRINT_MISMATCH: Final = (
    "fingerprint does not match the plan (the plan was changed after hashing)"
)


class PlanDecidedV1(EventPayload):
    """A :class:`~kaiwo_contracts.plans.Plan`, its fingerprint, and what it was planned from.

    ``fingerprint`` travels with the plan so the executor, the recorder and external readers
    can compare plans without re-hashing; it must equal ``plan.fingerprint()``.

    What replay needs to reproduce the plan byte for byte:

    * ``planned_at`` — the ``now`` the planner was given: the envelope time of the observation
      that triggered it, or the due time of a timer. Never the wall clock inside planning.
      None only for plans made outside the planner service (tools, tests).
    * ``trigger`` — ``observation``, ``timer``, ``resync``, ``finding`` or ``scale``.
    * ``obs_sequence`` — the ``KAIWO_OBS`` stream sequence of the last observation applied to
      the planner's projection when it planned: rebuilding the projection from the stream up
      to and including that sequence gives the cluster state the plan was computed from.
    * ``mon_sequence`` — likewise the ``KAIWO_MON`` stream sequence of the last monitor
      finding the planner had taken in: the latest finding per workload up to it is the rest
      of the input (the ``ResourceUnderutilization`` condition, terminations, idle preemption).
    * ``scale_sequence`` — likewise the ``KAIWO_GATEWAY`` stream sequence of the last
      autoscaler decision (``ScaleDecidedV1``) the planner had taken in: the latest decision
      per Model up to it is what a Model's plan scales to.
    * ``assumed_status`` — the owner status the planner planned from when it was not the
      observed one: the status of its own previous plan for that owner, which the executor
      may not have written back yet. Only the operator writes these statuses, so its last
      decision is the truth; planning from the observed (older) status instead would
      re-announce every transition and move every ``lastTransitionTime`` on each
      observation until the write lands. None: the observed status was used.
    * ``preempting`` — the uids of the owners (a GpuWorkload, a KaiwoJob or KaiwoService)
      whose preemption for idleness, or termination for duration preemption (decision
      0148), the planner had decided and not yet observed (sorted).
      Their GPUs count as being freed, so a decision made before that preemption is seen
      does not choose a second victim for the same demand.

    What the executor needs:

    * ``absent`` — desired (or shared) objects (as refs, sorted) that the planner has not
      observed in the cluster. The executor applies them even when it believes it already
      did, so a child deleted by hand is re-created although the plan itself did not change.
    * ``drifted`` — desired objects (as refs, sorted) observed without what the plan asks of
      them (a field changed by hand; server defaults do not count). The executor applies them
      again even when it believes it already did, so drift is corrected although the plan
      itself did not change.
    """

    EVENT_TYPE: ClassVar[str] = event_type("plan", "decided")

    plan: Plan
    fingerprint: str
    planned_at: AwareDatetime | None = None
    trigger: PlanTrigger = "observation"
    obs_sequence: int = Field(default=0, ge=0)
    mon_sequence: int = Field(default=0, ge=0)
    scale_sequence: int = Field(default=0, ge=0)
    absent: tuple[ObjectRef, ...] = ()
    drifted: tuple[ObjectRef, ...] = ()
    assumed_status: dict[str, Any] | None = None
    preempting: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        plan: Plan,
        *,
        planned_at: AwareDatetime | None = None,
        trigger: PlanTrigger = "observation",
        obs_sequence: int = 0,
        mon_sequence: int = 0,
        scale_sequence: int = 0,
        absent: tuple[ObjectRef, ...] = (),
        drifted: tuple[ObjectRef, ...] = (),
        assumed_status: dict[str, Any] | None = None,
        preempting: frozenset[str] = frozenset(),
        fingerprint: str | None = None,
    ) -> PlanDecidedV1:
        """The decision for ``plan``. ``fingerprint``, when given, must be
        ``plan.fingerprint()`` (saves hashing the plan again); an envelope made for the
        decision checks it."""
        if obs_sequence < 0:
            raise ValueError("obs_sequence must be >= 0")
        if planned_at is not None and planned_at.utcoffset() is None:
            raise ValueError("planned_at must carry a time zone")
        # Built from values that are valid already: validating again would hash the plan a
        # second time (the fingerprint check), a tenth of the planner's time per plan.
        decision = cls.model_construct(
            plan=plan,
            fingerprint=fingerprint or plan.fingerprint(),
            planned_at=planned_at,
            trigger=trigger,
            obs_sequence=obs_sequence,
            mon_sequence=mon_sequence,
            scale_sequence=scale_sequence,
            absent=tuple(sorted(absent, key=ObjectRef.sort_key)),
            drifted=tuple(sorted(drifted, key=ObjectRef.sort_key)),
            assumed_status=assumed_status,
            preempting=tuple(sorted(preempting)),
        )
        _check_absent(plan, decision.absent)
        _check_absent(plan, decision.drifted, name="drifted")
        return decision

    @model_validator(mode="after")
    def _fingerprint_matches(self, info: ValidationInfo) -> Self:
        context = info.context
        if isinstance(context, Mapping) and context.get(FINGERPRINT_CHECKED_BY_READER) is True:
            return self
        if not self.fingerprint_holds():
            raise ValueError(FINGERPRINT_MISMATCH)
        return self

    def fingerprint_holds(self) -> bool:
        """``fingerprint`` is the plan's (what validation checks unless the reader said it
        checks it itself, :data:`FINGERPRINT_CHECKED_BY_READER`)."""
        return self.checked_fingerprint_bytes() is not None

    def checked_fingerprint_bytes(self) -> bytes | None:
        """The plan's :meth:`~kaiwo_contracts.plans.Plan.fingerprint_bytes` when
        ``fingerprint`` is their hash, else None: a reader that checks the fingerprint and
        then compares other plans with this one hashes it once."""
        written = self.plan.fingerprint_bytes()
        return written if fingerprint_of(written) == self.fingerprint else None

    @staticmethod
    def checked_wire_fingerprint_bytes(data: Mapping[str, Any]) -> bytes | None:
        """:meth:`checked_fingerprint_bytes` of the decision whose wire form is ``data``,
        written from that form (:func:`~kaiwo_contracts.plans.fingerprint_bytes_of_wire`),
        without dumping the validated plan again. None when its ``fingerprint`` does not hash
        them, which is also the answer for a plan written otherwise than as its planner
        dumped it (the reader then checks the validated decision): bytes that hash to the
        recorded fingerprint are the bytes its planner hashed."""
        plan, fingerprint = data.get("plan"), data.get("fingerprint")
        if not isinstance(plan, Mapping) or not isinstance(fingerprint, str):
            return None
        written = fingerprint_bytes_of_wire(plan)
        return written if fingerprint_of(written) == fingerprint else None

    @model_validator(mode="after")
    def _absent_objects_are_desired(self) -> Self:
        _check_absent(self.plan, self.absent)
        _check_absent(self.plan, self.drifted, name="drifted")
        return self
