"""The GPU nodes page: the monitor's readings mapped to nodes through the workloads' Pods,
GPUs busy now and over time, and idle workloads flagged. Expected values worked by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kaiwo_console.domain.cluster import ClusterState, everything, only
from kaiwo_console.domain.nodes import (
    NodeRecords,
    Placement,
    Reading,
    UsedSample,
    gpus_in_use,
    idle_reason,
    node_views,
    placement_of,
)
from kaiwo_console.domain.pages.nodes import nodes_body

from tests.unit.console.objects import gpu_node, gpu_pod, kaiwojob

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
TRAIN = "uid-team-a-train"
EVAL = "uid-team-b-eval"


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


def cluster(*objects: dict[str, Any]) -> ClusterState:
    state = ClusterState()
    for obj in objects:
        state.apply(kind=obj["kind"], event="ADDED", obj=obj)
    return state


def underutilized(since: datetime) -> dict[str, Any]:
    return {
        "type": "ResourceUnderutilization",
        "status": "True",
        "reason": "GpuUtilizationLow",
        "message": f"GPU utilization has been below 20% of the 4 requested GPU(s) since {since}",
    }


def test_a_workloads_bound_pod_is_placed_with_its_gpus_and_others_are_not() -> None:
    assert placement_of(gpu_pod("train-0", "team-a", "n1", gpus=4, workload="train")) == (
        Placement("n1", TRAIN, "KaiwoJob", "team-a", "train", 4)
    )
    # No workload's labels (another controller's Pod), finished, or holding no GPU: not placed.
    assert placement_of(gpu_pod("other", "team-a", "n1", gpus=4)) is None
    done = gpu_pod("train-1", "team-a", "n1", gpus=4, workload="train", phase="Succeeded")
    assert placement_of(done) is None
    assert placement_of(gpu_pod("cpu-0", "team-a", "n1", gpus=0, workload="train")) is None


def test_gpus_in_use_weigh_each_pods_gpus_by_its_workloads_latest_fresh_reading() -> None:
    placements = [
        Placement("n1", TRAIN, "KaiwoJob", "team-a", "train", 4),
        Placement("n1", EVAL, "KaiwoJob", "team-b", "eval", 2),
    ]
    latest = {TRAIN: Reading(NOW - minutes(1), 0.5), EVAL: Reading(NOW - minutes(1), 0.25)}
    # 4 x 0.5 + 2 x 0.25
    assert gpus_in_use(placements, latest, now=NOW) == 2.5
    # eval's reading is 6 minutes old (fresh for 5): only train's counts.
    stale = {**latest, EVAL: Reading(NOW - minutes(6), 0.25)}
    assert gpus_in_use(placements, stale, now=NOW) == 2.0
    # GPUs held, no reading known: unknown, not 0; nothing held: 0.
    assert gpus_in_use(placements, {}, now=NOW) is None
    assert gpus_in_use([], latest, now=NOW) == 0.0


def test_idle_is_the_planners_condition_first_then_the_monitors_open_stretch() -> None:
    since = NOW - minutes(10)
    flagged = kaiwojob("train", phase="RUNNING", conditions=[underutilized(since)])
    assert idle_reason(flagged, None, NOW) == (
        "GpuUtilizationLow: GPU utilization has been below 20% of the 4 requested GPU(s) "
        f"since {since}"
    )
    gpu_idle = {"type": "GpuIdle", "status": "True", "reason": "GpuIdle", "message": "Idle"}
    both = kaiwojob("train", phase="RUNNING", conditions=[underutilized(since), gpu_idle])
    assert idle_reason(both, None, NOW) == "GpuIdle: Idle"
    # Before the planner's verdict: the monitor's fresh reading below its threshold.
    busy = kaiwojob("train", phase="RUNNING")
    below = Reading(NOW - minutes(1), 0.02, below_since=NOW - minutes(3))
    assert idle_reason(busy, below, NOW) == "below its threshold since 11:57:00 UTC (the monitor)"
    # A stale reading, or one with no open stretch, or a False condition: not idle.
    assert idle_reason(busy, Reading(NOW - minutes(6), 0.02, below_since=since), NOW) == ""
    assert idle_reason(busy, Reading(NOW - minutes(1), 0.9), NOW) == ""
    normal = {**underutilized(since), "status": "False", "reason": "GpuUtilizationNormal"}
    assert idle_reason(kaiwojob("train", conditions=[normal]), None, NOW) == ""


def test_the_fold_samples_each_node_as_pods_arrive_and_readings_come() -> None:
    records = NodeRecords()
    train_0 = gpu_pod("train-0", "team-a", "n1", gpus=4, workload="train")
    train_1 = gpu_pod("train-1", "team-a", "n2", gpus=2, workload="train")
    records.pod(event="ADDED", obj=train_0, recorded=NOW)
    records.pod(event="ADDED", obj=train_1, recorded=NOW + minutes(1))
    records.reading(TRAIN, Reading(NOW + minutes(2), 0.5))
    records.reading(TRAIN, Reading(NOW + minutes(3), None))  # no sample in that window
    records.reading(TRAIN, Reading(NOW + minutes(4), 0.25))
    # train-0 leaves n1 (its Pod done); n2 still holds train-1.
    finished = gpu_pod("train-0", "team-a", "n1", gpus=4, workload="train", phase="Succeeded")
    records.pod(event="MODIFIED", obj=finished, recorded=NOW + minutes(5))

    assert records.over_time("n1", since=NOW) == (
        UsedSample(NOW, None),  # 4 GPUs held, no reading yet
        UsedSample(NOW + minutes(2), 2.0),  # 4 x 0.5
        UsedSample(NOW + minutes(3), None),
        UsedSample(NOW + minutes(4), 1.0),  # 4 x 0.25
        UsedSample(NOW + minutes(5), 0.0),  # nothing held
    )
    assert records.over_time("n2", since=NOW) == (
        UsedSample(NOW + minutes(1), None),
        UsedSample(NOW + minutes(2), 1.0),  # 2 x 0.5
        UsedSample(NOW + minutes(3), None),
        UsedSample(NOW + minutes(4), 0.5),
    )
    # From minute 3 on only.
    assert [s.at for s in records.over_time("n2", since=NOW + minutes(3))] == [
        NOW + minutes(3),
        NOW + minutes(4),
    ]


def test_the_fold_keeps_a_minute_once_a_day_and_forgets_a_gone_workloads_reading() -> None:
    records = NodeRecords()
    pod = gpu_pod("train-0", "team-a", "n1", gpus=4, workload="train")
    records.pod(event="ADDED", obj=pod, recorded=NOW)
    records.reading(TRAIN, Reading(NOW + timedelta(seconds=10), 0.5))
    records.reading(TRAIN, Reading(NOW + timedelta(seconds=40), 0.75))  # same minute: replaces
    records.reading(TRAIN, Reading(NOW + timedelta(seconds=20), 0.0))  # older: ignored
    assert records.over_time("n1", since=NOW) == (UsedSample(NOW + timedelta(seconds=40), 3.0),)

    # A day and a minute later the first samples have left the window.
    records.reading(TRAIN, Reading(NOW + timedelta(hours=24, minutes=1), 0.25))
    assert records.over_time("n1", since=NOW) == (
        UsedSample(NOW + timedelta(hours=24, minutes=1), 1.0),
    )

    records.pod(event="DELETED", obj=pod, recorded=NOW + timedelta(hours=24, minutes=2))
    assert records.latest == {}
    assert records.placements == {}


def test_the_page_now_maps_live_pods_to_nodes_and_flags_the_idle_workloads() -> None:
    since = NOW - minutes(10)
    state = cluster(
        gpu_node("n1"),
        gpu_node("n2"),
        gpu_node("n3"),
        kaiwojob("train", "team-a", phase="RUNNING", conditions=[underutilized(since)]),
        kaiwojob("eval", "team-b", phase="RUNNING"),
        kaiwojob("busy", "team-a", phase="RUNNING"),
        gpu_pod("train-0", "team-a", "n1", gpus=4, workload="train"),
        gpu_pod("eval-0", "team-b", "n1", gpus=2, workload="eval"),
        gpu_pod("busy-0", "team-a", "n2", gpus=8, workload="busy"),
    )
    records = NodeRecords()
    records.latest.update(
        {
            TRAIN: Reading(NOW - minutes(1), 0.05, below_since=since),
            EVAL: Reading(NOW - minutes(1), 0.5),
            "uid-team-a-busy": Reading(NOW - minutes(1), 0.75),
        }
    )

    views = {v.row.name: v for v in node_views(state, records, visible=everything, now=NOW)}

    assert (views["n1"].used, views["n2"].used, views["n3"].used) == (1.2, 6.0, 0.0)
    n1 = views["n1"].workloads
    assert [(w.name, w.gpus, w.ratio, bool(w.idle)) for w in n1] == [
        ("train", 4, 0.05, True),  # idle first
        ("eval", 2, 0.5, False),
    ]
    assert n1[0].idle.startswith("GpuUtilizationLow: GPU utilization has been below 20%")

    # A reader of team-a only: eval is another tenant's; its GPUs still count.
    seen = node_views(state, records, visible=only(["team-a"]), now=NOW)
    hidden = [w for w in seen[0].workloads if w.namespace == ""]
    assert [(w.name, w.gpus) for w in hidden] == [("", 2)]
    assert seen[0].used == 1.2


def test_the_page_shows_busy_gpus_the_chart_and_links_idle_workloads() -> None:
    since = NOW - minutes(10)
    state = cluster(
        gpu_node("n1"),
        kaiwojob("train", "team-a", phase="RUNNING", conditions=[underutilized(since)]),
        gpu_pod("train-0", "team-a", "n1", gpus=4, workload="train"),
        gpu_pod("other-0", "team-b", "n1", gpus=2, workload="other"),
    )
    records = NodeRecords()
    records.pod(
        event="ADDED",
        obj=gpu_pod("train-0", "team-a", "n1", gpus=4, workload="train"),
        recorded=NOW - minutes(4),
    )
    records.reading(TRAIN, Reading(NOW - minutes(2), 0.5))
    records.reading(TRAIN, Reading(NOW - minutes(1), 0.125))

    html = nodes_body(
        node_views(state, records, visible=only(["team-a"]), now=NOW), chart_width=300
    )

    # 4 x 0.125 = 0.5 of 8 GPUs busy now.
    assert "<td class=used>0.5 GPUs (6%)</td>" in html
    assert "6 of 8 GPUs allocated, 0.5 busy; 1 idle workload<" in html
    # The chart: 3 minutes over 300 px, 30 px high; None then 4 x 0.5 = 2 of 8 (y 22.5),
    # then 0.5 of 8 (y 28.1).
    assert '<svg class=node-use width="300" height="44"' in html
    assert '<polyline points="200.0,22.5 300.0,28.1"' in html
    assert '<a href="/workloads/team-a/train">team-a/train</a>' in html
    assert '<b class="why idle">idle</b>' in html
    assert "another tenant's workload" in html


def test_a_pod_of_another_namespace_carrying_a_workloads_uid_gets_none_of_its_reading() -> None:
    """Decision 0252: whoever may create Pods in team-b may label one with the uid of
    team-a's KaiwoJob. Before, its row took the KaiwoJob's GPUs, reading and idle stretch
    under team-b's name, for a reader of team-b; team-a's reading now counts for team-a's
    Pods only."""
    since = NOW - minutes(10)
    decoy = gpu_pod("decoy", "team-b", "n1", gpus=1, workload="train")
    decoy["metadata"]["labels"]["kaiwo.silogen.ai/run-id"] = TRAIN
    state = cluster(
        gpu_node("n1"),
        kaiwojob("train", "team-a", phase="RUNNING"),
        decoy,
        gpu_pod("train-0", "team-a", "n1", gpus=4, workload="train"),
    )
    records = NodeRecords()
    records.latest[TRAIN] = Reading(NOW - minutes(1), 0.05, below_since=since, namespace="team-a")

    [view] = node_views(state, records, visible=only(["team-b"]), now=NOW)

    assert [(w.namespace, w.name, w.gpus, w.ratio, w.idle) for w in view.workloads] == [
        ("", "", 4, 0.05, "idle"),  # team-a's, as another tenant's workload is shown
        ("team-b", "train", 1, None, ""),
    ]
    assert view.used == 0.2  # 4 x 0.05: the decoy's GPU has no reading
