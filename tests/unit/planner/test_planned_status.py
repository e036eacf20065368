"""The planner plans from its own last status while the observed one lags behind."""

from __future__ import annotations

from kaiwo_planner.domain.status.planned_status import owner_with_status, status_to_assume

OWNER = {"kind": "KaiwoJob", "metadata": {"name": "train"}, "status": {"status": "PENDING"}}


def test_a_lagging_observed_status_is_replaced_by_the_last_planned_one() -> None:
    assumed = status_to_assume(OWNER, {"status": "RUNNING"})
    assert assumed == {"status": "RUNNING"}
    assert owner_with_status(OWNER, assumed) == {
        "kind": "KaiwoJob",
        "metadata": {"name": "train"},
        "status": {"status": "RUNNING"},
    }


def test_nothing_is_assumed_when_the_observed_status_caught_up_or_nothing_was_planned() -> None:
    assert status_to_assume(OWNER, {"status": "PENDING"}) is None
    assert status_to_assume(OWNER, None) is None
    assert owner_with_status(OWNER, None) is OWNER
