"""Whether a plan is news: what the planner service publishes, decided from what it published.

A plan is published for an owner only when it asks the executor for something the last
published one did not: its decision changed (:func:`decision_fingerprint`), desired objects
went missing from the projection (``absent``) or are observed without what the plan asks of
them (``drifted``: a field changed by hand) since the owner was last planned, or the owner
moved on to a new resourceVersion while its status is still not the planned one (the
executor writes a status only onto the owner version it was planned from).

A published plan names as ``absent`` and ``drifted`` only what became so since the owner
was last planned; a periodic resync (``reapply_gaps``) names every gap again, and publishes
again a status the owner does not show (decision 0234) and a plan whose other effects the
observed cluster does not show (``undone``: a child to prune still there, the owner's
finalizers or labels not the plan's, a deletion not made, decision 0250; a scale or a
preemption not made, decision 0263).

Pure: :func:`publication` takes what was published last (:class:`Published`) and the new
plan with its gaps, and returns what to publish and what to remember.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kaiwo_contracts.plans import (
    ObjectRef,
    Plan,
    created_suspended,
    document_fingerprint,
    without_admission_gate,
)


@dataclass(frozen=True, slots=True)
class Published:
    """What was last published for an owner, and what was last found absent or drifted."""

    fingerprint: str | None
    absent: tuple[ObjectRef, ...] = ()
    drifted: tuple[ObjectRef, ...] = ()
    resource_version: str | None = None
    """The owner's resourceVersion the last published plan was made from."""
    status: Mapping[str, Any] | None = None
    """The status of the last published plan: what the next plan starts from (see
    :mod:`kaiwo_planner.domain.status.planned_status`)."""

    def to_document(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "absent": [ref.model_dump(mode="json") for ref in self.absent],
            "drifted": [ref.model_dump(mode="json") for ref in self.drifted],
            "resourceVersion": self.resource_version,
            "status": self.status,
        }

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> Published:
        """Raises KeyError, TypeError or ValueError for a malformed document."""
        return cls(
            fingerprint=document["fingerprint"],
            absent=tuple(ObjectRef.model_validate(r) for r in document["absent"]),
            drifted=tuple(ObjectRef.model_validate(r) for r in document.get("drifted") or ()),
            resource_version=document.get("resourceVersion"),
            status=document.get("status"),
        )


@dataclass(frozen=True, slots=True)
class Publication:
    """What to do with a plan: publish it (naming ``absent`` and ``drifted``) or not, and
    the record to keep for the owner afterwards."""

    publish: bool
    fingerprint: str
    """The decision's fingerprint (:func:`decision_fingerprint`)."""
    plan_fingerprint: str | None
    """The plan's own fingerprint when it is published (worked out with the decision's, so
    the plan is not dumped again), else None."""
    absent: tuple[ObjectRef, ...]
    drifted: tuple[ObjectRef, ...]
    record: Published


def publication(
    *,
    plan: Plan,
    owner: Mapping[str, Any],
    last: Published | None,
    absent: tuple[ObjectRef, ...],
    drifted: tuple[ObjectRef, ...],
    reapply_gaps: bool,
    undone: tuple[str, ...] = (),
) -> Publication:
    """Whether ``plan`` of ``owner`` (as planned) is news against ``last`` (None: nothing
    published yet), given the desired objects found ``absent`` and ``drifted`` now, and the
    plan's effects the observed cluster does not show (``undone``, looked for at a resync:
    :func:`~kaiwo_planner.domain.undone_effects.undone_effects`)."""
    hashed = _decision(plan)
    fingerprint = hashed.decision
    if (
        last is not None
        and not is_news(
            last,
            fingerprint=fingerprint,
            absent=absent,
            drifted=drifted,
            reapply_gaps=reapply_gaps,
        )
        and not status_left_behind(plan, owner, last)
        and not (reapply_gaps and (status_unwritten(plan, owner) or undone))
    ):
        # Nothing new to apply; remember what is missing so a later change shows up.
        kept = replace(last, absent=absent, drifted=drifted)
        return Publication(
            publish=False,
            fingerprint=fingerprint,
            plan_fingerprint=None,
            absent=(),
            drifted=(),
            record=kept,
        )
    # A resync names every gap again; otherwise only what is new since the last planning.
    before = last if last is not None and not reapply_gaps else Published(None)
    record = Published(
        fingerprint=fingerprint,
        absent=absent,
        drifted=drifted,
        resource_version=plan.observed_resource_version,
        status=plan.status if plan.status is not None else (last.status if last else None),
    )
    return Publication(
        publish=True,
        fingerprint=fingerprint,
        plan_fingerprint=hashed.plans(),
        absent=newly(absent, before.absent),
        drifted=newly(drifted, before.drifted),
        record=record,
    )


def decision_fingerprint(plan: Plan) -> tuple[str, bool]:
    """What makes a plan news: everything but its Events, and but the admission gate of its
    children. Events announce a transition, and a transition always changes the status too;
    a plan that differs from the last one only by not repeating its Events asks the executor
    for nothing. Nor does one that no longer sends a child's ``spec.suspend`` because the
    child exists now (``kaiwo_contracts.plans.without_admission_gate``).

    Returns the fingerprint and whether it is the plan's own."""
    hashed = _decision(plan)
    return hashed.decision, hashed.document is None


@dataclass(frozen=True, slots=True)
class _Hashed:
    decision: str
    document: Mapping[str, Any] | None
    """The plan's fingerprint document, when the decision's fingerprint is not the plan's."""

    def plans(self) -> str:
        """The plan's own fingerprint."""
        return self.decision if self.document is None else document_fingerprint(self.document)


def _decision(plan: Plan) -> _Hashed:
    # The plan is dumped once: the decision's document is the plan's without its Events and
    # the admission gate, edited as JSON (removing a key changes nothing else of the dump).
    gated = any(created_suspended(manifest) for manifest in plan.desired)
    if not plan.events and not gated:
        return _Hashed(decision=plan.fingerprint(), document=None)
    document = plan.fingerprint_document()
    decided = {**document, "events": []}
    if gated:
        decided["desired"] = [without_admission_gate(m) for m in document["desired"]]
    return _Hashed(decision=document_fingerprint(decided), document=document)


def newly(found: tuple[ObjectRef, ...], before: tuple[ObjectRef, ...]) -> tuple[ObjectRef, ...]:
    """The refs of ``found`` not among ``before``."""
    if not before:
        return found
    known = set(before)
    return tuple(ref for ref in found if ref not in known)


def is_news(
    record: Published,
    *,
    fingerprint: str,
    absent: tuple[ObjectRef, ...],
    drifted: tuple[ObjectRef, ...],
    reapply_gaps: bool,
) -> bool:
    """Whether a plan asks the executor for something the last published one did not.

    An absent or drifted object is news when it was not so last time. One still being created
    or updated stays in the set until its observation comes back, and must not cause a plan
    per observation meanwhile; nor does the set shrinking as the executor's writes come back
    one by one (a plan per returning object would send every write again, n² in all). With
    ``reapply_gaps`` (a periodic resync) a plan is news while anything is absent or drifted,
    so what a failed or missed apply left behind is corrected once per resync.
    """
    if record.fingerprint != fingerprint:
        return True
    if reapply_gaps and (absent or drifted):
        return True
    return not set(absent) <= set(record.absent) or not set(drifted) <= set(record.drifted)


def status_unwritten(plan: Plan, owner: Mapping[str, Any]) -> bool:
    """The owner does not show the planned status, at any version: asked at a resync. The
    executor gives up on a plan whose writes kept failing through all its deliveries (the
    API server away longer than the retries); nothing else about the owner may ever change
    again (a finished job), and the planner plans from the status it published, so without
    this a status lost so would never be written (decision 0234)."""
    return plan.status is not None and owner.get("status") != plan.status


def status_left_behind(plan: Plan, owner: Mapping[str, Any], record: Published) -> bool:
    """The owner changed since the last plan was made and does not show the planned status:
    that plan's status write was (or will be) refused as stale, so publish it again."""
    return (
        plan.status is not None
        and plan.observed_resource_version != record.resource_version
        and owner.get("status") != plan.status
    )
