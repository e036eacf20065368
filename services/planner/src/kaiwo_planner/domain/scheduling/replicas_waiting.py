"""A running Deployment-based KaiwoService whose pods Kueue has not all admitted waits for the
GPUs of those pods (a scale-up, a rollout waiting for quota: Kueue admits its pods one by one),
pure. Upstream counts such a service as waiting for GPUs (its gated pod's Workload without
quota, §11.3), though its status says RUNNING or READY. GPU idle preemption (decision 0236) and
duration preemption (decision 0256) both take it for waiting, by this one rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kaiwo_planner.domain.scheduling.gpu_allocation import wire_workload_shape
from kaiwo_planner.domain.settings.cluster_settings import parse_time
from kaiwo_planner.domain.state.cluster import ClusterState, object_uid
from kaiwo_planner.domain.state.index_entry import RUN_ID_LABEL
from kaiwo_planner.domain.status.kueue_admission import kueue_admitted


@dataclass(frozen=True, slots=True)
class ReplicasWaiting:
    """The GPUs of the service's pods Kueue has not admitted, waiting since the first of
    their Workloads was made."""

    gpus: int
    since: datetime


def replicas_waiting(
    obj: Mapping[str, Any], cluster: ClusterState, held_gpus: Callable[[], int]
) -> ReplicasWaiting | None:
    """The running service ``obj`` (wire form) holding ``held_gpus()`` when all its pods run
    waits for that x its pod Workloads not admitted / all of them; None when every pod is
    admitted, or the workload is of another shape (a Job, RayJob or AppWrapper is admitted
    whole). ``held_gpus`` is asked only of a service that waits (decision 0158: most running
    workloads do not)."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return None
    if wire_workload_shape(str(obj.get("kind") or ""), spec) != "deployment":
        return None
    pods = cluster.objects_labelled(RUN_ID_LABEL, object_uid(obj), kind="Pod")
    queued = [w for pod in pods for w in cluster.kueue_workloads_for(object_uid(pod))]
    waiting = [w for w in queued if not kueue_admitted(w.get("status") or {})]
    times = [
        at
        for w in waiting
        if (at := parse_time((w.get("metadata") or {}).get("creationTimestamp"))) is not None
    ]
    if not times:
        return None
    gpus = held_gpus() * len(waiting) // len(queued)
    if gpus <= 0:
        return None
    return ReplicasWaiting(gpus=gpus, since=min(times))
