"""A child Kueue admitted into a flavor that holds none of its ``gpuModels`` is made anew
(decision 0264), by hand.

Queue ``kaiwo`` has a flavor per GPU model, MI300X first, and a node of each. A KaiwoJob asks
for ``gpuModels: [mi250x]``. Its Job made before the queue was observed has no flavor terms
(decision 0237), so Kueue admitted it into ``mi300x``: its pod asks for an MI300X node with
an MI250X GPU and waits for ever.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kaiwo_planner.domain.state.cluster import ClusterState

from tests.planning_calls import planned
from tests.unit.planner.conftest import build_node
from tests.unit.planner.test_planning import (
    NOW,
    T_EARLIER,
    admitted,
    condition,
    kaiwo_job,
    queue_config,
)

PRODUCT = "amd.com/gpu.product-name"
MI300X = {PRODUCT: "AMD_Instinct_MI300X_OAM"}
MI250X = {PRODUCT: "AMD_Instinct_MI250X"}
SPEC = {
    "user": "ann@example.com",
    "gpus": 8,
    "image": "rocm/pytorch:latest",
    "entrypoint": "python train.py",
    "gpuModels": ["mi250x"],
}
NODES = [
    build_node("mi300x-0", gpu="mi300x", labels={**MI300X, "kaiwo/gpu-model": "mi300x"}),
    build_node("mi250x-0", gpu="mi300x", labels={**MI250X, "kaiwo/gpu-model": "mi250x"}),
]


def kueue_object(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": kind,
        "metadata": {"name": name, "uid": f"{kind}-{name}"},
        "spec": spec,
    }


QUEUE_OBJECTS = (
    kueue_object(
        "ClusterQueue",
        "kaiwo",
        {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "amd.com/gpu"],
                    "flavors": [{"name": "mi300x"}, {"name": "mi250x"}],
                }
            ]
        },
    ),
    kueue_object("ResourceFlavor", "mi300x", {"nodeLabels": MI300X}),
    kueue_object("ResourceFlavor", "mi250x", {"nodeLabels": MI250X}),
)


def cluster(*objects: dict[str, Any], workloads: tuple[dict[str, Any], ...]) -> ClusterState:
    return ClusterState.from_wire(
        nodes=NODES,
        objects=[queue_config({"name": "kaiwo"}), *objects],
        kueue_workloads=workloads,
        namespaces=["team-a"],
    )


def admitted_into(flavor: str) -> dict[str, Any]:
    """The Job's Kueue Workload, admitted into ``flavor``."""
    workload = admitted("child-uid")
    workload["status"]["admission"] = {
        "clusterQueue": "kaiwo",
        "podSetAssignments": [
            {"name": "main", "flavors": {"amd.com/gpu": flavor, "cpu": flavor}, "count": 1}
        ],
    }
    return workload


def job_made_before_the_queue_was_seen() -> tuple[dict[str, Any], dict[str, Any]]:
    """The KaiwoJob STARTING, and its Job as its first plan made it, with the queue not yet
    observed (no flavor terms), started by Kueue."""
    owner = kaiwo_job(SPEC)
    first = planned(owner=owner, cluster=cluster(owner, workloads=()), now=NOW)
    assert first is not None
    (job,) = copy.deepcopy(first.desired)
    terms = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    assert terms["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "kaiwo/gpu-model", "operator": "In", "values": ["mi250x"]}]}
    ]
    job["metadata"]["uid"] = "child-uid"
    job["spec"]["suspend"] = False
    job["status"] = {"active": 1, "startTime": T_EARLIER}
    return kaiwo_job(SPEC, status={**first.status, "status": "STARTING"}), job


def test_a_job_admitted_into_a_flavor_without_its_models_is_made_anew() -> None:
    owner, job = job_made_before_the_queue_was_seen()

    plan = planned(
        owner=owner,
        cluster=cluster(owner, job, *QUEUE_OBJECTS, workloads=(admitted_into("mi300x"),)),
        now=NOW,
    )

    assert plan is not None
    assert plan.desired == ()
    assert any(rule.kind == "Job" for rule in plan.prune)
    told = (
        "Job train: Kueue admitted it into flavor mi300x, no node of which holds one of the "
        "spec's gpuModels, before any of its pods ran: the Job is made anew, and Kueue admits "
        "it into a flavor that holds them"
    )
    replacing = condition(plan, "ChildSpecApplied")
    assert (replacing["status"], replacing["reason"], replacing["message"]) == (
        "False",
        "Replacing",
        told,
    )
    assert [(e.type, e.reason, e.message) for e in plan.events if e.reason == "ChildReplacing"] == [
        ("Normal", "ChildReplacing", told)
    ]

    # Made again, it names the flavor that holds its model: Kueue admits it there.
    replaced = kaiwo_job(SPEC, status=plan.status)
    again = planned(
        owner=replaced, cluster=cluster(replaced, *QUEUE_OBJECTS, workloads=()), now=NOW
    )
    assert again is not None
    (made,) = again.desired
    affinity = made["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    assert affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": "kaiwo/gpu-model", "operator": "In", "values": ["mi250x"]},
                {"key": PRODUCT, "operator": "In", "values": ["AMD_Instinct_MI250X"]},
            ]
        }
    ]


@pytest.mark.parametrize(
    ("flavor", "status", "objects"),
    [
        pytest.param("mi250x", {}, QUEUE_OBJECTS, id="admitted into the flavor of its model"),
        pytest.param("mi300x", {"ready": 1}, QUEUE_OBJECTS, id="a pod of it is ready"),
        pytest.param("mi300x", {"succeeded": 1}, QUEUE_OBJECTS, id="a pod of it succeeded"),
        pytest.param("mi300x", {}, QUEUE_OBJECTS[:2], id="a flavor of the queue not observed"),
        pytest.param("mi300x", {}, QUEUE_OBJECTS[1:], id="the queue not observed"),
    ],
)
def test_a_job_is_kept_where_its_models_are_or_what_ran_or_unknown(
    flavor: str, status: dict[str, Any], objects: tuple[dict[str, Any], ...]
) -> None:
    """Nothing is made anew that runs where its models are, that ran (its work would be
    lost), or while what the queue's flavors hold is not known."""
    owner, job = job_made_before_the_queue_was_seen()
    job["status"] = {**job["status"], **status}

    plan = planned(
        owner=owner,
        cluster=cluster(owner, job, *objects, workloads=(admitted_into(flavor),)),
        now=NOW,
    )

    assert plan is not None
    assert [m["kind"] for m in plan.desired] == ["Job"]
    assert condition(plan, "ChildSpecApplied")["reason"] != "Replacing"
