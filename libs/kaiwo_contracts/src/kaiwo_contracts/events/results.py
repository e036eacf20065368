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
