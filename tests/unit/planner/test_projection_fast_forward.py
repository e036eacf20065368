"""Fast-forwarding the projection over a batch of observations gives exactly the projection
that taking them in one by one gives (objects, tombstones, sequence), whatever the
projection held before: stale and reobserved versions, deletions, versions that are not
integers, and tombstones forgotten along the way included."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kaiwo_contracts.events.observed import ObservedObjectV1, WatchEventType
from kaiwo_planner.domain.state import observed_objects
from kaiwo_planner.domain.state.observed_objects import superseded
from kaiwo_planner.domain.state.projection import Projection


def observed(
    uid: str,
    version: str,
    *,
    event: WatchEventType = "MODIFIED",
    kind: str = "Job",
    label: str = "a",
    reobserved: bool = False,
) -> ObservedObjectV1:
    api_version = "v1" if kind == "Node" else "batch/v1"
    namespace = None if kind == "Node" else "team-a"
    metadata: dict[str, Any] = {"name": f"{kind.lower()}-{uid}", "uid": uid}
    if namespace is not None:
        metadata["namespace"] = namespace
    metadata |= {"resourceVersion": version, "labels": {"step": label}}
    return ObservedObjectV1(
        kind=kind,
        api_version=api_version,
        namespace=namespace,
        name=metadata["name"],
        uid=uid,
        resource_version=version,
        event_type=event,
        object={"apiVersion": api_version, "kind": kind, "metadata": metadata},
        reobserved=reobserved,
    )


def numbered(*observations: ObservedObjectV1, start: int = 1) -> list[tuple[int, ObservedObjectV1]]:
    return list(enumerate(observations, start=start))


def test_all_but_the_last_of_an_objects_rising_versions_are_superseded() -> None:
    batch = numbered(
        observed("a", "1"),
        observed("b", "5"),
        observed("a", "2", label="b"),
        observed("a", "3", event="DELETED"),
        observed("b", "6"),
    )

    assert superseded(batch) == {1, 2, 3}


def test_an_object_whose_versions_do_not_all_rise_as_integers_is_taken_in_whole() -> None:
    falling = numbered(observed("a", "5"), observed("a", "4"))
    repeated = numbered(observed("a", "5"), observed("a", "5", event="DELETED"))
    not_integers = numbered(observed("a", "x1"), observed("a", "x2"))
    reobserved = numbered(observed("a", "1"), observed("a", "2", reobserved=True))
    other_kind = numbered(observed("a", "1"), observed("a", "2", kind="Node"))

    for batch in (falling, repeated, not_integers, reobserved, other_kind):
        assert superseded(batch) == set(), batch


def test_fast_forward_files_each_object_once_and_ends_where_applying_each_ends() -> None:
    batch = numbered(
        observed("a", "1", event="ADDED"),
        observed("a", "2", label="b"),
        observed("n", "7", event="ADDED", kind="Node"),
        observed("a", "3", label="c"),
        observed("b", "4", event="ADDED"),
        observed("b", "5", event="DELETED"),
    )
    one_by_one = Projection(share_strings=False)
    for sequence, observation in batch:
        one_by_one.apply(observation, sequence=sequence)
    fast = Projection(share_strings=False)
    versions_before = fast.version

    fast.fast_forward(batch)

    assert fast.snapshot() == one_by_one.snapshot()
    assert fast.last_sequence == 6
    assert fast.objects.tombstone_count == 1
    assert fast.objects.nodes == one_by_one.objects.nodes
    assert fast.version - versions_before == 3  # a at 3, the Node, b's deletion


def test_fast_forward_makes_no_change_record_and_counts_the_kinds_it_filed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A replay takes in every observation of its store here; the projection reads only the
    # kind of each change, so no Change (with its ObjectRef model) is made for one (0258).
    batch = numbered(
        observed("a", "1", event="ADDED"),  # passed over: a's 3 replaces it
        observed("a", "2", label="b"),  # passed over too
        observed("n", "7", event="ADDED", kind="Node"),
        observed("a", "3", label="c"),
        observed("b", "5", event="ADDED"),
        observed("b", "4"),  # older than b's 5: stale, nothing filed
    )

    def no_change(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("fast_forward made a Change")

    monkeypatch.setattr(observed_objects, "Change", no_change)
    projection = Projection(share_strings=False)

    filed = projection.objects.fast_forward(batch)

    assert filed == [("", "Node"), ("batch", "Job"), ("batch", "Job")]


def test_a_version_passed_over_forgets_the_tombstones_taking_it_in_would_forget() -> None:
    # b's tombstone (sequence 2) is forgotten once a third observation on is taken in (a
    # retention of 2): at a's third version, which is passed over. Then b's late, older
    # version is news again, as it is to a projection that took each in.
    deleted_before = numbered(
        observed("b", "3", event="ADDED"), observed("b", "4", event="DELETED")
    )
    batch = numbered(
        observed("a", "1", event="ADDED"),
        observed("a", "2"),
        observed("a", "3"),
        observed("b", "3", label="late"),
        observed("a", "4"),
        start=3,
    )
    one_by_one = Projection(share_strings=False, tombstone_retention=2)
    fast = Projection(share_strings=False, tombstone_retention=2)
    for sequence, observation in deleted_before:
        one_by_one.apply(observation, sequence=sequence)
        fast.apply(observation, sequence=sequence)
    for sequence, observation in batch:
        one_by_one.apply(observation, sequence=sequence)

    fast.fast_forward(batch)

    assert superseded(batch) == {3, 4, 5}
    assert fast.snapshot() == one_by_one.snapshot()
    assert len(fast.objects) == 2  # a, and b again


_UIDS = st.sampled_from(["a", "b", "c"])
_VERSIONS = st.one_of(st.integers(min_value=1, max_value=12).map(str), st.sampled_from(["x", "y"]))
_OBSERVATIONS = st.builds(
    observed,
    _UIDS,
    _VERSIONS,
    event=st.sampled_from(["ADDED", "MODIFIED", "MODIFIED", "DELETED"]),
    kind=st.sampled_from(["Job", "Job", "Node"]),
    label=st.sampled_from(["a", "b"]),
    reobserved=st.sampled_from([False, False, False, True]),
)


@settings(max_examples=400, deadline=None)
@given(
    before=st.lists(_OBSERVATIONS, max_size=8),
    after=st.lists(_OBSERVATIONS, max_size=16),
    cuts=st.lists(st.integers(min_value=1, max_value=16), max_size=3),
    retention=st.integers(min_value=1, max_value=6),
)
def test_fast_forward_in_any_batches_is_applying_each_in_turn(
    before: list[ObservedObjectV1],
    after: list[ObservedObjectV1],
    cuts: list[int],
    retention: int,
) -> None:
    one_by_one = Projection(share_strings=False, tombstone_retention=retention)
    fast = Projection(share_strings=False, tombstone_retention=retention)
    for sequence, observation in numbered(*before):
        one_by_one.apply(observation, sequence=sequence)
        fast.apply(observation, sequence=sequence)
    batch = numbered(*after, start=len(before) + 1)
    for sequence, observation in batch:
        one_by_one.apply(observation, sequence=sequence)

    edges = sorted({0, *(cut for cut in cuts if cut < len(batch)), len(batch)})
    for start, end in itertools.pairwise(edges):
        fast.fast_forward(batch[start:end])

    assert fast.snapshot() == one_by_one.snapshot()
    assert fast.objects.nodes == one_by_one.objects.nodes
    assert fast.objects.index.queue_uses == one_by_one.objects.index.queue_uses
