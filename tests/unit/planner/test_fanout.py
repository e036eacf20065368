"""Which owners a change re-plans: hand-written expectations over one small cluster."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from kaiwo_contracts.events.observed import ObservedObjectV1, WatchEventType
from kaiwo_contracts.plans import ObjectRef
from kaiwo_planner.domain.fanout import owners_to_replan
from kaiwo_planner.domain.state.observed_objects import Change
from kaiwo_planner.domain.state.projection import Projection

KAIWO = "kaiwo.silogen.ai/v1alpha1"
CONFIG = "config.kaiwo.silogen.ai/v1alpha1"
KUEUE = "kueue.x-k8s.io/v1beta1"

KQC = ObjectRef(api_version=KAIWO, kind="KaiwoQueueConfig", name="kaiwo", uid="kqc-uid")
TRAIN = ObjectRef(
    api_version=KAIWO, kind="KaiwoJob", name="train", namespace="team-a", uid="kj-train"
)
BATCH = ObjectRef(
    api_version=KAIWO, kind="KaiwoJob", name="batch", namespace="team-b", uid="kj-batch"
)
SERVE = ObjectRef(
    api_version=KAIWO, kind="KaiwoService", name="serve", namespace="team-b", uid="ks-serve"
)
# Sorted by apiVersion, kind, namespace, name: KaiwoJob < KaiwoQueueConfig < KaiwoService.
EVERY_WORKLOAD = (TRAIN, BATCH, SERVE)
EVERYTHING = (TRAIN, BATCH, KQC, SERVE)


def owner_ref(
    api_version: str, kind: str, name: str, uid: str, *, controller: bool = True
) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": controller,
    }


def obj(
    api_version: str,
    kind: str,
    name: str,
    uid: str,
    *,
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
    owners: list[dict[str, Any]] | None = None,
    **body: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "uid": uid}
    if namespace:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = labels
    if owners:
        metadata["ownerReferences"] = owners
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **body}


def node(
    name: str, *, labels: dict[str, str] | None = None, heartbeat: str = "t0"
) -> dict[str, Any]:
    return obj(
        "v1",
        "Node",
        name,
        f"uid-{name}",
        labels=labels or {"kubernetes.io/hostname": name},
        status={
            "capacity": {"cpu": "8"},
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}],
        },
    )


CLUSTER: list[dict[str, Any]] = [
    obj(KAIWO, "KaiwoQueueConfig", "kaiwo", "kqc-uid"),
    obj(CONFIG, "KaiwoConfig", "kaiwo", "kc-uid"),
    obj(KAIWO, "KaiwoJob", "train", "kj-train", namespace="team-a", spec={}),
    obj(KAIWO, "KaiwoJob", "batch", "kj-batch", namespace="team-b", spec={}),
    obj(
        KAIWO,
        "KaiwoService",
        "serve",
        "ks-serve",
        namespace="team-b",
        spec={"clusterQueue": "serving"},
    ),
    obj(
        "batch/v1",
        "Job",
        "train",
        "job-train",
        namespace="team-a",
        owners=[owner_ref(KAIWO, "KaiwoJob", "train", "kj-train")],
    ),
    obj(
        "v1",
        "Pod",
        "train-0",
        "pod-train-0",
        namespace="team-a",
        owners=[owner_ref("batch/v1", "Job", "train", "job-train")],
    ),
    obj(
        "apps/v1",
        "Deployment",
        "serve",
        "dep-serve",
        namespace="team-b",
        owners=[owner_ref(KAIWO, "KaiwoService", "serve", "ks-serve")],
    ),
    obj(
        "apps/v1",
        "ReplicaSet",
        "serve-5d9",
        "rs-serve",
        namespace="team-b",
        owners=[owner_ref("apps/v1", "Deployment", "serve", "dep-serve")],
    ),
    obj(
        "v1",
        "Pod",
        "serve-5d9-x",
        "pod-serve",
        namespace="team-b",
        owners=[owner_ref("apps/v1", "ReplicaSet", "serve-5d9", "rs-serve")],
    ),
    obj(
        "v1",
        "PersistentVolumeClaim",
        "serve-data",
        "pvc-serve",
        namespace="team-b",
        labels={"kaiwo.silogen.ai/owner-uid": "ks-serve"},
    ),
    obj(
        KUEUE,
        "ClusterQueue",
        "gpus",
        "cq-uid",
        labels={"kaiwo.silogen.ai/queue-config": "kaiwo"},
        owners=[owner_ref(KAIWO, "KaiwoQueueConfig", "kaiwo", "kqc-uid")],
    ),
    node("gpu-0"),
    obj("v1", "Namespace", "team-a", "ns-a"),
    obj(CONFIG, "AIMNamespaceConfig", "defaults", "aim-b", namespace="team-b"),
    obj("kubeai.org/v1", "Model", "llama", "model-uid", namespace="team-a"),
]


@pytest.fixture
def projection() -> Projection:
    projection = Projection()
    for sequence, item in enumerate(CLUSTER, start=1):
        projection.apply(observe(item, "1", "ADDED"), sequence=sequence)
    return projection


def observe(item: dict[str, Any], rv: str, event: WatchEventType = "MODIFIED") -> ObservedObjectV1:
    meta = item["metadata"]
    return ObservedObjectV1(
        kind=item["kind"],
        api_version=item["apiVersion"],
        namespace=meta.get("namespace"),
        name=meta["name"],
        uid=meta["uid"],
        resource_version=rv,
        event_type=event,
        object=item,
    )


def change_of(
    projection: Projection, item: dict[str, Any], event: WatchEventType = "MODIFIED"
) -> Change:
    change = projection.apply(observe(item, "2", event), sequence=100)
    assert change is not None
    return change


Replanned = Callable[..., tuple[ObjectRef, ...]]


def replanning(projection: Projection) -> Replanned:
    """``replanned(item, event="MODIFIED")``: the owners a change of ``item`` re-plans, each
    change observed at a new resource version."""
    versions = iter(range(2, 100))

    def replanned(
        item: dict[str, Any], event: WatchEventType = "MODIFIED"
    ) -> tuple[ObjectRef, ...]:
        version = next(versions)
        change = projection.apply(observe(item, str(version), event), sequence=100 + version)
        assert change is not None
        return owners_to_replan(change, projection)

    return replanned


def named(kind: str, name: str) -> dict[str, Any]:
    return copy.deepcopy(
        next(o for o in CLUSTER if o["kind"] == kind and o["metadata"]["name"] == name)
    )


def test_a_workload_replans_itself(projection: Projection) -> None:
    change = change_of(projection, named("KaiwoJob", "train"))
    assert owners_to_replan(change, projection) == (TRAIN,)


def test_a_deleted_workload_is_still_named_and_its_queue_config_drops_unused_local_queues(
    projection: Projection,
) -> None:
    change = change_of(projection, named("KaiwoService", "serve"), "DELETED")
    assert owners_to_replan(change, projection) == (KQC, SERVE)


def test_a_new_workload_replans_the_queue_config_for_its_local_queue() -> None:
    projection = Projection()
    projection.apply(observe(named("KaiwoQueueConfig", "kaiwo"), "1", "ADDED"), sequence=1)
    change = projection.apply(observe(named("KaiwoJob", "train"), "2", "ADDED"), sequence=2)
    assert change is not None
    assert owners_to_replan(change, projection) == (TRAIN, KQC)


def test_another_workload_of_a_queue_and_namespace_in_use_leaves_the_queue_config(
    projection: Projection,
) -> None:
    second = named("KaiwoJob", "train") | {"metadata": {"name": "second", "uid": "kj-second"}}
    second["metadata"]["namespace"] = "team-a"
    change = change_of(projection, second)
    second_ref = TRAIN.model_copy(update={"name": "second", "uid": "kj-second"})
    assert owners_to_replan(change, projection) == (second_ref,)
    # It goes again: "train" still uses the default queue in team-a.
    gone = change_of(projection, second, "DELETED")
    assert owners_to_replan(gone, projection) == (second_ref,)


def test_a_workload_moving_to_another_queue_replans_the_queue_config(
    projection: Projection,
) -> None:
    moved = named("KaiwoJob", "train")
    moved.setdefault("spec", {})["clusterQueue"] = "research"
    assert owners_to_replan(change_of(projection, moved), projection) == (TRAIN, KQC)


def test_a_direct_child_replans_its_controller(projection: Projection) -> None:
    change = change_of(projection, named("Job", "train"))
    assert owners_to_replan(change, projection) == (TRAIN,)


def test_a_pod_walks_up_to_its_workload(projection: Projection) -> None:
    assert owners_to_replan(change_of(projection, named("Pod", "train-0")), projection) == (TRAIN,)
    assert owners_to_replan(change_of(projection, named("Pod", "serve-5d9-x")), projection) == (
        SERVE,
    )


def test_a_kueue_workload_walks_up_through_its_job(projection: Projection) -> None:
    workload = obj(
        KUEUE,
        "Workload",
        "job-train-1a2b",
        "wl-train",
        namespace="team-a",
        owners=[owner_ref("batch/v1", "Job", "train", "job-train")],
    )
    assert owners_to_replan(change_of(projection, workload, "ADDED"), projection) == (TRAIN,)
    by_label = obj(
        KUEUE,
        "Workload",
        "pod-serve-1",
        "wl-serve",
        namespace="team-b",
        labels={"kueue.x-k8s.io/job-uid": "pod-serve"},
    )
    assert owners_to_replan(change_of(projection, by_label, "ADDED"), projection) == (SERVE,)


def test_a_kueue_workload_removed_after_its_deleted_job_replans_the_job_named_after_it(
    projection: Projection,
) -> None:
    """Decision 0139: the KaiwoJob waits for the deleted Job's Workload to go before it makes
    its Job again; the Job is no longer observed, so only the name leads to the KaiwoJob."""
    change_of(projection, named("Pod", "train-0"), "DELETED")
    change_of(projection, named("Job", "train"), "DELETED")
    workload = obj(
        KUEUE,
        "Workload",
        "job-train-1a2b",
        "wl-train",
        namespace="team-a",
        owners=[owner_ref("batch/v1", "Job", "train", "job-train")],
    )
    projection.apply(observe(workload, "1", "ADDED"), sequence=50)

    assert owners_to_replan(change_of(projection, workload, "DELETED"), projection) == (TRAIN,)


def test_a_kueue_workload_removed_while_its_job_is_observed_replans_through_the_job(
    projection: Projection,
) -> None:
    """Kueue replacing the Workload of a live Job: the owner reference leads to the KaiwoJob,
    and a workload of the same name in another namespace is not concerned."""
    workload = obj(
        KUEUE,
        "Workload",
        "job-batch-1a2b",
        "wl-batch",
        namespace="team-a",
        owners=[owner_ref("batch/v1", "Job", "batch", "job-batch-gone")],
    )
    projection.apply(observe(workload, "1", "ADDED"), sequence=50)

    # Job "batch" of team-a never existed: KaiwoJob "batch" is in team-b.
    assert owners_to_replan(change_of(projection, workload, "DELETED"), projection) == ()
    live = obj(
        KUEUE,
        "Workload",
        "job-train-9z9z",
        "wl-train-live",
        namespace="team-a",
        owners=[owner_ref("batch/v1", "Job", "train", "job-train")],
    )
    projection.apply(observe(live, "1", "ADDED"), sequence=51)
    assert owners_to_replan(change_of(projection, live, "DELETED"), projection) == (TRAIN,)


def test_a_child_found_by_the_owner_label_replans_that_owner(projection: Projection) -> None:
    change = change_of(projection, named("PersistentVolumeClaim", "serve-data"))
    assert owners_to_replan(change, projection) == (SERVE,)


def test_a_pod_found_by_the_run_id_label_replans_its_workload(projection: Projection) -> None:
    pod = obj(
        "v1",
        "Pod",
        "loose",
        "pod-loose",
        namespace="team-b",
        labels={"kaiwo.silogen.ai/run-id": "kj-batch"},
    )
    assert owners_to_replan(change_of(projection, pod, "ADDED"), projection) == (BATCH,)


def test_a_child_that_changes_owner_replans_both(projection: Projection) -> None:
    moved = named("PersistentVolumeClaim", "serve-data")
    moved["metadata"]["labels"] = {"kaiwo.silogen.ai/owner-uid": "kj-batch"}
    assert owners_to_replan(change_of(projection, moved), projection) == (BATCH, SERVE)


def test_a_deleted_child_replans_its_owner(projection: Projection) -> None:
    change = change_of(projection, named("Job", "train"), "DELETED")
    assert owners_to_replan(change, projection) == (TRAIN,)


def test_an_object_of_no_workload_replans_nothing(projection: Projection) -> None:
    stray = obj("v1", "ConfigMap", "stray", "cm-stray", namespace="team-a")
    assert owners_to_replan(change_of(projection, stray, "ADDED"), projection) == ()
    orphan = obj(
        "v1",
        "Pod",
        "orphan",
        "pod-orphan",
        namespace="team-a",
        owners=[owner_ref("batch/v1", "Job", "gone", "uid-never-seen")],
    )
    assert owners_to_replan(change_of(projection, orphan, "ADDED"), projection) == ()


def test_an_owner_reference_cycle_ends(projection: Projection) -> None:
    first = obj(
        "v1",
        "ConfigMap",
        "a",
        "cm-a",
        namespace="team-a",
        owners=[owner_ref("v1", "ConfigMap", "b", "cm-b")],
    )
    second = obj(
        "v1",
        "ConfigMap",
        "b",
        "cm-b",
        namespace="team-a",
        owners=[owner_ref("v1", "ConfigMap", "a", "cm-a")],
    )
    change_of(projection, first, "ADDED")
    assert owners_to_replan(change_of(projection, second, "ADDED"), projection) == ()


def test_a_node_change_replans_the_queue_config_and_every_workload(projection: Projection) -> None:
    relabelled = node("gpu-0", labels={"kubernetes.io/hostname": "gpu-0", "pool": "a"})
    assert owners_to_replan(change_of(projection, relabelled), projection) == EVERYTHING


def test_a_node_change_replans_every_gpu_workload(projection: Projection) -> None:
    """Whether a node could hold a plain workload's waiting pod is its GpuWorkload's verdict
    (decisions 0256, 0260): a node that joins or changes re-plans it (decision 0266)."""
    record = obj(KAIWO, "GpuWorkload", "job-plain-plain-01", "rec-job", namespace="team-a")
    projection.apply(observe(record, "1", "ADDED"), sequence=50)
    record_ref = ObjectRef(
        api_version=KAIWO,
        kind="GpuWorkload",
        name="job-plain-plain-01",
        namespace="team-a",
        uid="rec-job",
    )

    found = owners_to_replan(change_of(projection, node("gpu-1"), "ADDED"), projection)

    # Sorted by apiVersion, kind, namespace, name: GpuWorkload first.
    assert found == (record_ref, *EVERYTHING)
    assert owners_to_replan(change_of(projection, node("gpu-0", heartbeat="t1")), projection) == ()


def test_a_node_heartbeat_replans_nothing(projection: Projection) -> None:
    assert owners_to_replan(change_of(projection, node("gpu-0", heartbeat="t1")), projection) == ()


def test_a_new_or_deleted_node_replans_everything(projection: Projection) -> None:
    assert owners_to_replan(change_of(projection, node("gpu-1"), "ADDED"), projection) == EVERYTHING
    assert (
        owners_to_replan(change_of(projection, node("gpu-0"), "DELETED"), projection) == EVERYTHING
    )


def test_the_kaiwo_config_replans_itself_the_queue_config_and_every_workload(
    projection: Projection,
) -> None:
    # Itself: its plan carries a Warning Event while it is invalid (decision 0206).
    change = change_of(projection, named("KaiwoConfig", "kaiwo"))
    itself = ObjectRef(api_version=CONFIG, kind="KaiwoConfig", name="kaiwo", uid="kc-uid")
    assert owners_to_replan(change, projection) == (itself, *EVERYTHING)


@pytest.mark.parametrize("event", ["ADDED", "MODIFIED", "DELETED"])
def test_a_kaiwo_config_of_another_name_replans_only_itself(
    projection: Projection, event: WatchEventType
) -> None:
    # It is never read, so no other plan can change; its own says so (decision 0209).
    other = obj(CONFIG, "KaiwoConfig", "my-settings", "kc-other")
    if event != "ADDED":
        projection.apply(observe(other, "1", "ADDED"), sequence=60)
    change = change_of(projection, other, event)
    itself = ObjectRef(api_version=CONFIG, kind="KaiwoConfig", name="my-settings", uid="kc-other")
    assert owners_to_replan(change, projection) == (itself,)


def test_the_queue_config_replans_itself_and_every_workload(projection: Projection) -> None:
    change = change_of(projection, named("KaiwoQueueConfig", "kaiwo"))
    assert owners_to_replan(change, projection) == EVERYTHING


def test_a_namespace_config_replans_itself_and_the_workloads_of_its_namespace(
    projection: Projection,
) -> None:
    change = change_of(projection, named("AIMNamespaceConfig", "defaults"))
    itself = ObjectRef(
        api_version=CONFIG,
        kind="AIMNamespaceConfig",
        name="defaults",
        namespace="team-b",
        uid="aim-b",
    )
    assert owners_to_replan(change, projection) == (itself, BATCH, SERVE)


@pytest.mark.parametrize("event", ["ADDED", "MODIFIED", "DELETED"])
def test_a_namespace_config_replans_the_other_namespace_configs_of_its_namespace(
    projection: Projection, event: WatchEventType
) -> None:
    # Decision 0209: which one is in force (the first valid by name) may move with any
    # change of one of them, and the others' plans say whether another is in force.
    mine = obj(CONFIG, "AIMNamespaceConfig", "b-second", "aim-b2", namespace="team-b")
    elsewhere = obj(CONFIG, "AIMNamespaceConfig", "a-first", "aim-a1", namespace="team-a")
    for sequence, item in enumerate((mine, elsewhere), start=50):
        projection.apply(observe(item, "1", "ADDED"), sequence=sequence)
    first = obj(CONFIG, "AIMNamespaceConfig", "a-first", "aim-b1", namespace="team-b")
    if event != "ADDED":
        projection.apply(observe(first, "1", "ADDED"), sequence=60)

    owners = owners_to_replan(change_of(projection, first, event), projection)

    defaults = ObjectRef(
        api_version=CONFIG,
        kind="AIMNamespaceConfig",
        name="defaults",
        namespace="team-b",
        uid="aim-b",
    )
    assert owners == (ObjectRef.of(first), ObjectRef.of(mine), defaults, BATCH, SERVE)


def test_a_namespace_that_appears_or_goes_replans_the_queue_config(projection: Projection) -> None:
    added = obj("v1", "Namespace", "team-c", "ns-c")
    assert owners_to_replan(change_of(projection, added, "ADDED"), projection) == (KQC,)
    relabelled = obj("v1", "Namespace", "team-a", "ns-a", labels={"x": "y"})
    assert owners_to_replan(change_of(projection, relabelled), projection) == ()
    gone = obj("v1", "Namespace", "team-a", "ns-a")
    assert owners_to_replan(change_of(projection, gone, "DELETED"), projection) == (KQC,)


def test_a_managed_kueue_object_replans_the_queue_config(projection: Projection) -> None:
    change = change_of(projection, named("ClusterQueue", "gpus"))
    assert owners_to_replan(change, projection) == (KQC,)
    by_label_only = obj(
        KUEUE,
        "LocalQueue",
        "gpus",
        "lq-uid",
        namespace="team-a",
        labels={"kaiwo.silogen.ai/queue-config": "kaiwo"},
    )
    assert owners_to_replan(change_of(projection, by_label_only, "ADDED"), projection) == (KQC,)


def test_a_queues_flavors_changing_replans_every_workload(projection: Projection) -> None:
    """The flavors that hold a workload's gpuModels follow the ClusterQueue's spec and the
    ResourceFlavors (decision 0264); their status, moving at every admission, does not."""
    replanned = replanning(projection)

    queue = named("ClusterQueue", "gpus")
    queue["spec"] = {"resourceGroups": [{"coveredResources": ["amd.com/gpu"], "flavors": []}]}
    assert replanned(queue) == EVERYTHING
    queue["status"] = {"admittedWorkloads": 1}
    assert replanned(queue) == (KQC,)

    flavor = obj(KUEUE, "ResourceFlavor", "mi250x", "rf-uid", spec={"nodeLabels": {"a": "b"}})
    assert replanned(flavor, "ADDED") == EVERY_WORKLOAD
    flavor["metadata"]["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
    assert replanned(flavor) == ()
    assert replanned(flavor, "DELETED") == EVERY_WORKLOAD


LLAMA = ObjectRef(
    api_version="kubeai.org/v1", kind="Model", name="llama", namespace="team-a", uid="model-uid"
)
MODEL_OWNER = owner_ref("kubeai.org/v1", "Model", "llama", "model-uid")


def test_a_model_replans_itself(projection: Projection) -> None:
    assert owners_to_replan(change_of(projection, named("Model", "llama")), projection) == (LLAMA,)


@pytest.mark.parametrize(
    ("api_version", "kind", "name"),
    [
        ("v1", "Pod", "model-llama-abc-0"),
        ("batch/v1", "Job", "load-cache-llama"),
        ("v1", "ConfigMap", "model-llama-files"),
        ("rbac.authorization.k8s.io/v1", "Role", "model-llama-adapter-loader"),
    ],
)
def test_the_children_of_a_model_replan_it(
    projection: Projection, api_version: str, kind: str, name: str
) -> None:
    child = obj(api_version, kind, name, f"uid-{name}", namespace="team-a", owners=[MODEL_OWNER])
    assert owners_to_replan(change_of(projection, child, "ADDED"), projection) == (LLAMA,)


def test_the_models_system_configuration_replans_every_model_even_as_its_label_goes(
    projection: Projection,
) -> None:
    config = obj(
        "v1",
        "ConfigMap",
        "kaiwo-models",
        "cm-models",
        namespace="kaiwo-system",
        labels={"kaiwo.silogen.ai/system-config": "models"},
    )
    assert owners_to_replan(change_of(projection, config, "ADDED"), projection) == (LLAMA,)
    unlabelled = copy.deepcopy(config)
    unlabelled["metadata"]["labels"] = {}
    change = projection.apply(observe(unlabelled, "3"), sequence=101)
    assert change is not None
    assert owners_to_replan(change, projection) == (LLAMA,)
    other = obj("v1", "ConfigMap", "other", "cm-other", namespace="team-a")
    assert owners_to_replan(change_of(projection, other, "ADDED"), projection) == ()


def test_a_namespace_config_replans_the_models_of_its_namespace(projection: Projection) -> None:
    config = obj(CONFIG, "AIMNamespaceConfig", "defaults", "aim-a", namespace="team-a")
    itself = ObjectRef.of(config)
    assert owners_to_replan(change_of(projection, config, "ADDED"), projection) == (
        itself,
        TRAIN,
        LLAMA,
    )


def test_a_shared_cache_volume_replans_the_models_of_its_namespace(
    projection: Projection,
) -> None:
    volume = obj(
        "v1",
        "PersistentVolumeClaim",
        "shared-model-cache-fast",
        "pvc-cache",
        namespace="team-a",
        labels={"kaiwo.silogen.ai/cache-profile": "fast", "app.kubernetes.io/managed-by": "kaiwo"},
    )
    assert owners_to_replan(change_of(projection, volume, "DELETED"), projection) == (LLAMA,)


def test_a_node_replans_no_model(projection: Projection) -> None:
    changed = node("gpu-0", labels={"kubernetes.io/hostname": "gpu-0", "x": "y"})
    assert LLAMA not in owners_to_replan(change_of(projection, changed), projection)


def test_without_a_queue_config_a_node_change_replans_only_workloads() -> None:
    projection = Projection()
    projection.apply(observe(named("KaiwoJob", "train"), "1", "ADDED"), sequence=1)
    change = projection.apply(observe(node("gpu-9"), "1", "ADDED"), sequence=2)
    assert change is not None
    assert owners_to_replan(change, projection) == (TRAIN,)


def test_a_priority_class_replans_every_workload(projection: Projection) -> None:
    priority = obj("scheduling.k8s.io/v1", "PriorityClass", "urgent", "pc-uid", value=1000)
    assert owners_to_replan(change_of(projection, priority, "ADDED"), projection) == (
        EVERY_WORKLOAD
    )


def test_a_workload_priority_class_replans_every_workload_and_its_queue_config(
    projection: Projection,
) -> None:
    managed = obj(
        KUEUE,
        "WorkloadPriorityClass",
        "high",
        "wpc-uid",
        owners=[owner_ref(KAIWO, "KaiwoQueueConfig", "kaiwo", "kqc-uid")],
        value=100,
    )
    assert owners_to_replan(change_of(projection, managed, "ADDED"), projection) == EVERYTHING
    foreign = obj(KUEUE, "WorkloadPriorityClass", "theirs", "wpc-2", value=5)
    assert owners_to_replan(change_of(projection, foreign, "ADDED"), projection) == (EVERY_WORKLOAD)


def test_a_kueue_workload_of_a_gpu_root_replans_the_roots_gpuworkload(
    projection: Projection,
) -> None:
    gpu = {"limits": {"amd.com/gpu": "1"}}
    plain = obj(
        "batch/v1",
        "Job",
        "plain",
        "plain-0123456789",
        namespace="team-a",
        spec={"template": {"spec": {"containers": [{"name": "m", "resources": gpu}]}}},
    )
    record = obj(KAIWO, "GpuWorkload", "job-plain-plain-01", "rec-uid", namespace="team-a")
    for sequence, item in enumerate((plain, record), start=50):
        projection.apply(observe(item, "1", "ADDED"), sequence=sequence)
    workload = obj(
        KUEUE,
        "Workload",
        "job-plain-1",
        "wl-plain",
        namespace="team-a",
        owners=[owner_ref("batch/v1", "Job", "plain", "plain-0123456789")],
    )
    change = change_of(projection, workload, "ADDED")
    record_ref = ObjectRef(
        api_version=KAIWO,
        kind="GpuWorkload",
        name="job-plain-plain-01",
        namespace="team-a",
        uid="rec-uid",
    )
    assert owners_to_replan(change, projection) == (record_ref,)


def test_a_waiting_pod_of_a_gpu_root_replans_the_roots_gpuworkload(
    projection: Projection,
) -> None:
    """Decision 0066: a Job's pod by its controller's uid, a Deployment's pod by its
    ReplicaSet's name (``<deployment>-<pod-template-hash>``; the ReplicaSet is not observed)."""
    gpu = {"limits": {"amd.com/gpu": "1"}}
    template = {"template": {"spec": {"containers": [{"name": "m", "resources": gpu}]}}}
    plain = obj("batch/v1", "Job", "plain", "plain-0123456789", namespace="team-a", spec=template)
    serve = obj("apps/v1", "Deployment", "web", "web-0123456789", namespace="team-a", spec=template)
    records = [
        obj(KAIWO, "GpuWorkload", "job-plain-plain-01", "rec-job", namespace="team-a"),
        obj(KAIWO, "GpuWorkload", "deployment-web-web-0123", "rec-web", namespace="team-a"),
    ]
    for sequence, item in enumerate((plain, serve, *records), start=50):
        projection.apply(observe(item, "1", "ADDED"), sequence=sequence)

    def record_ref(name: str, uid: str) -> ObjectRef:
        return ObjectRef(
            api_version=KAIWO, kind="GpuWorkload", name=name, namespace="team-a", uid=uid
        )

    job_pod = obj(
        "v1",
        "Pod",
        "plain-x7k2p",
        "pod-1",
        namespace="team-a",
        owners=[owner_ref("batch/v1", "Job", "plain", "plain-0123456789")],
    )
    found = owners_to_replan(change_of(projection, job_pod, "ADDED"), projection)
    assert found == (record_ref("job-plain-plain-01", "rec-job"),)

    web_pod = obj(
        "v1",
        "Pod",
        "web-5d8f9c7b6-abcde",
        "pod-2",
        namespace="team-a",
        labels={"pod-template-hash": "5d8f9c7b6"},
        owners=[owner_ref("apps/v1", "ReplicaSet", "web-5d8f9c7b6", "rs-uid")],
    )
    found = owners_to_replan(change_of(projection, web_pod, "ADDED"), projection)
    assert found == (record_ref("deployment-web-web-0123", "rec-web"),)

    # A ReplicaSet made by hand, not named after its pods' hash: no Deployment's.
    by_hand = copy.deepcopy(web_pod)
    by_hand["metadata"].update(name="web-by-hand-abcde", uid="pod-3")
    by_hand["metadata"]["ownerReferences"][0]["name"] = "web-by-hand"
    assert owners_to_replan(change_of(projection, by_hand, "ADDED"), projection) == ()


def test_a_default_local_queue_that_appears_or_goes_replans_the_workloads_beside_it(
    projection: Projection,
) -> None:
    """Kueue puts every job made without a queue label in a namespace's LocalQueue
    ``default``, so a RayJob sent to an existing Ray cluster waits while one is there
    (decision 0159): its coming and going re-plans the workloads of its namespace."""

    def replanned(item: dict[str, Any], rv: str, event: WatchEventType) -> tuple[ObjectRef, ...]:
        change = projection.apply(observe(item, rv, event), sequence=100 + int(rv))
        assert change is not None
        return owners_to_replan(change, projection)

    default = obj(KUEUE, "LocalQueue", "default", "lq-default", namespace="team-b")
    assert replanned(default, "2", "ADDED") == (BATCH, SERVE)
    edited = obj(KUEUE, "LocalQueue", "default", "lq-default", namespace="team-b", x=1)
    assert replanned(edited, "3", "MODIFIED") == ()
    assert replanned(edited, "4", "DELETED") == (BATCH, SERVE)
    other = obj(KUEUE, "LocalQueue", "gpus", "lq-gpus", namespace="team-b")
    assert replanned(other, "5", "ADDED") == ()


def test_a_child_of_a_deleted_kaiwojob_removed_replans_the_one_submitted_again(
    projection: Projection,
) -> None:
    """Decision 0165: KaiwoJob ``train`` deleted and submitted again; its first run's claim,
    removed by the garbage collector after it, names a uid no longer observed. The KaiwoJob of
    that kind and name waited for it: its deletion plans it again. A child of a deleted owner
    of another name, or of another kind, plans nothing, nor does such a child that changes
    without going."""
    sequences = iter(range(60, 100))

    def seen(found: dict[str, Any], rv: str, event: WatchEventType) -> Change:
        change = projection.apply(observe(found, rv, event), sequence=next(sequences))
        assert change is not None
        return change

    def claim(name: str, owner: dict[str, Any], uid: str) -> dict[str, Any]:
        found = obj("v1", "PersistentVolumeClaim", name, uid, namespace="team-a", owners=[owner])
        seen(found, "1", "ADDED")
        return found

    previous = claim("train-data", owner_ref(KAIWO, "KaiwoJob", "train", "kj-train-first"), "p1")
    previous["metadata"]["deletionTimestamp"] = "2026-12-03T21:00:00Z"
    assert owners_to_replan(seen(previous, "2", "MODIFIED"), projection) == ()
    assert owners_to_replan(seen(previous, "3", "DELETED"), projection) == (TRAIN,)

    other_name = claim("gone-data", owner_ref(KAIWO, "KaiwoJob", "gone", "kj-gone"), "p2")
    assert owners_to_replan(seen(other_name, "2", "DELETED"), projection) == ()
    other_kind = claim("train-x", owner_ref(KAIWO, "KaiwoService", "train", "ks-x"), "p3")
    assert owners_to_replan(seen(other_kind, "2", "DELETED"), projection) == ()


def test_anyones_queue_that_appears_goes_or_changes_replans_the_gpu_workloads(
    projection: Projection,
) -> None:
    """Where Kueue counts a GPU workload no Kaiwo kind owns follows its LocalQueue and that
    queue's ClusterQueue, whoever made them (decision 0270): their coming, going and spec
    re-plan the GpuWorkloads (of the LocalQueue's namespace); their status does not."""
    records = {
        ns: obj(KAIWO, "GpuWorkload", f"job-{ns}", f"rec-{ns}", namespace=ns)
        for ns in ("team-a", "team-b")
    }
    for sequence, record in enumerate(records.values(), start=50):
        projection.apply(observe(record, "1", "ADDED"), sequence=sequence)
    ref = {
        ns: ObjectRef(
            api_version=KAIWO, kind="GpuWorkload", name=f"job-{ns}", namespace=ns, uid=f"rec-{ns}"
        )
        for ns in records
    }
    replanned = replanning(projection)

    local = obj(
        KUEUE, "LocalQueue", "research", "lq-r", namespace="team-a", spec={"clusterQueue": "a"}
    )
    assert replanned(local, "ADDED") == (ref["team-a"],)
    local["status"] = {"pendingWorkloads": 1}
    assert replanned(local) == ()
    local["spec"] = {"clusterQueue": "b"}
    assert replanned(local) == (ref["team-a"],)
    assert replanned(local, "DELETED") == (ref["team-a"],)

    theirs = obj(KUEUE, "ClusterQueue", "research", "cq-r", spec={"cohort": "lab"})
    assert replanned(theirs, "ADDED") == (ref["team-a"], ref["team-b"], *EVERY_WORKLOAD)
    theirs["status"] = {"admittedWorkloads": 3}
    assert replanned(theirs) == ()
    theirs["spec"] = {"cohort": "other"}
    assert replanned(theirs) == (ref["team-a"], ref["team-b"], *EVERY_WORKLOAD)


def test_a_cohort_that_appears_goes_or_changes_replans_every_workload_and_gpu_workload(
    projection: Projection,
) -> None:
    """Quota is lent across a Kueue cohort tree (decision 0271): a Cohort's parent moves which
    workloads share, for Kaiwo's and for the others' (their GpuWorkloads)."""
    record = obj(KAIWO, "GpuWorkload", "job-plain", "rec-plain", namespace="team-a")
    projection.apply(observe(record, "1", "ADDED"), sequence=50)
    record_ref = ObjectRef(
        api_version=KAIWO, kind="GpuWorkload", name="job-plain", namespace="team-a", uid="rec-plain"
    )
    replanned = replanning(projection)

    research = obj(KUEUE, "Cohort", "research", "co-r", spec={"parentName": "org"})
    assert replanned(research, "ADDED") == (record_ref, *EVERY_WORKLOAD)
    research["status"] = {"fairSharing": {"weightedShare": 0}}
    assert replanned(research) == ()
    research["spec"] = {}
    assert replanned(research) == (record_ref, *EVERY_WORKLOAD)
    assert replanned(research, "DELETED") == (record_ref, *EVERY_WORKLOAD)


def test_a_gateway_that_appears_goes_or_changes_whether_it_is_programmed_replans_services(
    projection: Projection,
) -> None:
    """A KaiwoService's route serves only through a programmed Gateway (decision 0273); the
    routes its listeners count move with every route attached, and re-plan nothing."""
    replanned = replanning(projection)

    def programmed(status: str) -> dict[str, Any]:
        return {"type": "Programmed", "status": status, "reason": "Programmed", "message": ""}

    gateway = obj(
        "gateway.networking.k8s.io/v1",
        "Gateway",
        "kgw",
        "gw-uid",
        namespace="gateway-system",
        spec={"gatewayClassName": "example"},
        status={"conditions": [programmed("Unknown")], "listeners": [{"attachedRoutes": 0}]},
    )
    assert replanned(gateway, "ADDED") == (SERVE,)
    gateway["status"]["listeners"] = [{"attachedRoutes": 1}]
    assert replanned(gateway) == ()
    gateway["status"]["conditions"] = [programmed("True")]
    assert replanned(gateway) == (SERVE,)
    gateway["spec"] = {"gatewayClassName": "other"}
    assert replanned(gateway) == ()
    # A listener that takes HTTPRoutes serves them only while it is programmed (0277).
    gateway["status"]["listeners"] = [{"attachedRoutes": 1, "conditions": [programmed("False")]}]
    assert replanned(gateway) == (SERVE,)
    assert replanned(gateway, "DELETED") == (SERVE,)
