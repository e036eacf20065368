"""An owner observed only in part (too large for the bus): reported, never planned from."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kaiwo_contracts.events.observed import OversizedObject, reduced_object
from kaiwo_planner.domain.state.cluster import ClusterState

from tests.planning_calls import planned

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
T_NOW = "2026-01-01T12:00:00Z"
KAIWO = "kaiwo.silogen.ai/v1alpha1"
MARKER = OversizedObject(size_bytes=1_153_433, limit_bytes=1_048_576)
MESSAGE = (
    "The object is larger as JSON than the 1,048,576 bytes a message on the operator's event "
    "bus may carry: only its metadata was observed, so nothing was planned or changed. Make it "
    "smaller (move large values into a ConfigMap or Secret)."
)


def cluster(*objects: dict[str, Any]) -> ClusterState:
    return ClusterState.from_wire(nodes=[], objects=list(objects), namespaces=["team-a"])


def test_an_oversized_running_job_keeps_its_phase_and_children_and_says_why() -> None:
    whole = {
        "apiVersion": KAIWO,
        "kind": "KaiwoJob",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": "job-uid",
            "resourceVersion": "9",
            "generation": 3,
            "annotations": {"big": "x" * 100},
        },
        "spec": {"image": "busybox", "entrypoint": "echo " + "x" * 100},
        "status": {"status": "RUNNING", "startTime": "2026-01-01T11:00:00Z"},
    }
    owner = reduced_object(whole, oversized=MARKER)

    plan = planned(owner=owner, cluster=cluster(owner), now=NOW)

    assert plan is not None
    assert plan.model_dump(mode="json") == {
        "owner": {
            "apiVersion": KAIWO,
            "kind": "KaiwoJob",
            "name": "train",
            "namespace": "team-a",
            "uid": "job-uid",
        },
        "observedGeneration": 3,
        "observedResourceVersion": "9",
        "desired": [],
        "status": {
            "status": "RUNNING",
            "startTime": "2026-01-01T11:00:00Z",
            "conditions": [
                {
                    "type": "Valid",
                    "status": "False",
                    "observedGeneration": 3,
                    "lastTransitionTime": T_NOW,
                    "reason": "ObjectTooLarge",
                    "message": MESSAGE,
                }
            ],
            "observedGeneration": 3,
        },
        "events": [{"type": "Warning", "reason": "ObjectTooLarge", "message": MESSAGE}],
        "prune": [],
        "pruneSelector": {},
        "deleteOwner": False,
        # Held only in part: named without a digest (only its identity can be compared).
        "sources": [
            {
                "ref": {
                    "apiVersion": KAIWO,
                    "kind": "KaiwoJob",
                    "name": "train",
                    "namespace": "team-a",
                    "uid": "job-uid",
                },
                "generation": 3,
                "resourceVersion": "9",
                "digest": None,
            }
        ],
    }


def test_an_oversized_new_queue_config_fails_without_an_observed_generation() -> None:
    whole = {
        "apiVersion": KAIWO,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "kqc-uid", "resourceVersion": "4", "generation": 1},
        "spec": {"clusterQueues": []},
    }
    owner = reduced_object(whole, oversized=MARKER, minimal=True)

    plan = planned(owner=owner, cluster=cluster(owner), now=NOW)

    assert plan is not None and plan.status is not None
    assert plan.status["status"] == "FAILED"
    assert "observedGeneration" not in plan.status
    assert [(c["reason"], c["message"]) for c in plan.status["conditions"]] == [
        ("ObjectTooLarge", MESSAGE)
    ]
    assert (plan.desired, plan.prune) == ((), ())


def test_an_oversized_model_keeps_its_pods_and_status_and_says_why() -> None:
    """Observed as its metadata only, a Model is told it is too large, not that its spec
    lacks the fields it was observed without; its Pods and its status stay as they were."""
    whole = {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {
            "name": "chat",
            "namespace": "team-a",
            "uid": "model-uid",
            "resourceVersion": "7",
            "generation": 2,
        },
        "spec": {
            "url": "hf://org/chat",
            "engine": "VLLM",
            "features": ["TextGeneration"],
            "files": [{"path": "/config/big.json", "content": "x" * 100}],
        },
        "status": {"replicas": {"all": 1, "ready": 1}},
    }
    owner = reduced_object(whole, oversized=MARKER)

    plan = planned(owner=owner, cluster=cluster(owner), now=NOW)

    assert plan is not None and plan.status is not None
    assert (plan.desired, plan.prune) == ((), ())
    assert plan.status["replicas"] == {"all": 1, "ready": 1}
    assert plan.status["observedGeneration"] == 2
    assert [
        (c["type"], c["status"], c["reason"], c["message"]) for c in plan.status["conditions"]
    ] == [("Valid", "False", "ObjectTooLarge", MESSAGE)]
    assert [(e.type, e.reason, e.message) for e in plan.events] == [
        ("Warning", "ObjectTooLarge", MESSAGE)
    ]
