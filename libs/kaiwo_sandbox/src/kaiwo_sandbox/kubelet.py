"""The simulated Job controller, Deployment controller, scheduler and kubelet.

On the fake API server nothing makes pods, so :class:`WorkloadControllers` plays the Job and
Deployment controllers (and the scheduler, by creating each pod on a node with room, see
:func:`~kaiwo_sandbox.scheduling.place`) and moves RayJobs on. :class:`Kubelet` moves every pod
bound to a sandbox node through its life; the Job and Deployment status follow from the pods.
Decisions are in :mod:`kaiwo_sandbox.lifecycle`; this module only reads and writes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from kaiwo_kube import AlreadyExists, Conflict, NotFound, resources

from kaiwo_sandbox.cluster_port import SandboxCluster
from kaiwo_sandbox.controller_status import (
    deployment_status,
    job_is_finished,
    job_status,
    same_status,
)
from kaiwo_sandbox.durations import duration_seconds
from kaiwo_sandbox.lifecycle import (
    CONTROLLER_UID_LABEL,
    GPU_IDS,
    JOB_NAME_LABEL,
    NODE,
    RUN_SECONDS,
    WORKLOAD_TYPE_LABEL,
    Timing,
    format_time,
    node_of,
    parse_time,
    pod_status,
    pod_step,
    run_plan,
)
from kaiwo_sandbox.quantities import pod_requests
from kaiwo_sandbox.scheduling import NodeRoom, is_active, place, unschedulable_message

FIELD_MANAGER: Final = "sandbox-controllers"
KUBELET: Final = "kubelet-sandbox"
OWNER_LABEL: Final = "sandbox.kaiwo.silogen.ai/owner-uid"
NAME_LABEL: Final = "kaiwo.silogen.ai/name"


class WorkloadControllers:
    """The Job and Deployment controllers and the scheduler, for an API server without them."""

    def __init__(self, kube: SandboxCluster, *, timing: Timing) -> None:
        self.kube = kube
        self.timing = timing

    async def reconcile(
        self, *, nodes: Sequence[NodeRoom], pods: list[dict[str, Any]], now: datetime
    ) -> None:
        for job in (await self.kube.list(resources.JOB)).items:
            await self._job(job, nodes=nodes, pods=pods, now=now)
        for deployment in (await self.kube.list(resources.DEPLOYMENT)).items:
            await self._deployment(deployment, nodes=nodes, pods=pods, now=now)
        with contextlib.suppress(NotFound):
            for ray_job in (await self.kube.list(resources.RAY_JOB)).items:
                await self._ray_job(ray_job, now=now)

    async def _job(
        self,
        job: dict[str, Any],
        *,
        nodes: Sequence[NodeRoom],
        pods: list[dict[str, Any]],
        now: datetime,
    ) -> None:
        metadata, spec = job["metadata"], job.get("spec") or {}
        own = [p for p in pods if _owned_by(p, metadata["uid"])]
        if job_is_finished(job):
            return
        if spec.get("suspend") is True:
            if (job.get("status") or {}).get("active"):
                await self._write_job_status(job, {"active": 0, "ready": 0})
            return
        wanted = int(spec.get("parallelism") or 1)
        failed = sum(1 for p in own if (p.get("status") or {}).get("phase") == "Failed")
        alive = [p for p in own if (p.get("status") or {}).get("phase") != "Failed"]
        if failed <= int(spec.get("backoffLimit", 6)):
            for index in range(len(alive), wanted):
                pod = await self._create_pod(
                    job,
                    template=spec.get("template") or {},
                    name=f"{metadata['name']}-{metadata['uid'][:5]}-{failed + index}",
                    extra_labels={
                        JOB_NAME_LABEL: metadata["name"],
                        CONTROLLER_UID_LABEL: metadata["uid"],
                    },
                    nodes=nodes,
                    pods=pods,
                )
                if pod is not None:
                    own.append(pod)
                    pods.append(pod)
        status = job_status(job, own, now=now)
        if not same_status(job.get("status") or {}, status):
            await self._write_job_status(job, status)

    async def _write_job_status(self, job: dict[str, Any], status: dict[str, Any]) -> None:
        with contextlib.suppress(NotFound, Conflict):
            await self.kube.patch_status(
                resources.JOB,
                job["metadata"]["name"],
                status,
                namespace=job["metadata"]["namespace"],
                field_manager="job-controller",
                method="merge",
            )

    async def _deployment(
        self,
        deployment: dict[str, Any],
        *,
        nodes: Sequence[NodeRoom],
        pods: list[dict[str, Any]],
        now: datetime,
    ) -> None:
        metadata, spec = deployment["metadata"], deployment.get("spec") or {}
        own = [p for p in pods if _owned_by(p, metadata["uid"]) and is_active(p)]
        wanted = int(spec.get("replicas", 1))
        for index in range(len(own), wanted):
            pod = await self._create_pod(
                deployment,
                template=spec.get("template") or {},
                name=f"{metadata['name']}-{metadata['uid'][:5]}-{index}",
                extra_labels={},
                nodes=nodes,
                pods=pods,
            )
            if pod is not None:
                own.append(pod)
                pods.append(pod)
        ready = sum(1 for p in own if (p.get("status") or {}).get("phase") == "Running")
        status = deployment_status(deployment, ready, now=now)
        if same_status(deployment.get("status") or {}, status):
            return
        with contextlib.suppress(NotFound, Conflict):
            await self.kube.patch_status(
                resources.DEPLOYMENT,
                metadata["name"],
                status,
                namespace=metadata["namespace"],
                field_manager="deployment-controller",
                method="merge",
            )

    async def _ray_job(self, ray_job: dict[str, Any], *, now: datetime) -> None:
        """A RayJob runs like a Job with one pod, without pods: status only."""
        metadata, spec = ray_job["metadata"], ray_job.get("spec") or {}
        status = ray_job.get("status") or {}
        if spec.get("suspend") is True or status.get("jobStatus") in ("SUCCEEDED", "FAILED"):
            return
        plan = run_plan(ray_job, timing=self.timing)
        started = parse_time(status.get("startTime"))
        if started is None:
            new = {
                "jobStatus": "RUNNING",
                "jobDeploymentStatus": "Running",
                "startTime": format_time(now),
            }
        elif now >= started + self.timing.delay(plan.seconds):
            outcome = "FAILED" if plan.failure else "SUCCEEDED"
            new = {
                "jobStatus": outcome,
                "jobDeploymentStatus": "Failed" if plan.failure else "Complete",
                "endTime": format_time(now),
                "message": plan.failure or "Job finished successfully",
            }
        else:
            return
        with contextlib.suppress(NotFound, Conflict):
            await self.kube.patch_status(
                resources.RAY_JOB,
                metadata["name"],
                new,
                namespace=metadata["namespace"],
                field_manager="kuberay-operator",
                method="merge",
            )

    async def _create_pod(
        self,
        owner: dict[str, Any],
        *,
        template: Mapping[str, Any],
        name: str,
        extra_labels: Mapping[str, str],
        nodes: Sequence[NodeRoom],
        pods: Sequence[dict[str, Any]],
    ) -> dict[str, Any] | None:
        metadata = owner["metadata"]
        template_metadata = template.get("metadata") or {}
        spec = dict(template.get("spec") or {})
        annotations = dict(template_metadata.get("annotations") or {})
        placement = place(pod_requests(spec), nodes=nodes, pods=pods)
        if placement is not None:
            spec["nodeName"] = placement.node
            annotations[NODE] = placement.node
            if placement.gpu_ids:
                annotations[GPU_IDS] = ",".join(str(i) for i in placement.gpu_ids)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name[:253],
                "namespace": metadata["namespace"],
                "labels": {
                    **(template_metadata.get("labels") or {}),
                    **extra_labels,
                    OWNER_LABEL: metadata["uid"],
                },
                "annotations": annotations,
                "ownerReferences": [
                    {
                        "apiVersion": owner.get("apiVersion", ""),
                        "kind": owner.get("kind", ""),
                        "name": metadata["name"],
                        "uid": metadata["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": spec,
        }
        try:
            created = await self.kube.create(pod, field_manager=FIELD_MANAGER)
        except AlreadyExists:
            return None
        except NotFound:  # the namespace is going away
            return None
        if placement is None:
            await report_unschedulable(self.kube, created, len(nodes))
        return created


class Scheduler:
    """Places pending pods on sandbox nodes with room. On the fake it sets ``spec.nodeName``
    itself; on a real API server it notes the node in an annotation (which the kubelet reads
    at once) and then binds the pod through the ``bindings`` resource, as a scheduler does,
    so that the API server knows the pod's node (``kubectl logs`` asks that node's kubelet)."""

    def __init__(self, kube: SandboxCluster, *, bind: bool) -> None:
        self.kube = kube
        self.bind = bind

    async def reconcile(self, *, nodes: Sequence[NodeRoom], pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            if not is_active(pod):
                continue
            if not node_of(pod):
                await self._schedule(pod, nodes=nodes, pods=pods)
            if not self.bind and node_of(pod) and not (pod.get("spec") or {}).get("nodeName"):
                await self._create_binding(pod, node_of(pod))

    async def _schedule(
        self, pod: dict[str, Any], *, nodes: Sequence[NodeRoom], pods: Sequence[dict[str, Any]]
    ) -> None:
        placement = place(pod_requests(pod.get("spec") or {}), nodes=nodes, pods=pods)
        if placement is None:
            if not _is_unschedulable(pod):
                await report_unschedulable(self.kube, pod, len(nodes))
            return
        annotations = {NODE: placement.node}
        if placement.gpu_ids:
            annotations[GPU_IDS] = ",".join(str(i) for i in placement.gpu_ids)
        patch: dict[str, Any] = {"metadata": {"annotations": annotations}}
        if self.bind:
            patch["spec"] = {"nodeName": placement.node}
        metadata = pod["metadata"]
        with contextlib.suppress(NotFound, Conflict):
            updated = await self.kube.merge_patch(
                resources.POD,
                metadata["name"],
                patch,
                namespace=metadata["namespace"],
                field_manager="default-scheduler",
            )
            pod.update(updated)

    async def _create_binding(self, pod: dict[str, Any], node: str) -> None:
        metadata = pod["metadata"]
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {
                "name": metadata["name"],
                "namespace": metadata["namespace"],
                "uid": metadata.get("uid"),
            },
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        # Conflict: bound meanwhile (the next round's list shows it); the pod may be gone.
        with contextlib.suppress(NotFound, Conflict):
            await self.kube.create(binding, field_manager="default-scheduler")
            pod.setdefault("spec", {})["nodeName"] = node


async def report_unschedulable(kube: SandboxCluster, pod: dict[str, Any], node_count: int) -> None:
    """The PodScheduled=False condition a scheduler reports for a pod no node has room for."""
    message = unschedulable_message(pod_requests(pod.get("spec") or {}), node_count)
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
    }
    with contextlib.suppress(NotFound, Conflict):
        await kube.patch_status(
            resources.POD,
            pod["metadata"]["name"],
            {"phase": "Pending", "conditions": [condition]},
            namespace=pod["metadata"]["namespace"],
            field_manager="default-scheduler",
            method="merge",
        )


def _is_unschedulable(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


class Kubelet:
    """Every sandbox node's kubelet: starts bound pods and ends them after their run time."""

    def __init__(self, kube: SandboxCluster, *, timing: Timing) -> None:
        self.kube = kube
        self.timing = timing

    async def reconcile(self, *, pods: list[dict[str, Any]], now: datetime) -> None:
        durations = await self._workload_durations()
        for pod in pods:
            labels = pod["metadata"].get("labels") or {}
            key = (pod["metadata"]["namespace"], labels.get(NAME_LABEL, ""))
            duration = durations.get(key) if labels.get(WORKLOAD_TYPE_LABEL) == "job" else None
            plan = run_plan(pod, timing=self.timing, duration_seconds=duration)
            step = pod_step(pod, plan, timing=self.timing, now=now)
            if step is None:
                continue
            status = pod_status(pod, step, plan=plan, now=now)
            with contextlib.suppress(NotFound, Conflict):
                updated = await self.kube.patch_status(
                    resources.POD,
                    pod["metadata"]["name"],
                    status,
                    namespace=pod["metadata"]["namespace"],
                    field_manager=KUBELET,
                    method="merge",
                )
                pod.update(updated)

    async def _workload_durations(self) -> dict[tuple[str, str], float]:
        found: dict[tuple[str, str], float] = {}
        with contextlib.suppress(NotFound):
            for job in (await self.kube.list(resources.KAIWO_JOB)).items:
                seconds = duration_seconds((job.get("spec") or {}).get("duration"))
                if seconds is not None:
                    found[(job["metadata"]["namespace"], job["metadata"]["name"])] = seconds
        return found


def _owned_by(pod: Mapping[str, Any], uid: str) -> bool:
    return any(o.get("uid") == uid for o in pod["metadata"].get("ownerReferences") or ())


__all__ = ["RUN_SECONDS", "Kubelet", "Scheduler", "WorkloadControllers"]
