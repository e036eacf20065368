"""What the cluster does around the operator, played by hand: an administrator sets up a
namespace and the KaiwoQueueConfig, a kubelet registers a GPU node, Kueue admits Jobs, and
Jobs move on.

How Jobs move depends on the API server. On the fake nothing runs, so
:class:`FakeJobController` writes Job status as the Job controller would. On a real API server
the controller manager's Job controller owns Job status and creates the Pods; with no
scheduler and no kubelet, :class:`Kubelet` writes those Pods' status and the real Job
controller works out the Job's.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from kaiwo_kube import AlreadyExists, KubernetesPort, NotFound, resources

KAIWO_API: Final = "kaiwo.silogen.ai/v1alpha1"
NAMESPACE: Final = "ml-team"
QUEUE: Final = "kaiwo"
QUEUE_CONFIG: Final = "kaiwo"
GPU_NODE: Final = "gpu-node-1"
GPUS_PER_NODE: Final = 8
TRANSITION_TIME: Final = "2025-01-01T00:00:00Z"

OWNER_UID_LABEL: Final = "kaiwo.silogen.ai/owner-uid"
MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
QUEUE_CONFIG_LABEL: Final = "kaiwo.silogen.ai/queue-config"
QUEUE_NAME_LABEL: Final = "kueue.x-k8s.io/queue-name"
KUEUE_JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"

NODE_LEASE_NAMESPACE: Final = "kube-node-lease"
NODE_LEASE_SECONDS: Final = 40
HEARTBEAT_SECONDS: Final = 10.0
"""A kubelet renews its node's Lease every 10 s; the node lifecycle controller marks a node
whose Lease is older than its grace period (50 s) NotReady and taints it unreachable."""
POD_APPEARS_SECONDS: Final = 30.0
KUEUE_CLUSTER_KINDS: Final = (
    resources.KUEUE_CLUSTER_QUEUE,
    resources.KUEUE_RESOURCE_FLAVOR,
    resources.KUEUE_WORKLOAD_PRIORITY_CLASS,
    resources.KUEUE_TOPOLOGY,
)


def now() -> str:
    """A timestamp as the API server writes them (whole seconds)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------- the administrator


async def create_namespace(kube: KubernetesPort, namespace: str) -> None:
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})


async def create_queue_config(kube: KubernetesPort, *, namespace: str) -> None:
    """The KaiwoQueueConfig (a cluster singleton) with queue ``kaiwo`` for ``namespace``,
    applied as an administrator would, over the empty one a running operator may have made
    already (it owns none of its fields: the apply must not conflict)."""
    await kube.apply(
        {
            "apiVersion": KAIWO_API,
            "kind": "KaiwoQueueConfig",
            "metadata": {"name": QUEUE_CONFIG},
            "spec": {"clusterQueues": [{"name": QUEUE, "namespaces": [namespace], "spec": {}}]},
        },
        field_manager="cluster-admin",
        force=False,
    )


async def remove_queue_config(kube: KubernetesPort) -> None:
    """The KaiwoQueueConfig and the Kueue objects made for it, so that the next test on a
    shared cluster starts without them. Call with the operator stopped: it would put them
    back. Its cluster-wide children are deleted here rather than left to the garbage
    collector, so none is still there when the next operator starts."""
    with contextlib.suppress(NotFound):
        await kube.delete(resources.KAIWO_QUEUE_CONFIG, QUEUE_CONFIG)
    selector = f"{QUEUE_CONFIG_LABEL}={QUEUE_CONFIG}"
    for kind in KUEUE_CLUSTER_KINDS:
        for item in (await kube.list(kind, label_selector=selector)).items:
            with contextlib.suppress(NotFound):
                await kube.delete(kind, item["metadata"]["name"])


def training_job(name: str, *, namespace: str = NAMESPACE, download: bool = True) -> dict[str, Any]:
    """A KaiwoJob on 4 AMD GPUs; with ``download``, a data volume filled from S3 first."""
    spec: dict[str, Any] = {
        "image": "ghcr.io/silogen/rocm-ray:6.4",
        "entrypoint": "python train.py",
        "gpus": 4,
        "gpuVendor": "amd",
    }
    if download:
        spec["storage"] = {
            "storageEnabled": True,
            "storageClassName": "standard",
            "accessMode": "ReadWriteOnce",
            "data": {
                "mountPath": "/workload",
                "storageSize": "10Gi",
                "download": {
                    "s3": [
                        {
                            "endpointUrl": "http://minio.minio.svc:80",
                            "accessKeyId": {"secretName": "minio", "secretKey": "access-key"},
                            "secretKey": {"secretName": "minio", "secretKey": "secret-key"},
                            "buckets": [
                                {
                                    "name": "datasets",
                                    "files": [{"path": "train.jsonl", "targetPath": "train.jsonl"}],
                                }
                            ],
                        }
                    ]
                },
            },
        }
    return {
        "apiVersion": KAIWO_API,
        "kind": "KaiwoJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


async def get_or_none(
    kube: KubernetesPort, resource: resources.ResourceType, name: str, *, namespace: str | None
) -> dict[str, Any] | None:
    try:
        return await kube.get(resource, name, namespace=namespace)
    except NotFound:
        return None


# ---------------------------------------------------------------------- the kubelet's node


def gpu_node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": GPU_NODE,
            "labels": {
                "kubernetes.io/hostname": GPU_NODE,
                "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM",
                "beta.amd.com/gpu.family.AI": str(GPUS_PER_NODE),
            },
        },
    }


async def register_gpu_node(kube: KubernetesPort) -> None:
    """One AMD GPU node (8 GPUs), as a kubelet registers it: the Node, then its status."""
    with contextlib.suppress(AlreadyExists):
        await kube.create(gpu_node(), field_manager="kubelet")
    capacity = {"cpu": "128", "memory": "1Ti", "pods": "110", "amd.com/gpu": str(GPUS_PER_NODE)}
    await kube.patch_status(
        resources.NODE,
        GPU_NODE,
        {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": now(),
                    "lastTransitionTime": now(),
                }
            ],
        },
        field_manager="kubelet",
        method="merge",
    )


async def remove_gpu_node(kube: KubernetesPort) -> None:
    with contextlib.suppress(NotFound):
        await kube.delete(resources.NODE, GPU_NODE)
    with contextlib.suppress(NotFound):
        await kube.delete(resources.LEASE, GPU_NODE, namespace=NODE_LEASE_NAMESPACE)


async def renew_node_lease(kube: KubernetesPort) -> None:
    renew_time = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    await kube.apply(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": GPU_NODE, "namespace": NODE_LEASE_NAMESPACE},
            "spec": {
                "holderIdentity": GPU_NODE,
                "leaseDurationSeconds": NODE_LEASE_SECONDS,
                "renewTime": renew_time,
            },
        },
        field_manager="kubelet",
    )


@contextlib.asynccontextmanager
async def node_heartbeat(kube: KubernetesPort) -> AsyncIterator[None]:
    """Renew the node's Lease while the block runs, as its kubelet would."""

    async def beat() -> None:
        while True:
            await renew_node_lease(kube)
            await asyncio.sleep(HEARTBEAT_SECONDS)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# ---------------------------------------------------------------------- Jobs moving on


class JobDriver(Protocol):
    """Moves a Job's (one) pod through its life; the Job's status follows."""

    async def pod_running(self, job: str, *, namespace: str, ready: bool) -> None: ...

    async def pod_succeeded(self, job: str, *, namespace: str) -> None: ...


class FakeJobController:
    """On the fake: the Job controller's status writes, by hand."""

    def __init__(self, kube: KubernetesPort) -> None:
        self.kube = kube

    async def pod_running(self, job: str, *, namespace: str, ready: bool) -> None:
        await self._status(job, namespace, {"active": 1, "ready": int(ready)})

    async def pod_succeeded(self, job: str, *, namespace: str) -> None:
        complete = {"type": "Complete", "status": "True", "lastTransitionTime": TRANSITION_TIME}
        await self._status(
            job, namespace, {"active": 0, "ready": 0, "succeeded": 1, "conditions": [complete]}
        )

    async def _status(self, job: str, namespace: str, status: dict[str, Any]) -> None:
        await self.kube.patch_status(
            resources.JOB,
            job,
            status,
            namespace=namespace,
            field_manager="job-controller",
            method="merge",
        )


class Kubelet:
    """On a real API server: the Pod status a kubelet reports for the pod the Job
    controller made (no scheduler either, so the pod is never bound to the node)."""

    def __init__(self, kube: KubernetesPort) -> None:
        self.kube = kube

    async def pod_running(self, job: str, *, namespace: str, ready: bool) -> None:
        pod = await self.job_pod(job, namespace=namespace)
        started = now()
        state = {"running": {"startedAt": started}}
        await self._report(pod, phase="Running", ready=ready, state=state, reason=None)

    async def pod_succeeded(self, job: str, *, namespace: str) -> None:
        pod = await self.job_pod(job, namespace=namespace)
        finished = now()
        terminated = {
            "exitCode": 0,
            "reason": "Completed",
            "startedAt": (pod.get("status") or {}).get("startTime") or finished,
            "finishedAt": finished,
        }
        state = {"terminated": terminated}
        await self._report(pod, phase="Succeeded", ready=False, state=state, reason="PodCompleted")

    async def job_pod(self, job: str, *, namespace: str) -> dict[str, Any]:
        """The Job's pod, once the Job controller has made it."""
        deadline = time.monotonic() + POD_APPEARS_SECONDS
        while True:
            listed = await self.kube.list(
                resources.POD, namespace=namespace, label_selector=f"{JOB_NAME_LABEL}={job}"
            )
            if listed.items:
                [pod] = listed.items  # parallelism 1, and no pod has failed
                return pod
            assert time.monotonic() < deadline, f"the Job controller made no pod for Job {job}"
            await asyncio.sleep(0.1)

    async def _report(
        self,
        pod: dict[str, Any],
        *,
        phase: str,
        ready: bool,
        state: dict[str, Any],
        reason: str | None,
    ) -> None:
        metadata, spec = pod["metadata"], pod["spec"]
        status = {
            "phase": phase,
            "startTime": (pod.get("status") or {}).get("startTime") or now(),
            "conditions": [
                _condition("PodScheduled", holds=True),
                _condition("Initialized", holds=True, reason=reason),
                _condition("ContainersReady", holds=ready, reason=reason),
                _condition("Ready", holds=ready, reason=reason),
            ],
            "containerStatuses": [
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": "",
                    "ready": ready,
                    "started": phase == "Running",
                    "restartCount": 0,
                    "state": state,
                }
                for container in spec["containers"]
            ],
        }
        await self.kube.patch_status(
            resources.POD,
            metadata["name"],
            status,
            namespace=metadata["namespace"],
            field_manager="kubelet",
            method="merge",
        )


def _condition(kind: str, *, holds: bool, reason: str | None = None) -> dict[str, Any]:
    condition: dict[str, Any] = {
        "type": kind,
        "status": "True" if holds else "False",
        "lastTransitionTime": now(),
    }
    if reason:
        condition["reason"] = reason
    return condition


# ---------------------------------------------------------------------- Kueue


async def kueue_admits(kube: KubernetesPort, job: dict[str, Any]) -> None:
    """Kueue: a Workload for the Job (its one pod set), admitted; then the Job unsuspended."""
    metadata = job["metadata"]
    name, namespace, uid = metadata["name"], metadata["namespace"], metadata["uid"]
    workload = f"job-{name}-{uid[:5]}"
    await kube.create(
        {
            "apiVersion": resources.KUEUE_WORKLOAD.api_version,
            "kind": "Workload",
            "metadata": {
                "name": workload,
                "namespace": namespace,
                "labels": {KUEUE_JOB_UID_LABEL: uid},
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": name,
                        "uid": uid,
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "queueName": metadata["labels"][QUEUE_NAME_LABEL],
                "podSets": [{"name": "main", "count": 1, "template": job["spec"]["template"]}],
            },
        },
        field_manager="kueue",
    )
    await kube.patch_status(
        resources.KUEUE_WORKLOAD,
        workload,
        {
            "admission": {
                "clusterQueue": QUEUE,
                "podSetAssignments": [{"name": "main", "count": 1}],
            },
            "conditions": [
                _kueue_condition("QuotaReserved", "QuotaReserved", f"Quota reserved in {QUEUE}"),
                _kueue_condition("Admitted", "Admitted", "The workload is admitted"),
            ],
        },
        namespace=namespace,
        field_manager="kueue",
        method="merge",
    )
    await kube.merge_patch(
        resources.JOB,
        name,
        {"spec": {"suspend": False}},
        namespace=namespace,
        field_manager="kueue",
    )


def _kueue_condition(kind: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": TRANSITION_TIME,
    }
