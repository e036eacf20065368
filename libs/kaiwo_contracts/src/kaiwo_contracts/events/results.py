"""What the executor did with a plan: one outcome per action it took."""

from __future__ import annotations

from typing import ClassVar, Literal, Self

from pydantic import Field, model_validator

from kaiwo_contracts.events.envelope import EventPayload, WireModel, event_type
from kaiwo_contracts.plans import ObjectRef

Operation = Literal["apply", "delete", "status", "event", "delete-owner", "scale", "preempt"]
ActionOutcomeKind = Literal["applied", "unchanged", "deleted", "failed"]
ResultOutcome = Literal["applied", "failed"]
"""``applied``: every action succeeded (or changed nothing); ``failed``: at least one failed."""


class ActionOutcome(WireModel):
    """One call the executor made: server-side apply, delete, status write or Event."""

    operation: Operation
    target: ObjectRef
    outcome: ActionOutcomeKind
    reason: str | None = None
    http_status: int | None = Field(default=None, ge=100, le=599)
    attempts: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _failure_has_reason(self) -> Self:
        if self.outcome == "failed" and not self.reason:
            msg = "a failed action needs a reason"
            raise ValueError(msg)
        return self


class ApplyResultV1(EventPayload):
    """The result of carrying out one plan (``plan_id`` is the plan event's id)."""

    EVENT_TYPE: ClassVar[str] = event_type("res", "applied")

    plan_id: str = Field(min_length=1)
    plan_fingerprint: str = Field(min_length=1)
    owner: ObjectRef
    outcome: ResultOutcome
    actions: tuple[ActionOutcome, ...] = ()

    @classmethod
    def summarise(
        cls,
        *,
        plan_id: str,
        plan_fingerprint: str,
        owner: ObjectRef,
        actions: tuple[ActionOutcome, ...],
    ) -> ApplyResultV1:
        """A result whose ``outcome`` follows from ``actions``."""
        failed = any(action.outcome == "failed" for action in actions)
        return cls(
            plan_id=plan_id,
            plan_fingerprint=plan_fingerprint,
            owner=owner,
            outcome="failed" if failed else "applied",
            actions=actions,
        )

    @model_validator(mode="after")
    def _outcome_follows_actions(self) -> Self:
        failed = any(action.outcome == "failed" for action in self.actions)
        if failed != (self.outcome == "failed"):
            msg = f"outcome {self.outcome!r} contradicts the action outcomes"
            raise ValueError(msg)
        return self

    @property
    def failures(self) -> tuple[ActionOutcome, ...]:
        return tuple(action for action in self.actions if action.outcome == "failed")


class PlanRefusedV1(EventPayload):
    """A plan the executor refused: nothing of it was carried out (decision 0038).

    ``reasons`` say why (its owner does not exist with the plan's uid, a source differs from
    the live object, a write outside the owner's confinement). ``reobserve`` names the
    objects the executor found different from what the plan was computed from (the owner, a
    configuration object): the watcher observes each again from the API server and publishes
    it marked ``reobserved``, which the planner takes in over whatever it held, so the next
    plan is made from what the API server holds. Published on
    ``kaiwo.res.refused.<kind>.<scope>.<uid>`` (the owner's), caused by the plan.
    """

    EVENT_TYPE: ClassVar[str] = event_type("res", "refused")

    plan_id: str = Field(min_length=1)
    plan_fingerprint: str = Field(min_length=1)
    owner: ObjectRef
    reasons: tuple[str, ...] = Field(min_length=1, max_length=64)
    reobserve: tuple[ObjectRef, ...] = Field(default=(), max_length=16)
