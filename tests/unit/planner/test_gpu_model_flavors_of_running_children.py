"""A running Job keeps the ``gpuModels`` flavor terms it was made with when the flavors holding
its models change, and is told nothing of it; a Deployment takes the new ones like any template
change (decision 0261). Expected values written by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kaiwo_planner.domain.children.pod_template import only_flavor_terms_differ
from kaiwo_planner.domain.state.cluster import ClusterState

from tests.planning_calls import planned
from tests.unit.planner.conftest import build_node
from tests.unit.planner.test_planning import queue_config

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
KAIWO = "kaiwo.silogen.ai/v1alpha1"
KUEUE = "kueue.x-k8s.io/v1beta1"
POOL = "kaiwo/nodepool"
MODEL = "kaiwo/gpu-model"


def flavor(name: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": {POOL: name}},
    }


CLUSTER_QUEUE = {
    "apiVersion": KUEUE,
    "kind": "ClusterQueue",
    "metadata": {"name": "kaiwo"},
    "spec": {
        "resourceGroups": [
            {
                "coveredResources": ["amd.com/gpu"],
                "flavors": [{"name": "pool-a"}, {"name": "pool-b"}],
            }
        ]
    },
}


def node(name: str, pool: str, model: str) -> dict[str, Any]:
    return build_node(name, gpu="mi300x", labels={POOL: pool, MODEL: model})


BEFORE = [
    node("a-0", "pool-a", "mi250x"),
    node("b-0", "pool-b", "mi300x"),
    node("b-1", "pool-b", "mi250x"),
]
"""Both flavors hold an MI250X: the pods name no flavor."""
AFTER = BEFORE[:2]
"""The MI250X node of pool-b left: only pool-a holds the model now."""

TERM_OF_POOL_A = {
    "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": MODEL, "operator": "In", "values": ["mi250x"]},
                    {"key": POOL, "operator": "In", "values": ["pool-a"]},
                ]
            }
        ]
    }
}
PLAIN_TERM = {
    "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": MODEL, "operator": "In", "values": ["mi250x"]}]}
        ]
    }
}


def workload(kind: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "user": "ann@example.com",
        "gpus": 8,
        "gpuModels": ["mi250x"],
        "image": "rocm/pytorch:latest",
    }
    if kind == "KaiwoJob":
        spec["entrypoint"] = "python train.py"
    return {
        "apiVersion": KAIWO,
        "kind": kind,
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": "job-uid",
            "generation": 1,
            "creationTimestamp": "2026-01-01T11:58:00Z",
        },
        "spec": spec,
        "status": {"status": "RUNNING", "startTime": "2026-01-01T11:59:00Z"},
    }


def state(nodes: list[dict[str, Any]], *objects: dict[str, Any]) -> ClusterState:
    return ClusterState.from_wire(
        nodes=nodes,
        objects=[
            queue_config({"name": "kaiwo"}),
            CLUSTER_QUEUE,
            flavor("pool-a"),
            flavor("pool-b"),
            *objects,
        ],
        namespaces=["team-a"],
    )


def main_child(owner: dict[str, Any], nodes: list[dict[str, Any]], *objects: Any) -> Any:
    plan = planned(owner=owner, cluster=state(nodes, owner, *objects), now=NOW)
    [child] = [c for c in plan.desired if c["kind"] in ("Job", "Deployment")]
    return plan, child


def running(child: dict[str, Any], *, ready: int = 1) -> dict[str, Any]:
    """The child as the API server holds it once it runs, ``ready`` pods of it Ready."""
    found = {**child, "metadata": {**child["metadata"], "uid": "child-uid"}}
    found["metadata"]["ownerReferences"] = [{"uid": "job-uid", "controller": True}]
    if child["kind"] == "Job":
        found["spec"] = {**child["spec"], "suspend": False}
        found["status"] = {"active": 1, "ready": ready, "startTime": "2026-01-01T11:59:00Z"}
    else:
        found["status"] = {"replicas": 1, "readyReplicas": ready}
    return found


def admitted_workload() -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": "job-train",
            "namespace": "team-a",
            "uid": "wl-uid",
            "ownerReferences": [{"uid": "child-uid"}],
        },
        "status": {"conditions": [{"type": "Admitted", "status": "True"}]},
    }


def affinity(child: dict[str, Any]) -> Any:
    return child["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]


def child_spec_applied(plan: Any) -> list[dict[str, Any]]:
    conditions = (plan.status or {}).get("conditions") or ()
    return [c for c in conditions if c["type"] == "ChildSpecApplied" and c["status"] == "False"]


def test_a_running_job_keeps_its_flavor_terms_and_is_told_nothing() -> None:
    """Before, its status said ``ChildSpecApplied`` False ``JobFieldsImmutable`` "a Job's pod
    template ... cannot change after it is created: spec.template.spec.affinity...", for a
    node that left."""
    _, made = main_child(workload("KaiwoJob"), BEFORE)
    assert affinity(made) == PLAIN_TERM
    job = running(made)

    plan, kept = main_child(workload("KaiwoJob"), AFTER, job, admitted_workload())

    assert affinity(kept) == PLAIN_TERM
    assert child_spec_applied(plan) == []
    # Made now, the Job would name pool-a, the only flavor holding the model.
    _, fresh = main_child(workload("KaiwoJob"), AFTER)
    assert affinity(fresh) == TERM_OF_POOL_A


def test_a_job_no_pod_of_which_is_ready_or_whose_models_were_edited_is_told() -> None:
    """Admitted by the terms of before, it may wait for ever: re-creating it helps. An edit of
    ``gpuModels`` is the user's own, and cannot reach the running Job either."""
    _, made = main_child(workload("KaiwoJob"), BEFORE)
    waiting = running(made, ready=0)
    plan, _ = main_child(workload("KaiwoJob"), AFTER, waiting, admitted_workload())
    [told] = child_spec_applied(plan)
    assert told["reason"] == "JobFieldsImmutable"

    edited = workload("KaiwoJob")
    edited["spec"]["gpuModels"] = ["mi300x"]
    plan, _ = main_child(edited, AFTER, running(made), admitted_workload())
    [told] = child_spec_applied(plan)
    assert told["reason"] == "JobFieldsImmutable"


def test_a_deployment_takes_the_flavors_of_now() -> None:
    _, made = main_child(workload("KaiwoService"), BEFORE)
    assert affinity(made) == PLAIN_TERM

    plan, rolled = main_child(workload("KaiwoService"), AFTER, running(made))

    assert affinity(rolled) == TERM_OF_POOL_A
    assert child_spec_applied(plan) == []


def test_only_the_flavor_terms_differ_when_every_term_asks_the_same_models() -> None:
    def job(node_affinity: dict[str, Any]) -> dict[str, Any]:
        return {"spec": {"template": {"spec": {"affinity": {"nodeAffinity": node_affinity}}}}}

    assert only_flavor_terms_differ(job(TERM_OF_POOL_A), job(PLAIN_TERM))
    other_model = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": MODEL, "operator": "In", "values": ["mi300x"]}]}
            ]
        }
    }
    assert not only_flavor_terms_differ(job(TERM_OF_POOL_A), job(other_model))
    assert not only_flavor_terms_differ(job(TERM_OF_POOL_A), {"spec": {}})
