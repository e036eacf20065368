"""Nodes that change under workloads (decision 0132): the GPU taint the nodes still carry is
tolerated, and an admitted workload is not made ERROR by nodes that no longer hold it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kaiwo_contracts.plans import EventIntent
from kaiwo_planner.domain.planning import plan_object
from kaiwo_planner.domain.settings.cluster_settings import NODE_KIND
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.planning_context import PlanningContext

from tests.planning_calls import planned
from tests.unit.planner.test_planning import (
    admitted,
    kaiwo_job,
    kaiwo_service,
    queue_config,
    running_job,
)

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
T_EARLIER = "2026-01-01T11:00:00Z"
GPU_TAINT = {"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "kaiwo.silogen.ai/gpu", "operator": "Exists", "effect": "NoSchedule"}
TRAIN = {"user": "ann@example.com", "gpus": 8, "image": "rocm/pytorch:latest"}
NodeFactory = Callable[..., dict[str, Any]]


def kaiwo_config(**nodes: Any) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {"nodes": nodes},
    }


def cluster(
    nodes: list[dict[str, Any]],
    *objects: dict[str, Any],
    workloads: tuple[dict[str, Any], ...] = (),
) -> ClusterState:
    return ClusterState.from_wire(
        nodes=nodes,
        objects=[queue_config({"name": "kaiwo"}), *objects],
        kueue_workloads=workloads,
        namespaces=["team-a"],
    )


def pod_tolerations(owner: dict[str, Any], state: ClusterState) -> list[dict[str, Any]] | None:
    plan = planned(owner=owner, cluster=state, now=NOW)
    assert plan is not None
    (job,) = plan.desired
    return job["spec"]["template"]["spec"].get("tolerations")


# ------------------------------------------------------------ the taint the nodes still carry


def test_gpu_pods_tolerate_the_taint_left_on_the_nodes_after_add_taints_is_turned_off(
    make_node: NodeFactory,
) -> None:
    # addTaintsToGpuNodes was on, then off: the operator never removes its taint, so without
    # the toleration every new GPU pod stayed Pending ("untolerated taint") for ever.
    owner = kaiwo_job(TRAIN)
    nodes = [
        make_node("mi300x-0", gpu="mi300x", taints=[GPU_TAINT]),
        make_node("mi300x-1", gpu="mi300x"),
    ]
    assert pod_tolerations(owner, cluster(nodes, owner, kaiwo_config())) == [GPU_TOLERATION]


def test_no_toleration_while_no_node_carries_the_taint_and_add_taints_is_off(
    make_node: NodeFactory,
) -> None:
    owner = kaiwo_job(TRAIN)
    others = [
        {"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoExecute"},
        {"key": "example.com/gpu", "value": "true", "effect": "NoSchedule"},
    ]
    nodes = [make_node("mi300x-0", gpu="mi300x", taints=others)]
    assert pod_tolerations(owner, cluster(nodes, owner)) is None


def test_the_taint_of_the_configured_key_is_tolerated_and_only_by_gpu_pods(
    make_node: NodeFactory,
) -> None:
    custom = {"key": "example.com/gpu", "value": "yes", "effect": "NoSchedule"}
    nodes = [make_node("mi300x-0", gpu="mi300x", taints=[custom]), make_node("cpu-0")]
    config = kaiwo_config(defaultGpuTaintKey="example.com/gpu")
    gpu_job = kaiwo_job(TRAIN)
    assert pod_tolerations(gpu_job, cluster(nodes, gpu_job, config)) == [
        {"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    cpu_job = kaiwo_job({"user": "ann@example.com", "image": "busybox"}, uid="cpu-uid")
    assert pod_tolerations(cpu_job, cluster(nodes, cpu_job, config)) is None


def test_the_toleration_goes_once_the_taint_is_taken_off_the_nodes(make_node: NodeFactory) -> None:
    # The same context carried to the next state (as the planner service does): the children
    # kept per spec version must not keep the toleration of a taint that is gone.
    owner = kaiwo_job(TRAIN)
    tainted = [make_node("mi300x-0", gpu="mi300x", taints=[GPU_TAINT])]
    context = PlanningContext.of(cluster(tainted, owner))
    before = plan_object(owner=owner, context=context, now=NOW).plan
    untainted = cluster([make_node("mi300x-0", gpu="mi300x")], owner)
    after = plan_object(
        owner=owner, context=context.moved_to(untainted, changed=[NODE_KIND]), now=NOW
    ).plan
    assert before is not None and after is not None
    (job_before,), (job_after,) = before.desired, after.desired
    assert job_before["spec"]["template"]["spec"]["tolerations"] == [GPU_TOLERATION]
    assert "tolerations" not in job_after["spec"]["template"]["spec"]


# ------------------------------------------ the taints the operator recorded on the nodes (0149)

RENAMED_TAINT = {"key": "example.com/gpu-node", "value": "true", "effect": "NoSchedule"}
RENAMED_TOLERATION = {"key": "example.com/gpu-node", "operator": "Exists", "effect": "NoSchedule"}


def recorded(node: dict[str, Any], key: str) -> dict[str, Any]:
    """``node`` with the operator's record of the GPU taint it added (decision 0145)."""
    node["metadata"]["annotations"] = {"kaiwo/gpu-taint": key}
    return node


def test_gpu_pods_tolerate_the_operators_recorded_taint_after_off_and_a_rename_in_one_edit(
    make_node: NodeFactory,
) -> None:
    # Tainted and recorded while on with the default key; then off and renamed together.
    # Before: no toleration at all (no node carries the new key), and every new GPU pod
    # waited on the nodes still carrying the operator's old taint.
    owner = kaiwo_job(TRAIN)
    nodes = [
        recorded(make_node("mi300x-0", gpu="mi300x", taints=[GPU_TAINT]), GPU_TAINT["key"]),
        recorded(make_node("mi300x-1", gpu="mi300x", taints=[GPU_TAINT]), GPU_TAINT["key"]),
    ]
    config = kaiwo_config(addTaintsToGpuNodes=False, defaultGpuTaintKey="example.com/gpu-node")
    assert pod_tolerations(owner, cluster(nodes, owner, config)) == [GPU_TOLERATION]
    cpu_job = kaiwo_job({"user": "ann@example.com", "image": "busybox"}, uid="cpu-uid")
    assert pod_tolerations(cpu_job, cluster(nodes, cpu_job, config)) is None


def test_the_configured_key_on_the_nodes_and_each_recorded_key_are_tolerated(
    make_node: NodeFactory,
) -> None:
    # Renamed twice while off: one node still carries the first key's recorded taint, one an
    # administrator's taint of the key in force, one the second key's recorded taint.
    owner = kaiwo_job(TRAIN)
    third = {"key": "example.com/gpu-3", "value": "true", "effect": "NoSchedule"}
    nodes = [
        recorded(make_node("mi300x-0", gpu="mi300x", taints=[RENAMED_TAINT]), RENAMED_TAINT["key"]),
        make_node("mi300x-1", gpu="mi300x", taints=[third]),
        recorded(make_node("mi300x-2", gpu="mi300x", taints=[GPU_TAINT]), GPU_TAINT["key"]),
    ]
    config = kaiwo_config(defaultGpuTaintKey="example.com/gpu-3")
    assert pod_tolerations(owner, cluster(nodes, owner, config)) == [
        {"key": "example.com/gpu-3", "operator": "Exists", "effect": "NoSchedule"},
        RENAMED_TOLERATION,
        GPU_TOLERATION,
    ]


def test_a_record_whose_taint_is_gone_or_changed_and_a_taint_without_record_are_not_tolerated(
    make_node: NodeFactory,
) -> None:
    owner = kaiwo_job(TRAIN)
    nodes = [
        # The taint removed by hand, the record left behind.
        recorded(make_node("mi300x-0", gpu="mi300x"), GPU_TAINT["key"]),
        # Another value or effect under the recorded key: not the taint the operator adds.
        recorded(
            make_node("mi300x-1", gpu="mi300x", taints=[{**GPU_TAINT, "value": "sunday"}]),
            GPU_TAINT["key"],
        ),
        recorded(
            make_node("mi300x-2", gpu="mi300x", taints=[{**GPU_TAINT, "effect": "NoExecute"}]),
            GPU_TAINT["key"],
        ),
        # An old key's taint no record names (an administrator's, or added before 0145).
        make_node("mi300x-3", gpu="mi300x", taints=[GPU_TAINT]),
        # A record naming another key than the taint the node carries.
        recorded(make_node("mi300x-4", gpu="mi300x", taints=[GPU_TAINT]), "example.com/other"),
    ]
    config = kaiwo_config(defaultGpuTaintKey="example.com/gpu-node")
    assert pod_tolerations(owner, cluster(nodes, owner, config)) is None


def test_with_the_setting_on_a_recorded_taint_of_another_key_is_moved_not_tolerated(
    make_node: NodeFactory,
) -> None:
    # Renamed while on: until the executor moves the recorded taint to the new key (0145),
    # tolerating the old key would change a Deployment's template twice (two rollouts).
    owner = kaiwo_job(TRAIN)
    nodes = [recorded(make_node("mi300x-0", gpu="mi300x", taints=[GPU_TAINT]), GPU_TAINT["key"])]
    config = kaiwo_config(addTaintsToGpuNodes=True, defaultGpuTaintKey="example.com/gpu-node")
    assert pod_tolerations(owner, cluster(nodes, owner, config)) == [RENAMED_TOLERATION]


def test_the_recorded_keys_toleration_goes_once_the_taint_is_taken_off(
    make_node: NodeFactory,
) -> None:
    # The same context carried along: children kept per spec version follow the nodes.
    owner = kaiwo_job(TRAIN)
    config = kaiwo_config(defaultGpuTaintKey="example.com/gpu-node")
    tainted = [recorded(make_node("mi300x-0", gpu="mi300x", taints=[GPU_TAINT]), GPU_TAINT["key"])]
    context = PlanningContext.of(cluster(tainted, owner, config))
    before = plan_object(owner=owner, context=context, now=NOW).plan
    untainted = cluster(
        [recorded(make_node("mi300x-0", gpu="mi300x"), GPU_TAINT["key"])], owner, config
    )
    after = plan_object(
        owner=owner, context=context.moved_to(untainted, changed=[NODE_KIND]), now=NOW
    ).plan
    assert before is not None and after is not None
    (job_before,), (job_after,) = before.desired, after.desired
    assert job_before["spec"]["template"]["spec"]["tolerations"] == [GPU_TOLERATION]
    assert "tolerations" not in job_after["spec"]["template"]["spec"]


# ------------------------------------------------- an admitted workload under changed nodes

RUNNING = {"status": "RUNNING", "startTime": T_EARLIER, "observedGeneration": 1}
TOLD = (
    "Cluster has 4 GPUs, but requested for 8 GPUs (vendor: amd); Kueue admitted the workload "
    "before the nodes changed, so its children are kept as they are and it goes on as far as "
    "its pods can (it would not be admitted again as it is)"
)


def relabelled_to_four(make_node: NodeFactory) -> list[dict[str, Any]]:
    """The device plugin's count label says 4 where the job was admitted on 8."""
    return [make_node("mi300x-0", gpu="mi300x", gpus=4)]


def test_a_running_job_whose_nodes_no_longer_hold_it_runs_on_and_is_told_once(
    make_node: NodeFactory,
) -> None:
    owner = kaiwo_job(TRAIN, status=RUNNING)
    job = running_job(owner)
    state = cluster(
        relabelled_to_four(make_node), owner, job, workloads=(admitted(job["metadata"]["uid"]),)
    )

    plan = planned(owner=owner, cluster=state, now=NOW)

    assert plan is not None and plan.status is not None
    # Before: ERROR, "Cluster has 4 GPUs, but requested for 8 GPUs", while its pod ran on.
    assert plan.status["status"] == "RUNNING"
    schedulable = next(c for c in plan.status["conditions"] if c["type"] == "Schedulable")
    assert (schedulable["status"], schedulable["reason"], schedulable["message"]) == (
        "True",
        "AdmittedBeforeNodeChange",
        TOLD,
    )
    # Its children are left as they are: nothing re-planned from the changed nodes.
    assert (plan.desired, plan.prune) == ((), ())
    assert plan.events == (
        EventIntent(type="Warning", reason="AdmittedBeforeNodeChange", message=TOLD),
    )

    # Planned again with that status: the same status, no second Event.
    told = {**owner, "status": plan.status}
    again = planned(
        owner=told,
        cluster=cluster(
            relabelled_to_four(make_node), told, job, workloads=(admitted(job["metadata"]["uid"]),)
        ),
        now=NOW,
    )
    assert again is not None
    assert (again.status, again.events) == (plan.status, ())

    # The Job completes: so does the workload (an ERROR workload never looked again).
    done = copy.deepcopy(job)
    done["status"] = {
        "succeeded": 1,
        "conditions": [{"type": "Complete", "status": "True"}],
        "completionTime": "2026-01-01T11:59:00Z",
    }
    finished = planned(
        owner=told,
        cluster=cluster(
            relabelled_to_four(make_node), told, done, workloads=(admitted(job["metadata"]["uid"]),)
        ),
        now=NOW,
    )
    assert finished is not None and finished.status is not None
    assert finished.status["status"] == "COMPLETE"


def test_a_job_kueue_has_not_admitted_still_waits_in_error_for_the_nodes(
    make_node: NodeFactory,
) -> None:
    owner = kaiwo_job(TRAIN)
    plan = planned(owner=owner, cluster=cluster(relabelled_to_four(make_node), owner), now=NOW)
    assert plan is not None and plan.status is not None
    assert plan.status["status"] == "ERROR"
    assert (plan.desired, plan.prune) == ((), ())


# ------------------------------------- the split a running workload was made with (0137)

SERVE = {"user": "ann@example.com", "gpus": 16, "image": "vllm/vllm-openai:v0.8.5"}
READY = {"status": "READY", "startTime": T_EARLIER, "observedGeneration": 1}
SPLIT_MARK = "kaiwo.silogen.ai/gpus-split-by-node-size"


def eight_gpu_nodes(make_node: NodeFactory) -> list[dict[str, Any]]:
    return [make_node("mi300x-0", gpu="mi300x"), make_node("mi300x-1", gpu="mi300x")]


def with_a_four_gpu_node(make_node: NodeFactory) -> list[dict[str, Any]]:
    return [*eight_gpu_nodes(make_node), make_node("mi300x-small", gpu="mi300x", gpus=4)]


def split_of(deployment: dict[str, Any]) -> tuple[int, str, str, str]:
    """Replicas, GPU limit, NUM_REPLICAS and the mark of what it was split from."""
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {v["name"]: v.get("value") for v in container["env"]}
    return (
        deployment["spec"]["replicas"],
        container["resources"]["limits"]["amd.com/gpu"],
        env["NUM_REPLICAS"],
        deployment["metadata"]["annotations"][SPLIT_MARK],
    )


def made_on_eight_gpu_nodes(
    owner: dict[str, Any], make_node: NodeFactory, *, ready: int
) -> dict[str, Any]:
    """The Deployment the planner made on two 8-GPU nodes, as observed with ``ready`` pods."""
    plan = planned(owner=owner, cluster=cluster(eight_gpu_nodes(make_node), owner), now=NOW)
    assert plan is not None
    [deployment] = [c for c in plan.desired if c["kind"] == "Deployment"]
    assert split_of(deployment) == (2, "8", "2", "16")
    observed = copy.deepcopy(deployment)
    observed["metadata"]["uid"] = "svc-uid-deployment"
    observed["status"] = {"replicas": 2, "readyReplicas": ready, "availableReplicas": ready}
    return observed


def planned_deployment(plan: Any) -> dict[str, Any]:
    [deployment] = [c for c in plan.desired if c["kind"] == "Deployment"]
    return dict(deployment)


def test_a_ready_service_keeps_its_split_when_a_smaller_node_joins(
    make_node: NodeFactory,
) -> None:
    # Before: the 4-GPU node made the split 4 x 4, and the Deployment rolled to it though
    # the user changed nothing.
    owner = kaiwo_service(SERVE, status=READY)
    observed = made_on_eight_gpu_nodes(owner, make_node, ready=2)
    context = PlanningContext.of(cluster(eight_gpu_nodes(make_node), owner, observed))
    before = plan_object(owner=owner, context=context, now=NOW).plan
    joined = cluster(with_a_four_gpu_node(make_node), owner, observed)
    after = plan_object(
        owner=owner, context=context.moved_to(joined, changed=[NODE_KIND]), now=NOW
    ).plan
    assert before is not None and after is not None and after.status is not None

    assert split_of(planned_deployment(after)) == (2, "8", "2", "16")
    assert planned_deployment(after) == planned_deployment(before)
    schedulable = next(c for c in after.status["conditions"] if c["type"] == "Schedulable")
    assert (schedulable["reason"], schedulable["message"]) == (
        "Schedulable",
        "Cluster has sufficient GPU resources",
    )
    assert after.status["status"] == "READY"


def test_a_service_not_running_yet_follows_the_nodes(make_node: NodeFactory) -> None:
    owner = kaiwo_service(SERVE)
    observed = made_on_eight_gpu_nodes(owner, make_node, ready=0)
    plan = planned(
        owner=owner, cluster=cluster(with_a_four_gpu_node(make_node), owner, observed), now=NOW
    )
    assert plan is not None
    assert split_of(planned_deployment(plan)) == (4, "4", "4", "16")


def test_an_edit_of_spec_gpus_is_split_by_the_nodes_of_now(make_node: NodeFactory) -> None:
    owner = kaiwo_service(SERVE, status=READY)
    observed = made_on_eight_gpu_nodes(owner, make_node, ready=2)
    edited = kaiwo_service({**SERVE, "gpus": 12}, generation=2, status=READY)
    plan = planned(
        owner=edited, cluster=cluster(with_a_four_gpu_node(make_node), edited, observed), now=NOW
    )
    assert plan is not None
    assert split_of(planned_deployment(plan)) == (3, "4", "3", "12")


def test_an_edit_of_another_field_keeps_the_split(make_node: NodeFactory) -> None:
    # The split is made from spec.gpus (and its vendor, replicas and gpusPerReplica): a new
    # image rolls the pods, in the split they have.
    owner = kaiwo_service(SERVE, status=READY)
    observed = made_on_eight_gpu_nodes(owner, make_node, ready=2)
    edited = kaiwo_service(
        {**SERVE, "image": "vllm/vllm-openai:v0.9.0"}, generation=2, status=READY
    )
    plan = planned(
        owner=edited, cluster=cluster(with_a_four_gpu_node(make_node), edited, observed), now=NOW
    )
    assert plan is not None
    deployment = planned_deployment(plan)
    assert split_of(deployment) == (2, "8", "2", "16")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "vllm/vllm-openai:v0.9.0"


def test_a_kept_split_no_node_holds_any_more_is_told_and_left_as_it_runs(
    make_node: NodeFactory,
) -> None:
    # Every node relabelled to 4: the pods of 8 run on (no Kueue Workload to ask: the kept
    # split is what the running child holds), told as for an admitted workload (0132).
    owner = kaiwo_service(SERVE, status=READY)
    observed = made_on_eight_gpu_nodes(owner, make_node, ready=2)
    four = [make_node(f"mi300x-{i}", gpu="mi300x", gpus=4) for i in range(4)]
    plan = planned(owner=owner, cluster=cluster(four, owner, observed), now=NOW)
    assert plan is not None and plan.status is not None
    told = (
        "spec.gpus (16) was split by the nodes' size when its pods were made into 2 replicas "
        "of 8 GPUs, kept while they run, but the largest node has 4 GPUs (vendor: amd): edit "
        "spec.gpus, or set spec.replicas and spec.gpusPerReplica, to split it over the nodes "
        "as they are now; Kueue admitted the workload before the nodes changed, so its "
        "children are kept as they are and it goes on as far as its pods can (it would not be "
        "admitted again as it is)"
    )
    schedulable = next(c for c in plan.status["conditions"] if c["type"] == "Schedulable")
    assert (schedulable["status"], schedulable["reason"], schedulable["message"]) == (
        "True",
        "AdmittedBeforeNodeChange",
        told,
    )
    assert (plan.desired, plan.prune) == ((), ())
    assert plan.status["status"] == "READY"


def test_a_ready_service_made_while_on_does_not_roll_when_turned_off_and_renamed(
    make_node: NodeFactory,
) -> None:
    # Its Deployment was made tolerating the default key; the edit that turns the setting off
    # and renames the key must leave its pod template as it is (a change would roll it).
    # Before: the toleration dropped from the template, a rollout to pods that could run
    # nowhere.
    owner = kaiwo_service(SERVE, status=READY)
    nodes = [
        recorded(make_node("mi300x-0", gpu="mi300x", taints=[GPU_TAINT]), GPU_TAINT["key"]),
        recorded(make_node("mi300x-1", gpu="mi300x", taints=[GPU_TAINT]), GPU_TAINT["key"]),
    ]
    on = kaiwo_config(addTaintsToGpuNodes=True)
    made = planned(owner=owner, cluster=cluster(nodes, owner, on), now=NOW)
    assert made is not None
    observed = copy.deepcopy(planned_deployment(made))
    assert observed["spec"]["template"]["spec"]["tolerations"] == [GPU_TOLERATION]
    observed["metadata"]["uid"] = "svc-uid-deployment"
    observed["status"] = {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2}
    before = planned(owner=owner, cluster=cluster(nodes, owner, observed, on), now=NOW)

    off_renamed = kaiwo_config(addTaintsToGpuNodes=False, defaultGpuTaintKey="example.com/gpu-node")
    after = planned(owner=owner, cluster=cluster(nodes, owner, observed, off_renamed), now=NOW)

    assert before is not None and after is not None
    assert planned_deployment(after) == planned_deployment(before)
    assert planned_deployment(after)["spec"]["template"] == observed["spec"]["template"]
