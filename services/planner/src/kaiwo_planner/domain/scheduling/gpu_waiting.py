"""When a GPU workload no Kaiwo kind owns *waits for GPUs* (decision 0056), pure.

A tracked root (decision 0047) waits for GPUs, as upstream's ``PendingGpu`` phase says (§11.3),
when one of these holds:

* **Kueue does not admit it for GPUs**: a Kueue Workload created for the root (its owner
  reference or the ``kueue.x-k8s.io/job-uid`` label names the root's uid) is not admitted
  (``QuotaReserved`` is not ``True``) and its ``QuotaReserved=False`` message names one of
  the GPU resources the root asks for (Kueue writes "insufficient unused quota for
  amd.com/gpu in flavor ..."). Waiting since the Kueue Workload's creation.
* **The scheduler cannot place it for GPUs**: one of its pods is ``Pending`` with
  ``PodScheduled=False``, reason ``Unschedulable`` and a message naming "insufficient
  <resource>" for one of its GPU resources (the kube-scheduler's "0/3 nodes are available: 3
  Insufficient amd.com/gpu."): the root itself when it is a bare Pod, else a pod its Job,
  its StatefulSet or its Deployment's ReplicaSet controls (decision 0066; the watcher
  publishes exactly those pods, :func:`kaiwo_contracts.gpu_workloads.
  is_controlled_pod_waiting_for_gpus`). Waiting since the earliest such pod's creation.

How many GPUs it waits for: all its pods hold when Kueue does not admit it (Kueue admits a
workload whole), else those of its pods the scheduler cannot place (a Deployment with two of
three replicas running waits for the third's GPUs only).

What does *not* count: a pod waiting for an image, a volume or a node of another kind (upstream
``PendingOther``) and a Kueue Workload refused for CPU or memory.

The caller applies ``KaiwoConfig.spec.scheduling.pendingThresholdForPreemption`` to the
returned time, as it does for a PENDING KaiwoJob.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from kaiwo_contracts.gpu_workloads import (
    POD,
    held_gpus,
    kind_of,
    pod_gpus,
    pod_templates,
    unschedulable_for_gpus,
)

from kaiwo_planner.domain.settings.cluster_settings import parse_time

QUOTA_RESERVED: Final = "QuotaReserved"


@dataclass(frozen=True, slots=True)
class GpuWait:
    """A root waiting for GPUs: since when, and for how many."""

    since: datetime
    gpus: int


def gpu_resources(root: Mapping[str, Any]) -> frozenset[str]:
    """The GPU resource names the root's pods ask for (``amd.com/gpu``, ...)."""
    return frozenset(name for spec, _ in pod_templates(root) for name in pod_gpus(spec))


def gpu_wait(
    root: Mapping[str, Any],
    kueue_workloads: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]] = (),
) -> GpuWait | None:
    """Whether the root waits for GPUs (module docstring), given the Kueue Workloads created
    for it and its observed pods; None when it does not."""
    names = gpu_resources(root)
    if not names:
        return None
    refused = [
        since
        for workload in kueue_workloads
        if _refused_for_gpus(workload, names)
        and (since := parse_time(_metadata(workload).get("creationTimestamp"))) is not None
    ]
    candidates = [root] if kind_of(root) == POD else list(pods)
    unplaced = [
        (since, sum(pod_gpus(pod.get("spec") or {}).values()))
        for pod in candidates
        if unschedulable_for_gpus(pod) & names
        and (since := parse_time(_metadata(pod).get("creationTimestamp"))) is not None
    ]
    if not refused and not unplaced:
        return None
    since = min([*refused, *(at for at, _ in unplaced)])
    gpus = held_gpus(root) if refused else sum(count for _, count in unplaced)
    return GpuWait(since=since, gpus=gpus)


def _refused_for_gpus(workload: Mapping[str, Any], names: frozenset[str]) -> bool:
    reserved = _condition(workload, QUOTA_RESERVED)
    if reserved is None or reserved.get("status") != "False":
        return False
    return _names_any(str(reserved.get("message") or ""), names)


def _names_any(message: str, names: frozenset[str]) -> bool:
    lowered = message.lower()
    return any(name.lower() in lowered for name in names)


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition
    return None


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    found = obj.get("metadata")
    return found if isinstance(found, Mapping) else {}
