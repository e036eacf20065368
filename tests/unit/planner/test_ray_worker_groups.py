"""A user-given Ray cluster with several worker groups (decision 0146): Kaiwo sizes every
group alike (upstream, and the API reference: ``replicas`` sets
``workerGroupSpecs[].replicas``), so the workload holds the split once per group; the
Schedulable check, the counts and the kept split read every group, not the first. Expected
values by hand, on four 8-GPU MI300X nodes (32 GPUs) unless said."""

from __future__ import annotations

from typing import Any

from kaiwo_planner.domain.scheduling.gpu_allocation import (
    SPLIT_MADE_FROM_ANNOTATION,
    GpuAllocation,
    GpuStats,
    allocated_gpus,
    child_split,
    keep_running_split,
)

from tests.planning_calls import planned
from tests.unit.planner.test_planning import (
    NOW,
    TRAIN_SPEC,
    condition,
    four_eight_gpu_nodes,
    gpu_env,
    kaiwo_job,
    kaiwo_service,
)

EIGHT_GPU_NODES = GpuStats(
    vendor="amd",
    total_gpus=32,
    min_gpus_per_node=8,
    total_allocatable_gpus=32,
    min_allocatable_gpus_per_node=8,
    max_gpus_per_node=8,
)


def nodes_of_eight(_: str) -> GpuStats:
    return EIGHT_GPU_NODES


# A 4-GPU node joined two 8-GPU nodes: the nodes of now split 16 into 4 x 4.
MIXED_NODES = GpuStats(
    vendor="amd",
    total_gpus=20,
    min_gpus_per_node=4,
    total_allocatable_gpus=20,
    min_allocatable_gpus_per_node=4,
    max_gpus_per_node=8,
)


def worker_template(container: str, gpus: int | str | None = None) -> dict[str, Any]:
    limits: dict[str, Any] = {"memory": "8Gi"}
    if gpus is not None:
        limits["amd.com/gpu"] = gpus
    return {"spec": {"containers": [{"name": container, "resources": {"limits": limits}}]}}


def two_group_cluster() -> dict[str, Any]:
    """A trainer group and an evaluator group, each sized by the user differently."""
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": worker_template("head")},
        "workerGroupSpecs": [
            {
                "groupName": "trainers",
                "replicas": 5,
                "minReplicas": 5,
                "maxReplicas": 5,
                "rayStartParams": {},
                "template": worker_template("trainer", 1),
            },
            {
                "groupName": "evaluators",
                "replicas": 1,
                "minReplicas": 0,
                "maxReplicas": 3,
                "rayStartParams": {},
                "template": worker_template("evaluator"),
            },
        ],
    }


def two_group_job(gpus: int) -> dict[str, Any]:
    return kaiwo_job(
        {
            **TRAIN_SPEC,
            "gpus": gpus,
            "ray": True,
            "rayJob": {"spec": {"rayClusterSpec": two_group_cluster()}},
        }
    )


# ------------------------------------------------------------------ what the plan writes


def test_every_worker_group_runs_the_split_and_the_workload_is_told_it_holds_each(make_node):
    """``gpus: 16`` on 8-GPU nodes is 2 x 8 in each of the two groups: 32 GPUs, which the
    Schedulable condition says (before: "sufficient" and nothing more, as if 16)."""
    owner = two_group_job(16)

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["reason"], schedulable["message"]) == (
        "True",
        "Schedulable",
        "Cluster has sufficient GPU resources: each of the 2 worker groups of the Ray cluster "
        "runs 2 replicas of 8 GPUs (spec.replicas and the GPU fields size every group), so "
        "the workload holds 32 GPUs",
    )
    (ray_job,) = plan.desired
    trainers, evaluators = ray_job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    for group, container in ((trainers, "trainer"), (evaluators, "evaluator")):
        assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (2, 2, 2)
        [main] = group["template"]["spec"]["containers"]
        assert main["name"] == container
        assert main["resources"]["limits"]["amd.com/gpu"] == "8"
        # The env speaks of one group's split, as upstream's did.
        assert gpu_env(main) == {"NUM_GPUS": "16", "NUM_REPLICAS": "2", "NUM_GPUS_PER_REPLICA": "8"}
    # The user's own sizes of both groups are replaced, and said so; so are the trainers'
    # GPU limit and the evaluators' none (decision 0154).
    sizes, gpus = [e.message for e in plan.events if e.reason == "SettingsIgnored"]
    assert sizes == (
        "spec.rayJob.spec.rayClusterSpec: workerGroupSpecs[0].replicas (5), "
        "workerGroupSpecs[0].minReplicas (5), workerGroupSpecs[0].maxReplicas (5), "
        "workerGroupSpecs[1].replicas (1), workerGroupSpecs[1].minReplicas (0), "
        "workerGroupSpecs[1].maxReplicas (3) are replaced by 2, from spec.replicas (default 1) "
        "and spec.gpus, which set every worker group's replicas, minReplicas and maxReplicas; "
        "set spec.replicas instead"
    )
    assert gpus == (
        "spec.rayJob.spec.rayClusterSpec.workerGroupSpecs[0].template.spec.containers[0]"
        '.resources.limits["amd.com/gpu"] (1), '
        "spec.rayJob.spec.rayClusterSpec.workerGroupSpecs[1].template.spec.containers[0]"
        '.resources.limits["amd.com/gpu"] (not set) are replaced by 8, from spec.gpus, '
        "spec.gpusPerReplica and spec.gpuVendor, which give every worker group's pods the "
        "same GPUs (no group runs without them); set those fields instead"
    )


def test_worker_groups_that_together_pass_the_cluster_are_refused(make_node):
    """``gpus: 24`` is 3 x 8 per group: 48 GPUs on a 32-GPU cluster never fit (before: the
    check counted 24, and a RayJob was made that Kueue could never admit)."""
    owner = two_group_job(24)

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["reason"], schedulable["message"]) == (
        "False",
        "InsufficientGPUs",
        "Cluster has 32 GPUs, but requested for 48 GPUs (vendor: amd): each of the 2 worker "
        "groups of the Ray cluster runs 3 replicas of 8 GPUs (spec.replicas and the GPU fields "
        "size every group), so the workload holds 48 GPUs",
    )
    assert plan.desired == ()


def test_one_worker_group_reads_as_before(make_node):
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 16, "ray": True})

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    assert condition(plan, "Schedulable")["message"] == "Cluster has sufficient GPU resources"


# ------------------------------------------------------------------ what is counted


def wire_job(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "KaiwoJob",
        "metadata": {"name": "train", "namespace": "team-a", "uid": "job-uid"},
        "spec": {"gpus": 16, "gpuVendor": "amd", **spec},
    }


def wire_service(spec: dict[str, Any]) -> dict[str, Any]:
    return {**wire_job(spec), "kind": "KaiwoService"}


def test_the_gpus_held_are_counted_in_every_worker_group() -> None:
    """What preemption, GPU idle preemption and ``kaiwo gpus`` count (decision 0118)."""
    nodes = nodes_of_eight
    two_groups = {"spec": {"rayClusterSpec": two_group_cluster()}}
    assert allocated_gpus(wire_job({"rayJob": two_groups}), nodes) == 32
    service_groups = {"spec": {"rayClusterConfig": two_group_cluster()}}
    assert allocated_gpus(wire_service({"rayService": service_groups}), nodes) == 32
    # Kaiwo's own cluster has one group.
    assert allocated_gpus(wire_job({"ray": True}), nodes) == 16
    # A RayJob sent to an existing cluster (no rayClusterSpec) makes no GPU pods.
    selector = {"spec": {"clusterSelector": {"ray.io/cluster": "shared"}}}
    assert allocated_gpus(wire_job({"rayJob": selector}), nodes) == 0
    # Not Ray: the split once.
    assert allocated_gpus(wire_service({"rayService": None, "replicas": 2}), nodes) == 16


def running_ray_job(groups: list[tuple[int, int]]) -> dict[str, Any]:
    """A RayJob Kaiwo made from ``gpus: 16`` that runs, a group per (replicas, GPUs)."""
    return {
        "kind": "RayJob",
        "metadata": {
            "name": "train",
            "annotations": {SPLIT_MADE_FROM_ANNOTATION: "16"},
            "ownerReferences": [{"uid": "job-uid", "controller": True}],
        },
        "spec": {
            "suspend": False,
            "rayClusterSpec": {
                "headGroupSpec": {"template": worker_template("head")},
                "workerGroupSpecs": [
                    {"replicas": replicas, "template": worker_template("w", gpus)}
                    for replicas, gpus in groups
                ],
            },
        },
    }


def test_a_running_cluster_keeps_its_split_in_every_group_and_is_counted_so() -> None:
    """Made 2 x 8 per group on 8-GPU nodes; a 4-GPU node joined (the nodes would make 4 x 4):
    both groups keep 2 x 8, 32 GPUs (before: 16, one group's)."""
    child = running_ray_job([(2, 8), (2, 8)])
    workload = wire_job({"rayJob": {"spec": {"rayClusterSpec": two_group_cluster()}}})
    assert child_split(child, "amd.com/gpu") == (2, 8)
    assert allocated_gpus(workload, lambda _: MIXED_NODES, running_child=child) == 32


def test_a_running_cluster_counts_the_groups_it_runs_not_those_edited_into_the_spec() -> None:
    """A running RayJob keeps its cluster as observed (decision 0123): one group runs, even
    when the spec gives two since."""
    child = running_ray_job([(2, 8)])
    workload = wire_job({"rayJob": {"spec": {"rayClusterSpec": two_group_cluster()}}})
    assert allocated_gpus(workload, nodes_of_eight, running_child=child) == 16


def test_a_group_edited_by_hand_is_no_split_to_keep() -> None:
    """The second group scaled to 1 x 8 by hand: the first group alone said 2 x 8 (kept, as if
    every group ran it); the groups disagree, so the nodes of now split it, as 0137 does for
    a Deployment scaled by hand."""
    child = running_ray_job([(2, 8), (1, 8)])
    assert child_split(child, "amd.com/gpu") is None
    by_nodes = GpuAllocation(gpus=16, gpus_per_replica=4, replicas=4, vendor="amd")
    assert keep_running_split(by_nodes, asked=16, child=child, runs=True) is by_nodes


# ------------------------------------------------------------------ a cluster with no worker


def head_only_cluster() -> dict[str, Any]:
    return {"headGroupSpec": {"rayStartParams": {}, "template": worker_template("ray-head")}}


def test_a_given_cluster_without_workers_runs_the_gpus_in_kaiwos_group(make_node):
    """The example ``kaiwojob-ray.yaml`` gives the head and Ray settings only, and says "4
    GPU workers": they run in Kaiwo's default group (before: a head alone, 16 GPUs asked
    for and none held)."""
    spec = {
        "rayJob": {
            "spec": {"shutdownAfterJobFinishes": True, "rayClusterSpec": head_only_cluster()}
        }
    }
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 16, "replicas": 4, "gpusPerReplica": 4, **spec})

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    (ray_job,) = plan.desired
    [workers] = ray_job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert (workers["groupName"], workers["replicas"], workers["maxReplicas"]) == (
        "default-worker-group",
        4,
        4,
    )
    [worker] = workers["template"]["spec"]["containers"]
    assert (worker["name"], worker["resources"]["limits"]["amd.com/gpu"]) == ("ray-worker", "4")
    assert (
        allocated_gpus(wire_job({**spec, "replicas": 4, "gpusPerReplica": 4}), nodes_of_eight) == 16
    )


def test_a_given_cluster_without_workers_or_gpus_runs_its_head_alone(make_node):
    spec = {
        "rayJob": {
            "spec": {"shutdownAfterJobFinishes": True, "rayClusterSpec": head_only_cluster()}
        }
    }
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 0, **spec})

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    (ray_job,) = plan.desired
    assert "workerGroupSpecs" not in ray_job["spec"]["rayClusterSpec"]


# ------------------------------------------------------------------ multi-host groups


def multi_host_cluster(*hosts: int) -> dict[str, Any]:
    """A head and a worker group per entry of ``hosts``, its ``numOfHosts``."""
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": worker_template("ray-head")},
        "workerGroupSpecs": [
            {
                "groupName": f"g{index}",
                "replicas": 1,
                "numOfHosts": count,
                "rayStartParams": {},
                "template": worker_template(f"w{index}"),
            }
            for index, count in enumerate(hosts)
        ],
    }


def multi_host_job(gpus: int, *hosts: int) -> dict[str, Any]:
    return kaiwo_job(
        {
            **TRAIN_SPEC,
            "gpus": gpus,
            "rayJob": {"spec": {"rayClusterSpec": multi_host_cluster(*hosts)}},
        }
    )


def test_a_multi_host_group_holds_the_split_on_every_host_and_says_so(make_node):
    """``gpus: 8`` is 1 x 8; with ``numOfHosts: 2`` KubeRay runs the replica on 2 pods of 8
    and Kueue reserves 16 (measured, decision 0151): the condition says 16 (before: only
    "sufficient", as if 8), and the pods' env counts both hosts (before: 8 GPUs, 1 replica)."""
    owner = multi_host_job(8, 2)

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    assert condition(plan, "Schedulable")["message"] == (
        "Cluster has sufficient GPU resources: the worker group of the Ray cluster runs "
        "1 replica of 2 hosts (numOfHosts) with 8 GPUs each, so the workload holds 16 GPUs"
    )
    (ray_job,) = plan.desired
    cluster = ray_job["spec"]["rayClusterSpec"]
    [group] = cluster["workerGroupSpecs"]
    assert (group["replicas"], group["numOfHosts"]) == (1, 2)
    [worker] = group["template"]["spec"]["containers"]
    assert worker["resources"]["limits"]["amd.com/gpu"] == "8"
    assert gpu_env(worker) == {"NUM_GPUS": "16", "NUM_REPLICAS": "2", "NUM_GPUS_PER_REPLICA": "8"}
    [head] = cluster["headGroupSpec"]["template"]["spec"]["containers"]
    assert gpu_env(head) == {"NUM_GPUS": "16", "NUM_REPLICAS": "2", "NUM_GPUS_PER_REPLICA": "8"}


def test_multi_host_groups_that_together_pass_the_cluster_are_refused(make_node):
    """``gpus: 8`` in a group of 2 hosts and one of 3: 40 GPUs on 32 never fit."""
    owner = multi_host_job(8, 2, 3)

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["message"]) == (
        "False",
        "Cluster has 32 GPUs, but requested for 40 GPUs (vendor: amd): each of the 2 worker "
        "groups of the Ray cluster runs 1 replica of 8 GPUs (spec.replicas and the GPU fields "
        "size every group), every replica on numOfHosts pods (2, 3 by group), so the workload "
        "holds 40 GPUs",
    )
    assert plan.desired == ()


def test_the_gpus_held_count_every_host() -> None:
    """What preemption, GPU idle preemption, ``kaiwo gpus`` and ``kaiwo plan`` count."""
    hosts = {"spec": {"rayClusterSpec": multi_host_cluster(2)}}
    assert allocated_gpus(wire_job({"rayJob": hosts}), nodes_of_eight) == 32
    service = {"spec": {"rayClusterConfig": multi_host_cluster(2, 1)}}
    assert allocated_gpus(wire_service({"rayService": service}), nodes_of_eight) == 48
    # A running child's hosts count, not the spec's.
    child = running_ray_job([(2, 8)])
    child["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["numOfHosts"] = 3
    workload = wire_job({"rayJob": {"spec": {"rayClusterSpec": multi_host_cluster(1)}}})
    assert allocated_gpus(workload, nodes_of_eight, running_child=child) == 48


def test_a_ray_job_without_a_cluster_is_told_it_runs_kaiwos(make_node):
    """``rayJob: {}`` gets Kaiwo's default cluster (decision 0151), and the condition says so."""
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 8, "rayJob": {}})

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    assert condition(plan, "Schedulable")["message"] == (
        "Cluster has sufficient GPU resources; spec.rayJob.spec gives no Ray cluster (neither "
        "rayClusterSpec nor clusterSelector), so the RayJob runs Kaiwo's default cluster: one "
        "head and the worker group default-worker-group, sized by spec.replicas and the GPU "
        "fields"
    )
    (ray_job,) = plan.desired
    [group] = ray_job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert group["groupName"] == "default-worker-group"


def test_a_ray_service_without_a_cluster_is_told_it_runs_kaiwos(make_node):
    """A ``rayService.spec`` with the Serve applications and no ``rayClusterConfig`` gets
    Kaiwo's default cluster (decision 0154), and the condition says so, as for a RayJob."""
    owner = kaiwo_service(
        {**TRAIN_SPEC, "gpus": 8, "rayService": {"spec": {"serveConfigV2": "applications: []"}}}
    )

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    assert condition(plan, "Schedulable")["message"] == (
        "Cluster has sufficient GPU resources; spec.rayService.spec gives no Ray cluster (no "
        "rayClusterConfig), so the RayService runs Kaiwo's default cluster: one head and the "
        "worker group default-worker-group, sized by spec.replicas and the GPU fields"
    )
    (wrapper,) = plan.desired
    ray_service = wrapper["spec"]["components"][0]["template"]
    [group] = ray_service["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert group["groupName"] == "default-worker-group"
    assert ray_service["spec"]["serveConfigV2"] == "applications: []"


def test_a_ray_service_with_its_cluster_is_not_told_of_kaiwos(make_node):
    spec = {"spec": {"rayClusterConfig": two_group_cluster()}}
    owner = kaiwo_service({**TRAIN_SPEC, "gpus": 8, "rayService": spec})

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    assert "Kaiwo's default cluster" not in condition(plan, "Schedulable")["message"]


def test_a_ray_job_that_keeps_its_cluster_is_refused_naming_the_field(make_node):
    """``shutdownAfterJobFinishes: false``, the user's: Kueue's webhook would refuse the
    RayJob for good, quoting the RayJob's field; the KaiwoJob is invalid instead, naming the
    user's field, and nothing is made (decision 0151)."""
    owner = kaiwo_job(
        {**TRAIN_SPEC, "gpus": 8, "rayJob": {"spec": {"shutdownAfterJobFinishes": False}}}
    )

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    valid = condition(plan, "Valid")
    assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec")
    assert valid["message"] == (
        "The spec is invalid, nothing was changed: spec.rayJob: spec."
        "shutdownAfterJobFinishes must not be false: Kaiwo queues the RayJob in Kueue, which "
        "admits a RayJob only when its Ray cluster is deleted after the job finishes; leave "
        "the field out (Kaiwo sets true) or set true"
    )
    assert plan.desired == ()


# ------------------------------------------------------- a RayJob on an existing cluster (0156)

ON_SHARED = {"spec": {"clusterSelector": {"ray.io/cluster": "shared"}}}
SHARED_NOTE = (
    "spec.rayJob.spec.clusterSelector sends the RayJob to the existing Ray cluster shared, "
    "whose pods run it: the workload holds no GPUs of its own (spec.gpus, "
    "spec.gpusPerReplica and spec.replicas size nothing) and is not queued in Kueue, which "
    "queues the cluster's pods with the cluster"
)


def test_a_ray_job_on_an_existing_cluster_holds_no_gpus_and_is_told(make_node):
    """``gpus: 8`` left on a KaiwoJob whose RayJob runs on the cluster ``shared``: its pods
    are the cluster's, so it holds none and the condition says so; the RayJob is made
    unqueued and not suspended (decision 0156)."""
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 8, "rayJob": ON_SHARED})

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["reason"]) == ("True", "Schedulable")
    assert schedulable["message"] == f"Workload does not require GPU resources; {SHARED_NOTE}"
    (ray_job,) = plan.desired
    assert ray_job["spec"]["clusterSelector"] == {"ray.io/cluster": "shared"}
    assert ray_job["spec"]["suspend"] is False
    assert "kueue.x-k8s.io/queue-name" not in ray_job["metadata"]["labels"]
    assert "rayClusterSpec" not in ray_job["spec"]


def test_a_ray_job_on_an_existing_cluster_runs_where_its_vendor_has_no_gpus(make_node):
    """``gpuVendor: nvidia`` on a cluster of AMD nodes: the workload holds no GPUs, so it is
    not refused for the vendor's missing GPUs (before: ERROR, NoGPUs, and no RayJob)."""
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 8, "gpuVendor": "nvidia", "rayJob": ON_SHARED})

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["reason"]) == ("True", "Schedulable")
    (ray_job,) = plan.desired
    assert ray_job["kind"] == "RayJob"


def test_a_ray_job_on_an_existing_cluster_runs_whatever_queue_or_priority_it_names(make_node):
    """The RayJob is not queued in Kueue (decision 0156), so a ``clusterQueue`` the
    KaiwoQueueConfig does not define, or a ``priorityClass`` that names nothing, keeps it from
    nothing: it is made and runs on ``shared``. Before, it went ERROR (``ClusterQueueNotFound``,
    ``PriorityClassNotFound``) for a queue and a class it would never use."""
    for setting in ({"clusterQueue": "nowhere"}, {"priorityClass": "nothing-of-that-name"}):
        owner = kaiwo_job({**TRAIN_SPEC, "gpus": 8, "rayJob": ON_SHARED, **setting})

        plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

        assert plan is not None
        schedulable = condition(plan, "Schedulable")
        assert (schedulable["status"], schedulable["reason"]) == ("True", "Schedulable"), setting
        assert schedulable["message"] == f"Workload does not require GPU resources; {SHARED_NOTE}"
        (ray_job,) = plan.desired
        assert "kueue.x-k8s.io/queue-name" not in ray_job["metadata"]["labels"]
        assert "kueue.x-k8s.io/priority-class" not in ray_job["metadata"]["labels"]


DEFAULT_QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "LocalQueue",
    "metadata": {"name": "default", "namespace": "team-a", "uid": "lq-default"},
    "spec": {"clusterQueue": "default"},
}


def test_a_ray_job_on_an_existing_cluster_waits_while_its_namespace_has_a_default_queue(
    make_node,
):
    """Kueue's webhook gives a job made without a queue label the namespace's LocalQueue
    ``default`` and suspends it, and KubeRay fails a suspended RayJob on an existing cluster
    for good (measured on the real stack, decision 0159). So beside a LocalQueue ``default``
    the RayJob is not made: the KaiwoJob is in ERROR, Schedulable False, naming the field,
    the namespace and the LocalQueue; without one, it is made as before."""
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 8, "rayJob": ON_SHARED})
    cluster = four_eight_gpu_nodes(make_node, owner, DEFAULT_QUEUE)

    plan = planned(owner=owner, cluster=cluster, now=NOW)

    assert plan is not None and plan.status is not None
    assert plan.status["status"] == "ERROR"
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["reason"]) == ("False", "DefaultLocalQueue")
    assert schedulable["message"] == (
        "spec.rayJob.spec.clusterSelector sends the RayJob to an existing Ray cluster, which "
        "Kueue does not queue, but namespace 'team-a' has a Kueue LocalQueue named "
        "'default': Kueue gives every RayJob made there without a queue that queue and "
        "suspends it, and KubeRay fails a suspended RayJob on an existing cluster for good. "
        "The RayJob is made once no LocalQueue 'default' is left in the namespace (Kaiwo "
        "makes one for a ClusterQueue named 'default' in the KaiwoQueueConfig), or run the "
        "job in another namespace"
    )
    assert [d["kind"] for d in plan.desired] == []
    # A RayJob with a cluster of its own is queued by its label as before: made.
    own = kaiwo_job({**TRAIN_SPEC, "gpus": 8, "ray": True})
    plan = planned(owner=own, cluster=four_eight_gpu_nodes(make_node, own, DEFAULT_QUEUE), now=NOW)
    assert plan is not None
    assert [d["kind"] for d in plan.desired] == ["RayJob"]


def test_a_ray_job_running_on_an_existing_cluster_is_kept_when_a_default_queue_comes(make_node):
    """A RayJob made before the LocalQueue ``default`` came is not Kueue's (its webhook
    labels a job when it is created): it runs on, and the KaiwoJob is not put in ERROR."""
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 8, "rayJob": ON_SHARED})
    made = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)
    assert made is not None
    (ray_job,) = made.desired
    running = {
        **ray_job,
        "metadata": {**ray_job["metadata"], "uid": "rayjob-uid", "resourceVersion": "9"},
        "status": {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"},
    }
    cluster = four_eight_gpu_nodes(make_node, owner, DEFAULT_QUEUE, running)

    plan = planned(owner=owner, cluster=cluster, now=NOW)

    assert plan is not None
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["reason"]) == ("True", "Schedulable")
    assert [d["kind"] for d in plan.desired] == ["RayJob"]


def test_a_ray_job_on_an_existing_cluster_carries_no_split_mark(make_node):
    """``gpus: 8`` on 8-GPU nodes would be split by node size and marked so on the child
    (decision 0137), but a RayJob on an existing cluster has no pods of its own: nothing is
    split, so it is not marked (decision 0159; before, it carried the mark ``8``)."""
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 8, "rayJob": ON_SHARED})

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    (ray_job,) = plan.desired
    assert SPLIT_MADE_FROM_ANNOTATION not in (ray_job["metadata"].get("annotations") or {})


def test_a_running_ray_job_on_an_existing_cluster_keeps_the_mark_it_was_made_with(make_node):
    """A RayJob made by an earlier operator with the mark runs on as it is: the update of a
    running RayJob keeps the mark it observes, so the plan does not rewrite it (nothing to
    fight over; decision 0159)."""
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 8, "rayJob": ON_SHARED})
    made = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)
    assert made is not None
    (ray_job,) = made.desired
    metadata = {
        **ray_job["metadata"],
        "uid": "rayjob-uid",
        "resourceVersion": "9",
        "annotations": {SPLIT_MADE_FROM_ANNOTATION: "8"},
    }
    running = {**ray_job, "metadata": metadata, "status": {"jobDeploymentStatus": "Running"}}
    cluster = four_eight_gpu_nodes(make_node, owner, running)

    plan = planned(owner=owner, cluster=cluster, now=NOW)

    assert plan is not None
    (kept,) = plan.desired
    assert kept["metadata"]["annotations"] == {SPLIT_MADE_FROM_ANNOTATION: "8"}


def test_a_ray_job_naming_no_existing_cluster_is_refused_naming_the_selector(make_node):
    """A ``clusterSelector`` without ``ray.io/cluster``: KubeRay would fail the RayJob for good
    (ValidationFailed); the KaiwoJob is invalid instead, naming the user's field, told in a
    Warning Event, and nothing is made (decision 0156)."""
    selector = {"spec": {"clusterSelector": {"app": "shared"}}}
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 8, "rayJob": selector})

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    valid = condition(plan, "Valid")
    assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec")
    assert valid["message"] == (
        "The spec is invalid, nothing was changed: spec.rayJob: spec.clusterSelector must "
        "name the Ray cluster under the key ray.io/cluster (ray.io/cluster: <name of a "
        "RayCluster in the KaiwoJob's namespace>): KubeRay runs the RayJob on the RayCluster "
        "of that name and reads no other key"
    )
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "InvalidSpec")]
    assert "spec.rayJob: spec.clusterSelector" in plan.events[0].message
    assert plan.desired == ()


def test_a_ray_job_that_would_delete_its_existing_cluster_is_refused_naming_the_rule(make_node):
    """A deletion rule that deletes the workers of the cluster ``shared``: KubeRay fails such a
    RayJob for good (ValidationFailed, measured); the KaiwoJob is invalid instead, naming the
    rule, told in a Warning Event, and nothing is made (decision 0159). Before, the RayJob was
    made and the KaiwoJob went FAILED with KubeRay's message."""
    rules = [
        {"policy": "DeleteSelf", "condition": {"jobStatus": "SUCCEEDED"}},
        {"policy": "DeleteWorkers", "condition": {"jobStatus": "FAILED"}},
    ]
    ray_job = {"spec": {**ON_SHARED["spec"], "deletionStrategy": {"deletionRules": rules}}}
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 8, "rayJob": ray_job})

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    valid = condition(plan, "Valid")
    assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec")
    assert valid["message"] == (
        "The spec is invalid, nothing was changed: spec.rayJob: "
        "spec.deletionStrategy.deletionRules[1].policy must not be DeleteWorkers with "
        "spec.clusterSelector: the existing Ray cluster is not the RayJob's to delete, and "
        "KubeRay refuses a RayJob on an existing cluster whose deletion policy deletes the "
        "cluster or its workers (DeleteCluster, DeleteWorkers); use DeleteSelf or DeleteNone"
    )
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "InvalidSpec")]
    assert "spec.deletionStrategy.deletionRules[1].policy" in plan.events[0].message
    assert plan.desired == ()


def test_a_ray_job_in_sidecar_mode_on_an_existing_cluster_is_refused(make_node):
    """``submissionMode: SidecarMode`` with ``clusterSelector``: KubeRay fails it for good;
    refused naming the field, nothing made (decision 0159)."""
    ray_job = {"spec": {**ON_SHARED["spec"], "submissionMode": "SidecarMode"}}
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 8, "rayJob": ray_job})

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    valid = condition(plan, "Valid")
    assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec")
    assert valid["message"].startswith(
        "The spec is invalid, nothing was changed: spec.rayJob: spec.submissionMode must not "
        "be SidecarMode with spec.clusterSelector"
    )
    assert plan.desired == ()


# ------------------------------------------------------------------ a group's own GPUs (0154)


def gpu_settings_ignored(plan: Any) -> list[str]:
    return [
        e.message
        for e in plan.events
        if e.reason == "SettingsIgnored" and "amd.com/gpu" in e.message
    ]


def service_group(name: str, resources: dict[str, Any]) -> dict[str, Any]:
    container = {"name": name, "resources": resources}
    return {
        "groupName": name,
        "rayStartParams": {},
        "template": {"spec": {"containers": [container]}},
    }


def test_a_group_meant_to_run_without_gpus_is_told_it_gets_them(make_node):
    """A RayService group of the user's with ``amd.com/gpu: 0`` as limit and request, the
    other group with the split's own 8: Kaiwo gives both 8 (upstream, the reference); the
    zeros, which it replaces, are told with their paths; the 8 is not (decision 0154)."""
    zero = {"limits": {"amd.com/gpu": 0}, "requests": {"amd.com/gpu": "0"}}
    cluster = {
        "headGroupSpec": {"rayStartParams": {}, "template": worker_template("head")},
        "workerGroupSpecs": [
            service_group("servers", {"limits": {"amd.com/gpu": "8"}}),
            service_group("routers", zero),
        ],
    }
    owner = kaiwo_service(
        {**TRAIN_SPEC, "gpus": 8, "rayService": {"spec": {"rayClusterConfig": cluster}}}
    )

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    (wrapper,) = plan.desired
    ray_service = wrapper["spec"]["components"][0]["template"]
    for group in ray_service["spec"]["rayClusterConfig"]["workerGroupSpecs"]:
        resources = group["template"]["spec"]["containers"][0]["resources"]
        assert (resources["limits"]["amd.com/gpu"], resources["requests"]["amd.com/gpu"]) == (
            "8",
            "8",
        )
    assert gpu_settings_ignored(plan) == [
        "spec.rayService.spec.rayClusterConfig.workerGroupSpecs[1].template.spec.containers[0]"
        '.resources.limits["amd.com/gpu"] (0), '
        "spec.rayService.spec.rayClusterConfig.workerGroupSpecs[1].template.spec.containers[0]"
        '.resources.requests["amd.com/gpu"] (0) are replaced by 8, from spec.gpus, '
        "spec.gpusPerReplica and spec.gpuVendor, which give every worker group's pods the "
        "same GPUs (no group runs without them); set those fields instead"
    ]


def test_gpus_the_user_leaves_to_kaiwo_or_that_kaiwo_keeps_are_not_told(make_node):
    """No group names its GPUs: they are left to Kaiwo, nothing to tell. A workload asking
    for no GPUs replaces none: the user's limit stays as written, untold."""
    cluster = {
        "headGroupSpec": {"rayStartParams": {}, "template": worker_template("head")},
        "workerGroupSpecs": [
            service_group("servers", {"limits": {"memory": "8Gi"}}),
            service_group("routers", {}),
        ],
    }
    owner = kaiwo_service(
        {**TRAIN_SPEC, "gpus": 8, "rayService": {"spec": {"rayClusterConfig": cluster}}}
    )
    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)
    assert plan is not None
    assert gpu_settings_ignored(plan) == []

    cluster["workerGroupSpecs"][1] = service_group("routers", {"limits": {"amd.com/gpu": 2}})
    owner = kaiwo_service(
        {**TRAIN_SPEC, "gpus": 0, "rayService": {"spec": {"rayClusterConfig": cluster}}}
    )
    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)
    assert plan is not None
    (wrapper,) = plan.desired
    routers = wrapper["spec"]["components"][0]["template"]["spec"]["rayClusterConfig"][
        "workerGroupSpecs"
    ][1]
    assert routers["template"]["spec"]["containers"][0]["resources"]["limits"]["amd.com/gpu"] == "2"
    assert gpu_settings_ignored(plan) == []
