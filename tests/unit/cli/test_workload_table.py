"""The demo's live table: rows from the cluster's objects, the phases seen, why a workload
waits or failed, rendered once to text."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from kaiwo_cli.workload_table import PhaseHistory, WorkloadRow, render, workload_rows
from rich.console import Console

NOW = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)


def kaiwo(kind: str, name: str, phase: str, queue: str = "research") -> dict:
    return {
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": "ml-team",
            "creationTimestamp": "2026-01-01T12:00:00Z",
        },
        "spec": {"clusterQueue": queue},
        "status": {"status": phase},
    }


def test_rows_explain_a_wait_and_a_failure() -> None:
    waiting = {
        "metadata": {"namespace": "ml-team", "ownerReferences": [{"kind": "Job", "name": "eval"}]},
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "message": "insufficient quota for amd.com/gpu",
                }
            ]
        },
    }
    failed_job = {
        "metadata": {"namespace": "ml-team", "name": "broken"},
        "status": {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "exit 1",
                }
            ]
        },
    }
    failed_pod = {
        "metadata": {"namespace": "ml-team", "labels": {"batch.kubernetes.io/job-name": "broken"}},
        "status": {
            "containerStatuses": [
                {"state": {"terminated": {"exitCode": 1, "message": "no tokenizer"}}}
            ]
        },
    }
    rows = workload_rows(
        workloads=[
            kaiwo("KaiwoJob", "eval", "PENDING"),
            kaiwo("KaiwoJob", "broken", "FAILED"),
            kaiwo("KaiwoService", "chat", "READY"),
        ],
        kueue_workloads=[waiting],
        jobs=[failed_job],
        pods=[failed_pod],
        now=NOW,
    )
    assert rows == [
        WorkloadRow(
            "ml-team",
            "broken",
            "KaiwoJob",
            "research",
            "FAILED",
            30,
            "BackoffLimitExceeded: exit 1: no tokenizer",
        ),
        WorkloadRow("ml-team", "chat", "KaiwoService", "research", "READY", 30, ""),
        WorkloadRow(
            "ml-team",
            "eval",
            "KaiwoJob",
            "research",
            "PENDING",
            30,
            "insufficient quota for amd.com/gpu",
        ),
    ]
    assert [row.settled for row in rows] == [True, True, False]


def test_history_and_the_rendered_table() -> None:
    history = PhaseHistory()
    for phase, detail in (("PENDING", "no quota"), ("RUNNING", ""), ("COMPLETE", "")):
        history.record([WorkloadRow("ml-team", "eval", "KaiwoJob", "research", phase, 5, detail)])
    assert history.path("ml-team/eval") == "PENDING → RUNNING → COMPLETE"
    assert history.story() == ["ml-team/eval waited: no quota"]
    assert history.longest_wait() == "ml-team/eval"

    out = io.StringIO()
    rows = [WorkloadRow("ml-team", "eval", "KaiwoJob", "research", "COMPLETE", 135, "")]
    Console(file=out, width=160).print(render(rows, history, title="demo"))
    lines = out.getvalue().splitlines()
    assert lines[0].strip() == "demo"
    assert [cell.strip() for cell in lines[2].split("┃")[1:-1]] == [
        "NAMESPACE/NAME",
        "KIND",
        "QUEUE",
        "PHASE",
        "SEEN",
        "AGE",
        "DETAIL",
    ]
    assert [cell.strip() for cell in lines[4].split("│")[1:-1]] == [
        "ml-team/eval",
        "KaiwoJob",
        "research",
        "COMPLETE",
        "PENDING → RUNNING → COMPLETE",
        "2m15s",
        "",
    ]


def test_the_longest_wait_is_the_one_worth_a_look() -> None:
    """A queue made with the jobs keeps each a moment ("ClusterQueue research is inactive");
    the job that waited for quota waited longest."""
    history = PhaseHistory()
    inactive = "ClusterQueue research is inactive"
    history.record(
        [
            WorkloadRow("ml-team", "broken", "KaiwoJob", "research", "PENDING", 1, inactive),
            WorkloadRow("ml-team", "eval", "KaiwoJob", "research", "PENDING", 1, "no quota"),
        ]
    )
    for _ in range(3):
        history.record(
            [
                WorkloadRow("ml-team", "broken", "KaiwoJob", "research", "RUNNING", 2),
                WorkloadRow("ml-team", "eval", "KaiwoJob", "research", "PENDING", 2, "no quota"),
            ]
        )
    assert history.longest_wait() == "ml-team/eval"
    assert PhaseHistory().longest_wait() is None


def test_an_error_is_explained_by_its_failing_condition_not_a_healthy_false_one() -> None:
    stuck = kaiwo("KaiwoService", "chat", "ERROR")
    stuck["status"]["conditions"] = [
        {
            "type": "ResourceUnderutilization",
            "status": "False",
            "reason": "GpuUtilizationNormal",
            "message": "GPU utilization is at or above 1% of the requested GPUs",
        },
        {
            "type": "ChildHealthy",
            "status": "False",
            "reason": "ProgressDeadlineExceeded",
            "message": "Deployment chat: ReplicaSet chat-7c9 has timed out progressing",
        },
    ]

    [row] = workload_rows(workloads=[stuck], kueue_workloads=[], jobs=[], pods=[], now=NOW)

    assert row.detail == (
        "ProgressDeadlineExceeded: Deployment chat: ReplicaSet chat-7c9 has timed out progressing"
    )


def test_a_detail_is_shown_as_written_brackets_and_all() -> None:
    # Read as markup, "[/workload/tokenizer.json]" ended `kaiwo demo` with a MarkupError.
    detail = "BackoffLimitExceeded: KeyError: [/workload/tokenizer.json] not in [bold]cache"
    rows = [WorkloadRow("ml-team", "broken", "KaiwoJob", "research", "FAILED", 5, detail)]
    out = io.StringIO()

    Console(file=out, width=250).print(render(rows, PhaseHistory(), title="demo"))

    assert [cell.strip() for cell in out.getvalue().splitlines()[4].split("│")[1:-1]][-1] == (
        detail
    )
