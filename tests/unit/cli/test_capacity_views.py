"""What ``kaiwo queues`` and ``kaiwo nodes`` print, from hand-made Kueue objects and Nodes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kaiwo_cli.capacity_views import (
    cluster_queue_table,
    gpu_nodes,
    local_queue_status_table,
    local_queue_table,
    node_table,
    pending_table,
    pool_summary,
)
from kaiwo_contracts.queue_estimates.eta import Basis, Eta, Method
from kaiwo_contracts.queue_estimates.kueue import Placed

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)

CLUSTER_QUEUE = {
    "metadata": {"name": "team-nlp"},
    "spec": {
        "resourceGroups": [
            {
                "coveredResources": ["amd.com/gpu", "memory"],
                "flavors": [
                    {
                        "name": "mi300x",
                        "resources": [
                            {"name": "amd.com/gpu", "nominalQuota": 16},
                            {"name": "memory", "nominalQuota": "1Ti"},
                        ],
                    }
                ],
            }
        ]
    },
}
EMPTY_QUEUE = {"metadata": {"name": "spare"}, "spec": {}}
LOCAL_QUEUE = {
    "metadata": {"name": "team-nlp", "namespace": "ml-team"},
    "spec": {"clusterQueue": "team-nlp"},
}


def kueue_workload(
    owner: str,
    *,
    created: str,
    admitted_gpus: int | None = None,
    priority: int = 0,
    finished: bool = False,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {
            "name": f"job-{owner}",
            "namespace": "ml-team",
            "uid": f"uid-{owner}",
            "creationTimestamp": created,
            "ownerReferences": [{"kind": "Job", "name": owner}],
        },
        "spec": {"queueName": "team-nlp", "priority": priority},
        "status": {},
    }
    if admitted_gpus is not None:
        obj["status"]["admission"] = {
            "clusterQueue": "team-nlp",
            "podSetAssignments": [
                {
                    "flavors": {"amd.com/gpu": "mi300x", "memory": "mi300x"},
                    "resourceUsage": {"amd.com/gpu": str(admitted_gpus), "memory": "256Gi"},
                }
            ],
        }
    if finished:
        obj["status"]["conditions"] = [{"type": "Finished", "status": "True"}]
    return obj


WORKLOADS = [
    kueue_workload("a", created="2026-03-01T11:00:00Z", admitted_gpus=8),
    kueue_workload("b", created="2026-03-01T11:10:00Z", admitted_gpus=4),
    kueue_workload("done", created="2026-03-01T10:00:00Z", admitted_gpus=8, finished=True),
    kueue_workload("c", created="2026-03-01T11:50:00Z"),
    kueue_workload("d", created="2026-03-01T11:55:00Z", priority=10),
]


def test_cluster_queues_show_quota_and_what_admitted_unfinished_workloads_use() -> None:
    assert cluster_queue_table([CLUSTER_QUEUE, EMPTY_QUEUE], WORKLOADS) == (
        "CLUSTERQUEUE   FLAVOR   RESOURCE      QUOTA   USED    PENDING   ADMITTED\n"
        "spare          -        -             -       -       0         0\n"
        "team-nlp       mi300x   amd.com/gpu   16      12      0         2\n"
        "               mi300x   memory        1Ti     512Gi"
    )


def test_local_queues_count_pending_and_admitted_workloads() -> None:
    assert local_queue_table([LOCAL_QUEUE], WORKLOADS) == (
        "NAMESPACE   LOCALQUEUE   CLUSTERQUEUE   PENDING   ADMITTED\n"
        "ml-team     team-nlp     team-nlp       2         2"
    )


def local_queue_with(status: dict[str, Any], *, name: str = "team-nlp") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml-team"},
        "spec": {"clusterQueue": "team-nlp"},
        "status": status,
    }


def test_local_queues_by_their_status_show_counts_and_use_per_flavor() -> None:
    """What a user refused ClusterQueues and Workloads sees (decision 0143)."""
    running = local_queue_with(
        {
            "pendingWorkloads": 3,
            "reservingWorkloads": 2,
            "admittedWorkloads": 1,
            "flavorUsage": [
                {
                    "name": "mi300x",
                    "resources": [
                        {"name": "amd.com/gpu", "total": 12},
                        {"name": "memory", "total": "549755813888"},
                    ],
                }
            ],
        }
    )
    idle = local_queue_with({}, name="debug")

    assert local_queue_status_table([running, idle]) == (
        "NAMESPACE   LOCALQUEUE   CLUSTERQUEUE   PENDING   RESERVING   ADMITTED   FLAVOR   "
        "RESOURCE      USED\n"
        "ml-team     debug        team-nlp       0         0           0          -        "
        "-             -\n"
        "ml-team     team-nlp     team-nlp       3         2           1          mi300x   "
        "amd.com/gpu   12\n"
        "                                                                         mi300x   "
        "memory        512Gi"
    )


def test_local_queue_use_is_read_by_either_versions_name() -> None:
    """v1beta2 calls flavorUsage flavorsUsage: a server that answers in it is read alike."""
    queue = local_queue_with(
        {
            "flavorsUsage": [
                {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "2"}]}
            ]
        }
    )

    assert local_queue_status_table([queue]).splitlines()[1].split() == [
        "ml-team",
        "team-nlp",
        "team-nlp",
        "0",
        "0",
        "0",
        "h100",
        "nvidia.com/gpu",
        "2",
    ]


def test_pending_workloads_are_listed_in_admission_order() -> None:
    assert pending_table(WORKLOADS, now=NOW) == (
        "LOCALQUEUE         POSITION   WORKLOAD   PRIORITY   AGE\n"
        "ml-team/team-nlp   1          Job/d      10         5m\n"
        "ml-team/team-nlp   2          Job/c      0          10m"
    )


def test_pending_workloads_show_their_place_and_estimated_start_in_the_cluster_queue() -> None:
    basis = Basis(
        method=Method.RUN_TIMES,
        recorded_runs=12,
        declared=1,
        admissions_per_hour=2.5,
        capacity_gpus=16,
    )
    estimate = Eta(
        "uid-d",
        1,
        NOW + timedelta(minutes=20),
        NOW + timedelta(minutes=5),
        NOW + timedelta(hours=1, minutes=10),
        basis,
    )
    placed = Placed("uid-d", "ml-team", "d", "team-nlp", "amd.com/gpu", 4, estimate)

    assert pending_table(WORKLOADS, now=NOW, estimates={"uid-d": placed}).splitlines() == [
        "LOCALQUEUE         POSITION   WORKLOAD   PRIORITY   AGE   "
        "#               STARTS                80%           BASIS",
        "ml-team/team-nlp   1          Job/d      10         5m    "
        "1 in team-nlp   ~12:20 UTC (in 20m)   12:05-13:10   "
        "recorded run times: 12 runs, 1 declared, 16 GPUs, 2.5 admissions/h",
        "ml-team/team-nlp   2          Job/c      0          10m   "
        "-               -                     -             -",
    ]


def node(
    name: str, *, labels: dict[str, str], gpus: dict[str, str], ready: bool = True
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {
            "capacity": {"cpu": "96", "memory": "1Ti", **gpus},
            "allocatable": {"cpu": "96", "memory": "1Ti", **gpus},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


AMD = {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM", "beta.amd.com/gpu.family.AI": "8"}
NVIDIA = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}
NODES = [
    node("h100-1", labels={**NVIDIA, "kaiwo/nodepool": "h100"}, gpus={"nvidia.com/gpu": "8"}),
    node(
        "mi300x-2",
        labels={**AMD, "kaiwo/nodepool": "mi300x"},
        gpus={"amd.com/gpu": "8"},
        ready=False,
    ),
    node("mi300x-1", labels={**AMD, "kaiwo/nodepool": "mi300x"}, gpus={"amd.com/gpu": "8"}),
    node("cpu-1", labels={}, gpus={}),
]


def pod(node_name: str, gpus: str, *, phase: str = "Running") -> dict[str, Any]:
    return {
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "main", "resources": {"limits": {"amd.com/gpu": gpus}}}],
        },
        "status": {"phase": phase},
    }


PODS = [pod("mi300x-1", "4"), pod("mi300x-1", "2"), pod("mi300x-1", "8", phase="Succeeded")]


def test_gpu_nodes_by_vendor_and_pool_with_use_of_allocatable() -> None:
    assert node_table(NODES, PODS) == (
        "VENDOR   POOL     NODE       MODEL                     GPUS USED   STATUS\n"
        "amd      mi300x   mi300x-1   AMD_Instinct_MI300X_OAM   6/8         Ready\n"
        "amd      mi300x   mi300x-2   AMD_Instinct_MI300X_OAM   0/8         NotReady\n"
        "nvidia   h100     h100-1     NVIDIA-H100-80GB-HBM3     0/8         Ready"
    )
    assert node_table(NODES, PODS, vendor="nvidia").splitlines()[1:] == [
        "nvidia   h100   h100-1   NVIDIA-H100-80GB-HBM3   0/8         Ready"
    ]


def test_pools_sum_their_nodes() -> None:
    assert pool_summary(NODES, PODS) == (
        "VENDOR   POOL     NODES   GPUS USED\n"
        "amd      mi300x   2       6/16\n"
        "nvidia   h100     1       0/8"
    )
    # `kaiwo nodes nvidia` summed the AMD pools too.
    assert pool_summary(NODES, PODS, vendor="nvidia") == (
        "VENDOR   POOL   NODES   GPUS USED\nnvidia   h100   1       0/8"
    )
    assert sorted(node.name for _, node in gpu_nodes(NODES, vendor="amd")) == [
        "mi300x-1",
        "mi300x-2",
    ]
