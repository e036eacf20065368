"""A pod labelled with the run-id of a workload of another namespace is not that workload's.

Anyone who may create a pod in ``vision`` may label it ``kaiwo.silogen.ai/run-id: <uid>`` with
the uid of a KaiwoJob of ``ml-team`` (decision 0252). Before, such a pod in CrashLoopBackOff
gave the KaiwoJob of ``ml-team`` ``ChildHealthy=False`` and a Warning Event naming the pod.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kaiwo_planner.domain.state.cluster import ClusterState

from tests.planning_calls import planned

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
OWNER_UID = "0f9a3c52-7a51-4d36-9a55-5f4f4d7e2b10"


def owner() -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {
            "name": "train",
            "namespace": "ml-team",
            "uid": OWNER_UID,
            "generation": 1,
            "resourceVersion": "10",
        },
        "spec": {"image": "busybox"},
        "status": {"status": "RUNNING", "observedGeneration": 1},
    }


def crashing_pod(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"{name}-uid",
            "resourceVersion": "13",
            "labels": {"kaiwo.silogen.ai/run-id": OWNER_UID},
        },
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "main",
                    "ready": False,
                    "restartCount": 9,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                }
            ],
        },
    }


def running_job() -> dict[str, Any]:
    """The KaiwoJob's Job, one pod active."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "ml-team",
            "uid": "job-uid",
            "resourceVersion": "12",
            "labels": {
                "app.kubernetes.io/managed-by": "kaiwo",
                "kaiwo.silogen.ai/owner-uid": OWNER_UID,
            },
            "ownerReferences": [
                {
                    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
                    "kind": "KaiwoJob",
                    "name": "train",
                    "uid": OWNER_UID,
                    "controller": True,
                }
            ],
        },
        "spec": {},
        "status": {"active": 1, "ready": 1},
    }


QUEUES = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoQueueConfig",
    "metadata": {"name": "kaiwo", "uid": "kqc-uid", "generation": 1},
    "spec": {
        "resourceFlavors": [{"name": "cpu"}],
        "clusterQueues": [
            {
                "name": "kaiwo",
                "spec": {
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {"name": "cpu", "resources": [{"name": "cpu", "nominalQuota": 8}]}
                            ],
                        }
                    ]
                },
            }
        ],
    },
}


def cluster(*objects: dict[str, Any]) -> ClusterState:
    return ClusterState.from_wire(
        objects=[QUEUES, owner(), running_job(), *objects], namespaces=["ml-team", "vision"]
    )


def test_only_the_pods_of_the_workloads_namespace_carry_its_run_id() -> None:
    state = cluster(crashing_pod("vision", "decoy"), crashing_pod("ml-team", "train-0"))

    found = state.objects_labelled("kaiwo.silogen.ai/run-id", OWNER_UID, kind="Pod")

    assert [pod["metadata"]["name"] for pod in found] == ["train-0"]


def test_a_namespace_given_keeps_that_namespaces_pods() -> None:
    state = cluster(crashing_pod("vision", "decoy"), crashing_pod("ml-team", "train-0"))

    found = state.objects_labelled("kaiwo.silogen.ai/run-id", OWNER_UID, namespace="vision")

    assert [pod["metadata"]["name"] for pod in found] == ["decoy"]


def test_a_label_value_that_is_no_observed_uid_keeps_every_namespace() -> None:
    state = ClusterState.from_wire(
        objects=[crashing_pod("vision", "decoy"), crashing_pod("ml-team", "train-0")],
        namespaces=["ml-team", "vision"],
    )

    found = state.objects_labelled("kaiwo.silogen.ai/run-id", OWNER_UID, kind="Pod")

    assert sorted(pod["metadata"]["name"] for pod in found) == ["decoy", "train-0"]


def test_a_crashing_pod_of_another_namespace_changes_nothing_of_the_workload() -> None:
    alone = planned(owner=owner(), cluster=cluster(), now=NOW)
    decoyed = planned(owner=owner(), cluster=cluster(crashing_pod("vision", "decoy")), now=NOW)

    assert decoyed is not None and decoyed.status is not None
    assert [c["type"] for c in decoyed.status.get("conditions", [])].count("ChildHealthy") == 0
    assert [e.reason for e in decoyed.events] == [e.reason for e in alone.events]  # type: ignore[union-attr]
    assert decoyed == alone


def test_a_crashing_pod_of_its_own_namespace_is_told() -> None:
    plan = planned(owner=owner(), cluster=cluster(crashing_pod("ml-team", "train-0")), now=NOW)

    assert plan is not None and plan.status is not None
    [healthy] = [c for c in plan.status["conditions"] if c["type"] == "ChildHealthy"]
    assert (healthy["status"], healthy["reason"]) == ("False", "CrashLoopBackOff")
    assert healthy["message"] == "pod train-0: container main is waiting: CrashLoopBackOff"
