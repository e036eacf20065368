"""GPU idle preemption frees GPUs for a waiting workload only in a flavor its ``gpuModels``
let Kueue admit it into (decision 0280), by hand.

Queue ``kaiwo`` has a flavor per GPU model, MI300X first, and a node of each. An idle opted-in
KaiwoJob runs in ``mi300x``; ``next`` waits in the same queue for 4 GPUs.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from kaiwo_planner.domain.scheduling.gpu_model_flavors import gpu_model_flavor_names
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.planning_context import PlanningContext

from tests.planning_calls import planned
from tests.unit.planner.test_gpu_models_admitted_elsewhere import (
    MI250X,
    MI300X,
    NODES,
    QUEUE_OBJECTS,
)
from tests.unit.planner.test_planning import (
    NOW,
    RUNNING_STATUS,
    TRAIN_SPEC,
    admitted,
    finding,
    kaiwo_job,
    opted_in,
    queue_config,
    running_job,
)

IDLE = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS))


def held_in(flavor: str) -> dict[str, Any]:
    """The idle KaiwoJob's Job's Kueue Workload, admitted into ``flavor``."""
    workload = admitted("job-uid-job")
    workload["status"]["admission"] = {
        "clusterQueue": "kaiwo",
        "podSetAssignments": [{"name": "main", "flavors": {"amd.com/gpu": flavor}, "count": 1}],
    }
    return workload


def waiting(gpu_models: list[str] | None) -> dict[str, Any]:
    spec = {**TRAIN_SPEC, "gpus": 4, **({"gpuModels": gpu_models} if gpu_models else {})}
    return kaiwo_job(
        spec,
        name="next",
        uid="next-uid",
        status={"status": "PENDING", "observedGeneration": 1},
        created="2026-01-01T11:50:00Z",
    )


def idle_phase(
    next_job: dict[str, Any], *others: dict[str, Any], flavor: str, queues: bool = True
) -> str:
    """The idle KaiwoJob's planned phase, held in ``flavor``, ``next_job`` waiting (with
    ``others`` observed too)."""
    cluster = ClusterState.from_wire(
        nodes=NODES,
        objects=[
            queue_config({"name": "kaiwo"}),
            IDLE,
            running_job(IDLE),
            next_job,
            *others,
            *(QUEUE_OBJECTS if queues else ()),
        ],
        kueue_workloads=(held_in(flavor),),
        namespaces=["team-a"],
    )
    idle = finding(idle_since=NOW - timedelta(minutes=11))
    cluster = dataclasses.replace(cluster, findings={idle.uid: idle})
    plan = planned(owner=IDLE, cluster=cluster, now=NOW)
    assert plan is not None and plan.status is not None
    return str(plan.status["status"])


def test_an_idle_job_is_kept_for_a_waiting_one_whose_gpu_models_its_flavor_holds_none_of() -> None:
    """Kueue admits ``next`` (MI250X only) into ``mi250x`` alone: the MI300X GPUs the idle
    Job frees are of no use to it. Before, it was deleted, and ``next`` went on waiting."""
    assert idle_phase(waiting(["mi250x"]), flavor="mi300x") == "RUNNING"


def test_an_idle_job_goes_for_a_waiting_one_its_flavor_can_run() -> None:
    assert idle_phase(waiting(["mi300x"]), flavor="mi300x") == "TERMINATING"
    assert idle_phase(waiting(["mi250x"]), flavor="mi250x") == "TERMINATING"
    assert idle_phase(waiting(["mi250x", "mi300x"]), flavor="mi300x") == "TERMINATING"
    # No gpuModels: any flavor of its queue.
    assert idle_phase(waiting(None), flavor="mi300x") == "TERMINATING"


def suspended_job_selecting(owner: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """``owner``'s suspended Job, the main child Kueue queues, whose pods select nodes of
    ``labels`` (a ``spec.job`` the user wrote)."""
    job = running_job(owner)
    gpus = {"limits": {"amd.com/gpu": 4}}
    pods = {"nodeSelector": labels, "containers": [{"name": "main", "resources": gpus}]}
    job["spec"] = {"suspend": True, "template": {"spec": pods}}
    del job["status"]
    return job


def test_an_idle_job_is_kept_for_a_waiting_one_whose_own_job_selects_another_flavor() -> None:
    """Decision 0283: ``next`` has no ``gpuModels``, but its Job selects MI250X nodes, so
    Kueue admits it into ``mi250x`` alone and the idle Job's MI300X GPUs are of no use to it.
    Selecting MI300X, it has the idle Job preempted."""
    next_job = waiting(None)
    mi250x_only = suspended_job_selecting(next_job, MI250X)
    assert idle_phase(next_job, mi250x_only, flavor="mi300x") == "RUNNING"
    mi300x_only = suspended_job_selecting(next_job, MI300X)
    assert idle_phase(next_job, mi300x_only, flavor="mi300x") == "TERMINATING"


def test_flavors_not_observed_leave_any_flavor_of_use() -> None:
    """Without the queue's ClusterQueue and ResourceFlavors the planner cannot tell which
    flavors hold the models: the idle Job may free what ``next`` waits for, as before."""
    assert idle_phase(waiting(["mi250x"]), flavor="mi300x", queues=False) == "TERMINATING"


def test_the_flavors_of_a_queue_and_models_are_worked_out_again_when_a_flavor_changes() -> None:
    """Kept per state for each queue and models, and worked out again when a ResourceFlavor
    (or a ClusterQueue, or a Node) changes: here ``mi250x`` comes to declare the MI300X
    product, so both flavors hold the MI300X node and neither holds only MI250X ones."""

    def state(*queue_objects: dict[str, Any]) -> ClusterState:
        return ClusterState.from_wire(
            nodes=NODES,
            objects=[queue_config({"name": "kaiwo"}), *queue_objects],
            namespaces=["team-a"],
        )

    def names(context: PlanningContext) -> frozenset[str]:
        return gpu_model_flavor_names(
            context, queue="kaiwo", gpu_key="amd.com/gpu", gpu_models=["mi250x"]
        )

    context = PlanningContext.of(state(*QUEUE_OBJECTS))
    assert names(context) == {"mi250x"}
    assert names(context) is names(context)
    [queue, mi300x, mi250x] = QUEUE_OBJECTS
    relabelled = {**mi250x, "spec": mi300x["spec"]}
    moved = context.moved_to(
        state(queue, mi300x, relabelled), changed={("kueue.x-k8s.io", "ResourceFlavor")}
    )
    assert names(moved) == frozenset()
