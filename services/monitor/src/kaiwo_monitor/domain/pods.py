"""Which workload a pod belongs to and how many GPUs it holds, read from its manifest.

Kaiwo puts system labels on every pod template of a KaiwoJob or KaiwoService:
``kaiwo.silogen.ai/run-id`` (the workload's uid), ``kaiwo.silogen.ai/type`` (``job`` or
``service``) and ``kaiwo.silogen.ai/name``. Pods without them (the download job's pods, pods
of other controllers) are not KaiwoJobs' or KaiwoServices'; the GPU workloads no Kaiwo kind
owns are found from the readings (:mod:`kaiwo_monitor.discovery`), their workload being their
root object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kaiwo_contracts.plans import ObjectRef

LABEL_RUN_ID = "kaiwo.silogen.ai/run-id"
LABEL_TYPE = "kaiwo.silogen.ai/type"
LABEL_NAME = "kaiwo.silogen.ai/name"
WORKLOAD_API_VERSION = "kaiwo.silogen.ai/v1alpha1"
WORKLOAD_KINDS = {"job": "KaiwoJob", "service": "KaiwoService"}
RUN_ID_SELECTOR = LABEL_RUN_ID
"""Label selector matching every pod that carries a workload uid."""

GpuVendor = Literal["amd", "nvidia"]
NVIDIA_PREFIX = "nvidia.com/"
GPU_SUFFIX = "/gpu"


def workload_ref(
    *, kind: str, name: str, namespace: str, uid: str, api_version: str = WORKLOAD_API_VERSION
) -> ObjectRef:
    """The KaiwoJob or KaiwoService a pod runs for, or the root object of a GPU workload no
    Kaiwo kind owns (a Job, a Deployment, the Pod itself...): the one reference type, as the
    findings carry it."""
    return ObjectRef(api_version=api_version, kind=kind, name=name, namespace=namespace, uid=uid)


def is_kaiwo_workload(workload: ObjectRef) -> bool:
    """A KaiwoJob or KaiwoService (resource monitoring judges these only)."""
    return workload.api_version == WORKLOAD_API_VERSION and workload.kind in WORKLOAD_KINDS.values()


@dataclass(frozen=True, slots=True)
class MonitoredPod:
    """A pod of a workload: where it runs, what it requested, whether it is running."""

    namespace: str
    name: str
    workload: ObjectRef
    requested_gpus: int
    vendor: GpuVendor
    running: bool


def monitored_pod(pod: Mapping[str, Any], *, gpu_resource_key: str) -> MonitoredPod | None:
    """The pod as the monitor sees it, or None when it belongs to no KaiwoJob/KaiwoService.

    GPUs are counted from the resource names ending in ``/gpu`` (``amd.com/gpu``,
    ``nvidia.com/gpu``) and ``gpu_resource_key`` (KaiwoConfig ``nodes.defaultGpuResourceKey``).
    """
    metadata = pod.get("metadata") or {}
    labels: Mapping[str, str] = metadata.get("labels") or {}
    uid = labels.get(LABEL_RUN_ID, "")
    kind = WORKLOAD_KINDS.get(labels.get(LABEL_TYPE, ""))
    name = labels.get(LABEL_NAME, "")
    namespace = metadata.get("namespace") or ""
    if not (uid and kind and name and namespace and metadata.get("name")):
        return None
    spec = pod.get("spec") or {}
    requested, vendor = _gpu_requests(spec.get("containers") or [], gpu_resource_key)
    return MonitoredPod(
        namespace=namespace,
        name=str(metadata["name"]),
        workload=workload_ref(kind=kind, name=name, namespace=namespace, uid=uid),
        requested_gpus=requested,
        vendor=vendor,
        running=(pod.get("status") or {}).get("phase") == "Running",
    )


def in_their_workloads_namespace(
    pods: Iterable[MonitoredPod], namespace_of: Mapping[str, str]
) -> list[MonitoredPod]:
    """``pods`` without those whose run-id names a workload of another namespace.

    ``namespace_of``: the namespace of each workload listed this tick, by uid. A workload's
    pods live in its namespace; anyone who may create a pod elsewhere may label it with the
    workload's uid, and such a pod, counted with the workload's own, would lower or raise the
    reading the planner terminates or preempts the workload by (decision 0252). A pod whose
    uid names no listed workload is kept: it is judged for that uid alone, and the planner
    acts on no finding of a workload it does not know.
    """
    return [
        pod
        for pod in pods
        if namespace_of.get(pod.workload.uid or "", pod.namespace) == pod.namespace
    ]


def _gpu_requests(
    containers: list[Mapping[str, Any]], gpu_resource_key: str
) -> tuple[int, GpuVendor]:
    """GPUs the regular containers hold (the larger of request and limit each) and the vendor.

    Init containers are left out: they finish before the main containers use the GPUs.
    """
    total = 0
    vendor: GpuVendor = "amd"
    for container in containers:
        resources = container.get("resources") or {}
        amounts: dict[str, int] = {}
        for section in ("requests", "limits"):
            for key, quantity in (resources.get(section) or {}).items():
                if key.endswith(GPU_SUFFIX) or key == gpu_resource_key:
                    amounts[key] = max(amounts.get(key, 0), _whole_number(quantity))
        total += sum(amounts.values())
        if any(key.startswith(NVIDIA_PREFIX) and count for key, count in amounts.items()):
            vendor = "nvidia"
    return total, vendor


def _whole_number(quantity: object) -> int:
    """A GPU count (extended resources are whole numbers); anything else counts as 0."""
    if isinstance(quantity, bool):
        return 0
    if isinstance(quantity, int):
        return max(quantity, 0)
    if isinstance(quantity, str) and quantity.strip().isdigit():
        return int(quantity.strip())
    return 0
