"""The planner's projection: staleness, tombstones, the ClusterState it hands out, snapshots."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kaiwo_contracts.events.observed import ObservedObjectV1, WatchEventType
from kaiwo_contracts.plans import ObjectRef
from kaiwo_contracts.queue_estimates.kueue import kueue_gpus
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.object_index import NotIndexedError
from kaiwo_planner.domain.state.observed_objects import is_newer
from kaiwo_planner.domain.state.projection import Projection, SnapshotFormatError

JOB_UID = "job-uid-1"
KAIWOJOB_UID = "kj-uid-1"


def make_object(
    kind: str,
    name: str,
    *,
    uid: str,
    api_version: str = "v1",
    namespace: str | None = "team-a",
    labels: dict[str, str] | None = None,
    owners: list[str] | None = None,
    **body: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "uid": uid}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = labels
    if owners:
        metadata["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "owner", "uid": u, "controller": True}
            for u in owners
        ]
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **body}


def observe(obj: dict[str, Any], rv: str, event: WatchEventType = "MODIFIED") -> ObservedObjectV1:
    meta = obj["metadata"]
    return ObservedObjectV1(
        kind=obj["kind"],
        api_version=obj["apiVersion"],
        namespace=meta.get("namespace"),
        name=meta["name"],
        uid=meta["uid"],
        resource_version=rv,
        event_type=event,
        object={**obj, "metadata": {**meta, "resourceVersion": rv}},
    )


POD = make_object("Pod", "worker-0", uid="pod-1", owners=[JOB_UID])
POD_REF = ObjectRef.of(POD)


def node(name: str, *, gpus: int = 8, **extra: Any) -> dict[str, Any]:
    return make_object(
        "Node",
        name,
        uid=f"uid-{name}",
        namespace=None,
        labels={"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"},
        status={"capacity": {"amd.com/gpu": str(gpus)}, "allocatable": {"amd.com/gpu": str(gpus)}},
        **extra,
    )


# ---------------------------------------------------------------- staleness


def test_a_new_object_is_stored_and_reported_as_a_change() -> None:
    projection = Projection()
    change = projection.apply(observe(POD, "10", "ADDED"), sequence=1)
    assert change is not None
    assert change.ref == ObjectRef(
        api_version="v1", kind="Pod", name="worker-0", namespace="team-a", uid="pod-1"
    )
    assert change.previous is None
    assert change.event_type == "ADDED"
    assert projection.objects.get(POD_REF) is not None
    assert projection.by_uid("pod-1") is not None
    assert len(projection) == 1
    assert projection.last_sequence == 1


def test_the_same_version_again_is_a_duplicate() -> None:
    projection = Projection()
    projection.apply(observe(POD, "10", "ADDED"), sequence=1)
    assert projection.apply(observe(POD, "10", "SYNC"), sequence=2) is None
    assert projection.apply(observe(POD, "10", "MODIFIED"), sequence=3) is None
    assert projection.last_sequence == 3


def test_resource_versions_compare_as_numbers_when_both_are_integers() -> None:
    projection = Projection()
    projection.apply(observe(POD, "10"), sequence=1)
    # As text "9" > "10"; as numbers it is older and must be dropped.
    assert projection.apply(observe(POD, "9"), sequence=2) is None
    change = projection.apply(observe(POD, "11"), sequence=3)
    assert change is not None
    assert change.previous is not None
    assert change.previous["metadata"]["resourceVersion"] == "10"
    assert projection.objects.resource_version(POD_REF) == "11"


def test_a_different_non_numeric_version_counts_as_newer() -> None:
    projection = Projection()
    projection.apply(observe(POD, "abc"), sequence=1)
    assert projection.apply(observe(POD, "abc"), sequence=2) is None
    assert projection.apply(observe(POD, "abb"), sequence=3) is not None
    assert projection.objects.resource_version(POD_REF) == "abb"


@pytest.mark.parametrize(
    ("incoming", "known", "newer"),
    [
        ("11", "10", True),
        ("9", "10", False),
        ("10", "10", False),
        ("b", "a", True),
        ("a", "a", False),
    ],
)
def test_is_newer(incoming: str, known: str, newer: bool) -> None:
    assert is_newer(incoming, known) is newer


def test_a_deletion_leaves_a_tombstone_that_drops_late_older_versions() -> None:
    projection = Projection()
    projection.apply(observe(POD, "10", "ADDED"), sequence=1)
    deleted = projection.apply(observe(POD, "12", "DELETED"), sequence=2)
    assert deleted is not None
    assert deleted.deleted
    assert projection.objects.get(POD_REF) is None
    assert projection.by_uid("pod-1") is None
    assert projection.objects.tombstone_count == 1
    assert projection.objects.resource_version(POD_REF) == "12"
    # A MODIFIED delivered late (older, or the deletion's own version) does not resurrect it.
    assert projection.apply(observe(POD, "11"), sequence=3) is None
    assert projection.apply(observe(POD, "12"), sequence=4) is None
    assert projection.apply(observe(POD, "12", "DELETED"), sequence=5) is None
    assert len(projection) == 0


def test_a_deletion_with_the_last_known_version_is_accepted() -> None:
    # A watcher that notices a deletion on relist only knows the last version it saw.
    projection = Projection()
    projection.apply(observe(POD, "10", "ADDED"), sequence=1)
    change = projection.apply(observe(POD, "10", "DELETED"), sequence=2)
    assert change is not None
    assert change.deleted
    assert projection.objects.get(POD_REF) is None


def test_a_newer_version_after_a_deletion_brings_the_object_back() -> None:
    # An object that left a watch's label selector comes back with a newer version.
    projection = Projection()
    projection.apply(observe(POD, "10", "DELETED"), sequence=1)
    assert projection.apply(observe(POD, "13", "ADDED"), sequence=2) is not None
    assert projection.objects.get(POD_REF) is not None
    assert projection.objects.tombstone_count == 0


def test_tombstones_are_forgotten_after_the_retention() -> None:
    projection = Projection(tombstone_retention=3)
    projection.apply(observe(POD, "10", "DELETED"), sequence=1)
    other = make_object("Pod", "other", uid="pod-2")
    for sequence in range(2, 5):
        projection.apply(observe(other, str(sequence)), sequence=sequence)
    assert projection.objects.tombstone_count == 1
    projection.apply(observe(other, "5"), sequence=5)
    assert projection.objects.tombstone_count == 0


def test_managed_fields_are_not_kept() -> None:
    projection = Projection()
    pod = {**POD, "metadata": {**POD["metadata"], "managedFields": [{"manager": "kubectl"}]}}
    projection.apply(observe(pod, "10"), sequence=1)
    stored = projection.objects.get(POD_REF)
    assert stored is not None
    assert "managedFields" not in stored["metadata"]
    assert stored["metadata"]["name"] == "worker-0"


def test_without_shared_strings_the_observed_object_itself_is_kept() -> None:
    projection = Projection(share_strings=False)
    observed = observe(POD, "10")
    projection.apply(observed, sequence=1)

    assert projection.objects.get(POD_REF) is observed.object


def test_without_shared_strings_managed_fields_are_still_dropped() -> None:
    projection = Projection(share_strings=False)
    pod = {**POD, "metadata": {**POD["metadata"], "managedFields": [{"manager": "kubectl"}]}}
    projection.apply(observe(pod, "10"), sequence=1)

    stored = projection.objects.get(POD_REF)
    assert stored is not None
    assert "managedFields" not in stored["metadata"]
    assert stored["metadata"]["name"] == "worker-0"


def test_shared_strings_change_no_value() -> None:
    shared, unshared = Projection(), Projection(share_strings=False)
    for projection in (shared, unshared):
        projection.apply(observe(POD, "10"), sequence=1)

    assert shared.objects.get(POD_REF) == unshared.objects.get(POD_REF)
    assert shared.objects.get(POD_REF) is not unshared.objects.get(POD_REF)


# ---------------------------------------------------------------- Kueue Workloads


def kueue_workload(*, env: str = "1") -> dict[str, Any]:
    """A Kueue Workload as Kueue writes it: each pod set holds a whole copy of the pod
    template of its job."""
    return make_object(
        "Workload",
        "job-train-7-1a2b3",
        uid="wl-1",
        api_version="kueue.x-k8s.io/v1beta1",
        labels={"kueue.x-k8s.io/job-uid": JOB_UID},
        owners=[JOB_UID],
        spec={
            "queueName": "kaiwo",
            "priority": 100,
            "podSets": [
                {
                    "name": "main",
                    "count": 2,
                    "minCount": 1,
                    "template": {
                        "metadata": {"labels": {"job-name": "train-7"}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "rocm/pytorch:latest",
                                    "command": ["python", "train.py"],
                                    "env": [{"name": "EPOCHS", "value": env}],
                                    "resources": {
                                        "requests": {"amd.com/gpu": "4", "cpu": "8"},
                                        "limits": {"amd.com/gpu": "4"},
                                    },
                                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                                }
                            ],
                            "initContainers": [
                                {
                                    "name": "fetch",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": "1"}},
                                }
                            ],
                            "volumes": [{"name": "data", "emptyDir": {}}],
                            "tolerations": [{"key": "amd.com/gpu", "operator": "Exists"}],
                            "restartPolicy": "Never",
                        },
                    },
                },
                {"name": "no-template", "count": 1},
            ],
        },
        status={
            "admission": {"clusterQueue": "kaiwo", "podSetAssignments": [{"name": "main"}]},
            "conditions": [{"type": "Admitted", "status": "True"}],
        },
    )


WORKLOAD_REF = ObjectRef.of(kueue_workload())


@pytest.mark.parametrize("share_strings", [True, False])
def test_a_kueue_workload_is_kept_without_its_pod_templates_but_their_containers_resources(
    share_strings: bool,
) -> None:
    whole = kueue_workload()
    projection = Projection(share_strings=share_strings)
    projection.apply(observe(whole, "10"), sequence=1)

    stored = projection.objects.get(WORKLOAD_REF)
    assert stored is not None
    assert stored["spec"]["podSets"] == [
        {
            "name": "main",
            "count": 2,
            "minCount": 1,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "resources": {
                                "requests": {"amd.com/gpu": "4", "cpu": "8"},
                                "limits": {"amd.com/gpu": "4"},
                            },
                        }
                    ],
                    "initContainers": [{"name": "fetch", "resources": {"requests": {"cpu": "1"}}}],
                }
            },
        },
        {"name": "no-template", "count": 1},
    ]
    assert {k: v for k, v in stored["spec"].items() if k != "podSets"} == {
        "queueName": "kaiwo",
        "priority": 100,
    }
    assert stored["status"] == whole["status"]
    assert stored["metadata"] == {**whole["metadata"], "resourceVersion": "10"}
    # What the planner reads of a Workload's pod sets is unchanged.
    assert kueue_gpus(stored) == kueue_gpus(whole) == ("amd.com/gpu", 8)
    # The observation itself is left whole (the recorder stores it so).
    assert "image" in whole["spec"]["podSets"][0]["template"]["spec"]["containers"][0]


def test_a_workload_observed_again_is_a_duplicate_and_a_new_version_of_it_shares_its_content() -> (
    None
):
    projection = Projection()
    assert projection.apply(observe(kueue_workload(), "10"), sequence=1) is not None

    assert projection.apply(observe(kueue_workload(), "10"), sequence=2) is None
    before = projection.objects.get(WORKLOAD_REF)
    # A new version differing only in what the projection does not keep: no new content.
    change = projection.apply(observe(kueue_workload(env="2"), "11"), sequence=3)
    assert change is not None
    assert not change.content_changed
    after = projection.objects.get(WORKLOAD_REF)
    assert after is not None and before is not None
    assert after["spec"] is before["spec"]
    assert after["metadata"]["resourceVersion"] == "11"


@pytest.mark.parametrize(
    "workload",
    [
        {**kueue_workload(), "apiVersion": "example.com/v1"},
        {**kueue_workload(), "spec": {"podSets": "not a list"}},
        {**kueue_workload(), "spec": {"podSets": [{"name": "main", "template": "not a map"}]}},
    ],
    ids=["another group's Workload", "pod sets not a list", "a template not a map"],
)
def test_a_workload_kueue_did_not_write_or_in_no_known_shape_is_kept_as_observed(
    workload: dict[str, Any],
) -> None:
    projection = Projection(share_strings=False)
    observation = observe(workload, "10")
    projection.apply(observation, sequence=1)

    assert projection.objects.get(ObjectRef.of(workload)) == observation.object


def test_a_snapshot_holding_a_kueue_workload_restores_exactly() -> None:
    projection = Projection()
    projection.apply(observe(kueue_workload(), "10"), sequence=1)
    data = projection.snapshot()

    restored = Projection.restore(data)

    assert restored.snapshot() == data
    assert restored.objects.get(WORKLOAD_REF) == projection.objects.get(WORKLOAD_REF)


# ---------------------------------------------------------------- Nodes' images


def node_with_images(*digest: str) -> dict[str, Any]:
    """A Node as its kubelet reports it, with the images it holds."""
    whole = node("gpu-node-1", gpus=8)
    images = [
        {
            "names": [f"registry.example/train@sha256:{d}", f"registry.example/train:{d}"],
            "sizeBytes": 9,
        }
        for d in digest
    ]
    conditions = [{"type": "Ready", "status": "True"}]
    return {**whole, "status": {**whole["status"], "images": images, "conditions": conditions}}


NODE_REF = ObjectRef.of(node("gpu-node-1"))


@pytest.mark.parametrize("share_strings", [True, False])
def test_a_node_is_kept_without_its_images(share_strings: bool) -> None:
    whole = node_with_images("a1", "b2")
    projection = Projection(share_strings=share_strings)
    projection.apply(observe(whole, "10"), sequence=1)

    stored = projection.objects.get(NODE_REF)
    assert stored is not None
    assert stored["status"] == {
        "capacity": {"amd.com/gpu": "8"},
        "allocatable": {"amd.com/gpu": "8"},
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    assert stored["metadata"] == {**whole["metadata"], "resourceVersion": "10"}
    [held] = projection.cluster_state().nodes
    assert (held.name, held.ready, dict(held.gpu_allocatable)) == (
        "gpu-node-1",
        True,
        {"amd.com/gpu": 8},
    )
    assert len(whole["status"]["images"]) == 2  # the observation itself is left whole


def test_a_node_whose_images_alone_changed_is_no_content_change() -> None:
    projection = Projection()
    projection.apply(observe(node_with_images("a1"), "10"), sequence=1)

    assert projection.apply(observe(node_with_images("a1"), "10"), sequence=2) is None
    change = projection.apply(observe(node_with_images("a1", "c3"), "11"), sequence=3)
    assert change is not None
    assert not change.content_changed


def test_a_malformed_object_raises_and_changes_nothing() -> None:
    projection = Projection()
    projection.apply(observe(POD, "10"), sequence=1)
    broken = {**POD, "metadata": {**POD["metadata"], "ownerReferences": 5}}
    with pytest.raises(TypeError):
        projection.apply(observe(broken, "11"), sequence=2)
    assert projection.objects.resource_version(POD_REF) == "10"
    assert [p["metadata"]["name"] for p in projection.cluster_state().children_of(JOB_UID)] == [
        "worker-0"
    ]


@pytest.mark.parametrize("part", ["spec", "status"])
def test_an_object_whose_spec_or_status_is_not_an_object_is_refused(part: str) -> None:
    # Found by fuzzing planning: a child Job whose spec was true made planning its owner raise.
    projection = Projection()
    projection.apply(observe(POD, "10"), sequence=1)
    with pytest.raises(TypeError, match=f"{part} must be an object, not bool"):
        projection.apply(observe({**POD, part: True}, "11"), sequence=2)
    assert projection.objects.resource_version(POD_REF) == "10"


# ---------------------------------------------------------------- lookups


def test_find_and_objects_of_kind() -> None:
    projection = Projection()
    kqc = make_object(
        "KaiwoQueueConfig",
        "kaiwo",
        uid="kqc",
        api_version="kaiwo.silogen.ai/v1alpha1",
        namespace=None,
    )
    job_b = make_object("KaiwoJob", "b", uid="kj-b", api_version="kaiwo.silogen.ai/v1alpha1")
    job_a = make_object("KaiwoJob", "a", uid="kj-a", api_version="kaiwo.silogen.ai/v1alpha1")
    job_c = make_object(
        "KaiwoJob", "c", uid="kj-c", api_version="kaiwo.silogen.ai/v1alpha1", namespace="team-b"
    )
    for sequence, obj in enumerate((kqc, job_b, job_a, job_c), start=1):
        projection.apply(observe(obj, "1"), sequence=sequence)
    found = projection.find(group="kaiwo.silogen.ai", kind="KaiwoQueueConfig", name="kaiwo")
    assert found is not None
    assert found["metadata"]["uid"] == "kqc"
    assert projection.find(group="kaiwo.silogen.ai", kind="KaiwoJob", name="zzz") is None
    names = [
        o["metadata"]["name"]
        for o in projection.objects_of_kind(group="kaiwo.silogen.ai", kind="KaiwoJob")
    ]
    assert names == ["a", "b", "c"]
    in_team_a = projection.objects_of_kind(
        group="kaiwo.silogen.ai", kind="KaiwoJob", namespace="team-a"
    )
    assert [o["metadata"]["name"] for o in in_team_a] == ["a", "b"]


def test_missing_names_the_unobserved_manifests_sorted_and_without_uid() -> None:
    projection = Projection()
    projection.apply(observe(make_object("ConfigMap", "here", uid="cm-here"), "1"), sequence=1)
    desired = [
        make_object("Service", "web", uid="svc-planned"),
        make_object("ConfigMap", "here", uid=""),  # observed, under its own uid
        make_object("ConfigMap", "gone", uid=""),
        make_object("Job", "train", uid="", api_version="batch/v1", namespace="team-b"),
    ]

    assert projection.missing(desired) == (
        ObjectRef(api_version="batch/v1", kind="Job", name="train", namespace="team-b"),
        ObjectRef(api_version="v1", kind="ConfigMap", name="gone", namespace="team-a"),
        ObjectRef(api_version="v1", kind="Service", name="web", namespace="team-a"),
    )
    assert projection.missing([desired[1]]) == ()


def applied_queue(**spec_changes: Any) -> dict[str, Any]:
    """ClusterQueue ``q`` as the API server holds it after the operator's apply (Kueue's CRD
    defaults filled in), with ``spec_changes`` made by hand."""
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [
                    {"name": "fa", "resources": [{"name": "cpu", "nominalQuota": "10"}]},
                    {"name": "fb", "resources": [{"name": "cpu", "nominalQuota": "500m"}]},
                ],
            }
        ],
        "queueingStrategy": "BestEffortFIFO",
        "stopPolicy": "None",
        "preemption": {"borrowWithinCohort": {"policy": "Never"}, "reclaimWithinCohort": "Never"},
        **spec_changes,
    }
    return make_object(
        "ClusterQueue",
        "q",
        uid="cq-1",
        api_version="kueue.x-k8s.io/v1beta1",
        namespace=None,
        spec=spec,
    )


QUEUE_MANIFEST = make_object(
    "ClusterQueue",
    "q",
    uid="",  # taken out below: a manifest names no uid
    api_version="kueue.x-k8s.io/v1beta1",
    namespace=None,
    spec={
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [
                    {"name": "fa", "resources": [{"name": "cpu", "nominalQuota": 10}]},
                    {"name": "fb", "resources": [{"name": "cpu", "nominalQuota": "0.5"}]},
                ],
            }
        ],
    },
)
del QUEUE_MANIFEST["metadata"]["uid"]
QUEUE_REF = ObjectRef(api_version="kueue.x-k8s.io/v1beta1", kind="ClusterQueue", name="q")


def drifted_after(observed: dict[str, Any]) -> tuple[ObjectRef, ...]:
    projection = Projection()
    projection.apply(observe(observed, "2"), sequence=1)
    return projection.drifted([QUEUE_MANIFEST])


def test_a_kueue_queue_as_applied_has_not_drifted() -> None:
    assert drifted_after(applied_queue()) == ()


def test_a_kueue_queues_resource_groups_and_selector_edited_by_hand_have_drifted() -> None:
    # The apply sets these fields whole (atomic in Kueue's CRD): whatever else they hold, or
    # in another order, a resync's apply takes away again (0226).
    groups = applied_queue()["spec"]["resourceGroups"]
    reversed_flavors = [{**groups[0], "flavors": groups[0]["flavors"][::-1]}]
    more_quota = [
        {**groups[0], "flavors": [*groups[0]["flavors"], {"name": "zz", "resources": []}]}
    ]
    lending = copy.deepcopy(groups)
    lending[0]["flavors"][0]["resources"][0]["lendingLimit"] = "0"
    another_group = [*groups, {"coveredResources": ["memory"], "flavors": []}]
    for edit in (
        {"resourceGroups": reversed_flavors},
        {"resourceGroups": more_quota},
        {"resourceGroups": lending},
        {"resourceGroups": another_group},
        {"namespaceSelector": {"matchLabels": {"team": "x"}}},
    ):
        assert drifted_after(applied_queue(**edit)) == (QUEUE_REF,), edit


def test_a_field_the_operator_does_not_send_is_not_drift() -> None:
    # Its apply would not take another manager's cohort away (0226).
    assert drifted_after(applied_queue(cohort="someone-elses")) == ()


# ---------------------------------------------------------------- the ClusterState


def _populated() -> Projection:
    projection = Projection()
    for sequence, obj in enumerate(_objects(), start=1):
        projection.apply(observe(obj, str(sequence), "ADDED"), sequence=sequence)
    return projection


def _objects() -> list[dict[str, Any]]:
    return [
        node("node-b"),
        node("node-a", gpus=4),
        make_object("Namespace", "team-a", uid="ns-a", namespace=None),
        make_object("Namespace", "team-b", uid="ns-b", namespace=None),
        make_object(
            "Job",
            "train",
            uid=JOB_UID,
            api_version="batch/v1",
            labels={"kaiwo.silogen.ai/run-id": KAIWOJOB_UID},
        ),
        make_object(
            "Pod",
            "train-1",
            uid="pod-t1",
            owners=[JOB_UID],
            labels={"kaiwo.silogen.ai/run-id": KAIWOJOB_UID},
        ),
        make_object(
            "Pod",
            "train-0",
            uid="pod-t0",
            owners=[JOB_UID],
            labels={"kaiwo.silogen.ai/run-id": KAIWOJOB_UID},
        ),
        make_object("ConfigMap", "unrelated", uid="cm-1", labels={"app": "x"}),
        make_object(
            "Workload",
            "job-train-abc",
            uid="wl-1",
            api_version="kueue.x-k8s.io/v1beta1",
            labels={"kueue.x-k8s.io/job-uid": JOB_UID},
        ),
    ]


def test_the_cluster_state_sorts_and_indexes_what_was_observed() -> None:
    state = _populated().cluster_state()
    assert [n.name for n in state.nodes] == ["node-a", "node-b"]
    assert [n.gpu_count for n in state.nodes] == [4, 8]
    assert state.namespaces == frozenset({"team-a", "team-b"})
    assert len(state.index) == 9
    assert [c["metadata"]["name"] for c in state.children_of(JOB_UID)] == ["train-0", "train-1"]
    assert state.child_of(JOB_UID, kind="Pod", name="train-1") is not None
    assert [w["metadata"]["uid"] for w in state.kueue_workloads_for(JOB_UID)] == ["wl-1"]
    assert state.kueue_workloads_for("nobody") == ()
    labelled = state.objects_labelled("kaiwo.silogen.ai/run-id", KAIWOJOB_UID, kind="Pod")
    assert [p["metadata"]["name"] for p in labelled] == ["train-0", "train-1"]
    # Sorted by apiVersion, kind, namespace, name: batch/v1 Job before v1 Pods.
    every_kind = state.objects_labelled("kaiwo.silogen.ai/run-id", KAIWOJOB_UID)
    assert [o["metadata"]["name"] for o in every_kind] == ["train", "train-0", "train-1"]
    assert state.node("node-a") is not None
    assert state.has_namespace("team-b")
    assert state.namespace_of("pod-t0") == "team-a"
    assert state.namespace_of("ns-a") == ""
    assert state.namespace_of("nobody") is None


def test_the_cluster_state_answers_like_one_built_from_the_objects() -> None:
    projected = _populated().cluster_state()
    objects = _objects()
    nodes = [o for o in objects if o["kind"] == "Node"]
    others = [o for o in objects if o["kind"] not in ("Node", "Namespace")]
    fresh = ClusterState.from_wire(
        nodes=nodes, objects=list(reversed(others)), namespaces=["team-a", "team-b"]
    )

    def uids(found: tuple[Any, ...]) -> list[str]:
        return [o["metadata"]["uid"] for o in found]

    assert (projected.nodes, projected.namespaces) == (fresh.nodes, fresh.namespaces)
    assert uids(projected.children_of(JOB_UID)) == uids(fresh.children_of(JOB_UID))
    assert uids(projected.kueue_workloads_for(JOB_UID)) == uids(fresh.kueue_workloads_for(JOB_UID))
    for kind in (None, "Pod", "Job"):
        assert uids(
            projected.objects_labelled("kaiwo.silogen.ai/run-id", KAIWOJOB_UID, kind=kind)
        ) == uids(fresh.objects_labelled("kaiwo.silogen.ai/run-id", KAIWOJOB_UID, kind=kind))


def test_the_cluster_state_lists_only_the_kinds_and_labels_planning_asks_for() -> None:
    projection = _populated()
    later = make_object("KaiwoJob", "b", uid="kj-b", api_version="kaiwo.silogen.ai/v1alpha1")
    other = make_object("KaiwoJob", "a", uid="kj-a", api_version="kaiwo.silogen.ai/v1alpha1")
    projection.apply(observe(later, "50"), sequence=50)
    projection.apply(observe(other, "51"), sequence=51)
    state = projection.cluster_state()
    jobs = state.objects_of_kind(group="kaiwo.silogen.ai", kind="KaiwoJob")
    assert [j["metadata"]["name"] for j in jobs] == ["a", "b"]
    with pytest.raises(NotIndexedError):
        state.objects_of_kind(group="", kind="Pod")
    with pytest.raises(NotIndexedError):
        state.objects_labelled("app", "x")
    found = state.find_object(group="", kind="ConfigMap", name="unrelated", namespace="team-a")
    assert found is not None
    assert found["metadata"]["uid"] == "cm-1"
    assert state.find_object(group="", kind="ConfigMap", name="unrelated") is None


def test_the_cluster_state_follows_deletions_and_relabelling() -> None:
    projection = _populated()
    pod_0 = make_object("Pod", "train-0", uid="pod-t0", owners=[JOB_UID])
    projection.apply(observe(pod_0, "20"), sequence=20)  # the run-id label removed
    pod_1 = make_object("Pod", "train-1", uid="pod-t1", owners=[JOB_UID])
    projection.apply(observe(pod_1, "21", "DELETED"), sequence=21)
    state = projection.cluster_state()
    assert [c["metadata"]["name"] for c in state.children_of(JOB_UID)] == ["train-0"]
    labelled = state.objects_labelled("kaiwo.silogen.ai/run-id", KAIWOJOB_UID, kind="Pod")
    assert labelled == ()
    projection.apply(observe(node("node-a"), "22", "DELETED"), sequence=22)
    assert [n.name for n in projection.cluster_state().nodes] == ["node-b"]


def test_the_cluster_state_is_a_value_that_outlives_later_changes() -> None:
    projection = _populated()
    first = projection.cluster_state()
    assert projection.cluster_state() is first
    assert projection.apply(observe(POD, "1"), sequence=30) is not None
    second = projection.cluster_state()
    assert second is not first
    assert [c["metadata"]["name"] for c in second.children_of(JOB_UID)] == [
        "train-0",
        "train-1",
        "worker-0",
    ]
    # The earlier state still answers for the cluster it was taken from.
    assert [c["metadata"]["name"] for c in first.children_of(JOB_UID)] == ["train-0", "train-1"]
    # A stale observation changes nothing, so the state stays the same.
    assert projection.apply(observe(POD, "0"), sequence=31) is None
    assert projection.cluster_state() is second


# ---------------------------------------------------------------- snapshot


def test_a_snapshot_restores_exactly() -> None:
    projection = _populated()
    projection.apply(observe(POD, "40", "DELETED"), sequence=40)
    data = projection.snapshot()
    restored = Projection.restore(data)
    assert restored.snapshot() == data
    assert restored.last_sequence == 40
    assert len(restored) == len(projection) == 9
    assert restored.objects.tombstone_count == 1
    # The tombstone still drops a late, older version after the restart.
    assert restored.apply(observe(POD, "39"), sequence=41) is None
    state = restored.cluster_state()
    assert [c["metadata"]["name"] for c in state.children_of(JOB_UID)] == ["train-0", "train-1"]
    assert [n.name for n in state.nodes] == ["node-a", "node-b"]


def test_restoring_something_else_fails_clearly() -> None:
    with pytest.raises(SnapshotFormatError):
        Projection.restore(b"not json")
    with pytest.raises(SnapshotFormatError):
        Projection.restore(b'{"format": 99}')
    with pytest.raises(SnapshotFormatError):
        Projection.restore(b'{"format": 1, "lastSequence": 3}')


# ------------------------------------------------------------------ observed again (0038)


def test_a_reobserved_object_replaces_a_forged_version_that_looked_newer() -> None:
    projection = Projection()
    real = make_object("KaiwoJob", "train", uid=KAIWOJOB_UID, spec={"image": "busybox"})
    forged = make_object("KaiwoJob", "train", uid=KAIWOJOB_UID, spec={"image": "evil/miner"})
    projection.apply(observe(real, "10"), sequence=1)
    projection.apply(observe(forged, "999999"), sequence=2)
    # The real version is older than the forged one claims: an ordinary observation of it
    # is dropped as stale ...
    assert projection.apply(observe(real, "10"), sequence=3) is None
    # ... but read again on the executor's request, it is taken in.
    again = observe(real, "10").model_copy(update={"reobserved": True})

    change = projection.apply(again, sequence=4)

    assert change is not None
    found = projection.by_uid(KAIWOJOB_UID)
    assert found is not None and found["spec"] == {"image": "busybox"}
    # Taken in once: the same again changes nothing.
    assert projection.apply(again, sequence=5) is None
    # And later ordinary versions follow as usual.
    later = make_object("KaiwoJob", "train", uid=KAIWOJOB_UID, spec={"image": "busybox:2"})
    assert projection.apply(observe(later, "11"), sequence=6) is not None


def test_a_reobserved_deletion_removes_an_owner_the_api_server_does_not_hold() -> None:
    projection = Projection()
    ghost = make_object("KaiwoJob", "ghost", uid="forged-uid", spec={})
    projection.apply(observe(ghost, "999999"), sequence=1)
    deleted = observe(ghost, "12", "DELETED").model_copy(update={"reobserved": True})

    assert projection.apply(deleted, sequence=2) is not None
    assert projection.by_uid("forged-uid") is None
