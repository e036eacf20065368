"""Objects as the watcher observes them, for the console's tests."""

from __future__ import annotations

from datetime import datetime
from typing import Any


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def kaiwojob(
    name: str,
    namespace: str = "team-a",
    *,
    phase: str = "PENDING",
    queue: str | None = "research",
    gpus: int = 8,
    user: str = "alice@example.com",
    duration: str | None = None,
    created: datetime | None = None,
    conditions: list[dict[str, Any]] | None = None,
    kind: str = "KaiwoJob",
    version: int = 1,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"user": user, "gpus": gpus, "image": "rocm/pytorch"}
    if queue:
        spec["clusterQueue"] = queue
    if duration:
        spec["duration"] = duration
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "resourceVersion": str(version),
    }
    if created is not None:
        metadata["creationTimestamp"] = stamp(created)
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": kind,
        "metadata": metadata,
        "spec": spec,
        "status": {"status": phase, "conditions": conditions or []},
    }


def kueue_workload(
    owner: str,
    namespace: str = "team-a",
    *,
    gpus: int = 8,
    resource: str = "amd.com/gpu",
    local_queue: str = "research",
    admitted_to: str | None = None,
    admitted_at: datetime | None = None,
    finished_at: datetime | None = None,
    created: datetime | None = None,
    priority: int = 0,
    waiting_message: str | None = None,
    version: int = 1,
) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = []
    status: dict[str, Any] = {"conditions": conditions}
    if admitted_to is not None:
        status["admission"] = {
            "clusterQueue": admitted_to,
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": {resource: "amd-mi300x"},
                    "resourceUsage": {resource: str(gpus)},
                }
            ],
        }
        conditions.append(
            {
                "type": "Admitted",
                "status": "True",
                "lastTransitionTime": stamp(admitted_at) if admitted_at else None,
            }
        )
    if waiting_message is not None:
        conditions.append(
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": waiting_message,
            }
        )
    if finished_at is not None:
        conditions.append(
            {"type": "Finished", "status": "True", "lastTransitionTime": stamp(finished_at)}
        )
    metadata: dict[str, Any] = {
        "name": f"job-{owner}-abcde",
        "namespace": namespace,
        "uid": f"wl-{namespace}-{owner}",
        "resourceVersion": str(version),
        "ownerReferences": [{"kind": "Job", "name": owner, "uid": f"job-{owner}"}],
    }
    if created is not None:
        metadata["creationTimestamp"] = stamp(created)
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": metadata,
        "spec": {
            "queueName": local_queue,
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"resources": {"requests": {resource: str(gpus)}}}]}
                    },
                }
            ],
        },
        "status": status,
    }


def cluster_queue(name: str, *, amd: int = 16, nvidia: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "uid": f"cq-{name}", "resourceVersion": "1"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["amd.com/gpu", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "amd-mi300x",
                            "resources": [
                                {"name": "amd.com/gpu", "nominalQuota": amd},
                                {"name": "nvidia.com/gpu", "nominalQuota": 0},
                            ],
                        },
                        {
                            "name": "nvidia-h100",
                            "resources": [
                                {"name": "amd.com/gpu", "nominalQuota": 0},
                                {"name": "nvidia.com/gpu", "nominalQuota": nvidia},
                            ],
                        },
                    ],
                }
            ]
        },
    }


def local_queue(namespace: str, name: str, cluster_queue_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "LocalQueue",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"lq-{namespace}-{name}",
            "resourceVersion": "1",
        },
        "spec": {"clusterQueue": cluster_queue_name},
    }


def gpu_node(name: str, *, gpus: int = 8, resource: str = "amd.com/gpu") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"node-{name}",
            "resourceVersion": "1",
            "labels": {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"},
        },
        "status": {
            "capacity": {resource: str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def gpu_pod(
    name: str,
    namespace: str,
    node: str,
    *,
    gpus: int,
    resource: str = "amd.com/gpu",
    workload: str | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    """A Pod on ``node``; ``workload``: the KaiwoJob it runs for (Kaiwo's system labels, its
    uid as :func:`kaiwojob` makes it)."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"pod-{name}",
        "resourceVersion": "1",
    }
    if workload is not None:
        metadata["labels"] = {
            "kaiwo.silogen.ai/run-id": f"uid-{namespace}-{workload}",
            "kaiwo.silogen.ai/type": "job",
            "kaiwo.silogen.ai/name": workload,
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "resources": {"requests": {resource: str(gpus)}}}],
        },
        "status": {"phase": phase},
    }
