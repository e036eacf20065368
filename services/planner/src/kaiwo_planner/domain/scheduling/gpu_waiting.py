"""When a GPU workload no Kaiwo kind owns *waits for GPUs* (decision 0056), pure.

A tracked root (decision 0047) waits for GPUs, as upstream's ``PendingGpu`` phase says (§11.3),
when one of these holds:

* **Kueue does not admit it for GPUs**: a Kueue Workload created for the root (its owner
  reference or the ``kueue.x-k8s.io/job-uid`` label names the root's uid) is not admitted
  (``QuotaReserved`` is not ``True``) and its ``QuotaReserved=False`` message names one of
  the GPU resources the root asks for (Kueue writes "insufficient unused quota for
  amd.com/gpu in flavor ..."). Waiting since the Kueue Workload's creation.
* **The scheduler cannot place it for GPUs**: the root is a bare Pod, ``Pending``, with
  ``PodScheduled=False``, reason ``Unschedulable`` and a message naming "insufficient
  <resource>" for one of its GPU resources (the kube-scheduler's "0/3 nodes are available: 3
  Insufficient amd.com/gpu."). Waiting since the Pod's creation.

What does *not* count: a pod waiting for an image, a volume or a node of another kind (upstream
``PendingOther``), a Kueue Workload refused for CPU or memory, and the pods of a Job,
Deployment or StatefulSet not under Kueue: the watcher observes roots, not their pods
(decision 0047), and one stream of every pending pod of the cluster is a price this does not
pay. Such a workload waits without pressing; put it under Kueue to make it press.

The caller applies ``KaiwoConfig.spec.scheduling.pendingThresholdForPreemption`` to the
returned time, as it does for a PENDING KaiwoJob.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

from kaiwo_contracts.gpu_workloads import POD, kind_of, pod_gpus, pod_templates

from kaiwo_planner.domain.settings.cluster_settings import parse_time

QUOTA_RESERVED: Final = "QuotaReserved"
POD_SCHEDULED: Final = "PodScheduled"
UNSCHEDULABLE: Final = "Unschedulable"


def gpu_resources(root: Mapping[str, Any]) -> frozenset[str]:
    """The GPU resource names the root's pods ask for (``amd.com/gpu``, ...)."""
    return frozenset(name for spec, _ in pod_templates(root) for name in pod_gpus(spec))


def waiting_for_gpus_since(
    root: Mapping[str, Any], kueue_workloads: Iterable[Mapping[str, Any]]
) -> datetime | None:
    """Since when the root waits for GPUs (module docstring), or None when it does not."""
    names = gpu_resources(root)
    if not names:
        return None
    found = [
        since
        for workload in kueue_workloads
        if _refused_for_gpus(workload, names)
        and (since := parse_time(_metadata(workload).get("creationTimestamp"))) is not None
    ]
    if kind_of(root) == POD and _unschedulable_for_gpus(root, names):
        since = parse_time(_metadata(root).get("creationTimestamp"))
        found += [since] if since is not None else []
    return min(found, default=None)


def _refused_for_gpus(workload: Mapping[str, Any], names: frozenset[str]) -> bool:
    reserved = _condition(workload, QUOTA_RESERVED)
    if reserved is None or reserved.get("status") != "False":
        return False
    return _names_any(str(reserved.get("message") or ""), names)


def _unschedulable_for_gpus(pod: Mapping[str, Any], names: frozenset[str]) -> bool:
    status = pod.get("status")
    if not isinstance(status, Mapping) or status.get("phase") != "Pending":
        return False
    scheduled = _condition(pod, POD_SCHEDULED)
    if scheduled is None or scheduled.get("status") != "False":
        return False
    if scheduled.get("reason") != UNSCHEDULABLE:
        return False
    message = str(scheduled.get("message") or "").lower()
    return any(f"insufficient {name.lower()}" in message for name in names)


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
