"""Values kept from one snapshot to the next, keyed by the identity of what they come from."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kaiwo_contracts.events import ObservedObjectV1
from kaiwo_planner.domain.cluster_settings import kaiwo_config, kept
from kaiwo_planner.domain.projection import Projection


def observed(obj: dict[str, Any], version: int) -> ObservedObjectV1:
    meta = obj["metadata"]
    return ObservedObjectV1(
        kind=obj["kind"],
        api_version=obj["apiVersion"],
        namespace=meta.get("namespace"),
        name=meta["name"],
        uid=meta["uid"],
        resource_version=str(version),
        event_type="ADDED",
        object={**obj, "metadata": {**meta, "resourceVersion": str(version)}},
    )


def config(image: str) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo", "uid": "config-uid"},
        "spec": {"ray": {"defaultRayImage": image}},
    }


def test_kept_reuses_the_value_only_for_the_very_same_inputs() -> None:
    calls: list[str] = []
    first, equal_copy = {"a": 1}, {"a": 1}

    def compute(label: str) -> str:
        calls.append(label)
        return label

    assert kept(("test-kept",), (first,), lambda: compute("first")) == "first"
    assert kept(("test-kept",), (first,), lambda: compute("again")) == "first"
    # An equal but different object is another version of it: worked out again.
    assert kept(("test-kept",), (equal_copy,), lambda: compute("copy")) == "copy"
    assert calls == ["first", "copy"]


def test_a_changed_kaiwoconfig_is_parsed_again_and_an_unrelated_change_reuses_it() -> None:
    projection = Projection()
    projection.apply(observed(config("ray:1"), 1), sequence=1)
    before = kaiwo_config(projection.cluster_state())
    assert before.spec.ray.default_ray_image == "ray:1"

    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "uid": "n"}}
    projection.apply(observed(namespace, 2), sequence=2)
    assert kaiwo_config(projection.cluster_state()) is before  # a new snapshot, same config

    projection.apply(observed(config("ray:2"), 3), sequence=3)
    after = kaiwo_config(projection.cluster_state())
    assert after.spec.ray.default_ray_image == "ray:2"


def test_planning_the_same_owner_object_twice_gives_equal_plans() -> None:
    from kaiwo_planner.domain.planning import plan_object

    projection = Projection()
    job = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "train", "namespace": "a", "uid": "job-uid", "generation": 1},
        "spec": {"image": "busybox", "entrypoint": "sleep 1"},
    }
    projection.apply(observed(job, 1), sequence=1)
    owner = projection.by_uid("job-uid")
    assert owner is not None
    now = datetime(2026, 1, 1, tzinfo=UTC)
    first = plan_object(owner=owner, cluster=projection.cluster_state(), now=now)
    second = plan_object(owner=owner, cluster=projection.cluster_state(), now=now)
    assert first is not None and second is not None
    assert first.fingerprint() == second.fingerprint()


def workload(name: str, namespace: str, queue: str | None, *, uid: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"image": "busybox"}
    if queue is not None:
        spec["clusterQueue"] = queue
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": spec,
    }


def test_the_queues_namespaces_follow_workloads_as_they_come_change_and_go() -> None:
    from kaiwo_planner.domain.cluster_settings import namespaces_by_queue

    projection = Projection()
    sequence = 0

    def apply(obj: dict[str, Any], event: str = "ADDED") -> None:
        nonlocal sequence
        sequence += 1
        change = observed(obj, sequence).model_copy(update={"event_type": event})
        projection.apply(change, sequence=sequence)

    apply(workload("a", "team-a", None, uid="u1"))
    apply(workload("b", "team-a", None, uid="u2"))
    apply(workload("c", "team-b", "gpu", uid="u3"))
    apply(workload("d", "team-c", "", uid="u4"))  # empty means the default queue
    assert namespaces_by_queue(projection.cluster_state()) == {
        "gpu": ("team-b",),
        "kaiwo": ("team-a", "team-c"),
    }

    apply(workload("a", "team-a", None, uid="u1"), "DELETED")  # b still uses kaiwo in team-a
    apply(workload("c", "team-b", "other", uid="u3"), "MODIFIED")  # moved to another queue
    assert namespaces_by_queue(projection.cluster_state()) == {
        "kaiwo": ("team-a", "team-c"),
        "other": ("team-b",),
    }

    apply(workload("b", "team-a", None, uid="u2"), "DELETED")
    apply(config("ray:1") | {"spec": {"defaultClusterQueueName": "main"}})
    assert namespaces_by_queue(projection.cluster_state()) == {
        "main": ("team-c",),
        "other": ("team-b",),
    }
