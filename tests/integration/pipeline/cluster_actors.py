"""What the cluster does around the operator, played by hand: an administrator sets up
namespaces and the KaiwoQueueConfig, kubelets register GPU nodes and keep their Leases, Kueue
admits Jobs, and Jobs and Deployments move on.

How Jobs move depends on the API server. On the fake nothing runs, so
:class:`FakeJobController` writes Job status as the Job controller would. On a real API server
the controller manager's Job controller owns Job status and creates the Pods; with no
scheduler and no kubelet, :class:`Kubelet` writes those Pods' status and the real Job
controller works out the Job's. The same goes for a Deployment: the real Deployment and
ReplicaSet controllers make the ReplicaSets and Pods, :class:`Kubelet` reports the Pods Ready.

What tests add to a shared cluster carries a label of its own (:data:`TEST_NODE_LABEL`,
:data:`TEST_NAMESPACE_LABEL`), so clean-up removes exactly that and nothing a real test
cluster holds besides.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from kaiwo_kube import AlreadyExists, Conflict, KubernetesPort, NotFound, resources
from kaiwo_kube.resources import ResourceType

KAIWO_API: Final = "kaiwo.silogen.ai/v1alpha1"
NAMESPACE: Final = "ml-team"
QUEUE: Final = "kaiwo"
QUEUE_CONFIG: Final = "kaiwo"
GPU_NODE: Final = "gpu-node-1"
GPUS_PER_NODE: Final = 8
MI300X: Final = "AMD_Instinct_MI300X_OAM"
KAIWO_CONFIG: Final = "kaiwo"
TEST_NODE_LABEL: Final = "kaiwo-tests/node"
TEST_NAMESPACE_LABEL: Final = "kaiwo-tests/namespace"
WORKLOAD_NAMESPACE_LABEL: Final = "kaiwo.silogen.ai/workloads"
NOT_READY_TAINT: Final = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
"""The taint a kubelet registers its Node with; the node lifecycle controller removes it once
the node reports Ready."""
STATUS_AFTER_SECONDS: Final = 0.5
"""How long after creating its Node a (played) kubelet reports the node's status."""
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
POD_APPEARS_SECONDS: Final = 60.0
"""A guard against a hang, not a measure: the Job controller makes a pod in moments when idle."""
REPLICA_SET: Final = ResourceType(
    group="apps", version="v1", plural="replicasets", kind="ReplicaSet", namespaced=True
)
REVISION_ANNOTATION: Final = "deployment.kubernetes.io/revision"
POD_TEMPLATE_HASH_LABEL: Final = "pod-template-hash"
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
    """A namespace labelled as the tests', so clean-up finds it (one left over by an earlier,
    interrupted run is taken as it is), and as one that holds workloads, as a platform team
    labels it for the executor's admission policy (deploy/k8s/base/admission-policy.yaml)."""
    with contextlib.suppress(AlreadyExists):
        await kube.create(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": namespace,
                    "labels": {TEST_NAMESPACE_LABEL: "true", WORKLOAD_NAMESPACE_LABEL: "true"},
                },
            }
        )


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


async def remove_kaiwo_config(kube: KubernetesPort) -> None:
    """The KaiwoConfig singleton, which a running operator creates (empty) when it is missing
    and tests may have changed. Call with the operator stopped: it would create it again."""
    with contextlib.suppress(NotFound):
        await kube.delete(resources.KAIWO_CONFIG, KAIWO_CONFIG)


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


async def edit_node(
    kube: KubernetesPort,
    name: str,
    edit: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    field_manager: str = "cluster-admin",
) -> None:
    """What ``kubectl taint`` and ``kubectl label`` do: read the node, merge-patch what
    ``edit`` makes of it with the node's resourceVersion as precondition, and read again
    when someone else (the operator, the node lifecycle controller) wrote in between."""
    while True:
        node = await kube.get(resources.NODE, name)
        patch = edit(node)
        patch.setdefault("metadata", {})["resourceVersion"] = node["metadata"]["resourceVersion"]
        try:
            await kube.merge_patch(resources.NODE, name, patch, field_manager=field_manager)
        except Conflict:
            continue
        return


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


# ---------------------------------------------------------------------- kubelets' nodes


@dataclass(frozen=True, slots=True)
class GpuNode:
    """A node as its kubelet and the AMD device plugin describe it."""

    name: str
    gpus: int = GPUS_PER_NODE
    cpu: str = "128"
    memory: str = "1Ti"
    product: str = MI300X

    def manifest(self, *, not_ready_taint: bool) -> dict[str, Any]:
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {
                    "kubernetes.io/hostname": self.name,
                    "amd.com/gpu.product-name": self.product,
                    "beta.amd.com/gpu.family.AI": str(self.gpus),
                    TEST_NODE_LABEL: "true",
                },
            },
        }
        if not_ready_taint:
            node["spec"] = {"taints": [dict(NOT_READY_TAINT)]}
        return node

    def status(self) -> dict[str, Any]:
        capacity = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": "110",
            "amd.com/gpu": str(self.gpus),
        }
        return {
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
        }


async def register_node(
    kube: KubernetesPort, node: GpuNode, *, not_ready_taint: bool, status_after: float = 0.0
) -> None:
    """``node`` as a kubelet registers it: the Node (with the not-ready taint, which on a real
    API server the node lifecycle controller removes; the fake has none to do so), and
    ``status_after`` seconds later its capacity and Ready condition."""
    with contextlib.suppress(AlreadyExists):
        await kube.create(node.manifest(not_ready_taint=not_ready_taint), field_manager="kubelet")
    await asyncio.sleep(status_after)
    await kube.patch_status(
        resources.NODE, node.name, node.status(), field_manager="kubelet", method="merge"
    )


async def register_gpu_node(kube: KubernetesPort, *, not_ready_taint: bool = False) -> None:
    """The pipeline's AMD GPU node (8 GPUs), registered at once."""
    await register_node(kube, GpuNode(GPU_NODE), not_ready_taint=not_ready_taint)


async def remove_node(kube: KubernetesPort, name: str) -> None:
    """The Node (its Lease goes with it: the garbage collector follows the Lease's owner
    reference, as for a kubelet's; deleted here too, for the fake and for speed)."""
    with contextlib.suppress(NotFound):
        await kube.delete(resources.NODE, name)
    with contextlib.suppress(NotFound):
        await kube.delete(resources.LEASE, name, namespace=NODE_LEASE_NAMESPACE)


async def remove_test_nodes(kube: KubernetesPort) -> None:
    """Every node the tests registered, and their Leases."""
    for node in (await kube.list(resources.NODE, label_selector=TEST_NODE_LABEL)).items:
        await remove_node(kube, node["metadata"]["name"])
    leases = await kube.list(
        resources.LEASE, namespace=NODE_LEASE_NAMESPACE, label_selector=TEST_NODE_LABEL
    )
    for lease in leases.items:
        with contextlib.suppress(NotFound):
            await kube.delete(
                resources.LEASE, lease["metadata"]["name"], namespace=NODE_LEASE_NAMESPACE
            )


async def renew_node_lease(kube: KubernetesPort, node: dict[str, Any]) -> None:
    """The node's Lease renewed, owned by the Node as a kubelet's is."""
    metadata = node["metadata"]
    renew_time = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    await kube.apply(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": metadata["name"],
                "namespace": NODE_LEASE_NAMESPACE,
                "labels": {TEST_NODE_LABEL: "true"},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "name": metadata["name"],
                        "uid": metadata["uid"],
                    }
                ],
            },
            "spec": {
                "holderIdentity": metadata["name"],
                "leaseDurationSeconds": NODE_LEASE_SECONDS,
                "renewTime": renew_time,
            },
        },
        field_manager="kubelet",
    )


@contextlib.asynccontextmanager
async def node_heartbeat(kube: KubernetesPort) -> AsyncIterator[None]:
    """Renew the Lease of every node the tests registered while the block runs, as their
    kubelets would (nodes registered later are picked up at the next beat)."""

    async def beat() -> None:
        while True:
            for node in (await kube.list(resources.NODE, label_selector=TEST_NODE_LABEL)).items:
                with contextlib.suppress(NotFound):  # deleted meanwhile
                    await renew_node_lease(kube, node)
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
        # Stamped now, as the Job controller does: the operator reads a Job's own finish.
        finished = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        complete = {"type": "Complete", "status": "True", "lastTransitionTime": finished}
        status = {"active": 0, "ready": 0, "succeeded": 1, "completionTime": finished}
        await self._status(job, namespace, {**status, "conditions": [complete]})

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

    async def deployment_pods_ready(
        self, deployment: str, *, namespace: str
    ) -> list[dict[str, Any]]:
        """Report Running and Ready every pod of the Deployment's current ReplicaSet (the
        one of its latest revision), once the ReplicaSet controller has made them all;
        returns them as they were before the report."""
        deadline = time.monotonic() + POD_APPEARS_SECONDS
        while True:
            pods = await self._current_pods(deployment, namespace=namespace)
            if pods is not None:
                break
            assert time.monotonic() < deadline, (
                f"the controllers made no complete ReplicaSet for Deployment {deployment}"
            )
            await asyncio.sleep(0.1)
        for pod in pods:
            state = {"running": {"startedAt": now()}}
            await self._report(pod, phase="Running", ready=True, state=state, reason=None)
        return pods

    async def _current_pods(
        self, deployment: str, *, namespace: str
    ) -> list[dict[str, Any]] | None:
        """The pods of the Deployment's latest ReplicaSet, or None while the Deployment, that
        ReplicaSet or some of its pods are not there yet, or the controller has not yet seen
        the Deployment's latest generation."""
        found = await get_or_none(self.kube, resources.DEPLOYMENT, deployment, namespace=namespace)
        if found is None:
            return None
        # Until the controller has seen the Deployment's latest spec, its revision annotation
        # still names the old ReplicaSet: a new template would be answered with the old pods.
        observed = (found.get("status") or {}).get("observedGeneration", 0)
        if observed < found["metadata"].get("generation", 1):
            return None
        revision = (found["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION)
        uid = found["metadata"]["uid"]
        replica_sets = await self.kube.list(REPLICA_SET, namespace=namespace)
        current = [
            rs
            for rs in replica_sets.items
            if any(o["uid"] == uid for o in rs["metadata"].get("ownerReferences") or [])
            and (rs["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION) == revision
        ]
        if revision is None or len(current) != 1:
            return None
        [replica_set] = current
        template_hash = replica_set["metadata"]["labels"][POD_TEMPLATE_HASH_LABEL]
        pods = await self.kube.list(
            resources.POD,
            namespace=namespace,
            label_selector=f"{POD_TEMPLATE_HASH_LABEL}={template_hash}",
        )
        wanted = int(replica_set["spec"].get("replicas") or 0)
        alive = [p for p in pods.items if "deletionTimestamp" not in p["metadata"]]
        return alive if wanted > 0 and len(alive) == wanted else None

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
