"""``kaiwo gpus``: the GpuWorkload records as a table (decision 0047). Expected text by hand."""

from __future__ import annotations

from typing import Any

from kaiwo_cli.gpu_views import NONE_TRACKED, gpu_workload_table


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
