"""``kaiwo gpus``: the GpuWorkload records as a table (decision 0047). Expected text by hand."""

from __future__ import annotations

from typing import Any

from kaiwo_cli.gpu_views import NONE_TRACKED, gpu_workload_table

from tests.unit.planner.conftest import build_node


def record(namespace: str, kind: str, name: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": f"{kind.lower()}-{name}-0123abcd"},
        "spec": {"workloadRef": {"apiVersion": "v1", "kind": kind, "name": name, "uid": "u"}},
        "status": status,
    }


def test_each_tracked_workload_with_utilization_idle_since_policy_and_verdict() -> None:
    table = gpu_workload_table(
        [
            record(
                "team-b",
                "Pod",
                "notebook",
                phase="Idle",
                gpus=1,
                utilization=2,
                idleSince="2026-03-01T11:50:00Z",
                policy="OnPressure",
                gracePeriod="10m",
                verdict="Idle below 5%",
            ),
            record(
                "team-a",
                "Job",
                "train",
                phase="Active",
                gpus=8,
                utilization=93,
                policy="Always",
                gracePeriod="1h",
                verdict="Busy",
            ),
            record("team-a", "Deployment", "serve"),
        ]
    )

    # Sorted by namespace and workload; three spaces between columns; "-" for what is unknown.
    assert table.splitlines() == [
        "NAMESPACE   WORKLOAD           PHASE    GPUS   UTIL   IDLE SINCE             "
        "POLICY             VERDICT",
        "team-a      Deployment/serve   -        -      -      -                      "
        "-                  -",
        "team-a      Job/train          Active   8      93%    -                      "
        "Always (1h)        Busy",
        "team-b      Pod/notebook       Idle     1      2%     2026-03-01T11:50:00Z   "
        "OnPressure (10m)   Idle below 5%",
    ]


def test_nothing_tracked_says_how_a_workload_opts_in() -> None:
    assert gpu_workload_table([]) == NONE_TRACKED
    assert "kaiwo.silogen.ai/gpu-preemption." in NONE_TRACKED


def kaiwo_workload(
    kind: str, name: str, *, annotations: dict[str, str], **status: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": kind,
        "metadata": {"namespace": "team-a", "name": name, "annotations": annotations},
        "spec": {"gpus": 4},
        "status": status,
    }


def test_opted_in_kaiwo_workloads_are_listed_beside_the_records() -> None:
    """Decision 0056: a KaiwoJob or KaiwoService is its own record; its GpuIdle condition
    gives phase, utilization, idle since and verdict."""
    opted = {"kaiwo.silogen.ai/gpu-preemption.policy": "Always"}
    idle_message = (
        "Idle since 2026-03-01T11:50:00Z: GPU utilization below 5%; preempted once idle until "
        "2026-03-01T12:00:00Z (policy Always)"
    )
    idle = kaiwo_workload(
        "KaiwoJob",
        "train",
        annotations=opted,
        status="RUNNING",
        conditions=[{"type": "GpuIdle", "status": "True", "message": idle_message}],
    )
    preempted = kaiwo_workload(
        "KaiwoService",
        "chat",
        annotations={},  # its namespace opted in
        status="TERMINATED",
        conditions=[
            {
                "type": "WorkloadTerminatedEarly",
                "status": "True",
                "reason": "GpuIdlePreemption",
                "message": "Preempted: idle",
            }
        ],
    )
    nobodys = kaiwo_workload("KaiwoJob", "other", annotations={}, status="RUNNING")
    team_b = {**nobodys, "metadata": {**nobodys["metadata"], "namespace": "team-b"}}
    namespaces = {
        "team-a": {"metadata": {"name": "team-a"}},
        "team-b": {"metadata": {"name": "team-b"}},
    }
    # Only team-b's namespace opted in: chat and other are in team-a and team-b.
    preempted["metadata"]["namespace"] = "team-b"
    namespaces["team-b"]["metadata"]["annotations"] = {
        "kaiwo.silogen.ai/gpu-preemption.grace-period": "1h"
    }

    table = gpu_workload_table([], [idle, preempted, nobodys, team_b], namespaces=namespaces)

    assert table.splitlines() == [
        "NAMESPACE   WORKLOAD            PHASE       GPUS   UTIL   IDLE SINCE             "
        "POLICY                VERDICT",
        "team-a      KaiwoJob/train      Idle        4      <5%    2026-03-01T11:50:00Z   "
        f"Always (10m0s)        {idle_message}",
        "team-b      KaiwoJob/other      RUNNING     4      -      -                      "
        "OnPressure (1h0m0s)   -",
        "team-b      KaiwoService/chat   Preempted   4      -      -                      "
        "OnPressure (1h0m0s)   Preempted: idle",
    ]


def test_a_kaiwo_workload_shows_the_gpus_its_pods_hold() -> None:
    """Decision 0118: the planner's allocation on the listed nodes, not spec.gpus: a Ray job
    asking for 30 on 8-GPU nodes holds 4 x 7 = 28; gpusPerReplica 8 with replicas 1 holds 8."""
    opted = {"kaiwo.silogen.ai/gpu-preemption.policy": "Always"}
    rounded = kaiwo_workload("KaiwoJob", "rounded", annotations=opted, status="RUNNING")
    rounded["spec"] = {"gpus": 30, "ray": True}
    recalculated = kaiwo_workload("KaiwoJob", "recalc", annotations=opted, status="RUNNING")
    recalculated["spec"] = {"gpus": 16, "gpusPerReplica": 8, "replicas": 1, "ray": True}
    nodes = [build_node(f"mi300x-{i}", gpu="mi300x", gpus=8) for i in range(4)]

    def gpus_column(table: str) -> list[str]:
        return [line.split()[3] for line in table.splitlines()[1:]]

    assert gpus_column(gpu_workload_table([], [rounded, recalculated], nodes=nodes)) == [
        "8",
        "28",
    ]
    # Nodes the user may not list: what the workload asks for, split over no nodes.
    assert gpus_column(gpu_workload_table([], [rounded, recalculated])) == ["8", "30"]


def test_a_kaiwo_job_shows_the_gpus_of_every_pod_its_job_runs_at_once() -> None:
    """Decision 0147: a spec.job of parallelism 4 (completions 8) runs 4 pods of 8 GPUs, 32
    held, with or without nodes listed; completions 2 bound it to 2 pods, 16 (before: 8)."""
    opted = {"kaiwo.silogen.ai/gpu-preemption.policy": "Always"}
    sweep = kaiwo_workload("KaiwoJob", "sweep", annotations=opted, status="RUNNING")
    sweep["spec"] = {"gpus": 8, "job": {"spec": {"parallelism": 4, "completions": 8}}}
    short = kaiwo_workload("KaiwoJob", "short", annotations=opted, status="RUNNING")
    short["spec"] = {"gpusPerReplica": 8, "job": {"spec": {"parallelism": 4, "completions": 2}}}
    nodes = [build_node(f"mi300x-{i}", gpu="mi300x", gpus=8) for i in range(4)]

    def gpus_column(table: str) -> list[str]:
        return [line.split()[3] for line in table.splitlines()[1:]]

    assert gpus_column(gpu_workload_table([], [sweep, short], nodes=nodes)) == ["16", "32"]
    assert gpus_column(gpu_workload_table([], [sweep, short])) == ["16", "32"]


def test_a_running_kaiwo_workload_shows_the_split_its_child_was_made_with() -> None:
    """Decision 0137: a service asking for 30 was made 4 x 7 on 8-GPU nodes; a 6-GPU node
    joined, which would split it 5 x 6. Its running Deployment holds 28, as the planner
    counts it; without its Deployment listed, the split of the nodes of now."""
    opted = {"kaiwo.silogen.ai/gpu-preemption.policy": "Always"}
    chat = kaiwo_workload("KaiwoService", "chat", annotations=opted, status="READY")
    chat["metadata"]["uid"] = "chat-uid"
    chat["spec"] = {"gpus": 30}
    nodes = [
        *(build_node(f"mi300x-{i}", gpu="mi300x", gpus=8) for i in range(4)),
        build_node("mi300x-6", gpu="mi300x", gpus=6),
    ]
    worker = {"name": "main", "resources": {"limits": {"amd.com/gpu": "7"}}}
    deployment = {
        "kind": "Deployment",
        "metadata": {
            "namespace": "team-a",
            "name": "chat",
            "ownerReferences": [{"uid": "chat-uid", "controller": True}],
            "annotations": {"kaiwo.silogen.ai/gpus-split-by-node-size": "30"},
        },
        "spec": {"replicas": 4, "template": {"spec": {"containers": [worker]}}},
        "status": {"readyReplicas": 4},
    }

    def gpus_column(table: str) -> list[str]:
        return [line.split()[3] for line in table.splitlines()[1:]]

    assert gpus_column(gpu_workload_table([], [chat], nodes=nodes, children=[deployment])) == ["28"]
    assert gpus_column(gpu_workload_table([], [chat], nodes=nodes)) == ["30"]


def test_a_running_kaiwo_job_shows_none_of_the_pods_kueue_released() -> None:
    """Decision 0152: a sweep of 2 pods x 4 (3 completions) ran its first 2; its Kueue
    Workload says 1 pod reclaimable, and Kueue's usage is 4: so is the table's. Without the
    Workload listed (a user who may not list them), both pods it runs at once."""
    opted = {"kaiwo.silogen.ai/gpu-preemption.policy": "Always"}
    sweep = kaiwo_workload("KaiwoJob", "sweep", annotations=opted, status="RUNNING")
    sweep["metadata"]["uid"] = "sweep-uid"
    sweep["spec"] = {"gpus": 4, "job": {"spec": {"parallelism": 2, "completions": 3}}}
    job = {
        "kind": "Job",
        "metadata": {
            "namespace": "team-a",
            "name": "sweep",
            "uid": "sweep-job-uid",
            "ownerReferences": [{"uid": "sweep-uid", "controller": True}],
        },
    }
    workload = {
        "metadata": {"namespace": "team-a", "ownerReferences": [{"uid": "sweep-job-uid"}]},
        "status": {
            "admission": {"podSetAssignments": [{"name": "main", "count": 2}]},
            "reclaimablePods": [{"name": "main", "count": 1}],
        },
    }

    def gpus_column(table: str) -> list[str]:
        return [line.split()[3] for line in table.splitlines()[1:]]

    table = gpu_workload_table([], [sweep], children=[job], kueue_workloads=[workload])
    assert gpus_column(table) == ["4"]
    assert gpus_column(gpu_workload_table([], [sweep], children=[job])) == ["8"]
