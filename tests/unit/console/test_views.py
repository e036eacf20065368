"""What the console's pages show, from observed objects: rows, reasons, queues with their
estimates, GPU nodes, and that a tenant sees only their namespaces. Expected values by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kaiwo_console.domain.cluster import ClusterState, everything, only
from kaiwo_console.domain.history import QueueRecords
from kaiwo_console.domain.node_rows import node_rows
from kaiwo_console.domain.pages.workloads import workloads_body
from kaiwo_console.domain.queues import pending_estimates, queue_views
from kaiwo_console.domain.workload_rows import WorkloadFilter, workload_rows
from kaiwo_contracts.queue_estimates.eta import Method

from tests.unit.console.objects import (
    cluster_queue,
    gpu_node,
    gpu_pod,
    kaiwojob,
    kueue_workload,
    local_queue,
)

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


def cluster(*objects: dict) -> ClusterState:
    state = ClusterState()
    for obj in objects:
        state.apply(kind=obj["kind"], event="ADDED", obj=obj)
    return state


def test_an_observation_changes_the_state_once_and_a_deletion_removes_it() -> None:
    state = ClusterState()
    job = kaiwojob("train")

    assert state.apply(kind="KaiwoJob", event="ADDED", obj=job)
    assert not state.apply(kind="KaiwoJob", event="MODIFIED", obj=job)
    assert state.version == 1
    assert state.apply(kind="KaiwoJob", event="DELETED", obj=job)
    assert state.of("KaiwoJob") == []
    assert state.version == 2


def test_workloads_are_filtered_and_a_tenant_sees_only_their_namespaces() -> None:
    state = cluster(
        kaiwojob("train", "team-a", phase="RUNNING", user="alice"),
        kaiwojob("eval", "team-a", phase="PENDING", user="bob"),
        kaiwojob("serve", "team-b", phase="RUNNING", kind="KaiwoService", queue=None),
    )

    everyone = workload_rows(state, everything, WorkloadFilter())
    running = workload_rows(state, everything, WorkloadFilter(phase="running"))
    team_b_only = workload_rows(state, only(["team-b"]), WorkloadFilter())

    assert [(r.namespace, r.name) for r in everyone] == [
        ("team-a", "eval"),
        ("team-a", "train"),
        ("team-b", "serve"),
    ]
    assert [r.name for r in running] == ["train", "serve"]
    assert [(r.name, r.queue, r.kind) for r in team_b_only] == [("serve", "kaiwo", "KaiwoService")]
    assert [r.name for r in workload_rows(state, everything, WorkloadFilter(user="bob"))] == [
        "eval"
    ]


def test_a_waiting_workload_says_what_kueue_said_and_a_failed_one_its_condition() -> None:
    failed = kaiwojob(
        "broken",
        phase="FAILED",
        conditions=[
            {"type": "Ready", "status": "False", "reason": "JobFailed", "message": "exit code 3"}
        ],
    )
    state = cluster(
        kaiwojob("eval"),
        kueue_workload(
            "eval", waiting_message="couldn't assign flavors: insufficient quota for amd.com/gpu"
        ),
        failed,
        kaiwojob("fresh", "team-b"),
    )

    why = {r.name: r.why for r in workload_rows(state, everything, WorkloadFilter())}

    assert why == {
        "broken": "JobFailed: exit code 3",
        "eval": "couldn't assign flavors: insufficient quota for amd.com/gpu",
        "fresh": "waiting for Kueue",
    }


def _queue_with_two_running_and_three_waiting() -> tuple[ClusterState, QueueRecords]:
    state = cluster(
        cluster_queue("research", amd=16),
        local_queue("team-a", "research", "research"),
        local_queue("team-b", "research", "research"),
        kueue_workload(
            "r1",
            gpus=8,
            admitted_to="research",
            admitted_at=NOW - minutes(30),
            created=NOW - minutes(31),
        ),
        kueue_workload(
            "r2",
            gpus=8,
            admitted_to="research",
            admitted_at=NOW - minutes(50),
            created=NOW - minutes(51),
        ),
        kueue_workload("a", gpus=8, created=NOW - minutes(20)),
        kueue_workload("c", "team-b", gpus=8, created=NOW - minutes(15)),
        kueue_workload("b", gpus=8, created=NOW - minutes(10)),
        kaiwojob("a"),
        kaiwojob("b", duration="20m"),
    )
    records = QueueRecords()
    lane = ("research", "amd.com/gpu")
    records.runs[lane] = [3600.0] * 5
    return state, records


def test_the_queue_lists_pending_workloads_in_admission_order_with_position_and_estimate() -> None:
    state, records = _queue_with_two_running_and_three_waiting()

    (view,) = queue_views(state, records, now=NOW, visible=only(["team-a"]))

    # Runs take 60 min: r2 frees its 8 GPUs in 10 min, r1 in 30. a starts at 10 and runs 60;
    # c (team-b, hidden) at 30; b, which waits for a, at 70.
    assert view.admitted == 2
    assert [(p.namespace, p.name, p.eta.position, p.eta.start) for p in view.pending] == [
        ("team-a", "a", 1, NOW + minutes(10)),
        ("team-b", "", 2, NOW + minutes(30)),
        ("team-a", "b", 3, NOW + minutes(70)),
    ]
    assert view.pending[0].eta.basis.method is Method.RUN_TIMES
    assert [(q.flavor, q.resource, q.quota, q.used) for q in view.quota if q.quota] == [
        ("amd-mi300x", "amd.com/gpu", 16.0, 16.0)
    ]


def test_a_higher_priority_goes_first_and_every_estimate_is_found_by_workload() -> None:
    state, records = _queue_with_two_running_and_three_waiting()
    state.apply(
        kind="Workload",
        event="ADDED",
        obj=kueue_workload("urgent", gpus=8, priority=100, created=NOW - minutes(1)),
    )

    estimates = pending_estimates(state, records, now=NOW)

    assert {name: entry.eta.position for (_, name), entry in estimates.items()} == {
        "urgent": 1,
        "a": 2,
        "c": 3,
        "b": 4,
    }


def test_gpu_nodes_show_what_running_pods_hold() -> None:
    state = cluster(
        gpu_node("mi300x-1"),
        gpu_node("mi300x-2"),
        gpu_pod("train-0", "team-a", "mi300x-1", gpus=8),
        gpu_pod("eval-0", "team-a", "mi300x-2", gpus=2),
    )

    assert [(n.name, n.vendor, n.allocated, n.gpus) for n in node_rows(state)] == [
        ("mi300x-1", "amd", 8, 8),
        ("mi300x-2", "amd", 2, 8),
    ]


def test_what_the_cluster_says_is_escaped_in_the_page() -> None:
    state = cluster(
        kaiwojob("eval"),
        kueue_workload("eval", waiting_message="<img src=x onerror=alert(1)>"),
    )
    rows = workload_rows(state, everything, WorkloadFilter())

    html = workloads_body(rows, WorkloadFilter(), now=NOW, estimates={})

    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_quota_bars_write_memory_short() -> None:
    from kaiwo_console.domain.pages.queues import quota_bars
    from kaiwo_console.domain.quota import QuotaUse

    svg = quota_bars([QuotaUse("amd-mi300x", "memory", 2 * 2**40, 512 * 2**30)])

    assert "amd-mi300x memory: 512Gi of 2Ti" in svg
