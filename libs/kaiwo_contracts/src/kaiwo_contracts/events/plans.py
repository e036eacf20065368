"""Plan decisions: the planner's complete answer for one owner object."""

from __future__ import annotations

from typing import ClassVar, Self

from pydantic import model_validator

from kaiwo_contracts.events.envelope import EventPayload, event_type
from kaiwo_contracts.plans import EventIntent, ObjectRef, Plan, PruneRule

__all__ = ["EventIntent", "ObjectRef", "Plan", "PlanDecidedV1", "PruneRule"]


class PlanDecidedV1(EventPayload):
    """A :class:`~kaiwo_contracts.plans.Plan` and its fingerprint.

    ``fingerprint`` travels with the plan so the executor, the recorder and external readers
    can compare plans without re-hashing; it must equal ``plan.fingerprint()``.
    """

    EVENT_TYPE: ClassVar[str] = event_type("plan", "decided")

    plan: Plan
    fingerprint: str

    @classmethod
    def of(cls, plan: Plan) -> PlanDecidedV1:
        return cls(plan=plan, fingerprint=plan.fingerprint())

    @model_validator(mode="after")
    def _fingerprint_matches(self) -> Self:
        if self.fingerprint != self.plan.fingerprint():
            msg = "fingerprint does not match the plan (the plan was changed after hashing)"
            raise ValueError(msg)
        return self
