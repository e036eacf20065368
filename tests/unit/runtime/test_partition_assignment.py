"""Which live replica holds which partition: the same answer everywhere, balanced, stable."""

from __future__ import annotations

import pytest
from kaiwo_runtime.partition_assignment import (
    assign_partitions,
    member_lease,
    member_prefix,
    partition_lease,
)


def test_lease_names_share_one_prefix_per_role() -> None:
    assert partition_lease("planner", 3) == "planner.p3"
    assert member_lease("executor", "pod-a/7") == "executor.member.pod-a/7"
    assert member_lease("planner", "x").startswith(member_prefix("planner"))


def test_three_members_share_eight_partitions_three_three_two() -> None:
    # Pinned: a change of the hash or the ranking would move partitions on every upgrade.
    assert assign_partitions(partitions=8, members=["a", "b", "c"]) == {
        "a": frozenset({2, 3, 6}),
        "b": frozenset({1, 5, 7}),
        "c": frozenset({0, 4}),
    }


def test_a_member_leaving_moves_only_its_own_partitions() -> None:
    assert assign_partitions(partitions=8, members=["a", "c"]) == {
        "a": frozenset({2, 3, 6, 7}),
        "c": frozenset({0, 1, 4, 5}),
    }


def test_the_order_members_are_listed_in_does_not_matter() -> None:
    assert assign_partitions(partitions=8, members=["c", "a", "b", "a"]) == assign_partitions(
        partitions=8, members=["a", "b", "c"]
    )


def test_more_members_than_partitions_leaves_some_idle() -> None:
    assert assign_partitions(partitions=2, members=["a", "b", "c"]) == {
        "a": frozenset(),
        "b": frozenset({1}),
        "c": frozenset({0}),
    }


def test_one_member_holds_everything_and_none_holds_nothing() -> None:
    assert assign_partitions(partitions=3, members=["solo"]) == {"solo": frozenset({0, 1, 2})}
    assert assign_partitions(partitions=3, members=[]) == {}


def test_partitions_must_be_positive() -> None:
    with pytest.raises(ValueError, match="partitions"):
        assign_partitions(partitions=0, members=["a"])
