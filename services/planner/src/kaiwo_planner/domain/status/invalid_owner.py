"""The plan for an owner whose spec the models reject: say so, change nothing else.

An object the API server stored can still fail the models' rules (the CRD schema cannot
express every cross-field rule, and older objects predate newer rules). Planning from it would
mean guessing, and pruning would delete a running workload's children because of a typo. So
the plan carries only the status: a ``Valid`` condition (False, reason ``InvalidSpec``, the
field paths and rules in its message) and a Warning Event; no desired objects, no prune rules.
The phase is kept, except that an object never planned before shows ``invalid_phase``
(ERROR for workloads, FAILED for a KaiwoQueueConfig) so ``kubectl get`` does not show it as
new. Once the spec is valid again, the workload plan flips ``Valid`` to True.

An owner observed *oversized* (its JSON was larger than a bus message may be, so the watcher
published only its metadata and status, :mod:`kaiwo_contracts.events.observed`) gets the same
kind of plan with reason ``ObjectTooLarge``: planning from half an object would be guessing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus
from kaiwo_contracts.events.observed import OversizedObject
from kaiwo_contracts.plans import EventIntent, ObjectRef, Plan
from kaiwo_contracts.validation import Problem, validate_manifest
from pydantic import ValidationError

from kaiwo_planner.domain.state.first_few import first_few
from kaiwo_planner.domain.status.conditions import ConditionSpec, merge_conditions

VALID_CONDITION = "Valid"
REASON_INVALID = "InvalidSpec"
REASON_VALID = "ValidSpec"
REASON_TOO_LARGE = "ObjectTooLarge"
MAX_MESSAGE_PROBLEMS = 10
MAX_MESSAGE_LENGTH = 4000


def spec_problems(owner: Mapping[str, Any], error: ValidationError) -> list[Problem]:
    """What is wrong with ``owner``, field by field, in words (pydantic's, when needed).

    The words come from :func:`~kaiwo_contracts.validation.validate_manifest`, which checks
    like the API server (strictly, from JSON); only its problems at fields the planner's own
    parse rejected are kept, so a value the planner reads fine is never reported.
    """
    details = error.errors()
    rejected = [_path(detail["loc"]) for detail in details]
    worded = [
        problem
        for problem in validate_manifest(owner)
        if any(_related(problem.path, path) for path in rejected)
    ]
    if worded:
        return worded
    return [Problem(path, detail["msg"]) for path, detail in zip(rejected, details, strict=True)]


def _path(location: tuple[int | str, ...]) -> str:
    text = ""
    for step in location:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text


def _related(one: str, other: str) -> bool:
    """One path is the other or lies under it (pydantic adds union-branch steps at the end)."""
    shorter, longer = sorted((one, other), key=len)
    return longer == shorter or longer.startswith((f"{shorter}.", f"{shorter}["))


def problems_message(problems: Sequence[Problem]) -> str:
    shown = first_few(
        [str(p) for p in problems], shown=MAX_MESSAGE_PROBLEMS, separator="; ", and_more="; and "
    )
    return f"The spec is invalid, nothing was changed: {shown}"[:MAX_MESSAGE_LENGTH]


def invalid_owner_plan(
    *,
    owner: Mapping[str, Any],
    owner_ref: ObjectRef,
    problems: Sequence[Problem],
    invalid_phase: WorkloadStatus,
    now: datetime,
    writes_observed_generation: bool = True,
) -> Plan:
    """A plan that only reports ``problems`` (see the module docstring).

    ``writes_observed_generation``: the owner's status has ``observedGeneration`` (the
    workloads' does, the KaiwoQueueConfig's does not).
    """
    return _reporting_plan(
        owner=owner,
        owner_ref=owner_ref,
        reason=REASON_INVALID,
        message=problems_message(problems),
        invalid_phase=invalid_phase,
        now=now,
        writes_observed_generation=writes_observed_generation,
    )


def oversized_message(oversized: OversizedObject) -> str:
    """What an owner observed as its metadata only is told (reason :data:`REASON_TOO_LARGE`).

    Without the object's own size: the status this message goes into is part of it, so the
    size seen after the status is written is another, which made another message, another
    status and a second Warning Event (found on the real stack)."""
    return (
        f"The object is larger as JSON than the {oversized.limit_bytes:,} bytes a message on "
        "the operator's event bus may carry: only its metadata was observed, so nothing was "
        "planned or changed. Make it smaller (move large values into a ConfigMap or Secret)."
    )


def oversized_owner_plan(
    *,
    owner: Mapping[str, Any],
    owner_ref: ObjectRef,
    oversized: OversizedObject,
    invalid_phase: WorkloadStatus,
    now: datetime,
    writes_observed_generation: bool = True,
) -> Plan:
    """A plan that only reports that ``owner`` was too large to observe whole."""
    return _reporting_plan(
        owner=owner,
        owner_ref=owner_ref,
        reason=REASON_TOO_LARGE,
        message=oversized_message(oversized),
        invalid_phase=invalid_phase,
        now=now,
        writes_observed_generation=writes_observed_generation,
    )


def observed_version(owner: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """The ``metadata.generation`` and ``resourceVersion`` of a wire-form owner, each None
    when missing or malformed (a plan of an invalid owner names what it was planned from)."""
    meta = owner.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    generation = meta.get("generation")
    version = meta.get("resourceVersion")
    return (
        generation if isinstance(generation, int) and generation >= 0 else None,
        version if isinstance(version, str) else None,
    )


def invalid_status(
    owner: Mapping[str, Any], *, reason: str, message: str, generation: int | None, now: datetime
) -> dict[str, Any]:
    """The owner's status as observed with ``Valid=False`` (``reason``, ``message``) merged
    into its conditions, the others kept."""
    previous = owner.get("status")
    previous = dict(previous) if isinstance(previous, Mapping) else {}
    earlier = previous.get("conditions")
    conditions = merge_conditions(
        [c for c in earlier if isinstance(c, Mapping)] if isinstance(earlier, list) else (),
        [ConditionSpec(VALID_CONDITION, "False", reason, message)],
        generation=generation or 0,
        now=now,
    )
    return {**previous, "conditions": conditions}


def _reporting_plan(
    *,
    owner: Mapping[str, Any],
    owner_ref: ObjectRef,
    reason: str,
    message: str,
    invalid_phase: WorkloadStatus,
    now: datetime,
    writes_observed_generation: bool,
) -> Plan:
    generation, resource_version = observed_version(owner)
    status = invalid_status(owner, reason=reason, message=message, generation=generation, now=now)
    phase = status.get("status")
    if phase not in {status.value for status in WorkloadStatus} or phase == "":
        phase = invalid_phase.value
    status = {**status, "status": phase}
    if generation is not None and writes_observed_generation:
        status["observedGeneration"] = generation
    return Plan(
        owner=owner_ref,
        observed_generation=generation,
        observed_resource_version=resource_version,
        status=status,
        events=(EventIntent(type="Warning", reason=reason, message=message),),
    )
