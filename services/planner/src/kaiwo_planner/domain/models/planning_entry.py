"""A Model from the wire to its plan: parsed (once per version), checked, planned.

A Model the models reject gets a plan that reports the problem in a ``Valid`` condition
(False, ``InvalidSpec``) with a Warning Event, and changes nothing else, as for the Kaiwo
kinds (decision 0008); unlike theirs, a Model's status has no phase to keep. A Model too
large for the bus, observed as its metadata only, is told so the same way (``ObjectTooLarge``)
rather than judged by the spec it was observed without.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kaiwo_contracts.crds.kubeai_v1.model import Model
from kaiwo_contracts.events.observed import oversized_marker
from kaiwo_contracts.plans import EventIntent, ObjectRef, Plan
from kaiwo_contracts.validation import Problem
from pydantic import ValidationError

from kaiwo_planner.domain.models.model_plan import ModelPlanning, plan_model
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.status.invalid_owner import (
    REASON_INVALID,
    REASON_TOO_LARGE,
    invalid_status,
    observed_version,
    oversized_message,
    problems_message,
    spec_problems,
)


def plan_model_object(
    *, owner: Mapping[str, Any], context: PlanningContext, now: datetime
) -> ModelPlanning:
    """The plan of a Model given in wire form (valid or not)."""
    oversized = oversized_marker(owner)
    if oversized is not None:
        return ModelPlanning(
            invalid_model_plan(
                owner, reason=REASON_TOO_LARGE, message=oversized_message(oversized), now=now
            )
        )
    uid = (owner.get("metadata") or {}).get("uid")
    try:
        model = context.owner_value(
            ("owner", Model, uid), (owner,), lambda: Model.model_validate(owner)
        )
    except ValidationError as error:
        return ModelPlanning(_invalid(owner, spec_problems(owner, error), now=now))
    missing = [
        Problem(f"metadata.{key}", "required field is missing")
        for key, value in (("name", model.metadata.name), ("namespace", model.metadata.namespace))
        if not value
    ]
    if missing:
        return ModelPlanning(_invalid(owner, missing, now=now))
    return plan_model(model=model, context=context, now=now)


def _invalid(owner: Mapping[str, Any], problems: list[Problem], *, now: datetime) -> Plan:
    return invalid_model_plan(
        owner, reason=REASON_INVALID, message=problems_message(problems), now=now
    )


def invalid_model_plan(
    owner: Mapping[str, Any], *, reason: str, message: str, now: datetime
) -> Plan:
    """Only the ``Valid=False`` condition and its Event (see the module docstring)."""
    generation, version = observed_version(owner)
    status = invalid_status(owner, reason=reason, message=message, generation=generation, now=now)
    if generation is not None:
        status["observedGeneration"] = generation
    return Plan(
        owner=ObjectRef.of(owner),
        observed_generation=generation,
        observed_resource_version=version,
        status=status,
        events=(EventIntent(type="Warning", reason=reason, message=message),),
    )
