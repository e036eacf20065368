"""A Ray KaiwoJob or KaiwoService that asks for no GPUs (no ``gpus``, no ``gpusPerReplica``)
whose given ``rayJob``/``rayService`` templates ask for their own (decision 0167): each
worker group holds Kaiwo's replicas x ``numOfHosts`` pods of its own template's GPUs, the head
its own; the plan (Schedulable, env) and the preemption counts (``allocated_gpus``) agree.
Expected values by hand, on four 8-GPU MI300X nodes (32 GPUs)."""

from __future__ import annotations

from typing import Any

from kaiwo_planner.domain.scheduling.gpu_allocation import (
    GpuAllocation,
    allocate_workload_gpus,
    allocated_gpus,
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
from tests.unit.planner.test_ray_worker_groups import (
    EIGHT_GPU_NODES,
    gpu_settings_ignored,
    nodes_of_eight,
    worker_template,
)

NO_GPUS_SPEC = {key: value for key, value in TRAIN_SPEC.items() if key != "gpus"}


def group(name: str, gpus: int | str | None, *, replicas: int = 2, hosts: int | None = None):
    given: dict[str, Any] = {
        "groupName": name,
        "replicas": replicas,
        "minReplicas": replicas,
        "maxReplicas": replicas,
        "rayStartParams": {},
        "template": worker_template(name, gpus),
    }
    if hosts is not None:
        given["numOfHosts"] = hosts
    return given


def cluster(*groups: dict[str, Any], head_gpus: int | None = None) -> dict[str, Any]:
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": worker_template("head", head_gpus)},
        "workerGroupSpecs": list(groups),
    }


def trainers_and_evaluators() -> dict[str, Any]:
    """``trainers`` of 2 GPUs per pod, ``evaluators`` of 1 on 2 hosts per replica."""
    return cluster(group("trainers", 2), group("evaluators", 1, hosts=2))


def ray_job(given: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return kaiwo_job({**NO_GPUS_SPEC, **spec, "rayJob": {"spec": {"rayClusterSpec": given}}})


def workers(plan: Any) -> list[dict[str, Any]]:
    (child,) = plan.desired
    return child["spec"]["rayClusterSpec"]["workerGroupSpecs"]


def main(template_of: dict[str, Any]) -> dict[str, Any]:
    return template_of["template"]["spec"]["containers"][0]


# ------------------------------------------------------------------ the plan


def test_a_single_group_asking_its_own_gpus_is_counted_and_told(make_node):
    """The measured case: one group ``trainers`` limiting 2 (the user's 2 replicas replaced by
    Kaiwo's 1, decision 0146): 2 GPUs held, the env says so (before: 0/1/0 and "Workload does
    not require GPU resources")."""
    owner = ray_job(cluster(group("trainers", 2)))

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["message"]) == (
        "True",
        "Cluster has sufficient GPU resources",
    )
    (trainers,) = workers(plan)
    assert trainers["replicas"] == 1
    assert main(trainers)["resources"]["limits"]["amd.com/gpu"] == "2"  # as written
    assert gpu_env(main(trainers)) == {
        "NUM_GPUS": "2",
        "NUM_REPLICAS": "1",
        "NUM_GPUS_PER_REPLICA": "2",
    }


def test_groups_of_their_own_gpus_each_hold_and_are_told_their_own(make_node):
    """``replicas: 3``: trainers 3 x 2 = 6, evaluators 3 x 2 hosts x 1 = 6, the head none: 12.
    Each group's env counts its own pods and GPUs; the head gets the first group's (as 0151).
    The containers stay as written and nothing is told replaced."""
    owner = ray_job(trainers_and_evaluators(), replicas=3)

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    assert condition(plan, "Schedulable")["message"] == (
        "Cluster has sufficient GPU resources: the spec asks for no GPUs, so the Ray "
        "cluster's own templates give them: each of its 2 worker groups runs 3 replicas "
        "(spec.replicas) of 2, 1 GPUs per pod by group, every replica on numOfHosts pods "
        "(1, 2), so the workload holds 12 GPUs"
    )
    trainers, evaluators = workers(plan)
    assert (trainers["replicas"], evaluators["replicas"]) == (3, 3)
    assert main(trainers)["resources"]["limits"]["amd.com/gpu"] == "2"
    assert main(evaluators)["resources"]["limits"]["amd.com/gpu"] == "1"
    assert gpu_env(main(trainers)) == {
        "NUM_GPUS": "6",
        "NUM_REPLICAS": "3",
        "NUM_GPUS_PER_REPLICA": "2",
    }
    assert gpu_env(main(evaluators)) == {
        "NUM_GPUS": "6",
        "NUM_REPLICAS": "6",
        "NUM_GPUS_PER_REPLICA": "1",
    }
    (child,) = plan.desired
    head = child["spec"]["rayClusterSpec"]["headGroupSpec"]
    assert "amd.com/gpu" not in main(head)["resources"].get("limits", {})
    assert gpu_env(main(head)) == gpu_env(main(trainers))
    assert gpu_settings_ignored(plan) == []


def test_a_head_asking_its_own_gpus_is_counted(make_node):
    """One group of 2 and a head of 1: 3 GPUs, said."""
    owner = ray_job(cluster(group("trainers", 2), head_gpus=1))

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    assert condition(plan, "Schedulable")["message"] == (
        "Cluster has sufficient GPU resources: the spec asks for no GPUs, so the Ray "
        "cluster's own templates give them: each of its 1 worker group runs 1 replica "
        "(spec.replicas) of 2 GPUs per pod, and its head 1, so the workload holds 3 GPUs"
    )


def test_groups_whose_own_gpus_pass_the_cluster_or_a_node_are_refused(make_node):
    """Trainers 4 x 8 and evaluators 4 x 2 hosts x 1 = 40 on 32: refused with no child. A group
    of 16 per pod on 8-GPU nodes: refused naming its container."""
    owner = ray_job(cluster(group("trainers", 8), group("evaluators", 1, hosts=2)), replicas=4)
    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)
    assert plan is not None
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["reason"]) == ("False", "InsufficientGPUs")
    assert schedulable["message"].startswith(
        "Cluster has 32 GPUs, but requested for 40 GPUs (vendor: amd): the spec asks for no "
        "GPUs, so the Ray cluster's own templates give them"
    )
    assert plan.desired == ()

    owner = ray_job(cluster(group("trainers", 2), group("evaluators", 16)))
    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)
    assert plan is not None
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["reason"], schedulable["message"]) == (
        "InsufficientGPUsPerNode",
        "spec.rayJob.spec.rayClusterSpec.workerGroupSpecs[1].template.spec.containers[0] asks "
        'for 16 GPUs ("amd.com/gpu") per pod, but the largest node has 8 GPUs (vendor: amd): '
        "lower it, or set spec.gpus to let Kaiwo split the GPUs by the nodes' size",
    )
    assert plan.desired == ()


def test_a_ray_service_of_its_own_gpus_declares_and_counts_them(make_node):
    """A KaiwoService's AppWrapper: the groups' pod sets as before (Kueue reads the GPUs from
    the templates, kept as written), the count 12 as for the job."""
    owner = kaiwo_service(
        {
            **NO_GPUS_SPEC,
            "replicas": 3,
            "rayService": {"spec": {"rayClusterConfig": trainers_and_evaluators()}},
        }
    )

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    assert condition(plan, "Schedulable")["message"].endswith("so the workload holds 12 GPUs")
    (wrapper,) = plan.desired
    assert [s["replicas"] for s in wrapper["spec"]["components"][0]["podSets"]] == [1, 3, 6]
    config = wrapper["spec"]["components"][0]["template"]["spec"]["rayClusterConfig"]
    evaluators = config["workerGroupSpecs"][1]
    assert gpu_env(main(evaluators)) == {
        "NUM_GPUS": "6",
        "NUM_REPLICAS": "6",
        "NUM_GPUS_PER_REPLICA": "1",
    }


def test_a_spec_that_asks_for_gpus_still_sizes_every_group(make_node):
    """``gpus: 2`` decides, as before (decisions 0146, 0154): every group runs 1 x 2 on its
    hosts, 2 + 4 = 6, and the evaluators' own 1 is replaced and told."""
    owner = ray_job(trainers_and_evaluators(), gpus=2)
    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)
    assert plan is not None
    _, evaluators = workers(plan)
    assert main(evaluators)["resources"]["limits"]["amd.com/gpu"] == "2"
    assert condition(plan, "Schedulable")["message"].endswith("so the workload holds 6 GPUs")
    assert len(gpu_settings_ignored(plan)) == 1


# ------------------------------------------------------------------ what preemption counts


def wire(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": kind,
        "metadata": {"name": "train", "namespace": "team-a", "uid": "job-uid"},
        "spec": {"gpuVendor": "amd", **spec},
    }


def test_the_gpus_held_are_each_groups_own() -> None:
    """What duration and idle preemption and ``kaiwo gpus`` count: the plan's numbers."""
    given = {"spec": {"rayClusterSpec": trainers_and_evaluators()}}
    assert allocated_gpus(wire("KaiwoJob", {"rayJob": given, "replicas": 3}), nodes_of_eight) == 12
    assert allocated_gpus(wire("KaiwoJob", {"rayJob": given}), nodes_of_eight) == 4
    service = {"spec": {"rayClusterConfig": trainers_and_evaluators()}}
    assert allocated_gpus(wire("KaiwoService", {"rayService": service}), nodes_of_eight) == 4
    head = {"spec": {"rayClusterSpec": cluster(group("trainers", 2), head_gpus=1)}}
    assert allocated_gpus(wire("KaiwoJob", {"rayJob": head}), nodes_of_eight) == 3
    # Paused: the groups run no pod; the head still holds its own.
    assert allocated_gpus(wire("KaiwoJob", {"rayJob": head, "replicas": 0}), nodes_of_eight) == 1
    # The spec's own GPUs win: 1 in each of the two groups' pods, 1 + 2 hosts = 3.
    assert allocated_gpus(wire("KaiwoJob", {"rayJob": given, "gpus": 1}), nodes_of_eight) == 3
    # No template asks: nothing, as before.
    plain = {"spec": {"rayClusterSpec": cluster(group("trainers", None))}}
    assert allocated_gpus(wire("KaiwoJob", {"rayJob": plain}), nodes_of_eight) == 0


def test_a_running_cluster_is_counted_by_the_groups_it_runs() -> None:
    """A running RayJob keeps its cluster as observed (decision 0123): its evaluators count on
    their 2 hosts, even when the spec was since edited to one host."""
    running = {
        "kind": "RayJob",
        "metadata": {"name": "train", "ownerReferences": [{"uid": "job-uid"}]},
        "spec": {"suspend": False, "rayClusterSpec": trainers_and_evaluators()},
    }
    edited = {"spec": {"rayClusterSpec": cluster(group("trainers", 2), group("evaluators", 1))}}
    workload = wire("KaiwoJob", {"rayJob": edited})
    assert allocated_gpus(workload, nodes_of_eight, running_child=running) == 4


def test_the_allocation_of_a_ray_cluster_of_its_own_gpus() -> None:
    allocation = allocate_workload_gpus(
        shape="ray",
        gpus=0,
        replicas=2,
        gpus_per_replica=None,
        vendor="amd",
        stats=EIGHT_GPU_NODES,
        given={"spec": {"rayClusterSpec": trainers_and_evaluators()}},
    )
    assert allocation == GpuAllocation(
        gpus=8,
        gpus_per_replica=2,
        replicas=2,
        vendor="amd",
        rule="template",
        worker_group_hosts=(1, 2),
        given_template="rayJob",
        worker_group_gpus=(2, 1),
    )
    assert allocation.held_gpus == 8
