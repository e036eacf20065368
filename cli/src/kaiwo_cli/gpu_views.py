"""``kaiwo gpus``: the GPU workloads GPU idle preemption tracks, from their GpuWorkload records
(decision 0047), as a table. Pure: records in, text out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kaiwo_cli.text_tables import render_table

HEADERS = ("NAMESPACE", "WORKLOAD", "PHASE", "GPUS", "UTIL", "IDLE SINCE", "POLICY", "VERDICT")
NONE_TRACKED = (
    "No GPU workload is tracked: GPU idle preemption tracks Pods, Jobs, Deployments, "
    "StatefulSets, RayJobs and RayClusters whose annotations or namespace opt in "
    "(kaiwo.silogen.ai/gpu-preemption.*; docs/operations.md)"
)


def gpu_workload_table(records: Sequence[Mapping[str, Any]]) -> str:
    """One row per record, by namespace and workload; ``-`` where nothing is known yet."""
    if not records:
        return NONE_TRACKED
    rows = sorted((_row(record) for record in records), key=lambda row: (row[0], row[1]))
    return render_table(HEADERS, rows)


def _row(record: Mapping[str, Any]) -> list[str]:
    metadata = record.get("metadata") or {}
    reference = (record.get("spec") or {}).get("workloadRef") or {}
    status = record.get("status") or {}
    utilization = status.get("utilization")
    policy = status.get("policy")
    grace = status.get("gracePeriod")
    return [
        str(metadata.get("namespace") or ""),
        f"{reference.get('kind', '?')}/{reference.get('name', '?')}",
        str(status.get("phase") or "-"),
        _text(status.get("gpus")),
        "-" if utilization is None else f"{utilization}%",
        _text(status.get("idleSince")),
        "-" if policy is None else f"{policy} ({grace})" if grace else str(policy),
        _text(status.get("verdict")),
    ]


def _text(value: object) -> str:
    return "-" if value is None or value == "" else str(value)
