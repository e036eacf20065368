"""Why a workload's children fail or do not start: the ``ChildHealthy`` condition.

The phase alone says FAILED, ERROR or STARTING; what the user needs is the cause the child
and its pods report (decision 0134):

* a main child that failed (FAILED): its own reason and message (a Job's ``Failed`` condition:
  ``BackoffLimitExceeded``, ``DeadlineExceeded``, with the last failed pod's container exit
  code, reason and message: "container workload exited with code 1 (Error): CUDA out of
  memory"; a RayJob's ``reason`` and ``message``);
* a Deployment past its progress deadline (ERROR): the Deployment's own message, with what
  its pods are stuck on; a RayService whose Serve applications are ``UNHEALTHY`` or
  ``DEPLOY_FAILED`` (ERROR): those applications and their messages, on either of its Ray
  clusters, and also while the service stays READY (decision 0186);
* a pod whose container cannot start or keeps crashing, whatever the phase
  (:data:`CONTAINER_TROUBLES`: ``CrashLoopBackOff``, ``ImagePullBackOff``...): a Job's pod
  that cannot pull its image waits for good, and a crash-looping service replica shows only
  STARTING;
* a pod Kueue admitted into a node pool no node is in any more (:data:`NODE_POOL_GONE`,
  decision 0182): the operator moved the pool's nodes to another pool before the scheduler
  bound the pod, so the scheduler finds no node for it, and Kueue, which counts it
  admitted, never places it again. A batch Job none of whose pods ran is made anew
  (:func:`main_child_made_anew`, decision 0183), as is a RayJob none of whose cluster's
  pods ran.

Each is ``ChildHealthy`` False with the cause as its reason. The condition is written only
once something went wrong, so a workload that never had trouble carries none; once written it
turns True when the trouble is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Final

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus
from kaiwo_contracts.gpu_workloads import controller_reference

from kaiwo_planner.domain.state.cluster import object_uid
from kaiwo_planner.domain.state.first_few import first_few
from kaiwo_planner.domain.state.nodes import NODEPOOL_LABEL
from kaiwo_planner.domain.status.child_phase import (
    COMPONENT_DELETED,
    KUBERNETES_DEFAULT_BACKOFF_LIMIT,
    FailingApplication,
    ObservedChildren,
    app_wrapper_failure,
    failing_applications,
    past_progress_deadline,
    ray_cluster_of,
    ray_service_clusters,
)
from kaiwo_planner.domain.status.conditions import ConditionSpec, condition_of

CHILD_HEALTHY: Final = "ChildHealthy"
APPLICATIONS_FAILED: Final = "ApplicationsFailed"

CONTAINER_TROUBLES: Final = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
"""Reasons a kubelet gives a waiting container that will not run without someone's help (a
container merely starting waits as ``ContainerCreating`` or ``PodInitializing``)."""

NODE_POOL_GONE: Final = "NodePoolGone"
"""The reason for a pod that waits for a node pool no node is in (decision 0182)."""

_FINISHED_POD_PHASES: Final = frozenset({"Succeeded", "Failed"})
_SHOWN: Final = 2
"""Troubled pods named in a message; the rest are counted."""


def child_health(
    observed: ObservedChildren,
    *,
    phase: WorkloadStatus,
    previous: Mapping[str, Any],
    overdue_pods: Sequence[str] = (),
    node_pools: Collection[str] | None = None,
) -> ConditionSpec | None:
    """The ``ChildHealthy`` condition for a workload whose children show ``phase``; None
    while nothing went wrong and the condition was never written. ``overdue_pods`` tell the
    admitted pods of a Deployment not Ready within its deadline (decision 0176);
    ``node_pools`` are the pools some node is in (None: not known, no pod is judged by its
    pool)."""
    if phase is WorkloadStatus.FAILED:
        return _failure(observed)
    # Only Kueue puts a pool's selector on a pod it admits; without its Workloads (a
    # namespace Kueue does not manage) a pool in a pod's selector is the user's own choice.
    troubles = tuple(
        _troubles(
            observed.pods,
            node_pools if observed.kueue_workloads else None,
            advice=lambda pod: _stranded_advice(observed, node_pools, pod),
        )
    )
    troubles_told = [text for _, text in troubles]
    applications = (
        _failed_applications(observed.ray_service) if observed.child_kind == "AppWrapper" else ""
    )
    if phase is WorkloadStatus.ERROR and observed.child_kind == "AppWrapper":
        return ConditionSpec(CHILD_HEALTHY, "False", APPLICATIONS_FAILED, applications)
    if phase is WorkloadStatus.ERROR:
        return _past_progress_deadline(observed.child or {}, [*overdue_pods, *troubles_told])
    if applications:  # READY all the same: a replica still serves, or the other cluster does
        troubles = (*troubles, (APPLICATIONS_FAILED, applications))
    if troubles:
        reason = troubles[0][0]
        return ConditionSpec(
            CHILD_HEALTHY,
            "False",
            reason,
            first_few([text for _, text in troubles], shown=_SHOWN, separator="; "),
        )
    if condition_of(previous, CHILD_HEALTHY) is None:
        return None
    return ConditionSpec(
        CHILD_HEALTHY, "True", "Healthy", "The workload's children and pods report no failure"
    )


# ------------------------------------------------------------------ a failed main child


def _failure(observed: ObservedChildren) -> ConditionSpec:
    child = observed.child or {}
    name = str((child.get("metadata") or {}).get("name") or "")
    if observed.child_kind == "Job":
        reason, message = _job_failure(child, name)
        last_pod = _last_failed_pod(observed.pods, owner_uid=object_uid(child))
        if last_pod:
            message = f"{message}; {last_pod}"
        return ConditionSpec(CHILD_HEALTHY, "False", reason, message)
    if observed.child_kind == "AppWrapper":
        # The AppWrapper controller's why, from its Unhealthy condition (decision 0185).
        failure = app_wrapper_failure(child) or {}
        why = f": {failure['message']}" if failure.get("message") else ""
        reason = str(failure.get("reason") or "AppWrapperFailed")
        return ConditionSpec(CHILD_HEALTHY, "False", reason, f"AppWrapper {name} failed{why}")
    status = child.get("status") or {}
    reason = str(status.get("reason") or f"{observed.child_kind}Failed")
    message = str(status.get("message") or f"{observed.child_kind} {name} failed")
    return ConditionSpec(CHILD_HEALTHY, "False", reason, message)


def failed_job_cause(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> str:
    """Why the batch Job ``job`` failed: its own ``Failed`` reason and message, then what its
    last failed pod among ``pods`` says ("Job x: ...; pod x-7k2p: container c exited with
    code 1 (Error): ..."). The download Job's cause too (decision 0248)."""
    name = str((job.get("metadata") or {}).get("name") or "")
    _, message = _job_failure(job, name)
    last_pod = _last_failed_pod(pods, owner_uid=object_uid(job))
    return f"{message}; {last_pod}" if last_pod else message


def _job_failure(job: Mapping[str, Any], name: str) -> tuple[str, str]:
    status = job.get("status") or {}
    for condition_type in ("Failed", "FailureTarget"):
        found = condition_of(status, condition_type)
        if found is not None and found.get("status") == "True":
            reason = str(found.get("reason") or "JobFailed")
            return reason, f"Job {name}: {found.get('message') or 'failed'}"
    # More pods failed than the backoffLimit allows; the Job controller has not said so yet.
    failed = int(status.get("failed") or 0)
    limit = (job.get("spec") or {}).get("backoffLimit")
    if not isinstance(limit, int):
        limit = KUBERNETES_DEFAULT_BACKOFF_LIMIT
    return "BackoffLimitExceeded", (
        f"Job {name}: {failed} pod(s) failed, more than its backoffLimit of {limit}"
    )


def _last_failed_pod(pods: Sequence[Mapping[str, Any]], *, owner_uid: str) -> str:
    """What the Job's last failed pod says of its end ("" when no failed pod is left)."""
    failed = [
        pod
        for pod in pods
        if (pod.get("status") or {}).get("phase") == "Failed" and _owned_by(pod, owner_uid)
    ]
    if not failed:
        return ""
    last = max(failed, key=_finished_at)
    status = last.get("status") or {}
    pod_name = str((last.get("metadata") or {}).get("name") or "")
    told = [
        f"container {c.get('name')} {ended}"
        for c in status.get("containerStatuses") or ()
        if (ended := _ended_badly((c.get("state") or {}).get("terminated")))
    ]
    if told:
        return f"pod {pod_name}: " + "; ".join(told)
    if status.get("reason") or status.get("message"):
        return f"pod {pod_name}: " + _reason_and_message(status)
    return f"pod {pod_name} failed"


def _ended_badly(terminated: Mapping[str, Any] | None) -> str:
    """A container's end with a non-zero exit code, as words ("" for any other end)."""
    code = terminated.get("exitCode") if isinstance(terminated, Mapping) else None
    if terminated is None or not isinstance(code, int) or code == 0:
        return ""
    text = f"exited with code {code}"
    if terminated.get("reason"):
        text += f" ({terminated['reason']})"
    if terminated.get("message"):
        text += f": {terminated['message']}"
    return text


def _finished_at(pod: Mapping[str, Any]) -> str:
    """When the pod's containers ended (RFC 3339 sorts as text), else when it started."""
    status = pod.get("status") or {}
    ends = [
        str(((c.get("state") or {}).get("terminated") or {}).get("finishedAt") or "")
        for c in status.get("containerStatuses") or ()
    ]
    return max([*ends, str(status.get("startTime") or "")])


# ------------------------------------------------------------------ a RayService failing


def _failed_applications(ray_service: Mapping[str, Any] | None) -> str:
    return first_few(
        [_told_application(a) for a in failing_applications(ray_service)],
        shown=_SHOWN,
        separator="; ",
    )


def _told_application(application: FailingApplication) -> str:
    told = f"application {application.name} is {application.status}"
    if application.serving:
        told += (
            f" on Ray cluster {application.cluster}, which KubeRay started to take the edit "
            f"while {application.serving} serves"
        )
    return told + (f": {application.message}" if application.message else "")


# ------------------------------------------------------------------ a Deployment stuck


def _past_progress_deadline(deployment: Mapping[str, Any], stuck: Sequence[str]) -> ConditionSpec:
    """The Deployment controller's words when it says the deadline passed; ours when only
    an admitted pod's own deadline did (its ``Progressing`` then still says it progresses)."""
    name = str((deployment.get("metadata") or {}).get("name") or "")
    message = f"Deployment {name} is not progressing"
    if past_progress_deadline(deployment):
        progressing = condition_of(deployment.get("status") or {}, "Progressing") or {}
        message = str(progressing.get("message") or message)
    limit = (deployment.get("spec") or {}).get("progressDeadlineSeconds")
    if isinstance(limit, int):
        message += f" (progressDeadlineSeconds: {limit})"
    if stuck:
        message += "; " + first_few(list(stuck), shown=_SHOWN, separator="; ")
    return ConditionSpec(CHILD_HEALTHY, "False", "ProgressDeadlineExceeded", message)


# ------------------------------------------------------------------ pods in trouble


def _troubles(
    pods: Sequence[Mapping[str, Any]],
    node_pools: Collection[str] | None,
    *,
    advice: Callable[[Mapping[str, Any]], str],
) -> list[tuple[str, str]]:
    """Each live pod's trouble (its first container in trouble, else a pool gone): its
    reason and what to tell, by pod name. ``advice``: what is done, or to do, for a pod
    waiting for a pool gone (asked only of such a pod)."""
    found = [
        (str((pod.get("metadata") or {}).get("name") or ""), trouble)
        for pod in pods
        if (trouble := pod_trouble(pod) or _pool_gone(pod, node_pools, advice)) is not None
    ]
    return [trouble for _, trouble in sorted(found)]


def unschedulable(pod: Mapping[str, Any]) -> bool:
    """The scheduler found no node for the pod (a pod Kueue gates says ``SchedulingGated``)."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    scheduled = condition_of(pod.get("status") or {}, "PodScheduled") or {}
    return scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable"


def gone_pool(pod: Mapping[str, Any], node_pools: Collection[str] | None) -> str | None:
    """The node pool a pod waits for that no node is in: the pool its node selector (Kueue's,
    from the flavor it admitted the pod into) names, when the scheduler found no node for the
    pod and no node is in that pool (None otherwise, and when ``node_pools`` is None)."""
    spec = pod.get("spec") or {}
    pool = (spec.get("nodeSelector") or {}).get(NODEPOOL_LABEL)
    if node_pools is None or not pool or pool in node_pools or spec.get("nodeName"):
        return None
    if spec.get("schedulingGates") or not unschedulable(pod):
        return None
    return str(pool)


def _pool_gone(
    pod: Mapping[str, Any],
    node_pools: Collection[str] | None,
    advice: Callable[[Mapping[str, Any]], str],
) -> tuple[str, str] | None:
    """:func:`gone_pool`'s pod: the reason and what to tell."""
    pool = gone_pool(pod, node_pools)
    if pool is None:
        return None
    name = str((pod.get("metadata") or {}).get("name") or "")
    told = (
        f"pod {name}: Kueue admitted it into node pool {pool}, which no node is in any "
        "more (its nodes moved to another pool before the scheduler bound the pod), so no "
        "node can take it, and Kueue, which counts it admitted, does not admit it again"
    )
    if (controller_reference(pod) or {}).get("kind") == "ReplicaSet":
        told += "; delete the pod: its ReplicaSet makes a new one, which Kueue admits anew"
    elif what_to_do := advice(pod):
        told += f"; {what_to_do}"
    return NODE_POOL_GONE, told


def _stranded_advice(
    observed: ObservedChildren, node_pools: Collection[str] | None, pod: Mapping[str, Any]
) -> str:
    """What is done, or to do, for a pod of the main child that waits for a pool gone: the
    child made anew when none of its pods ran (:func:`main_child_made_anew`); else, for a
    batch Job, what recovers it without losing what its pods finished, as measured on Kueue
    (decision 0183): its Workload deactivated and activated again, so that Kueue suspends
    the Job (its finished pods counted) and admits it anew. Nothing else was measured.
    Asked only of a workload Kueue manages (:func:`child_health` judges no pool otherwise)."""
    if not _of_main_child(observed, pod):
        return ""
    if main_child_made_anew(observed, node_pools) is not None:
        return f"the operator makes the {observed.child_kind} anew, which Kueue admits again"
    if observed.child_kind != "Job":
        return ""
    names = sorted(
        str((w.get("metadata") or {}).get("name") or "") for w in observed.kueue_workloads
    )
    return (
        f"set spec.active of its Kueue Workload {', '.join(names)} to false, and once the Job "
        "is suspended back to true: Kueue admits it anew, and what its pods finished is kept"
    )


def main_child_made_anew(
    observed: ObservedChildren,
    node_pools: Collection[str] | None,
    *,
    flavors_without_models: Collection[str] = (),
) -> str | None:
    """Why the main child is to be made anew (None: it is not): it waits in a node pool no
    node is in any more (:func:`_stranded`), or in flavors none of whose nodes hold its
    ``gpuModels`` (:func:`_admitted_without_models`), or it is an AppWrapper whose controller
    failed it because its RayService was deleted (:func:`_component_deleted`). Never one
    being deleted."""
    child = observed.child
    if child is None or (child.get("metadata") or {}).get("deletionTimestamp"):
        return None
    return (
        _component_deleted(observed.child_kind, child)
        or _stranded(observed, node_pools)
        or _admitted_without_models(observed, flavors_without_models)
    )


def _admitted_without_models(observed: ObservedChildren, flavors: Collection[str]) -> str | None:
    """Why the main child is made anew that Kueue admitted into ``flavors``, none of whose
    nodes holds one of the workload's ``gpuModels`` (decision 0264): Kueue's flavor selector
    and the models' affinity name no node together, so its pods wait for ever while Kueue
    counts it admitted. Made anew with the flavor terms (decision 0237), Kueue admits it into
    a flavor that holds them. As for a pool gone, a batch child only while nothing of it ran,
    a service's AppWrapper only while no pod of it is bound to a node (one whose node was
    relabelled since serves on)."""
    child, kind = observed.child or {}, observed.child_kind
    if not flavors or kind not in _MADE_ANEW or not observed.kueue_workloads:
        return None
    if _ran(kind, child) if kind != "AppWrapper" else _has_bound_pods(observed):
        return None
    when = "and none of its pods can run" if kind == "AppWrapper" else "before any of its pods ran"
    return (
        f"{kind} {(child.get('metadata') or {}).get('name') or ''}: Kueue admitted it into "
        f"flavor {', '.join(sorted(flavors))}, no node of which holds one of the spec's "
        f"gpuModels, {when}: the {kind} is made anew, and Kueue admits it into a flavor "
        "that holds them"
    )


def _component_deleted(kind: str, child: Mapping[str, Any]) -> str | None:
    """Why an AppWrapper is made anew whose RayService someone deleted: the AppWrapper
    controller fails it at once and for good (``Failed``, ``Unhealthy`` ``MissingComponent``),
    without the retries it gives other faults, so the service would never run again. Made
    anew, as a Deployment someone deleted is made again (decision 0185)."""
    failure = app_wrapper_failure(child) if kind == "AppWrapper" else None
    if failure is None or failure.get("reason") != COMPONENT_DELETED:
        return None
    return (
        f"AppWrapper {(child.get('metadata') or {}).get('name') or ''}: its RayService was "
        "deleted, and the AppWrapper controller failed it for good "
        f"({failure.get('message') or COMPONENT_DELETED}): the AppWrapper is made anew, and "
        "Kueue admits it again"
    )


def _stranded(observed: ObservedChildren, node_pools: Collection[str] | None) -> str | None:
    """Why the main child, a batch Job, a RayJob or a Ray service's AppWrapper, is made anew
    when Kueue admitted it into a node pool no node is in any more (:func:`gone_pool`): each
    live pod of it waits for that pool, and, for a batch child, none of its pods ran.

    Kueue wrote the pool into the child's pod templates when it admitted it (a Job's, a
    RayJob's cluster's, the AppWrapper's RayService's), so every pod made from them waits for
    that pool, and Kueue, which counts the child admitted, never admits it again. A child
    made anew gets a Workload of its own, which Kueue admits into a pool that has nodes (or
    queues). A batch child only while nothing of it ran (:func:`_ran`), so that no work done
    is lost (decision 0183); a service keeps no work, and one whose every live pod waits
    serves nothing (decision 0185). Only for a workload Kueue manages (see
    :func:`child_health`).
    """
    child, kind = observed.child or {}, observed.child_kind
    if not observed.kueue_workloads or kind not in _MADE_ANEW:
        return None
    if kind != "AppWrapper" and _ran(kind, child):
        return None
    live = _live_pods_of_main_child(observed)
    pools = {gone_pool(pod, node_pools) for pod in live}
    if not live or None in pools:
        return None
    when = "and none of its pods can run" if kind == "AppWrapper" else "before any of its pods ran"
    return (
        f"{kind} {(child.get('metadata') or {}).get('name') or ''}: Kueue admitted it into "
        f"node pool {', '.join(sorted(str(pool) for pool in pools))}, which no node is in any "
        f"more, {when}: the {kind} is made anew, and Kueue admits it again"
    )


def _has_bound_pods(observed: ObservedChildren) -> bool:
    live = _live_pods_of_main_child(observed)
    return any((pod.get("spec") or {}).get("nodeName") for pod in live)


def _live_pods_of_main_child(observed: ObservedChildren) -> list[Mapping[str, Any]]:
    return [
        pod
        for pod in observed.pods
        if _of_main_child(observed, pod)
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
    ]


_MADE_ANEW: Final = frozenset({"Job", "RayJob", "AppWrapper"})
"""The main children :func:`_stranded` judges: those Kueue admits whole whose pods it places
through the child's own templates (an AppWrapper's, through its RayService's)."""


def _ran(kind: str, child: Mapping[str, Any]) -> bool:
    """Whether anything of the child ran: a Job with a pod succeeded, failed or ready; a
    RayJob past starting its cluster (KubeRay's ``jobDeploymentStatus``) or with a job
    status."""
    status = child.get("status") or {}
    if kind == "Job":
        return any(int(status.get(count) or 0) for count in ("succeeded", "failed", "ready"))
    return bool(status.get("jobStatus")) or status.get("jobDeploymentStatus") not in (
        None,
        "",
        "New",
        "Initializing",
    )


def _of_main_child(observed: ObservedChildren, pod: Mapping[str, Any]) -> bool:
    """A pod the main child made: a batch Job's own, or a Ray cluster's that its RayJob's
    status names, or its AppWrapper's RayService's (only those: the cluster of a child made
    anew can still be there, going, when the next child of the same name starts)."""
    child = observed.child or {}
    if observed.child_kind == "Job":
        return _owned_by(pod, object_uid(child))
    if observed.child_kind == "RayJob":
        clusters = [str((child.get("status") or {}).get("rayClusterName") or "")]
    elif observed.child_kind == "AppWrapper":
        clusters = ray_service_clusters(observed.ray_service)
    else:
        return False
    return ray_cluster_of(pod) in clusters


def pod_trouble(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """A live pod's first container (init containers first) that waits in one of
    :data:`CONTAINER_TROUBLES`: the reason, and what to tell ("pod p: container c is waiting:
    ImagePullBackOff (...)"); None for a pod without trouble, finished or being deleted."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if meta.get("deletionTimestamp") or status.get("phase") in _FINISHED_POD_PHASES:
        return None
    containers = [
        *(status.get("initContainerStatuses") or ()),
        *(status.get("containerStatuses") or ()),
    ]
    trouble = next((c for c in containers if _waiting_reason(c) in CONTAINER_TROUBLES), None)
    if trouble is None:
        return None
    return _waiting_reason(trouble), _told(str(meta.get("name") or ""), trouble)


def _waiting_reason(container: Mapping[str, Any]) -> str:
    return str(((container.get("state") or {}).get("waiting") or {}).get("reason") or "")


def _told(pod_name: str, container: Mapping[str, Any]) -> str:
    waiting = (container.get("state") or {}).get("waiting") or {}
    if waiting.get("reason") == "CrashLoopBackOff":
        # The kubelet's message names the growing back-off ("back-off 40s restarting ..."):
        # it would rewrite the status at each restart and says less than the exit below.
        waiting = {"reason": "CrashLoopBackOff"}
    text = f"pod {pod_name}: container {container.get('name')} is waiting: " + (
        _reason_and_message(waiting)
    )
    last = _ended_badly((container.get("lastState") or {}).get("terminated"))
    return f"{text}; it last {last}" if last else text


def _reason_and_message(part: Mapping[str, Any]) -> str:
    reason = str(part.get("reason") or "")
    message = str(part.get("message") or "")
    return f"{reason} ({message})" if reason and message else reason or message


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    references = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return bool(uid) and any((ref or {}).get("uid") == uid for ref in references)
