"""The planning context: values kept from one state to the next while what they read stays,
and a context carried along that plans as a fresh one does."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kaiwo_planner.domain.planning import plan_object
from kaiwo_planner.domain.settings.cluster_settings import kaiwo_config
from kaiwo_planner.domain.state.context_keeper import PlanningContextKeeper
from kaiwo_planner.domain.state.planning_context import OwnerValues, PlanningContext
from kaiwo_planner.domain.state.projection import Projection

from tests.unit.planner.observations import observed


def config(image: str) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo", "uid": "config-uid"},
        "spec": {"ray": {"defaultRayImage": image}},
    }


QUEUES: dict[str, Any] = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoQueueConfig",
    "metadata": {"name": "kaiwo", "uid": "kqc-uid"},
    "spec": {"clusterQueues": [{"name": "kaiwo", "spec": {"resourceGroups": []}}]},
}
"""The default queue, so that workloads are schedulable and get children."""
TRAIN: dict[str, Any] = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoJob",
    "metadata": {"name": "train", "namespace": "a", "uid": "job-uid", "generation": 1},
    "spec": {"image": "busybox", "entrypoint": "sleep 1"},
}


def test_owner_values_are_reused_only_for_the_very_same_inputs() -> None:
    context = PlanningContext.of(Projection().cluster_state())
    calls: list[str] = []
    first, equal_copy = {"a": 1}, {"a": 1}

    def compute(label: str) -> str:
        calls.append(label)
        return label

    assert context.owner_value(("test",), (first,), lambda: compute("first")) == "first"
    assert context.owner_value(("test",), (first,), lambda: compute("again")) == "first"
    # An equal but different object is another version of it: worked out again.
    assert context.owner_value(("test",), (equal_copy,), lambda: compute("copy")) == "copy"
    assert calls == ["first", "copy"]


def test_a_changed_kaiwoconfig_is_parsed_again_and_an_unrelated_change_reuses_it() -> None:
    projection, contexts = Projection(), PlanningContextKeeper()
    projection.apply(observed(config("ray:1"), 1), sequence=1)
    before = kaiwo_config(contexts.context(projection))
    assert before.spec.ray.default_ray_image == "ray:1"

    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "uid": "n"}}
    projection.apply(observed(namespace, 2), sequence=2)
    assert kaiwo_config(contexts.context(projection)) is before  # a new state, same config

    projection.apply(observed(config("ray:2"), 3), sequence=3)
    after = kaiwo_config(contexts.context(projection))
    assert after.spec.ray.default_ray_image == "ray:2"


def test_planning_the_same_owner_object_twice_gives_equal_plans() -> None:
    projection = Projection()
    projection.apply(observed(TRAIN, 1), sequence=1)
    owner = projection.by_uid("job-uid")
    assert owner is not None
    now = datetime(2026, 1, 1, tzinfo=UTC)
    context = PlanningContext.of(projection.cluster_state())
    first = plan_object(owner=owner, context=context, now=now).plan
    second = plan_object(owner=owner, context=context, now=now).plan
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
    from kaiwo_planner.domain.settings.cluster_settings import namespaces_by_queue

    projection, contexts = Projection(), PlanningContextKeeper()
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
    assert namespaces_by_queue(contexts.context(projection)) == {
        "gpu": ("team-b",),
        "kaiwo": ("team-a", "team-c"),
    }

    apply(workload("a", "team-a", None, uid="u1"), "DELETED")  # b still uses kaiwo in team-a
    apply(workload("c", "team-b", "other", uid="u3"), "MODIFIED")  # moved to another queue
    assert namespaces_by_queue(contexts.context(projection)) == {
        "kaiwo": ("team-a", "team-c"),
        "other": ("team-b",),
    }

    apply(workload("b", "team-a", None, uid="u2"), "DELETED")
    apply(config("ray:1") | {"spec": {"defaultClusterQueueName": "main"}})
    assert namespaces_by_queue(contexts.context(projection)) == {
        "main": ("team-c",),
        "other": ("team-b",),
    }


def test_a_ray_job_on_an_existing_cluster_uses_no_queue() -> None:
    """A KaiwoJob whose RayJob runs on an existing Ray cluster is not queued (decision 0156),
    so the queue it names gets no LocalQueue for it: one named ``default`` (a ClusterQueue
    ``default`` listing no namespaces) would have Kueue queue and kill the RayJob (decision
    0159). Before, the job's own queue use made that LocalQueue beside it."""
    from kaiwo_planner.domain.settings.cluster_settings import namespaces_by_queue

    projection, contexts = Projection(), PlanningContextKeeper()
    on_shared = workload("shared", "team-d", "default", uid="u5")
    on_shared["spec"]["rayJob"] = {"spec": {"clusterSelector": {"ray.io/cluster": "shared"}}}
    projection.apply(observed(on_shared, 1), sequence=1)
    projection.apply(observed(workload("own", "team-e", "default", uid="u6"), 2), sequence=2)

    assert namespaces_by_queue(contexts.context(projection)) == {"default": ("team-e",)}


def aim_config(namespace: str, secret: str) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "AIMNamespaceConfig",
        "metadata": {"name": "aim", "namespace": namespace, "uid": f"aim-{namespace}"},
        "spec": {"images": {"imagePullSecrets": [secret]}},
    }


def test_a_namespace_config_is_kept_until_one_of_its_namespace_changes() -> None:
    from kaiwo_planner.domain.settings.cluster_settings import namespace_config

    projection, contexts = Projection(), PlanningContextKeeper()
    projection.apply(observed(aim_config("team-a", "registry-1"), 1), sequence=1)
    projection.apply(observed(aim_config("team-b", "registry-b"), 2), sequence=2)
    before = namespace_config(contexts.context(projection), "team-a")
    assert before is not None
    assert before.spec.images.image_pull_secrets == ["registry-1"]

    # Another namespace's config changed: team-a's parsed config is the same object.
    projection.apply(observed(aim_config("team-b", "registry-b2"), 3), sequence=3)
    assert namespace_config(contexts.context(projection), "team-a") is before

    projection.apply(observed(aim_config("team-a", "registry-2"), 4), sequence=4)
    after = namespace_config(contexts.context(projection), "team-a")
    assert after is not None
    assert after.spec.images.image_pull_secrets == ["registry-2"]
    assert namespace_config(contexts.context(projection), "team-c") is None


def test_owner_values_are_bounded_and_the_least_recently_used_go() -> None:
    values = OwnerValues(limit=100)
    anchor = object()
    values.get(("test-anchor",), (anchor,), lambda: "anchor")
    for index in range(110):
        values.get(("test-fill", index), (), lambda index=index: index)
        if index % 10 == 0:  # used now and then, as a busy owner's values are
            assert values.get(("test-anchor",), (anchor,), lambda: "recomputed") == "anchor"
    assert len(values) == 100
    assert values.get(("test-anchor",), (anchor,), lambda: "recomputed") == "anchor"
    assert values.get(("test-fill", 0), (), lambda: "recomputed") == "recomputed"  # it went


def test_a_replan_with_kept_children_equals_one_worked_out_afresh() -> None:
    projection, contexts = Projection(), PlanningContextKeeper()

    def child(active: int) -> dict[str, Any]:
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "train",
                "namespace": "a",
                "uid": "child-uid",
                "ownerReferences": [{"uid": "job-uid", "kind": "KaiwoJob", "controller": True}],
            },
            "spec": {"suspend": False, "template": {"spec": {"containers": [{"name": "x"}]}}},
            "status": {"active": active},
        }

    projection.apply(observed(QUEUES, 1), sequence=1)
    projection.apply(observed(TRAIN, 2), sequence=2)
    projection.apply(observed(child(0), 3), sequence=3)
    owner = projection.by_uid("job-uid")
    assert owner is not None
    now = datetime(2026, 1, 1, tzinfo=UTC)
    first = plan_object(owner=owner, context=contexts.context(projection), now=now).plan
    assert first is not None
    first_json = first.model_dump_json()

    projection.apply(observed(child(1), 4), sequence=4)  # the child moved, the owner did not
    again = plan_object(owner=owner, context=contexts.context(projection), now=now).plan
    fresh = PlanningContext.of(projection.cluster_state())
    afresh = plan_object(owner=owner, context=fresh, now=now).plan
    assert again is not None and afresh is not None
    assert again.model_dump_json() == afresh.model_dump_json()
    # The kept children are shared between plans; neither plan changed the other.
    assert first.model_dump_json() == first_json
    desired_job = next(obj for obj in again.desired if obj["kind"] == "Job")
    # The Job's pod template is immutable: the observed one is kept (hand-written value).
    assert desired_job["spec"]["template"] == {"spec": {"containers": [{"name": "x"}]}}


def test_children_are_built_again_for_a_new_spec_or_labels_but_not_for_a_new_status(
    monkeypatch: Any,
) -> None:
    from kaiwo_planner.domain.children import workload_children as children

    built: list[int] = []
    build = children._build_children

    def counting(**kwargs: Any) -> Any:
        built.append(kwargs["workload"].metadata.generation)
        return build(**kwargs)

    monkeypatch.setattr(children, "_build_children", counting)
    projection, contexts = Projection(), PlanningContextKeeper()
    projection.apply(observed(QUEUES, 1), sequence=1)
    now = datetime(2026, 1, 1, tzinfo=UTC)

    def plan(version: int, *, generation: int, labels: dict[str, str], status: str) -> None:
        job = {
            "apiVersion": "kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoJob",
            "metadata": {
                "name": "train",
                "namespace": "a",
                "uid": "job-uid",
                "generation": generation,
                "labels": labels,
            },
            "spec": {"image": "busybox", "entrypoint": f"sleep {generation}"},
            "status": {"status": status},
        }
        projection.apply(observed(job, version), sequence=version)
        owner = projection.by_uid("job-uid")
        assert owner is not None
        context = contexts.context(projection)
        assert plan_object(owner=owner, context=context, now=now).plan is not None

    plan(2, generation=1, labels={}, status="")
    plan(3, generation=1, labels={}, status="PENDING")  # our own status write: kept
    assert built == [1]
    plan(4, generation=2, labels={}, status="PENDING")  # a new spec
    plan(5, generation=2, labels={"team": "x"}, status="PENDING")  # labels go to the children
    assert built == [1, 2, 2]


def test_a_workload_spec_is_parsed_once_per_generation_unless_it_changed_without_one(
    monkeypatch: Any,
) -> None:
    from kaiwo_planner.domain import planning

    planned: list[Any] = []
    plan_workload = planning.plan_workload

    def capturing(*, workload: Any, **kwargs: Any) -> Any:
        planned.append(workload)
        return plan_workload(workload=workload, **kwargs)

    monkeypatch.setattr(planning, "plan_workload", capturing)
    projection, contexts = Projection(), PlanningContextKeeper()
    projection.apply(observed(QUEUES, 1), sequence=1)
    now = datetime(2026, 1, 1, tzinfo=UTC)

    def plan(version: int, spec: dict[str, Any], status: str) -> Any:
        job = {**TRAIN, "spec": spec, "status": {"status": status}}
        projection.apply(observed(job, version), sequence=version)
        owner = projection.by_uid("job-uid")
        assert owner is not None
        return plan_object(owner=owner, context=contexts.context(projection), now=now).plan

    spec = {"image": "busybox", "entrypoint": "sleep 1"}
    plan(2, dict(spec), "")
    plan(3, dict(spec), "PENDING")  # our own status write, an equal spec: parsed before
    assert planned[1].spec is planned[0].spec
    assert planned[1] == planned[1].model_validate(projection.by_uid("job-uid"))
    # Hand-made: another spec under the same generation is parsed afresh, not taken as held.
    plan(4, {**spec, "image": "alpine"}, "PENDING")
    assert planned[2].spec.image == "alpine"
    invalid = plan(5, {**spec, "gpus": "many"}, "PENDING")
    assert len(planned) == 3  # not planned as a workload: its spec does not parse
    (valid,) = invalid.status["conditions"]
    assert (valid["type"], valid["status"], valid["reason"]) == ("Valid", "False", "InvalidSpec")
    assert "spec.gpus" in valid["message"]


def gpu_node(name: str, gpus: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"node-{name}",
            "labels": {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"},
        },
        "status": {"capacity": {"amd.com/gpu": gpus}, "allocatable": {"amd.com/gpu": gpus}},
    }


def test_values_follow_changes_of_the_kinds_they_read_and_only_those() -> None:
    from kaiwo_planner.domain.scheduling.gpu_allocation import vendor_gpu_stats

    projection, contexts = Projection(), PlanningContextKeeper()
    projection.apply(observed(gpu_node("a", "8"), 1), sequence=1)
    projection.apply(observed(config("ray:1"), 2), sequence=2)
    state = contexts.context(projection)
    stats, settings = vendor_gpu_stats(state, "AMD"), kaiwo_config(state)
    assert stats.total_gpus == 8

    projection.apply(observed(TRAIN, 3), sequence=3)  # a workload: neither value reads it
    state = contexts.context(projection)
    assert vendor_gpu_stats(state, "AMD") is stats
    assert kaiwo_config(state) is settings

    projection.apply(observed(gpu_node("b", "4"), 4), sequence=4)  # a new node
    state = contexts.context(projection)
    assert vendor_gpu_stats(state, "AMD").total_gpus == 12
    assert kaiwo_config(state) is settings

    projection.apply(observed(TRAIN, 5), sequence=5)
    before_deletion = projection.cluster_state()  # not asked anything yet
    gone = observed(config("ray:1"), 6).model_copy(update={"event_type": "DELETED"})
    projection.apply(gone, sequence=6)
    assert kaiwo_config(contexts.context(projection)).spec.ray.default_ray_image != "ray:1"
    # A state is a value: taken before the deletion, it still holds that cluster.
    earlier = kaiwo_config(PlanningContext.of(before_deletion))
    assert earlier.spec.ray.default_ray_image == "ray:1"


def test_manifests_without_a_uid_get_their_own_children_even_with_a_generation() -> None:
    from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwojob import KaiwoJob
    from kaiwo_planner.domain.children.workload_children import plan_children
    from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation

    def manifest(image: str) -> KaiwoJob:
        return KaiwoJob.model_validate(
            {
                "apiVersion": "kaiwo.silogen.ai/v1alpha1",
                "kind": "KaiwoJob",
                "metadata": {"name": "train", "namespace": "a", "generation": 1},
                "spec": {"image": image, "entrypoint": "sleep 1"},
            }
        )

    allocation = GpuAllocation(gpus=0, gpus_per_replica=0, replicas=1, vendor="AMD")
    images = [
        container["image"]
        for image in ("first:1", "second:2")
        for child in plan_children(
            workload=manifest(image), allocation=allocation, config=None
        ).desired
        for container in child["spec"]["template"]["spec"]["containers"]
    ]
    assert images == ["first:1", "second:2"]
