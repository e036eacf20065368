from __future__ import annotations

import pytest
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import KaiwoQueueConfigSpec
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation, GpuStats
from kaiwo_planner.domain.scheduling.schedulable import (
    SchedulableVerdict,
    decide_schedulable,
    queue_namespaces,
)

QUEUES = {"kaiwo": (), "team-a": ("research", "prod")}
EIGHT_AMD = GpuStats(vendor="amd", total_gpus=8, min_gpus_per_node=8)


def _alloc(gpus: int, vendor: str = "amd") -> GpuAllocation:
    return GpuAllocation(gpus=gpus, gpus_per_replica=gpus, replicas=1, vendor=vendor)


@pytest.mark.parametrize(
    ("queue", "namespace", "gpus", "stats", "expected"),
    [
        (
            "missing",
            "research",
            0,
            EIGHT_AMD,
            SchedulableVerdict(
                schedulable=False,
                reason="ClusterQueueNotFound",
                message="Cluster queue 'missing' is not defined in KaiwoQueueConfig 'kaiwo'",
            ),
        ),
        (
            "team-a",
            "default",
            1,
            EIGHT_AMD,
            SchedulableVerdict(
                schedulable=False,
                reason="WrongQueueNamespace",
                message=(
                    "Cluster queue 'team-a' defines one or more namespaces, but workload "
                    "namespace 'default' is not one of them"
                ),
            ),
        ),
        (
            "kaiwo",
            "default",
            2,
            GpuStats(vendor="amd"),
            SchedulableVerdict(
                schedulable=False, reason="NoGPUs", message="Cluster has 0 GPUs (vendor: amd)"
            ),
        ),
        (
            "team-a",
            "prod",
            9,
            EIGHT_AMD,
            SchedulableVerdict(
                schedulable=False,
                reason="InsufficientGPUs",
                message="Cluster has 8 GPUs, but requested for 9 GPUs (vendor: amd)",
            ),
        ),
        (
            "team-a",
            "research",
            8,
            EIGHT_AMD,
            SchedulableVerdict(
                schedulable=True,
                reason="Schedulable",
                message="Cluster has sufficient GPU resources",
            ),
        ),
        (
            "kaiwo",
            "anywhere",
            0,
            GpuStats(vendor="amd"),
            SchedulableVerdict(
                schedulable=True,
                reason="Schedulable",
                message="Workload does not require GPU resources",
            ),
        ),
    ],
    ids=["queue-unknown", "wrong-namespace", "no-gpus", "insufficient", "enough", "cpu-only"],
)
def test_schedulable_reasons(
    queue: str, namespace: str, gpus: int, stats: GpuStats, expected: SchedulableVerdict
) -> None:
    verdict = decide_schedulable(
        cluster_queue=queue,
        namespace=namespace,
        queue_namespaces=QUEUES,
        allocation=_alloc(gpus),
        stats=stats,
    )
    assert verdict == expected
    assert verdict.condition_status == ("True" if expected.schedulable else "False")


def test_nvidia_vendor_in_message() -> None:
    verdict = decide_schedulable(
        cluster_queue="kaiwo",
        namespace="default",
        queue_namespaces=QUEUES,
        allocation=_alloc(1, "nvidia"),
        stats=GpuStats(vendor="nvidia"),
    )
    assert verdict.message == "Cluster has 0 GPUs (vendor: nvidia)"


def test_queue_namespaces_from_spec() -> None:
    spec = KaiwoQueueConfigSpec.from_wire(
        {
            "clusterQueues": [
                {"name": "kaiwo"},
                {"name": "team-a", "namespaces": ["prod", "research"]},
            ]
        }
    )
    assert queue_namespaces(spec) == {"kaiwo": (), "team-a": ("prod", "research")}
    assert queue_namespaces(None) == {}
