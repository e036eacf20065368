"""The append decision shared by every adapter: duplicates, expectations, next versions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kaiwo_eventstore import ANY, NO_STREAM, STREAM_EXISTS, ConcurrencyError, NewEvent
from kaiwo_eventstore.versioning import check_batch, plan_append


def event(event_id: str, stream: str = "kaiwojob/u1") -> NewEvent:
    return NewEvent(
        event_id=event_id,
        stream_id=stream,
        type="ai.silogen.kaiwo.kaiwojob.observed.v1",
        time=datetime(2025, 1, 1, tzinfo=UTC),
        source="/kaiwo/watcher",
        correlation_id="u1",
        data={},
    )


def planned(plan_items: tuple[object, ...]) -> list[tuple[str, str, int]]:
    return [
        (item.event.event_id, item.event.stream_id, item.stream_version)  # type: ignore[attr-defined]
        for item in plan_items
    ]


def test_new_events_continue_each_stream_from_its_current_version() -> None:
    plan = plan_append(
        [event("a", "node/n1"), event("b", "kaiwojob/u1"), event("c", "node/n1")],
        expected_version=ANY,
        stored_ids=[],
        current_versions={"node/n1": 4},
    )

    assert planned(plan.to_store) == [
        ("a", "node/n1", 5),
        ("b", "kaiwojob/u1", 1),
        ("c", "node/n1", 6),
    ]
    assert plan.duplicates == ()


def test_stored_and_repeated_ids_are_duplicates_and_take_no_version() -> None:
    plan = plan_append(
        [event("u1:10"), event("u1:11"), event("u1:11"), event("u1:12")],
        expected_version=2,
        stored_ids=["u1:10"],
        current_versions={"kaiwojob/u1": 2},
    )

    assert planned(plan.to_store) == [("u1:11", "kaiwojob/u1", 3), ("u1:12", "kaiwojob/u1", 4)]
    assert plan.duplicates == ("u1:10", "u1:11")


def test_a_batch_of_only_duplicates_skips_the_expectation() -> None:
    plan = plan_append(
        [event("u1:10")],
        expected_version=0,
        stored_ids=["u1:10"],
        current_versions={"kaiwojob/u1": 7},
    )

    assert plan.to_store == ()
    assert plan.duplicates == ("u1:10",)


@pytest.mark.parametrize(
    ("expected", "current", "message"),
    [
        (3, 2, "stream 'kaiwojob/u1': expected version 3, found version 2"),
        (0, 1, "stream 'kaiwojob/u1': expected version 0, found version 1"),
        (NO_STREAM, 5, "stream 'kaiwojob/u1': expected no stream, found version 5"),
        (STREAM_EXISTS, 0, "stream 'kaiwojob/u1': expected stream exists, found version 0"),
    ],
)
def test_unmet_expectations_raise_conflicts(expected: object, current: int, message: str) -> None:
    with pytest.raises(ConcurrencyError) as raised:
        plan_append(
            [event("x")],
            expected_version=expected,  # type: ignore[arg-type]
            stored_ids=[],
            current_versions={"kaiwojob/u1": current} if current else {},
        )
    assert str(raised.value) == message
    assert raised.value.actual == current


@pytest.mark.parametrize(("expected", "current"), [(2, 2), (NO_STREAM, 0), (STREAM_EXISTS, 1)])
def test_met_expectations_pass(expected: object, current: int) -> None:
    plan = plan_append(
        [event("x")],
        expected_version=expected,  # type: ignore[arg-type]
        stored_ids=[],
        current_versions={"kaiwojob/u1": current},
    )
    assert planned(plan.to_store) == [("x", "kaiwojob/u1", current + 1)]


def test_expectations_need_a_single_stream_and_a_sane_version() -> None:
    with pytest.raises(ValueError, match="one stream"):
        check_batch([event("a", "node/n1"), event("b", "node/n2")], expected_version=NO_STREAM)
    with pytest.raises(ValueError, match=">= 0"):
        check_batch([event("a")], expected_version=-1)
    with pytest.raises(ValueError, match=">= 0"):
        check_batch([event("a")], expected_version=True)
    check_batch([event("a", "node/n1"), event("b", "node/n2")], expected_version=ANY)
    check_batch([event("a", "node/n1"), event("b", "node/n2")], expected_version=None)
