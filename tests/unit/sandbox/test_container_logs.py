"""What a sandbox container's log holds at a given moment (expected lines by hand)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from kaiwo_sandbox.container_logs import LogLine, container_log, container_run
from kaiwo_sandbox.kubelet_endpoint import LogOptions, rfc3339_nano
from kaiwo_sandbox.lifecycle import RunPlan, Timing

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
TIMING = Timing(start_seconds=2, run_seconds=20, download_seconds=3)
SCRIPT = (
    "#!/bin/bash\nset -euo pipefail\n# train\n"
    'torchrun --nnodes "$NUM_REPLICAS" \\\n  train_sft.py --config /workload/sft.yaml\n'
)
STARTED = (
    "[sandbox] container workload of pod ml-team/sft-abcde-0 (workload ml-team/sft) started "
    "on node amd-mi300x-1 with GPUs 0,1,2,3; a simulation: nothing really runs"
)
COMMAND = (
    '[sandbox] image rocm/pytorch: /bin/bash -c torchrun --nnodes "$NUM_REPLICAS" '
    "train_sft.py --config /workload/sft.yaml"
)


def pod(state: dict[str, Any] | None, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    statuses = [{"name": "workload", "state": state}] if state is not None else []
    return {
        "metadata": {
            "name": "sft-abcde-0",
            "namespace": "ml-team",
            "labels": {"kaiwo.silogen.ai/name": "sft", "kaiwo.silogen.ai/type": "job"}
            if labels is None
            else labels,
            "annotations": {"sandbox.kaiwo.silogen.ai/gpu-ids": "0,1,2,3"},
        },
        "spec": {
            "nodeName": "amd-mi300x-1",
            "containers": [
                {
                    "name": "workload",
                    "image": "rocm/pytorch",
                    "command": ["/bin/bash", "-c"],
                    "args": [SCRIPT],
                }
            ],
        },
        "status": {"containerStatuses": statuses},
    }


RUNNING = {"running": {"startedAt": "2026-01-01T12:00:00Z"}}


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_running_job_has_written_its_start_and_the_quarters_that_are_due() -> None:
    running = pod(RUNNING)
    run = container_run(running, "workload")
    assert run is not None
    lines = container_log(running, "workload", run=run, plan=RunPlan(20), timing=TIMING, now=at(11))
    assert lines == (
        LogLine(T0, STARTED),
        LogLine(T0, COMMAND),
        LogLine(at(5), "[sandbox] 25% of the planned 20 s"),
        LogLine(at(10), "[sandbox] 50% of the planned 20 s"),
    )


def test_a_finished_job_ends_with_done_and_its_exit_code() -> None:
    finished = pod(
        {
            "terminated": {
                "exitCode": 0,
                "startedAt": "2026-01-01T12:00:00Z",
                "finishedAt": "2026-01-01T12:00:20Z",
            }
        }
    )
    run = container_run(finished, "workload")
    assert run is not None
    lines = container_log(
        finished, "workload", run=run, plan=RunPlan(20), timing=TIMING, now=at(500)
    )
    assert [line.text for line in lines] == [
        STARTED,
        COMMAND,
        "[sandbox] 25% of the planned 20 s",
        "[sandbox] 50% of the planned 20 s",
        "[sandbox] 75% of the planned 20 s",
        "[sandbox] done after 20 s: exit code 0",
    ]
    assert lines[-1].at == at(20)


def test_a_failed_container_says_its_message_then_its_exit_code() -> None:
    failed = pod(
        {
            "terminated": {
                "exitCode": 1,
                "message": "FileNotFoundError: /workload/tokenizer.json",
                "startedAt": "2026-01-01T12:00:00Z",
                "finishedAt": "2026-01-01T12:00:06Z",
            }
        }
    )
    run = container_run(failed, "workload")
    assert run is not None
    lines = container_log(failed, "workload", run=run, plan=RunPlan(8), timing=TIMING, now=at(9))
    assert [line.text for line in lines][2:] == [
        "[sandbox] 25% of the planned 8 s",
        "[sandbox] 50% of the planned 8 s",
        "[sandbox] 75% of the planned 8 s",
        "FileNotFoundError: /workload/tokenizer.json",
        "[sandbox] exited with code 1 after 6 s",
    ]


def test_a_serving_container_says_so_every_thirty_seconds_at_the_time_scale() -> None:
    serving = pod(RUNNING, labels={})
    run = container_run(serving, "workload")
    assert run is not None
    half = Timing(scale=0.5)
    lines = container_log(
        serving, "workload", run=run, plan=RunPlan(math.inf), timing=half, now=at(31)
    )
    assert lines[0].text == (
        "[sandbox] container workload of pod ml-team/sft-abcde-0 started on node amd-mi300x-1 "
        "with GPUs 0,1,2,3; a simulation: nothing really runs"
    )
    assert lines[2:] == (
        LogLine(T0, "[sandbox] ready: serving until the pod is deleted"),
        LogLine(at(15), "[sandbox] still serving after 15 s"),
        LogLine(at(30), "[sandbox] still serving after 30 s"),
    )


def test_a_container_that_has_not_started_has_no_run() -> None:
    assert container_run(pod(None), "workload") is None
    assert container_run(pod({"waiting": {"reason": "ContainerCreating"}}), "workload") is None
    assert container_run(pod(RUNNING), "sidecar") is None


def test_a_download_pod_is_named_as_a_download() -> None:
    download = pod(
        RUNNING, labels={"kaiwo.silogen.ai/name": "sft", "kaiwo.silogen.ai/type": "downloader"}
    )
    run = container_run(download, "workload")
    assert run is not None
    first = container_log(download, "workload", run=run, plan=RunPlan(3), timing=TIMING, now=T0)
    assert "(download ml-team/sft)" in first[0].text


def test_since_then_tail_choose_the_first_line_sent() -> None:
    lines = [LogLine(at(seconds), f"line {seconds}") for seconds in (0, 5, 10, 15)]
    assert LogOptions().first_shown(lines, now=at(20)) == 0
    assert LogOptions(tail_lines=1).first_shown(lines, now=at(20)) == 3
    assert LogOptions(tail_lines=10).first_shown(lines, now=at(20)) == 0
    # Since 17 s before 20 s: from 3 s on.
    assert LogOptions(since_seconds=17).first_shown(lines, now=at(20)) == 1
    assert LogOptions(since_seconds=17, tail_lines=2).first_shown(lines, now=at(20)) == 2
    assert LogOptions(since_seconds=17, tail_lines=4).first_shown(lines, now=at(20)) == 1
    assert LogOptions(since_seconds=1).first_shown(lines, now=at(20)) == 4


def test_timestamps_are_written_as_the_kubelet_writes_them() -> None:
    assert rfc3339_nano(T0) == "2026-01-01T12:00:00Z"
    assert rfc3339_nano(T0 + timedelta(microseconds=250_000)) == "2026-01-01T12:00:00.25Z"
    assert rfc3339_nano(T0 + timedelta(microseconds=1)) == "2026-01-01T12:00:00.000001Z"
