"""Which kinds the watcher follows, with which selectors."""

from __future__ import annotations

from kaiwo_kube import resources
from kaiwo_planner.domain.children import labels as planner_labels
from kaiwo_watcher import watch_list
from kaiwo_watcher.watch_list import DEFAULT_WATCH_LIST, WatchTarget
from kaiwo_watcher.watch_state import watch_streams

MANAGED = "app.kubernetes.io/managed-by=kaiwo"


def selectors() -> dict[str, str | None]:
    return {s.key: s.target.label_selector for s in watch_streams(DEFAULT_WATCH_LIST)}


def test_every_served_kind_is_watched_whole_and_correlates_with_itself():
    served = [t for t in DEFAULT_WATCH_LIST if t.workload]
    assert [t.kind for t in served] == [
        "KaiwoJob",
        "KaiwoService",
        "KaiwoQueueConfig",
        "KaiwoConfig",
        "AIMNamespaceConfig",
        "Model",
        "GpuWorkload",
    ]
    assert all(t.label_selector is None for t in served)
    assert served[0].resource == resources.KAIWO_JOB
    assert served[5].resource == resources.KUBEAI_MODEL


def test_children_and_managed_kueue_objects_are_filtered_by_the_managed_by_label():
    found = selectors()
    for resource in (
        resources.JOB,
        resources.DEPLOYMENT,
        resources.RAY_JOB,
        resources.APP_WRAPPER,
        resources.PERSISTENT_VOLUME_CLAIM,
        resources.CONFIG_MAP,
        resources.SERVICE,
        resources.HTTP_ROUTE,
        resources.ROLE,
        resources.ROLE_BINDING,
        resources.KUEUE_RESOURCE_FLAVOR,
        resources.KUEUE_CLUSTER_QUEUE,
        resources.KUEUE_LOCAL_QUEUE,
        resources.KUEUE_TOPOLOGY,
    ):
        assert found[str(resource)] == MANAGED, resource


def test_pods_and_ray_services_by_run_id_and_workloads_nodes_namespaces_priority_classes_whole():
    found = selectors()
    assert found["pods"] == "kaiwo.silogen.ai/run-id"
    # The AppWrapper controller makes a Ray service's RayService from the workload's
    # labels, without the managed-by label (decision 0185), in a stream of its own.
    assert found["rayservices.ray.io/v1#run-id"] == "kaiwo.silogen.ai/run-id"
    assert "rayservices.ray.io/v1" not in found
    # The Pods the operator makes itself (a Model's), in a stream of their own.
    assert found["pods#owned"] == "app.kubernetes.io/managed-by=kaiwo,kaiwo.silogen.ai/owner-uid"
    assert found["workloads.kueue.x-k8s.io/v1beta1"] is None
    assert found["nodes"] is None
    assert found["namespaces"] is None
    # A workload's priorityClass may name one a platform team made (decision 0045).
    assert found["priorityclasses.scheduling.k8s.io/v1"] is None
    assert found["workloadpriorityclasses.kueue.x-k8s.io/v1beta1"] is None
    # Quota is lent across a Kueue cohort tree (decision 0271).
    assert found["cohorts.kueue.x-k8s.io/v1beta1"] is None
    # A route serves only through a programmed Gateway, anyone's (decision 0273).
    assert found["gateways.gateway.networking.k8s.io/v1"] is None
    # Nothing the operator does not need: no Secrets, Events, Leases.
    assert "secrets" not in found
    assert "events" not in found
    assert len(DEFAULT_WATCH_LIST) == 7 + 10 + 1 + 2 + 1 + 1 + 4 + 3 + 1 + 1 + 2 + 1 + 6 + 1 + 1


def test_the_roots_of_gpu_workloads_come_in_streams_of_their_own():
    found = selectors()
    # Pods no controller made: none with the labels the Job, ReplicaSet, StatefulSet and
    # KubeRay controllers or the operator put on theirs.
    assert found["pods#gpu"] == (
        "!pod-template-hash,!controller-revision-hash,!batch.kubernetes.io/controller-uid,"
        "!controller-uid,!ray.io/node-type,!kaiwo.silogen.ai/run-id,!kaiwo.silogen.ai/owner-uid"
    )
    for key in (
        "jobs.batch/v1#gpu",
        "deployments.apps/v1#gpu",
        "statefulsets.apps/v1#gpu",
        "rayjobs.ray.io/v1#gpu",
        "rayclusters.ray.io/v1#gpu",
    ):
        assert found[key] == "!kaiwo.silogen.ai/owner-uid", key
    gpu = [t for t in DEFAULT_WATCH_LIST if t.stream in ("gpu", "waiting-gpu")]
    assert all(t.accept is not None for t in gpu)
    assert all(t.accept is None for t in DEFAULT_WATCH_LIST if t not in gpu)


def test_pods_waiting_for_gpus_come_unbound_and_not_the_operators():
    """Decision 0066: the kube-scheduler's own selection (pods no node was chosen for), the
    operator's pods left out; the API server filters, the watcher publishes only the waiting
    pods of Jobs, ReplicaSets and StatefulSets."""
    [waiting] = [t for t in DEFAULT_WATCH_LIST if t.stream == "waiting-gpu"]
    assert waiting.resource == resources.POD
    assert waiting.field_selector == "spec.nodeName=,status.phase=Pending"
    assert waiting.label_selector == "!kaiwo.silogen.ai/run-id,!kaiwo.silogen.ai/owner-uid"
    others = [t for t in DEFAULT_WATCH_LIST if t is not waiting]
    assert [t.field_selector for t in others] == [None] * (len(DEFAULT_WATCH_LIST) - 1)


def test_label_keys_agree_with_the_planner():
    assert watch_list.LABEL_MANAGED_BY == planner_labels.LABEL_MANAGED_BY
    assert watch_list.MANAGED_BY_KAIWO == planner_labels.MANAGED_BY_KAIWO
    assert watch_list.LABEL_OWNER_UID == planner_labels.LABEL_OWNER_UID
    assert watch_list.LABEL_RUN_ID == planner_labels.LABEL_RUN_ID


def test_namespaces_split_namespaced_kinds_only():
    targets = (WatchTarget(resource=resources.KAIWO_JOB), WatchTarget(resource=resources.NODE))
    streams = watch_streams(targets, ("team-a", "team-b", "team-a"))
    assert [s.key for s in streams] == [
        "kaiwojobs.kaiwo.silogen.ai/v1alpha1@team-a",
        "kaiwojobs.kaiwo.silogen.ai/v1alpha1@team-b",
        "nodes",
    ]
    assert [s.key for s in watch_streams(targets)] == [
        "kaiwojobs.kaiwo.silogen.ai/v1alpha1",
        "nodes",
    ]


def test_the_models_configuration_is_read_in_the_operators_namespace_only():
    streams = watch_streams(watch_list.default_watch_list("ops"), ("team-a", "team-b"))
    config = [s for s in streams if s.target.stream == "system-config"]
    assert [(s.key, s.target.label_selector) for s in config] == [
        ("configmaps#system-config@ops", "kaiwo.silogen.ai/system-config=models")
    ]
    # The label keys agree with the contracts the planner reads it by.
    from kaiwo_contracts.models_config import CONFIG_MAP_LABEL, CONFIG_MAP_LABEL_VALUE

    assert f"{CONFIG_MAP_LABEL}={CONFIG_MAP_LABEL_VALUE}" == watch_list.MODELS_CONFIG_SELECTOR


def test_the_operators_namespace_is_the_service_accounts(tmp_path):
    from kaiwo_watcher.settings import own_namespace

    found = tmp_path / "namespace"
    assert own_namespace(found) == "kaiwo-system"
    found.write_text("operators\n")
    assert own_namespace(found) == "operators"


def test_everyone_elses_local_and_cluster_queues_come_in_a_stream_of_their_own():
    """Kueue counts a GPU workload no Kaiwo kind owns in the ClusterQueue of the LocalQueue its
    label names, and lends within that ClusterQueue's cohort: idle preemption reads both, for
    queues anyone made (decision 0270), and the node labels of their flavors (decision 0283).
    A LocalQueue named ``default`` is among them (Kueue puts a job made without a queue label
    there, decision 0159). Not the old stream of those named ``default`` only, whose
    checkpoint would miss the others."""
    users = [t for t in DEFAULT_WATCH_LIST if t.stream == "users"]
    assert [(t.resource, t.label_selector, t.field_selector) for t in users] == [
        (resources.KUEUE_LOCAL_QUEUE, "app.kubernetes.io/managed-by!=kaiwo", None),
        (resources.KUEUE_CLUSTER_QUEUE, "app.kubernetes.io/managed-by!=kaiwo", None),
        (resources.KUEUE_RESOURCE_FLAVOR, "app.kubernetes.io/managed-by!=kaiwo", None),
    ]
    assert [t for t in DEFAULT_WATCH_LIST if t.stream == "default-queue"] == []
