"""GPU idle preemption (OnPressure) stops an idle workload only for a waiting pod some node
could hold once GPUs are freed (decision 0256). Expected plans written by hand."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from kaiwo_planner.domain.scheduling.placeable import could_be_placed
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.nodes import NodeInfo

from tests.unit.planner.conftest import build_node
from tests.unit.planner.test_gpu_workloads import (
    NOW,
    ON_PRESSURE,
    UNPLACED,
    finding,
    job,
    namespace,
    plan_of,
    record,
)


def waiting_pod(gpus: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "notebook",
            "namespace": "team-a",
            "uid": "pod-0123456789",
            "creationTimestamp": "2026-03-01T11:00:00Z",
            "annotations": ON_PRESSURE,
        },
        "spec": {
            "containers": [{"name": "main", "resources": {"limits": {"amd.com/gpu": str(gpus)}}}],
            **spec,
        },
        "status": UNPLACED,
    }


def preempted_for(pod: dict[str, Any], *nodes: dict[str, Any]) -> str | None:
    """The name of the workload an idle 16-GPU job (enough for any of these) is preempted
    for, or None when kept."""
    idle = job("idle", annotations=ON_PRESSURE)
    idle["spec"]["template"]["spec"]["containers"] = [
        {"name": "main", "resources": {"limits": {"amd.com/gpu": "16"}}}
    ]
    read = finding(idle["metadata"]["uid"], percent=0.0, idle_since=NOW - timedelta(minutes=5))
    state = ClusterState.from_wire(
        nodes=nodes,
        objects=[namespace(), idle, record(idle), pod, record(pod)],
        namespaces=["team-a"],
    )
    state = dataclasses.replace(state, findings={read.uid: read})
    plan = plan_of(record(idle), state).plan
    if plan.preempt is None:
        return None
    return str(plan.status["preemptedFor"]["name"])


EIGHT = build_node("gpu-1", gpu="mi300x", gpus=8, labels={"pool": "train"})


def test_a_pod_asking_more_gpus_than_any_node_has_preempts_nobody() -> None:
    assert preempted_for(waiting_pod(16), EIGHT) is None
    assert preempted_for(waiting_pod(8), EIGHT) == "notebook"


def test_a_pod_whose_node_selector_no_node_matches_preempts_nobody() -> None:
    assert preempted_for(waiting_pod(2, nodeSelector={"pool": "serve"}), EIGHT) is None
    assert preempted_for(waiting_pod(2, nodeSelector={"pool": "train"}), EIGHT) == "notebook"


def test_a_pod_whose_only_fitting_node_is_cordoned_preempts_nobody() -> None:
    cordoned = build_node("gpu-2", gpu="mi300x", gpus=16, unschedulable=True)
    assert preempted_for(waiting_pod(16), EIGHT, cordoned) is None


def affinity(*expressions: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]
            }
        }
    }


def test_required_node_affinity_is_matched_against_the_nodes_labels() -> None:
    nodes = [NodeInfo.from_wire(EIGHT)]
    wanted = {"key": "pool", "operator": "In", "values": ["serve"]}
    assert not could_be_placed(waiting_pod(2, affinity=affinity(wanted)), nodes)
    assert could_be_placed(
        waiting_pod(2, affinity=affinity({**wanted, "values": ["serve", "train"]})), nodes
    )
    assert not could_be_placed(
        waiting_pod(2, affinity=affinity({"key": "pool", "operator": "DoesNotExist"})), nodes
    )
    assert could_be_placed(
        waiting_pod(2, affinity=affinity({"key": "zone", "operator": "NotIn", "values": ["a"]})),
        nodes,
    )


def test_without_nodes_of_the_resource_observed_the_planner_does_not_judge() -> None:
    """Nodes not observed yet: the waiting pod presses as before."""
    assert preempted_for(waiting_pod(16)) == "notebook"


def test_the_record_of_a_pod_no_node_could_hold_says_nobody_is_preempted_for_it() -> None:
    """Decision 0260: the verdict no longer promises a preemption the decision never makes."""
    pod = waiting_pod(16)
    state = ClusterState.from_wire(
        nodes=[EIGHT], objects=[namespace(), pod, record(pod)], namespaces=["team-a"]
    )
    planned = plan_of(record(pod), state).plan
    told = (
        "Waiting for 16 amd GPUs since 2026-03-01T11:00:00Z: no schedulable node has enough "
        "GPUs and matches its node selector and affinity, so no idle workload is preempted "
        "for it"
    )
    assert planned.status["phase"] == "PendingGpu"
    assert planned.status["verdict"] == told
    assert [(e.type, e.reason, e.message) for e in planned.events] == [
        ("Warning", "WorkloadPendingGpu", told)
    ]
    fits = waiting_pod(8)
    state = ClusterState.from_wire(
        nodes=[EIGHT], objects=[namespace(), fits, record(fits)], namespaces=["team-a"]
    )
    assert plan_of(record(fits), state).plan.status["verdict"] == (
        "Waiting for 8 amd GPUs since 2026-03-01T11:00:00Z: idle workloads under the "
        "OnPressure policy may be preempted for it"
    )
