"""The singletons the operator creates on a fresh cluster: expected manifests written by hand."""

from __future__ import annotations

from typing import Any

from kaiwo_contracts.plans import ObjectRef
from kaiwo_planner.domain.queues.default_objects import default_object_plans
from kaiwo_planner.domain.state.cluster import ClusterState

EMPTY_KAIWO_CONFIG = {
    "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoConfig",
    "metadata": {"name": "kaiwo"},
    "spec": {},
}
EMPTY_QUEUE_CONFIG = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoQueueConfig",
    "metadata": {"name": "kaiwo"},
    "spec": {},
}


def cluster(
    *objects: dict[str, Any], namespaces: frozenset[str] = frozenset({"default"})
) -> ClusterState:
    return ClusterState.of(objects=objects, namespaces=namespaces)


def test_a_fresh_cluster_gets_both_singletons_created_only() -> None:
    plans = default_object_plans(cluster())
    assert [(p.owner, p.desired, p.create_only, p.status, p.prune) for p in plans] == [
        (
            ObjectRef(
                api_version="config.kaiwo.silogen.ai/v1alpha1", kind="KaiwoConfig", name="kaiwo"
            ),
            (EMPTY_KAIWO_CONFIG,),
            True,
            None,
            (),
        ),
        (
            ObjectRef(
                api_version="kaiwo.silogen.ai/v1alpha1", kind="KaiwoQueueConfig", name="kaiwo"
            ),
            (EMPTY_QUEUE_CONFIG,),
            True,
            None,
            (),
        ),
    ]


def test_existing_singletons_are_left_alone_and_others_named_otherwise_do_not_count() -> None:
    other = {**EMPTY_QUEUE_CONFIG, "metadata": {"name": "team", "uid": "u1"}}
    mine = {**EMPTY_KAIWO_CONFIG, "metadata": {"name": "kaiwo", "uid": "u2"}}
    plans = default_object_plans(cluster(other, mine))
    assert [p.owner.kind for p in plans] == ["KaiwoQueueConfig"]


def test_nothing_before_the_watcher_has_listed_anything() -> None:
    assert default_object_plans(cluster(namespaces=frozenset())) == ()


def test_the_installations_default_queue_goes_into_the_kaiwoconfig_it_creates() -> None:
    plans = default_object_plans(cluster(), default_cluster_queue="team-default")
    assert plans[0].desired == (
        {**EMPTY_KAIWO_CONFIG, "spec": {"defaultClusterQueueName": "team-default"}},
    )
    assert plans[1].desired == (EMPTY_QUEUE_CONFIG,)


def test_an_existing_kaiwoconfig_is_not_touched_by_the_installations_default_queue() -> None:
    mine = {**EMPTY_KAIWO_CONFIG, "metadata": {"name": "kaiwo", "uid": "u2"}}
    plans = default_object_plans(cluster(mine), default_cluster_queue="team-default")
    assert [p.owner.kind for p in plans] == ["KaiwoQueueConfig"]
