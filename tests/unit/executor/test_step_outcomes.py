"""The one table of step outcomes: how each is published and counted, and its default reason.

The published kinds are also the ``outcome`` label of ``kaiwo_executor_actions``: dashboards
and alerts select on them, so they are written out here by hand."""

from __future__ import annotations

from kaiwo_executor.step_outcomes import STALE_STATUS, StepOutcome, kind_of, reason_for


def test_every_step_outcome_is_published_as_one_of_the_three_kinds_a_success_can_have() -> None:
    assert {outcome: kind_of(outcome) for outcome in StepOutcome} == {
        StepOutcome.APPLIED: "applied",
        StepOutcome.UNCHANGED: "unchanged",
        StepOutcome.DELETED: "deleted",
        StepOutcome.RELEASED: "deleted",
        StepOutcome.ALREADY_DELETED: "unchanged",
        StepOutcome.REPLACED: "unchanged",
        StepOutcome.FOREIGN: "unchanged",
        StepOutcome.OWNER_GONE: "unchanged",
        StepOutcome.NODE_GONE: "unchanged",
        StepOutcome.STALE: "unchanged",
        StepOutcome.NO_FINALIZER: "unchanged",
        StepOutcome.MOVED: "unchanged",
        StepOutcome.STATUS_FIRST: "unchanged",
    }


def test_the_default_reasons_say_why_nothing_was_written() -> None:
    assert {outcome: reason_for(outcome) for outcome in StepOutcome} == {
        StepOutcome.APPLIED: None,
        StepOutcome.UNCHANGED: None,
        StepOutcome.DELETED: None,
        StepOutcome.RELEASED: None,
        StepOutcome.ALREADY_DELETED: "already deleted",
        StepOutcome.REPLACED: "replaced by a new object of the same name; left to the next plan",
        StepOutcome.FOREIGN: (
            "not the owner's (its inventory labels or controller differ); left alone"
        ),
        StepOutcome.OWNER_GONE: "the owner no longer exists",
        StepOutcome.NODE_GONE: "the node no longer exists",
        StepOutcome.STALE: STALE_STATUS,
        StepOutcome.NO_FINALIZER: "no finalizer to release",
        StepOutcome.MOVED: None,
        StepOutcome.STATUS_FIRST: (
            "its status, which says why, was not written; left to the plan that writes it"
        ),
    }


def test_a_reason_the_step_gives_wins_over_the_table() -> None:
    assert reason_for(StepOutcome.OWNER_GONE, "already at 3 replicas") == "already at 3 replicas"
    assert reason_for(StepOutcome.UNCHANGED, "owner metadata") == "owner metadata"
