"""The estimate read from Kueue's objects (decision 0055): the lane, Kueue's order, the history
the cluster still holds, the declared durations, and the words the CLI prints."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kaiwo_contracts.queue_estimates.eta import Method
from kaiwo_contracts.queue_estimates.kueue import (
    band_words,
    basis_words,
    cluster_estimates,
    declared_durations,
    history_in_cluster,
    placed_for,
    span_words,
    start_words,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
GPU = "nvidia.com/gpu"


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def kueue_workload(
    name: str,
    *,
    gpus: int,
    created: datetime,
    priority: int = 0,
    admitted: datetime | None = None,
    finished: datetime | None = None,
) -> dict[str, Any]:
    conditions = []
    status: dict[str, Any] = {"conditions": conditions}
    if admitted is not None:
        conditions.append(
            {"type": "Admitted", "status": "True", "lastTransitionTime": stamp(admitted)}
        )
        status["admission"] = {"clusterQueue": "team"}
    if finished is not None:
        conditions.append(
            {"type": "Finished", "status": "True", "lastTransitionTime": stamp(finished)}
        )
    return {
        "metadata": {
            "name": f"job-{name}",
            "namespace": "ml",
            "uid": f"uid-{name}",
            "creationTimestamp": stamp(created),
            "ownerReferences": [{"kind": "KaiwoJob", "name": name, "uid": f"owner-{name}"}],
        },
        "spec": {
            "queueName": "q",
            "priority": priority,
            "podSets": [
                {
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"resources": {"requests": {GPU: gpus}}}]}
                    },
                }
            ],
        },
        "status": status,
    }


CLUSTER_QUEUE = {
    "metadata": {"name": "team"},
    "spec": {
        "resourceGroups": [
            {"flavors": [{"name": "h100", "resources": [{"name": GPU, "nominalQuota": 4}]}]}
        ]
    },
}
LOCAL_QUEUE = {"metadata": {"name": "q", "namespace": "ml"}, "spec": {"clusterQueue": "team"}}
# Ran 10 minutes, 09:00 to 09:10.
FINISHED = kueue_workload(
    "old",
    gpus=2,
    created=NOW - timedelta(hours=3),
    admitted=NOW - timedelta(hours=3),
    finished=NOW - timedelta(hours=2, minutes=50),
)
# Holds all 4 GPUs since 11:55.
RUNNING = kueue_workload(
    "run", gpus=4, created=NOW - timedelta(minutes=6), admitted=NOW - timedelta(minutes=5)
)
OLDER_LOW = kueue_workload("low", gpus=2, created=NOW - timedelta(minutes=4))
NEWER_HIGH = kueue_workload("high", gpus=4, created=NOW - timedelta(minutes=2), priority=5)
EVERYTHING = [FINISHED, RUNNING, OLDER_LOW, NEWER_HIGH]


def test_the_cluster_keeps_the_admissions_and_the_run_times_of_finished_workloads() -> None:
    history = history_in_cluster(EVERYTHING, now=NOW)

    assert set(history) == {("team", GPU)}
    assert history[("team", GPU)].admissions == (
        NOW - timedelta(hours=3),
        NOW - timedelta(minutes=5),
    )
    assert history[("team", GPU)].run_seconds == (600.0,)


def test_pending_workloads_start_in_kueues_order_as_the_running_ones_end() -> None:
    estimates = cluster_estimates(
        cluster_queues=[CLUSTER_QUEUE],
        local_queues=[LOCAL_QUEUE],
        kueue_workloads=EVERYTHING,
        declared=lambda _w: None,
        now=NOW,
    )

    # The one recorded run lasted 10 minutes: "run" (5 minutes in) ends at 12:05; "high"
    # (priority 5) goes first, takes the 4 GPUs for 10 minutes; "low" starts at 12:15.
    high, low = estimates["uid-high"], estimates["uid-low"]
    assert (high.eta.position, high.eta.start) == (1, NOW + timedelta(minutes=5))
    assert (low.eta.position, low.eta.start) == (2, NOW + timedelta(minutes=15))
    assert (low.queue, low.resource, low.gpus, low.owner) == ("team", GPU, 2, "low")
    assert low.eta.earliest == low.eta.latest == NOW + timedelta(minutes=15)
    assert low.eta.basis.method is Method.RUN_TIMES
    assert low.eta.basis.recorded_runs == 1
    assert low.eta.basis.capacity_gpus == 4
    # Two admissions 2 h 55 min apart.
    assert low.eta.basis.admissions_per_hour is not None
    assert round(low.eta.basis.admissions_per_hour, 4) == round(60 / 175, 4)


def test_declared_durations_carry_the_estimate_when_nothing_finished_yet() -> None:
    workloads = [
        {"metadata": {"name": name, "namespace": "ml"}, "spec": {"duration": text}}
        for name, text in (("run", "20m"), ("low", "1h"), ("high", "30m"))
    ]

    estimates = cluster_estimates(
        cluster_queues=[CLUSTER_QUEUE],
        local_queues=[LOCAL_QUEUE],
        kueue_workloads=[RUNNING, OLDER_LOW, NEWER_HIGH],
        declared=declared_durations(workloads),
        now=NOW,
    )

    # "run" declared 20 minutes and is 5 in: it ends at 12:15; "high" runs 30 minutes.
    assert estimates["uid-high"].eta.start == NOW + timedelta(minutes=15)
    assert estimates["uid-low"].eta.start == NOW + timedelta(minutes=45)
    assert estimates["uid-low"].eta.basis.method is Method.DECLARED
    assert estimates["uid-low"].eta.basis.declared == 3


def test_a_workload_finds_its_pending_kueue_workload() -> None:
    estimates = cluster_estimates(
        cluster_queues=[CLUSTER_QUEUE],
        local_queues=[LOCAL_QUEUE],
        kueue_workloads=EVERYTHING,
        declared=lambda _w: None,
        now=NOW,
    )
    low = {"metadata": {"name": "low", "namespace": "ml", "uid": "owner-low"}}
    running = {"metadata": {"name": "run", "namespace": "ml", "uid": "owner-run"}}
    elsewhere = {"metadata": {"name": "low", "namespace": "other", "uid": "x"}}

    found = placed_for(low, EVERYTHING, estimates)
    assert found is not None
    assert found.uid == "uid-low"
    assert placed_for(running, EVERYTHING, estimates) is None
    assert placed_for(elsewhere, EVERYTHING, estimates) is None


def test_the_words_the_cli_prints() -> None:
    estimates = cluster_estimates(
        cluster_queues=[CLUSTER_QUEUE],
        local_queues=[LOCAL_QUEUE],
        kueue_workloads=EVERYTHING,
        declared=lambda _w: None,
        now=NOW,
    )
    eta = estimates["uid-low"].eta

    assert start_words(eta, now=NOW) == "~12:15 UTC (in 15m)"
    assert band_words(eta) == "12:15-12:15"
    assert basis_words(eta) == "recorded run times: 1 runs, 0 declared, 4 GPUs, 0.3 admissions/h"
    assert [span_words(s) for s in (30, 59 * 60, 3900, 3 * 86400 + 4 * 3600)] == [
        "<1m",
        "59m",
        "1h05m",
        "3d4h",
    ]
