"""The sandbox's GPU metrics: one series per GPU a running pod holds, answered as Prometheus
answers an instant query, and read back by the monitor's own parser."""

from __future__ import annotations

from datetime import UTC, datetime

from kaiwo_monitor.prometheus import sample_times_from_response, samples_from_response, series_key
from kaiwo_sandbox.gpu_metrics import exposition, query_answer, utilization

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def running_pod(
    name: str, gpus: str, *, phase: str = "Running", utilization_text: str | None = None
) -> dict:
    annotations = {"sandbox.kaiwo.silogen.ai/gpu-ids": gpus}
    if utilization_text is not None:
        annotations["sandbox.kaiwo.silogen.ai/gpu-utilization"] = utilization_text
    return {
        "metadata": {"name": name, "namespace": "ml-team", "annotations": annotations},
        "spec": {"nodeName": "amd-mi300x-1", "containers": [{"name": "workload"}]},
        "status": {"phase": phase},
    }


def test_one_series_per_gpu_of_running_pods_only() -> None:
    series = utilization(
        [
            running_pod("idle", "0,1", utilization_text="3"),
            running_pod("done", "2", phase="Succeeded"),
        ]
    )
    assert [(s.labels["pod"], s.labels["gpu_id"], s.value) for s in series] == [
        ("idle", "0", 3.0),
        ("idle", "1", 3.0),
    ]
    assert series[0].labels["hostname"] == "amd-mi300x-1"


def bound_pod(name: str, node: str, gpus: int, created: str) -> dict:
    """A pod a real scheduler bound (``kaiwo demo --cluster kwok``): no GPU ids noted."""
    return {
        "metadata": {"name": name, "namespace": "ml-team", "creationTimestamp": created},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "workload", "resources": {"requests": {"amd.com/gpu": str(gpus)}}}
            ],
        },
        "status": {"phase": "Running"},
    }


def test_pods_a_real_scheduler_bound_hold_the_lowest_ids_left_on_their_node() -> None:
    """In order of creation, around the ids the sandbox's scheduler noted on other pods."""
    pods = [
        bound_pod("second", "amd-mi300x-1", 2, "2026-01-01T12:00:02Z"),
        {
            **running_pod("noted", "0,1"),
            "metadata": {
                "name": "noted",
                "namespace": "ml-team",
                "annotations": {"sandbox.kaiwo.silogen.ai/gpu-ids": "0,1"},
            },
        },
        bound_pod("first", "amd-mi300x-1", 3, "2026-01-01T12:00:01Z"),
        bound_pod("elsewhere", "amd-mi300x-2", 1, "2026-01-01T12:00:00Z"),
    ]
    held = {(s.labels["pod"], s.labels["hostname"], s.labels["gpu_id"]) for s in utilization(pods)}
    assert held == {
        ("noted", "amd-mi300x-1", "0"),
        ("noted", "amd-mi300x-1", "1"),
        ("first", "amd-mi300x-1", "2"),
        ("first", "amd-mi300x-1", "3"),
        ("first", "amd-mi300x-1", "4"),
        ("second", "amd-mi300x-1", "5"),
        ("second", "amd-mi300x-1", "6"),
        ("elsewhere", "amd-mi300x-2", "0"),
    }


def test_busy_gpus_report_between_70_and_95() -> None:
    [series] = utilization([running_pod("train", "5")])
    assert 70.0 <= series.value <= 95.0


def test_the_monitor_reads_the_answer() -> None:
    answer = query_answer(utilization([running_pod("idle", "0", utilization_text="3")]), now=NOW)
    [sample] = samples_from_response(answer)
    assert (sample.namespace, sample.pod, sample.gpu, sample.percent) == (
        "ml-team",
        "idle",
        "0/0",
        3.0,
    )
    assert sample.at == NOW


def test_exposition_text() -> None:
    text = exposition(utilization([running_pod("idle", "0", utilization_text="3")]))
    assert text.splitlines()[-1] == (
        'gpu_gfx_activity{container="workload",gpu_id="0",gpu_partition_id="0",'
        'hostname="amd-mi300x-1",namespace="ml-team",pod="idle"} 3.0'
    )


def test_the_monitor_reads_each_samples_time_from_the_timestamp_answer() -> None:
    series = utilization([running_pod("idle", "0", utilization_text="3")])
    times = sample_times_from_response(query_answer(series, now=NOW, timestamps=True))
    [sample] = samples_from_response(query_answer(series, now=NOW), times=times)
    assert times == {series_key(series[0].labels): NOW}
    assert (sample.percent, sample.at) == (3.0, NOW)
