"""The persistent object index and the kinds a projection reports as changed."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kaiwo_planner.domain.state.index_entry import Entry
from kaiwo_planner.domain.state.object_index import ObjectIndex
from kaiwo_planner.domain.state.planning_context import FINDINGS, PlanningContext
from kaiwo_planner.domain.state.projection import Projection

from tests.unit.planner.observations import observed


def pod(name: str, owner: str, *, run: str = "") -> dict[str, Any]:
    labels = {"kaiwo.silogen.ai/run-id": run} if run else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "t",
            "uid": f"uid-{name}",
            "labels": labels,
            "ownerReferences": [{"uid": owner}],
        },
    }


def test_adding_and_removing_make_new_indexes_and_leave_the_old_ones_as_they_were() -> None:
    first = Entry.of_wire(pod("b", "job", run="r"), sequence=1)
    second = Entry.of_wire(pod("a", "job", run="r"), sequence=2)
    empty = ObjectIndex()
    one = empty.adding(first)
    two = one.adding(second)
    back = two.removing(first)

    def names(found: tuple[Any, ...]) -> list[str]:
        return [o["metadata"]["name"] for o in found]

    assert names(empty.children_of("job")) == []
    assert names(one.children_of("job")) == ["b"]
    assert names(two.children_of("job")) == ["a", "b"]  # sorted, whatever the order in
    assert names(back.children_of("job")) == ["a"]
    assert names(two.labelled_with("kaiwo.silogen.ai/run-id", "r")) == ["a", "b"]
    assert names(back.labelled_with("kaiwo.silogen.ai/run-id", "r")) == ["a"]
    assert (len(empty), len(one), len(two), len(back)) == (0, 1, 2, 1)
    assert two.entry("uid-b") is first
    assert back.entry("uid-b") is None


def test_the_projection_says_which_kinds_changed_since_a_version() -> None:
    projection = Projection()
    projection.apply(observed(pod("a", "job"), 1), sequence=1)
    start = projection.version
    config = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo", "uid": "config"},
        "spec": {},
    }
    projection.apply(observed(config, 2), sequence=2)
    assert projection.kinds_changed_since(start) == {("config.kaiwo.silogen.ai", "KaiwoConfig")}
    assert projection.kinds_changed_since(projection.version) == frozenset()
    assert projection.kinds_changed_since(0) == {
        ("", "Pod"),
        ("config.kaiwo.silogen.ai", "KaiwoConfig"),
    }


def test_a_moved_context_keeps_only_values_that_read_none_of_the_changed_kinds() -> None:
    context = PlanningContext.of(Projection().cluster_state())
    computed: list[str] = []

    def value(name: str) -> str:
        computed.append(name)
        return name

    context.derived(("nodes",), reads=(("", "Node"),), compute=lambda: value("nodes"))
    context.derived(("findings",), reads=(FINDINGS,), compute=lambda: value("findings"))
    context.derived(("any",), reads=None, compute=lambda: value("any"))
    moved = context.moved_to(Projection().cluster_state(), changed=[FINDINGS])
    for key, reads in ((("nodes",), (("", "Node"),)), (("findings",), (FINDINGS,))):
        moved.derived(key, reads=reads, compute=lambda key=key: value(f"{key[0]} again"))
    moved.derived(("any",), reads=None, compute=lambda: value("any again"))
    assert computed == ["nodes", "findings", "any", "findings again", "any again"]


def _version(
    kind: str, name: str, *, owners: list[str], run: str, queue: str, rv: int
) -> dict[str, Any]:
    """One version of an object of ``kind``: what it is filed under varies with the rest."""
    api_version = {
        "Pod": "v1",
        "KaiwoJob": "kaiwo.silogen.ai/v1alpha1",
        "Workload": "kueue.x-k8s.io/v1beta1",
        "Namespace": "v1",
    }[kind]
    labels = {"kaiwo.silogen.ai/run-id": run} if run else {}
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": "" if kind == "Namespace" else "t",
            "uid": f"uid-{kind}-{name}",
            "resourceVersion": str(rv),
            "labels": labels,
            "ownerReferences": [{"uid": owner} for owner in owners],
        },
        "spec": {"queue": queue} if queue else {},
    }


_versions = st.builds(
    _version,
    st.sampled_from(["Pod", "KaiwoJob", "Workload", "Namespace"]),
    st.sampled_from(["a", "b", "c"]),
    owners=st.lists(st.sampled_from(["o1", "o2"]), max_size=2, unique=True),
    run=st.sampled_from(["", "r1", "r2"]),
    queue=st.sampled_from(["", "q1"]),
    rv=st.integers(min_value=1, max_value=9),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_versions, min_size=1, max_size=12))
def test_replacing_a_version_gives_the_index_removing_then_adding_gives(
    versions: list[dict[str, Any]],
) -> None:
    """Whether or not the new version moved between groups (owners, labels, queue)."""
    index, held = ObjectIndex(), dict[str, Entry]()
    for sequence, obj in enumerate(versions, start=1):
        entry = Entry.of_wire(obj, sequence=sequence)
        old = held.get(entry.uid)
        if old is None:
            index = index.adding(entry)
        else:
            expected = index.removing(old).adding(entry)
            index = index.replacing(old, entry)
            assert index == expected
        held[entry.uid] = entry
    assert len(index) == len(held)


def test_a_version_filed_alike_keeps_its_place_and_shows_its_new_content() -> None:
    first = Entry.of_wire(pod("a", "job", run="r"), sequence=1)
    second = Entry.of_wire(pod("b", "job", run="r"), sequence=2)
    changed = {**pod("a", "job", run="r"), "status": {"phase": "Running"}}
    newer = Entry.of_wire(changed, sequence=3)
    index = ObjectIndex.of([first, second]).replacing(first, newer)
    assert [o.get("status") for o in index.children_of("job")] == [{"phase": "Running"}, None]
    assert index.labelled_with("kaiwo.silogen.ai/run-id", "r")[0] is changed
    assert index.entry("uid-a") is newer
    assert index.newest(newer.identity) is newer
    assert len(index) == 2
