"""The persistent object index and the kinds a projection reports as changed."""

from __future__ import annotations

from typing import Any

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
