"""What ``kaiwo list`` and ``kaiwo status`` print, from hand-made objects."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kaiwo_cli.text_tables import render_table
from kaiwo_cli.workload_views import (
    QueuePosition,
    age,
    child_state,
    is_settled,
    list_table,
    matches,
    qualified_name,
    queue_position,
    status_report,
)
from kaiwo_contracts.queue_estimates.eta import Basis, Eta, Method
from kaiwo_contracts.queue_estimates.kueue import Placed

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def workload(
    kind: str,
    name: str,
    *,
    namespace: str = "ml-team",
    user: str | None = "alice@example.com",
    queue: str | None = "team-nlp",
    phase: str | None = None,
    created: str = "2026-03-01T11:58:00Z",
    **spec: Any,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": created,
        },
        "spec": {
            **({"user": user} if user else {}),
            **({"clusterQueue": queue} if queue else {}),
            **spec,
        },
    }
    if phase is not None:
        obj["status"] = {"status": phase}
    return obj


def test_a_table_pads_columns_three_spaces_apart_without_trailing_blanks() -> None:
    assert render_table(["NAME", "PHASE"], [["a", "RUNNING"], ["longer-name", ""]]) == (
        "NAME          PHASE\na             RUNNING\nlonger-name"
    )


def test_ages_read_as_kubectl_writes_them() -> None:
    assert age("2026-03-01T11:59:15Z", NOW) == "45s"
    assert age("2026-03-01T11:58:30Z", NOW) == "90s"
    assert age("2026-03-01T11:58:00Z", NOW) == "2m"
    assert age("2026-03-01T10:30:00Z", NOW) == "90m"
    assert age("2026-03-01T09:00:00Z", NOW) == "3h"
    assert age("2026-02-25T12:00:00Z", NOW) == "4d"
    assert age(None, NOW) == "<unknown>"


def test_the_list_sorts_by_namespace_kind_and_name_and_says_new_before_any_status() -> None:
    rows = [
        workload("KaiwoService", "chat", phase="READY", created="2026-03-01T09:00:00Z"),
        workload("KaiwoJob", "train", phase="RUNNING", gpus=8, gpuVendor="amd"),
        workload("KaiwoJob", "eval", namespace="eval", user="bob@example.com", queue=None),
    ]

    assert list_table(rows, now=NOW) == (
        "NAMESPACE   KIND           NAME    USER                QUEUE      PHASE     AGE\n"
        "eval        KaiwoJob       eval    bob@example.com     -          NEW       2m\n"
        "ml-team     KaiwoJob       train   alice@example.com   team-nlp   RUNNING   2m\n"
        "ml-team     KaiwoService   chat    alice@example.com   team-nlp   READY     3h"
    )
    assert list_table(rows[1:2], now=NOW, wide=True).splitlines()[1].split() == [
        "ml-team",
        "KaiwoJob",
        "train",
        "alice@example.com",
        "team-nlp",
        "RUNNING",
        "2m",
        "8",
        "amd",
        "-",
        "-",
    ]


def test_filters_by_user_kind_and_phase() -> None:
    job = workload("KaiwoJob", "train", phase="PENDING")

    assert matches(job, user="alice@example.com", kind="kaiwojob", phase="pending")
    assert not matches(job, user="bob@example.com", kind=None, phase=None)
    assert not matches(job, user=None, kind="KaiwoService", phase=None)
    assert not matches(job, user=None, kind=None, phase="RUNNING")
    assert qualified_name(job) == "kaiwojob.kaiwo.silogen.ai/train"


def test_wait_stops_at_a_final_phase_or_a_serving_service() -> None:
    assert is_settled(workload("KaiwoJob", "a", phase="COMPLETE"))
    assert is_settled(workload("KaiwoJob", "a", phase="FAILED"))
    assert is_settled(workload("KaiwoJob", "a", phase="ERROR"))  # not left by itself
    assert not is_settled(workload("KaiwoJob", "a", phase="PENDING"))
    assert not is_settled(workload("KaiwoJob", "a", phase="READY"))
    assert is_settled(workload("KaiwoService", "a", phase="READY"))
    assert not is_settled(workload("KaiwoService", "a", phase="RUNNING"))


def kueue_workload(
    name: str, owner: str, *, created: str, priority: int = 0, admitted: bool = False
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "ml-team",
            "creationTimestamp": created,
            "ownerReferences": [{"kind": "Job", "name": owner, "uid": f"job-{owner}"}],
        },
        "spec": {"queueName": "team-nlp", "priority": priority},
    }
    if admitted:
        obj["status"] = {"admission": {"clusterQueue": "team-nlp"}}
    return obj


def test_the_position_in_the_queue_counts_higher_priority_then_older_first() -> None:
    queued = [
        kueue_workload("job-running", "running", created="2026-03-01T11:00:00Z", admitted=True),
        kueue_workload("job-old", "old", created="2026-03-01T11:10:00Z"),
        kueue_workload("job-urgent", "urgent", created="2026-03-01T11:50:00Z", priority=100),
        kueue_workload("job-train", "train", created="2026-03-01T11:40:00Z"),
    ]

    position = queue_position(workload("KaiwoJob", "train", phase="PENDING"), queued)

    assert position == QueuePosition(queue="team-nlp", position=3, pending=3)
    assert queue_position(workload("KaiwoJob", "running"), queued) is None
    assert queue_position(workload("KaiwoJob", "unqueued"), queued) is None


def test_status_shows_phase_conditions_children_pods_events_and_the_queue() -> None:
    job = workload("KaiwoJob", "train", phase="PENDING")
    job["status"]["conditions"] = [
        {"type": "Schedulable", "status": "True", "reason": "Schedulable", "message": "fits"},
        {"type": "Admitted", "status": "False", "reason": "Pending", "message": "no quota"},
    ]
    children = [
        {"kind": "Job", "metadata": {"name": "train"}, "spec": {"suspend": True}, "status": {}},
        {
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "train-data"},
            "status": {"phase": "Bound"},
        },
    ]
    pods = [{"kind": "Pod", "metadata": {"name": "train-0"}, "status": {"phase": "Pending"}}]
    events = [
        {
            "type": "Normal",
            "reason": "WorkloadPending",
            "message": "Workload is   pending admission",
            "lastTimestamp": "2026-03-01T11:59:00Z",
            "involvedObject": {"kind": "KaiwoJob", "name": "train"},
        }
    ]

    report = status_report(
        job,
        children=children,
        pods=pods,
        events=events,
        position=QueuePosition(queue="team-nlp", position=2, pending=3),
        now=NOW,
    )

    assert report == (
        "KaiwoJob ml-team/train\n"
        "Phase:     PENDING\n"
        "User:      alice@example.com\n"
        "Queue:     team-nlp (waiting: 2 of 3 pending in team-nlp)\n"
        "Age:       2m\n"
        "\n"
        "Conditions:\n"
        "  TYPE          STATUS   REASON        MESSAGE\n"
        "  Schedulable   True     Schedulable   fits\n"
        "  Admitted      False    Pending       no quota\n"
        "\n"
        "Children:\n"
        "  OBJECT                             STATE\n"
        "  Job/train                          Suspended (waiting for admission)\n"
        "  PersistentVolumeClaim/train-data   Bound\n"
        "  Pod/train-0                        Pending\n"
        "\n"
        "Events:\n"
        "  AGE   TYPE     REASON            OBJECT           MESSAGE\n"
        "  60s   Normal   WorkloadPending   KaiwoJob/train   Workload is pending admission"
    )


def test_status_of_a_pending_workload_shows_its_estimated_start_and_the_basis() -> None:
    job = workload("KaiwoJob", "train", phase="PENDING")
    basis = Basis(
        method=Method.DECLARED,
        recorded_runs=0,
        declared=3,
        admissions_per_hour=None,
        capacity_gpus=8,
    )
    eta = Eta(
        "uid-kw",
        2,
        NOW + timedelta(hours=1, minutes=30),
        NOW + timedelta(hours=1, minutes=30),
        NOW + timedelta(hours=1, minutes=30),
        basis,
    )

    report = status_report(
        job,
        children=[],
        pods=[],
        events=[],
        position=QueuePosition(queue="team-nlp", position=2, pending=3),
        now=NOW,
        estimate=Placed("uid-kw", "ml-team", "train", "team-nlp", "amd.com/gpu", 8, eta),
    )

    assert report.splitlines()[3:7] == [
        "Queue:     team-nlp (waiting: 2 of 3 pending in team-nlp)",
        "Estimate:  #2 in team-nlp (amd.com/gpu), starts ~13:30 UTC (in 1h30m), "
        "80% between 13:30-13:30",
        "Basis:     declared durations: 0 runs, 3 declared, 8 GPUs",
        "Age:       2m",
    ]


def test_an_estimate_from_ones_own_namespace_only_says_so() -> None:
    basis = Basis(
        method=Method.NO_HISTORY,
        recorded_runs=0,
        declared=0,
        admissions_per_hour=None,
        capacity_gpus=8,
    )
    eta = Eta("uid-kw", 1, None, None, None, basis)

    report = status_report(
        workload("KaiwoJob", "train", phase="PENDING"),
        children=[],
        pods=[],
        events=[],
        position=QueuePosition(queue="team-nlp", position=1, pending=1),
        now=NOW,
        estimate=Placed("uid-kw", "ml-team", "train", "team-nlp", "amd.com/gpu", 8, eta),
        estimate_partial=True,
    )

    assert report.splitlines()[4:7] == [
        "Estimate:  #1 in team-nlp (amd.com/gpu), starts no estimate, 80% between -",
        "Basis:     no history: 0 runs, 0 declared, 8 GPUs",
        "           (from your namespace's workloads only: others' were not readable, so it "
        "may start later)",
    ]


def test_status_names_the_kinds_the_caller_may_not_read_rather_than_show_none() -> None:
    # A scientist with `edit` in their namespace may list Jobs but not RayJobs or Kueue
    # Workloads: the report says what it could not see instead of "(none yet)" and no place.
    report = status_report(
        workload("KaiwoJob", "train", phase="PENDING"),
        children=[],
        pods=[],
        events=[],
        position=None,
        now=NOW,
        unreadable=("RayJob", "AppWrapper", "Workload"),
    )

    assert report == (
        "KaiwoJob ml-team/train\n"
        "Phase:     PENDING\n"
        "User:      alice@example.com\n"
        "Queue:     team-nlp (place in the queue unknown: your credentials may not list Kueue "
        "Workloads)\n"
        "Age:       2m\n"
        "\n"
        "Conditions:\n"
        "  (none)\n"
        "\n"
        "Children:\n"
        "  (none you may see yet)\n"
        "  (not shown: your credentials may not list RayJobs, AppWrappers)\n"
        "\n"
        "Events:\n"
        "  (none)"
    )


def test_an_admitted_workload_does_not_mention_the_queue_it_may_not_read() -> None:
    report = status_report(
        workload("KaiwoJob", "train", phase="RUNNING"),
        children=[{"kind": "Job", "metadata": {"name": "train"}, "status": {"active": 1}}],
        pods=[],
        events=[],
        position=None,
        now=NOW,
        unreadable=("Workload",),
    )

    assert report.splitlines()[3] == "Queue:     team-nlp"
    assert report.split("Children:\n")[1].split("\n\n")[0] == (
        "  OBJECT      STATE\n  Job/train   active 1, succeeded 0"
    )


def event(name: str, reason: str, version: str, **times: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": version},
        "type": "Normal",
        "reason": reason,
        "message": reason,
        "involvedObject": {"kind": "KaiwoJob", "name": "train"},
        **times,
    }


def test_events_of_one_second_keep_the_order_they_were_written_in() -> None:
    # As the API server lists them: by name. Timestamps have whole seconds; the scheduler's
    # events.k8s.io Events have only an eventTime, with microseconds.
    events = [
        event("train.a", "WorkloadStarting", "580", lastTimestamp="2026-03-01T11:59:00Z"),
        event("train.b", "Scheduled", "575", eventTime="2026-03-01T11:59:00.900000Z"),
        event("train.c", "WorkloadPending", "562", lastTimestamp="2026-03-01T11:59:00Z"),
        event("train.d", "WorkloadRunning", "591", lastTimestamp="2026-03-01T11:59:03Z"),
        event("train.e", "Created", "9", lastTimestamp="2026-03-01T11:58:59Z"),
    ]

    report = status_report(
        workload("KaiwoJob", "train", phase="RUNNING"),
        children=[],
        pods=[],
        events=events,
        position=None,
        now=NOW,
        recent_events=4,
    )

    assert report.split("Events:\n")[1] == (
        "  AGE   TYPE     REASON             OBJECT           MESSAGE\n"
        "  60s   Normal   WorkloadPending    KaiwoJob/train   WorkloadPending\n"
        "  59s   Normal   Scheduled          KaiwoJob/train   Scheduled\n"
        "  60s   Normal   WorkloadStarting   KaiwoJob/train   WorkloadStarting\n"
        "  57s   Normal   WorkloadRunning    KaiwoJob/train   WorkloadRunning"
    )


def test_a_ray_services_state_names_the_applications_of_each_of_its_clusters() -> None:
    # The first cluster stays KubeRay's pending one until its applications serve, so one
    # failing to deploy shows there (decision 0186).
    first = {
        "kind": "RayService",
        "status": {
            "conditions": [{"type": "Ready", "status": "False"}],
            "pendingServiceStatus": {
                "rayClusterName": "chat-x7k2p",
                "applicationStatuses": {
                    "chat": {"status": "DEPLOY_FAILED"},
                    "health": {"status": "RUNNING"},
                },
            },
        },
    }
    assert child_state(first) == (
        "not serving; starting chat-x7k2p: chat DEPLOY_FAILED, health RUNNING"
    )
    serving = {
        "kind": "RayService",
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "activeServiceStatus": {
                "rayClusterName": "chat-x7k2p",
                "applicationStatuses": {"chat": {"status": "RUNNING"}},
            },
            "pendingServiceStatus": {"rayClusterName": "chat-m4n5q"},
        },
    }
    assert child_state(serving) == (
        "serving; cluster chat-x7k2p: chat RUNNING; starting chat-m4n5q: no application"
    )
    assert child_state({"kind": "RayService"}) == "not serving"
