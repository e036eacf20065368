"""What the cluster does around the operator, played by hand: an administrator sets up GPU
nodes, a namespace and the KaiwoQueueConfig; the Job controller and Kueue move Jobs on."""

from __future__ import annotations

from typing import Any, Final

from kaiwo_kube import KubernetesPort, NotFound, resources

KAIWO_API: Final = "kaiwo.silogen.ai/v1alpha1"
NAMESPACE: Final = "ml-team"
QUEUE: Final = "kaiwo"
GPU_NODE: Final = "gpu-node-1"
GPUS_PER_NODE: Final = 8
TRANSITION_TIME: Final = "2025-01-01T00:00:00Z"

OWNER_UID_LABEL: Final = "kaiwo.silogen.ai/owner-uid"
MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
QUEUE_NAME_LABEL: Final = "kueue.x-k8s.io/queue-name"
KUEUE_JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"


async def set_up_cluster(kube: KubernetesPort, *, namespace: str = NAMESPACE) -> None:
    """A namespace, one AMD GPU node (8 GPUs) and the KaiwoQueueConfig with queue ``kaiwo``."""
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": GPU_NODE,
                "labels": {
                    "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM",
                    "beta.amd.com/gpu.family.AI": str(GPUS_PER_NODE),
                },
            },
        }
    )
    capacity = {"cpu": "128", "memory": "1Ti", "amd.com/gpu": str(GPUS_PER_NODE)}
    await kube.patch_status(
        resources.NODE,
        GPU_NODE,
        {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
        field_manager="kubelet",
        method="merge",
    )
    await kube.create(
        {
            "apiVersion": KAIWO_API,
            "kind": "KaiwoQueueConfig",
            "metadata": {"name": "kaiwo"},
            "spec": {"clusterQueues": [{"name": QUEUE, "namespaces": [namespace], "spec": {}}]},
        }
    )


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
    kube: KubernetesPort, resource: resources.ResourceType, name: str, *, namespace: str
) -> dict[str, Any] | None:
    try:
        return await kube.get(resource, name, namespace=namespace)
    except NotFound:
        return None


async def job_succeeds(kube: KubernetesPort, name: str, *, namespace: str = NAMESPACE) -> None:
    """The Job controller: every pod succeeded."""
    await kube.patch_status(
        resources.JOB,
        name,
        {
            "active": 0,
            "ready": 0,
            "succeeded": 1,
            "conditions": [
                {"type": "Complete", "status": "True", "lastTransitionTime": TRANSITION_TIME}
            ],
        },
        namespace=namespace,
        field_manager="job-controller",
        method="merge",
    )


async def job_pods(
    kube: KubernetesPort, name: str, *, active: int, ready: int, namespace: str = NAMESPACE
) -> None:
    """The Job controller: ``active`` pods exist, ``ready`` of them ready."""
    await kube.patch_status(
        resources.JOB,
        name,
        {"active": active, "ready": ready},
        namespace=namespace,
        field_manager="job-controller",
        method="merge",
    )


async def kueue_admits(kube: KubernetesPort, job: dict[str, Any]) -> None:
    """Kueue: a Workload for the Job, admitted; then the Job unsuspended."""
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
            "spec": {"queueName": metadata["labels"][QUEUE_NAME_LABEL]},
        },
        field_manager="kueue",
    )
    await kube.patch_status(
        resources.KUEUE_WORKLOAD,
        workload,
        {
            "conditions": [
                {
                    "type": "Admitted",
                    "status": "True",
                    "reason": "Admitted",
                    "message": "The workload is admitted",
                    "lastTransitionTime": TRANSITION_TIME,
                }
            ]
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
