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
from tests.unit.planner.test_planning import admitted, kaiwo_job, queue_config, running_job

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
