"""The storage a workload waits for: its PersistentVolumeClaims and its download Job.

Each gives a phase for the workload (FAILED, still waiting, or COMPLETE: ready) and the
condition that says so (``PvcReady``, ``DownloadJobSucceeded``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus

from kaiwo_planner.domain.children.downloads import claims_made_anew
from kaiwo_planner.domain.state.cluster import object_uid
from kaiwo_planner.domain.status.child_health import failed_job_cause
from kaiwo_planner.domain.status.child_phase import batch_job_phase
from kaiwo_planner.domain.status.conditions import ConditionSpec
from kaiwo_planner.domain.status.workload_events import event_reason

PVC_READY = "PvcReady"
PVC_DELETING = "Deleting"
DOWNLOAD_JOB_SUCCEEDED = "DownloadJobSucceeded"
VOLUME_MADE_ANEW = "VolumeMadeAnew"

_DOWNLOAD_MAP: Mapping[
    WorkloadStatus, tuple[WorkloadStatus, Literal["True", "False"], str, str]
] = MappingProxyType(
    {
        WorkloadStatus.PENDING: (
            WorkloadStatus.RUNNING,
            "False",
            "JobPending",
            "Download job pending",
        ),
        WorkloadStatus.STARTING: (
            WorkloadStatus.STARTING,
            "False",
            "JobInProgress",
            "Download job starting",
        ),
        WorkloadStatus.RUNNING: (
            WorkloadStatus.RUNNING,
            "False",
            "JobInProgress",
            "Download job in progress",
        ),
        WorkloadStatus.FAILED: (WorkloadStatus.FAILED, "False", "JobFailed", "Download job failed"),
        WorkloadStatus.COMPLETE: (
            WorkloadStatus.COMPLETE,
            "True",
            "JobCompleted",
            "Download job succeeded",
        ),
    }
)


def download_observation(
    job: Mapping[str, Any] | None,
    previous: Mapping[str, Any] | None,
    claims: Sequence[Mapping[str, Any]] = (),
    pods: Sequence[Mapping[str, Any]] = (),
) -> tuple[WorkloadStatus, ConditionSpec | None]:
    """The download's phase for the workload and its ``DownloadJobSucceeded`` condition.

    A failed download tells why, from the Job and its failed pod among ``pods`` (the
    downloader's exit code and message: a bucket that does not exist, a wrong key). FAILED
    is final, and the finished pod may not outlive the Job for long; "Download job failed"
    alone left the user to find both (decision 0248)."""
    anew = claims_made_anew(job, claims, succeeded_at=succeeded_at(previous))
    if anew:
        # The volume the download filled was deleted, and the one there now (or soon) is
        # empty: the download runs again before the workload's child runs (decision 0140).
        return WorkloadStatus.PENDING, volume_made_anew_condition(anew)
    if job is None:
        if succeeded_at(previous) is not None:
            # Finished earlier and since removed: the data is there.
            return WorkloadStatus.COMPLETE, None
        return WorkloadStatus.NEW, None
    job_phase = batch_job_phase(job, previous_phase=WorkloadStatus.NEW)
    storage_phase, status, reason, message = _DOWNLOAD_MAP[job_phase]
    if storage_phase is WorkloadStatus.FAILED:
        message = f"{message}: {failed_job_cause(job, pods)}"
    elif job_phase in (WorkloadStatus.PENDING, WorkloadStatus.STARTING):
        waiting = _waiting_pod(pods, owner_uid=object_uid(job))
        if waiting:
            message = f"{message}: {waiting}"
    return storage_phase, ConditionSpec(DOWNLOAD_JOB_SUCCEEDED, status, reason, message)


def _waiting_pod(pods: Sequence[Mapping[str, Any]], *, owner_uid: str) -> str:
    """What keeps the download Job's pod from starting, naming the Secrets it needs ("" when
    none of its pods waits to be created).

    A Secret a download reads that does not exist leaves the pod in ``ContainerCreating``
    for good: the kubelet says so only in ``FailedMount`` Events, which the operator does not
    read, and "Download job pending" sent the user nowhere (decision 0254). The pod's own
    spec names every Secret it mounts; a missing Secret an env var reads (the Hugging Face
    token) the kubelet tells in the container's waiting message, kept here."""
    for pod in pods:
        if (pod.get("status") or {}).get("phase") != "Pending" or not _owned_by(pod, owner_uid):
            continue
        name = str((pod.get("metadata") or {}).get("name") or "")
        for container in (pod.get("status") or {}).get("containerStatuses") or ():
            waiting = (container.get("state") or {}).get("waiting") or {}
            reason = waiting.get("reason")
            if reason == "CreateContainerConfigError":
                return f"pod {name}: container {container.get('name')} {reason}: " + str(
                    waiting.get("message") or ""
                )
            if reason == "ContainerCreating":
                secrets = sorted(
                    {
                        str(volume["secret"].get("secretName"))
                        for volume in (pod.get("spec") or {}).get("volumes") or ()
                        if isinstance(volume.get("secret"), Mapping)
                    }
                )
                if secrets:
                    namespace = (pod.get("metadata") or {}).get("namespace") or ""
                    return (
                        f"pod {name} is ContainerCreating; if it stays so, check that the "
                        f"Secret(s) it mounts exist in namespace {namespace}: "
                        f"{', '.join(secrets)} (kubectl describe pod {name} shows its Events)"
                    )
    return ""


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    references = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return bool(uid) and any((ref or {}).get("uid") == uid for ref in references)


def succeeded_at(previous: Mapping[str, Any] | None) -> str | None:
    """When the download last succeeded, by the previous ``DownloadJobSucceeded`` condition
    (None: it does not say so)."""
    if previous is None or previous.get("status") != "True":
        return None
    moment = previous.get("lastTransitionTime")
    return moment if isinstance(moment, str) else ""


def volume_made_anew_condition(claim_names: Sequence[str]) -> ConditionSpec:
    claims = ", ".join(claim_names)
    return ConditionSpec(
        DOWNLOAD_JOB_SUCCEEDED,
        "False",
        VOLUME_MADE_ANEW,
        f"PersistentVolumeClaim {claims} the download filled was deleted: the download runs "
        "again into the new, empty one before the workload's pods start",
    )


def pvc_observation(
    pvcs: Sequence[Mapping[str, Any]],
) -> tuple[WorkloadStatus, ConditionSpec | None]:
    if not pvcs:
        return WorkloadStatus.NEW, None
    phases = [str((p.get("status") or {}).get("phase") or "Pending") for p in pvcs]
    names = [str((p.get("metadata") or {}).get("name", "")) for p in pvcs]
    if "Lost" in phases:
        name = names[phases.index("Lost")]
        return WorkloadStatus.FAILED, ConditionSpec(
            PVC_READY, "False", "Lost", f"PersistentVolumeClaim {name} is Lost"
        )
    waiting = [(n, p) for n, p in zip(names, phases, strict=True) if p != "Bound"]
    deleting = [n for n, p in zip(names, pvcs, strict=True) if _being_deleted(p)]
    if deleting and not waiting:
        # Someone deleted it while pods use it: Kubernetes keeps it (pvc-protection) until
        # they stop, and the workload runs on; told, as its data goes with it (0139).
        return WorkloadStatus.COMPLETE, ConditionSpec(
            PVC_READY,
            "False",
            PVC_DELETING,
            f"PersistentVolumeClaim {deleting[0]} is being deleted: it is kept while pods use "
            "it, then goes with its data, and a new, empty one is made",
        )
    if waiting:
        name, phase = waiting[0]
        message = f"PersistentVolumeClaim {name} is {phase}"
        if phase == "Pending":
            # A storage class that does not exist leaves it so for good, and the workload
            # waited with nothing else said (decision 0202 tells it for a Model's cache).
            message += " (if it stays so, see its Events: a storage class that does not exist?)"
        return WorkloadStatus.PENDING, ConditionSpec(
            PVC_READY, "False", event_reason(phase), message
        )
    return WorkloadStatus.COMPLETE, ConditionSpec(
        PVC_READY, "True", "Bound", "All PersistentVolumeClaims are bound"
    )


def _being_deleted(pvc: Mapping[str, Any]) -> bool:
    return bool((pvc.get("metadata") or {}).get("deletionTimestamp"))
