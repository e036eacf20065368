"""What one call of a plan's step found or did, and how it is reported: the one table.

Every step of :mod:`kaiwo_executor.apply_plan` ends in a :class:`StepOutcome`. The
table below says, for each, which :data:`~kaiwo_contracts.events.results.ActionOutcomeKind`
the published :class:`~kaiwo_contracts.events.results.ActionOutcome` carries (also the
``outcome`` label of ``kaiwo_executor_actions``) and the reason it gives when the step has
nothing more precise to say. A step that knows more (the replicas of a scale, the finalizers
released) passes its own reason; see :func:`reason_for`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final

from kaiwo_contracts.events.results import ActionOutcomeKind

STALE_STATUS = "the owner changed since the plan was made; the plan of its newer version writes it"
NOT_THE_OWNERS = "not the owner's (its inventory labels or controller differ); left alone"
REPLACED_SINCE = "replaced by a new object of the same name; left to the next plan"
STATUS_FIRST = "its status, which says why, was not written; left to the plan that writes it"


class StepOutcome(Enum):
    """What a step's call against the API server found or did."""

    APPLIED = "applied"
    """Written: created, applied or patched."""
    UNCHANGED = "unchanged"
    """Nothing to write: already as wanted, or it exists and is left as it is."""
    DELETED = "deleted"
    """Deleted (background propagation, uid precondition)."""
    RELEASED = "released"
    """Finalizers taken off a child being deleted, so its deletion completes."""
    ALREADY_DELETED = "already-deleted"
    """The object to delete is gone already, which is what was wanted."""
    REPLACED = "replaced"
    """Another object of the same name (another uid) stands there now: the next plan judges."""
    FOREIGN = "foreign"
    """Found by name, but its inventory labels or controller are not the owner's."""
    OWNER_GONE = "owner-gone"
    """The object written to (the owner, or the workload a preemption scales) is gone."""
    NODE_GONE = "node-gone"
    """The Node to patch is gone; the planner stops asking once it sees that."""
    STALE = "stale"
    """The owner changed since the plan was made: its status is the newer plan's to write."""
    NO_FINALIZER = "no-finalizer"
    """No finalizer to release (not being deleted yet, or none of them is left)."""
    MOVED = "moved"
    """The replicas are no longer those the scale decision started from."""
    STATUS_FIRST = "status-first"
    """Not preempted: the status that must precede the preemption was not written."""


@dataclass(frozen=True, slots=True)
class Reported:
    """How a :class:`StepOutcome` is reported when the step gives no reason of its own."""

    kind: ActionOutcomeKind
    reason: str | None = None


REPORTED: Final[Mapping[StepOutcome, Reported]] = {
    StepOutcome.APPLIED: Reported("applied"),
    StepOutcome.UNCHANGED: Reported("unchanged"),
    StepOutcome.DELETED: Reported("deleted"),
    StepOutcome.RELEASED: Reported("deleted"),
    StepOutcome.ALREADY_DELETED: Reported("unchanged", "already deleted"),
    StepOutcome.REPLACED: Reported("unchanged", REPLACED_SINCE),
    StepOutcome.FOREIGN: Reported("unchanged", NOT_THE_OWNERS),
    StepOutcome.OWNER_GONE: Reported("unchanged", "the owner no longer exists"),
    StepOutcome.NODE_GONE: Reported("unchanged", "the node no longer exists"),
    StepOutcome.STALE: Reported("unchanged", STALE_STATUS),
    StepOutcome.NO_FINALIZER: Reported("unchanged", "no finalizer to release"),
    StepOutcome.MOVED: Reported("unchanged"),
    StepOutcome.STATUS_FIRST: Reported("unchanged", STATUS_FIRST),
}


def kind_of(outcome: StepOutcome) -> ActionOutcomeKind:
    """The published kind of ``outcome`` (and its ``kaiwo_executor_actions`` label)."""
    return REPORTED[outcome].kind


def reason_for(outcome: StepOutcome, given: str | None = None) -> str | None:
    """The step's own reason when it gives one, else the table's."""
    return given if given is not None else REPORTED[outcome].reason
