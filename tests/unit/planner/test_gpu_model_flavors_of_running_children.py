"""A running Job, RayJob or AppWrapper keeps the ``gpuModels`` flavor terms it was made with
when the flavors holding its models change, and is told nothing of it while it is where its
models are; a Deployment takes the new ones like any template change (decisions 0261, 0267).
Expected values written by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_planner.domain.children.pod_template import without_flavor_terms
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
    [child] = [c for c in plan.desired if c["kind"] in MAIN_KINDS]
    return plan, child


MAIN_KINDS = ("Job", "Deployment", "RayJob", "AppWrapper")


def running(child: dict[str, Any], *, ready: int = 1) -> dict[str, Any]:
    """The child as the API server holds it once it runs, ``ready`` pods of it Ready."""
    found = {**child, "metadata": {**child["metadata"], "uid": "child-uid"}}
    found["metadata"]["ownerReferences"] = [{"uid": "job-uid", "controller": True}]
    if child["kind"] == "Job":
        found["spec"] = {**child["spec"], "suspend": False}
        found["status"] = {"active": 1, "ready": ready, "startTime": "2026-01-01T11:59:00Z"}
    elif child["kind"] == "RayJob":
        found["spec"] = {**child["spec"], "suspend": False}
        found["status"] = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}
    elif child["kind"] == "AppWrapper":
        found["spec"] = {**child["spec"], "suspend": False}
        found["status"] = {"phase": "Running"}
    else:
        found["status"] = {"replicas": 1, "readyReplicas": ready}
    return found


def admitted_workload(flavor: str | None = None) -> dict[str, Any]:
    """The child's Kueue Workload, admitted (into ``flavor`` for the GPUs, when given)."""
    workload: dict[str, Any] = {
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
    if flavor is not None:
        assignment = {"name": "main", "flavors": {"amd.com/gpu": flavor}, "count": 1}
        workload["status"]["admission"] = {
            "clusterQueue": "kaiwo",
            "podSetAssignments": [assignment],
        }
    return workload


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


def test_a_job_is_told_only_where_the_terms_matter() -> None:
    """Decision 0267. Not yet Ready where its model is (pool-a), it is told nothing. Admitted
    into pool-b, which no longer holds the model, it waits for ever: made anew while nothing
    of it ran (decision 0264), told once a pod ran (re-creating it is what helps). An edit of
    ``gpuModels`` is the user's own, and cannot reach the running Job either."""
    _, made = main_child(workload("KaiwoJob"), BEFORE)

    plan, _ = main_child(
        workload("KaiwoJob"), AFTER, running(made, ready=0), admitted_workload("pool-a")
    )
    assert child_spec_applied(plan) == []

    plan = planned(
        owner=workload("KaiwoJob"),
        cluster=state(
            AFTER, workload("KaiwoJob"), running(made, ready=0), admitted_workload("pool-b")
        ),
        now=NOW,
    )
    [replacing] = child_spec_applied(plan)
    assert replacing["reason"] == "Replacing"
    assert plan.desired == ()

    plan, _ = main_child(workload("KaiwoJob"), AFTER, running(made), admitted_workload("pool-b"))
    [told] = child_spec_applied(plan)
    assert told["reason"] == "JobFieldsImmutable"
    assert "spec.template.spec.affinity.nodeAffinity" in told["message"]

    edited = workload("KaiwoJob")
    edited["spec"]["gpuModels"] = ["mi300x"]
    plan, _ = main_child(edited, AFTER, running(made), admitted_workload())
    [told] = child_spec_applied(plan)
    assert told["reason"] == "JobFieldsImmutable"


def ray_workload(kind: str) -> dict[str, Any]:
    owner = workload(kind)
    if kind == "KaiwoJob":
        owner["spec"]["ray"] = True
    else:
        owner["spec"]["ray"] = True
        owner["spec"]["serveConfigV2"] = "applications: []"
    return owner


@pytest.mark.parametrize(
    ("kind", "elsewhere"),
    [
        # Its Ray job runs: what re-creating it would restart is told.
        pytest.param("KaiwoJob", "JobFieldsImmutable", id="RayJob"),
        # No pod of its service is bound to a node: made anew (decision 0264).
        pytest.param("KaiwoService", "Replacing", id="AppWrapper"),
    ],
)
def test_a_running_ray_child_keeps_its_flavor_terms_and_is_told_nothing(
    kind: str, elsewhere: str
) -> None:
    """Before, its status said ``ChildSpecApplied`` False: the RayJob keeps its spec, or the
    AppWrapper its components, "...affinity.nodeAffinity...", for a node that left."""
    _, made = main_child(ray_workload(kind), BEFORE)
    child = running(made)

    plan, kept = main_child(ray_workload(kind), AFTER, child, admitted_workload("pool-a"))

    field = {"RayJob": "rayClusterSpec", "AppWrapper": "components"}[made["kind"]]
    assert kept["spec"][field] == made["spec"][field]
    assert child_spec_applied(plan) == []
    # Admitted where the model is not.
    plan = planned(
        owner=ray_workload(kind),
        cluster=state(AFTER, ray_workload(kind), child, admitted_workload("pool-b")),
        now=NOW,
    )
    [told] = child_spec_applied(plan)
    assert told["reason"] == elsewhere
    assert "node" in told["message"]


def test_a_deployment_takes_the_flavors_of_now() -> None:
    _, made = main_child(workload("KaiwoService"), BEFORE)
    assert affinity(made) == PLAIN_TERM

    plan, rolled = main_child(workload("KaiwoService"), AFTER, running(made))

    assert affinity(rolled) == TERM_OF_POOL_A
    assert child_spec_applied(plan) == []


def test_only_paths_of_terms_asking_the_same_models_in_both_are_left_out() -> None:
    def job(node_affinity: dict[str, Any]) -> dict[str, Any]:
        return {"spec": {"template": {"spec": {"affinity": {"nodeAffinity": node_affinity}}}}}

    def ray_job(node_affinity: dict[str, Any]) -> dict[str, Any]:
        template = {"spec": {"affinity": {"nodeAffinity": node_affinity}}}
        return {"spec": {"rayClusterSpec": {"workerGroupSpecs": [{"template": template}]}}}

    term = "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    paths = (f"{term}.nodeSelectorTerms[0].matchExpressions", "spec.template.spec.containers")
    assert without_flavor_terms(paths, job(TERM_OF_POOL_A), job(PLAIN_TERM)) == paths[1:]
    worker = "spec.rayClusterSpec.workerGroupSpecs[0].template.spec.affinity.nodeAffinity"
    assert without_flavor_terms((worker,), ray_job(TERM_OF_POOL_A), ray_job(PLAIN_TERM)) == ()
    other_model = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": MODEL, "operator": "In", "values": ["mi300x"]}]}
            ]
        }
    }
    assert without_flavor_terms(paths, job(TERM_OF_POOL_A), job(other_model)) == paths
    assert without_flavor_terms(paths, job(TERM_OF_POOL_A), {"spec": {}}) == paths
