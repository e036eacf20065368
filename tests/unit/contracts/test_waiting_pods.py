"""Which unbound pods the watcher publishes as waiting for GPUs, and a Deployment's pods
named back to it (decision 0066). Pure functions over pods as the API server returns them."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_contracts.gpu_workloads import (
    deployment_of_pod,
    is_controlled_pod_waiting_for_gpus,
    unschedulable_for_gpus,
)

INSUFFICIENT_GPU = "0/3 nodes are available: 1 Insufficient cpu, 3 Insufficient amd.com/gpu."


def pod(
    *,
    controller: tuple[str, str, str] | None = ("batch/v1", "Job", "train"),
    labels: dict[str, str] | None = None,
    gpus: str | None = "2",
    phase: str = "Pending",
    reason: str = "Unschedulable",
    message: str = INSUFFICIENT_GPU,
) -> dict[str, Any]:
    references = []
    if controller is not None:
        api_version, kind, name = controller
        references = [
            {"apiVersion": api_version, "kind": kind, "name": name, "uid": "u", "controller": True}
        ]
    resources = {"limits": {"amd.com/gpu": gpus}} if gpus else {"requests": {"cpu": "1"}}
    return {
        "metadata": {
            "name": "p",
            "namespace": "team-a",
            "labels": labels or {},
            "ownerReferences": references,
        },
        "spec": {"containers": [{"name": "main", "resources": resources}]},
        "status": {
            "phase": phase,
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
            ],
        },
    }


def test_the_scheduler_naming_a_gpu_resource_it_lacks_is_waiting_for_it() -> None:
    assert unschedulable_for_gpus(pod()) == frozenset({"amd.com/gpu"})
    assert unschedulable_for_gpus(pod(message="0/3 nodes are available: 3 Insufficient cpu.")) == (
        frozenset()
    )
    assert unschedulable_for_gpus(pod(reason="SchedulingGated")) == frozenset()
    assert unschedulable_for_gpus(pod(phase="Running")) == frozenset()
    assert unschedulable_for_gpus(pod(gpus=None)) == frozenset()


@pytest.mark.parametrize(
    ("given", "published"),
    [
        (pod(), True),
        (pod(controller=("apps/v1", "ReplicaSet", "web-5d8f9c7b6")), True),
        (pod(controller=("apps/v1", "StatefulSet", "ranks")), True),
        # A bare Pod is a root, watched on its own stream.
        (pod(controller=None), False),
        # Controlled by something that is never a tracked root's pod-maker.
        (pod(controller=("apps/v1", "DaemonSet", "agents")), False),
        (pod(controller=("ray.io/v1", "RayCluster", "rc")), False),
        # The operator's own pods.
        (pod(labels={"kaiwo.silogen.ai/run-id": "x"}), False),
        # Waiting, but not for GPUs.
        (pod(message="0/3 nodes are available: 3 Insufficient memory."), False),
    ],
)
def test_what_the_watcher_publishes_of_the_unbound_pods(
    given: dict[str, Any], published: bool
) -> None:
    assert is_controlled_pod_waiting_for_gpus(given) is published


def test_a_replica_sets_name_less_the_pods_hash_is_its_deployment() -> None:
    hashed = {"pod-template-hash": "5d8f9c7b6"}
    of_web = pod(controller=("apps/v1", "ReplicaSet", "web-5d8f9c7b6"), labels=hashed)
    assert deployment_of_pod(of_web) == "web"
    dashed = pod(controller=("apps/v1", "ReplicaSet", "my-web-5d8f9c7b6"), labels=hashed)
    assert deployment_of_pod(dashed) == "my-web"
    assert (
        deployment_of_pod(pod(controller=("apps/v1", "ReplicaSet", "by-hand"), labels=hashed))
        is None
    )
    assert deployment_of_pod(pod(controller=("apps/v1", "ReplicaSet", "web-5d8f9c7b6"))) is None
    assert (
        deployment_of_pod(pod(controller=("apps/v1", "ReplicaSet", "-5d8f9c7b6"), labels=hashed))
        is None
    )
    assert deployment_of_pod(pod(labels=hashed)) is None  # a Job's
