"""What the simulated Job and Deployment controllers report, with no I/O: a workload's status
from its pods, and whether a new status differs from the old beyond its timestamps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kaiwo_sandbox.lifecycle import format_time


def job_status(
    job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], *, now: datetime
) -> dict[str, Any]:
    """The status a Job controller writes for ``job`` given its pods (one pod per
    ``parallelism``; ``backoffLimit`` failures allowed)."""
    spec = job.get("spec") or {}
    previous = job.get("status") or {}
    phases = [((p.get("status") or {}).get("phase") or "Pending") for p in pods]
    ready = sum(1 for p in pods if _pod_ready(p))
    succeeded = phases.count("Succeeded")
    failed = phases.count("Failed")
    active = len(phases) - succeeded - failed
    status: dict[str, Any] = {
        "active": active,
        "ready": ready,
        "succeeded": succeeded,
        "failed": failed,
        "startTime": previous.get("startTime") or format_time(now),
    }
    conditions = [
        c
        for c in previous.get("conditions") or ()
        if c.get("type") not in ("Complete", "Failed", "SuccessCriteriaMet", "FailureTarget")
    ]
    wanted = int(spec.get("completions") or spec.get("parallelism") or 1)
    at = format_time(now)
    if failed > int(spec.get("backoffLimit", 6)):
        # The real Job controller's words: what the container said stays on the pod.
        conditions.append(
            {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit",
                "lastTransitionTime": at,
            }
        )
    elif succeeded >= wanted:
        conditions.append(
            {
                "type": "SuccessCriteriaMet",
                "status": "True",
                "reason": "CompletionsReached",
                "lastTransitionTime": at,
            }
        )
        conditions.append(
            {
                "type": "Complete",
                "status": "True",
                "reason": "CompletionsReached",
                "lastTransitionTime": at,
            }
        )
        status["completionTime"] = previous.get("completionTime") or at
    if conditions:
        status["conditions"] = conditions
    return status


def job_is_finished(job: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or ()
    )


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def deployment_status(
    deployment: Mapping[str, Any], ready_pods: int, *, now: datetime
) -> dict[str, Any]:
    """The Deployment controller's status when ``ready_pods`` of its pods are Ready."""
    metadata = deployment.get("metadata") or {}
    wanted = int((deployment.get("spec") or {}).get("replicas", 1))
    ready = min(ready_pods, wanted)
    at = format_time(now)
    available = "True" if ready >= wanted else "False"
    return {
        "observedGeneration": int(metadata.get("generation") or 1),
        "replicas": wanted,
        "updatedReplicas": wanted,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "unavailableReplicas": wanted - ready,
        "conditions": [
            {
                "type": "Available",
                "status": available,
                "reason": "MinimumReplicasAvailable"
                if available == "True"
                else "MinimumReplicasUnavailable",
                "lastUpdateTime": at,
                "lastTransitionTime": at,
            },
            {
                "type": "Progressing",
                "status": "True",
                "reason": "NewReplicaSetAvailable" if available == "True" else "ReplicaSetUpdated",
                "lastUpdateTime": at,
                "lastTransitionTime": at,
            },
        ],
    }


def same_status(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether writing ``new`` would change anything but timestamps (level-triggered: a
    settled sandbox writes nothing)."""
    written = {key: old.get(key) for key in new}
    return bool(_without_times(written) == _without_times(new))


def _without_times(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_times(v) for k, v in value.items() if not k.endswith(("Time", "At"))}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value
