"""What a workload's children report: the children observed, and the phase they show.

:func:`observe_children` collects a KaiwoJob's or KaiwoService's children from the cluster
state (they are named after it); :func:`child_phase` reads the phase of its main child: a
batch Job, a RayJob, a Deployment (and its pods), or the RayService an AppWrapper made
(FAILED once the AppWrapper controller failed the AppWrapper for good). The status state
machine (:mod:`~kaiwo_planner.domain.status.workload_status`) builds on these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final, Literal

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus
from kaiwo_contracts.gpu_workloads import controller_reference, deployment_of_pod
from kaiwo_contracts.ray_service_status import ray_service_serves, ray_service_status_clusters

from kaiwo_planner.domain.children.naming import child_name, main_child_name
from kaiwo_planner.domain.settings.cluster_settings import parse_time
from kaiwo_planner.domain.state.cluster import ClusterState, object_uid
from kaiwo_planner.domain.state.index_entry import RUN_ID_LABEL
from kaiwo_planner.domain.status.conditions import condition_of, has_condition

ChildKind = Literal["Job", "RayJob", "Deployment", "AppWrapper"]

KUEUE_MANAGED_CHILDREN: frozenset[ChildKind] = frozenset({"Job", "RayJob", "AppWrapper"})
"""Main children Kueue admits whole, through one Workload it owns by the child's name (a
Deployment's pods have one each, owned by the pod)."""

OTHER_MAIN_KIND: Final[Mapping[str, ChildKind]] = MappingProxyType(
    {"Job": "RayJob", "RayJob": "Job", "Deployment": "AppWrapper", "AppWrapper": "Deployment"}
)
"""The kind of main child a workload's ``ray`` switches to or from, by the other kind."""


@dataclass(frozen=True, slots=True)
class ObservedChildren:
    """What exists of one workload's children, as JSON objects (None: not created yet).

    ``child`` is the main child (``child_kind``); for a Ray KaiwoService it is the AppWrapper
    and ``ray_service`` the RayService the AppWrapper created. ``kueue_workloads`` are the
    Workloads Kueue made for the child (for a Deployment: for each of its pods).
    ``downloads_configured`` says whether a download Job is part of the workload at all.
    ``pods`` are every pod carrying the workload's run-id (its main child's, its download
    Job's): what they say tells why the workload fails or does not start
    (:mod:`.child_health`), and whether a Ray service's cluster is up or a Deployment's pod
    runs before any is Ready (:func:`child_phase`, decisions 0186 and 0214).
    ``earlier_kueue_workloads``: while the main child is missing, the Kueue Workloads still
    observed of an earlier child of its kind and name (deleted by someone, not yet removed
    by the garbage collector); Kueue would take one for a new child of that name (0139).
    ``switched_from``: while the main child is missing, the workload's main child of the
    other kind, still observed: its ``ray`` was switched, and that child is replaced.
    """

    child_kind: ChildKind
    child: Mapping[str, Any] | None = None
    ray_service: Mapping[str, Any] | None = None
    kueue_workloads: tuple[Mapping[str, Any], ...] = ()
    downloads_configured: bool = False
    download_job: Mapping[str, Any] | None = None
    pvcs: tuple[Mapping[str, Any], ...] = ()
    pods: tuple[Mapping[str, Any], ...] = ()
    earlier_kueue_workloads: tuple[Mapping[str, Any], ...] = ()
    switched_from: Mapping[str, Any] | None = None

    @property
    def run_times(self) -> ChildRunTimes:
        """When the main child says it started and finished (see :class:`ChildRunTimes`)."""
        return child_run_times(self.child_kind, self.child)


@dataclass(frozen=True, slots=True)
class ChildRunTimes:
    """The main child's own record of its run; None where it keeps none.

    A batch Job: ``status.startTime`` (when its controller started it, after Kueue admitted
    it) and ``status.completionTime``, which Kubernetes sets only on success, else the time
    its ``Complete``/``SuccessCriteriaMet``/``Failed`` condition turned True. A RayJob:
    ``status.startTime`` and ``status.endTime``. Deployments and RayServices keep neither.
    """

    started: datetime | None = None
    finished: datetime | None = None


_FINISHING_CONDITIONS = ("SuccessCriteriaMet", "Complete", "Failed")


def child_run_times(kind: ChildKind, child: Mapping[str, Any] | None) -> ChildRunTimes:
    """The run times ``child`` (the main child, of ``kind``) reports about itself."""
    status = (child or {}).get("status")
    if not isinstance(status, Mapping):
        return ChildRunTimes()
    if kind == "Job":
        finished = parse_time(status.get("completionTime")) or _finishing_condition_time(status)
        return ChildRunTimes(started=parse_time(status.get("startTime")), finished=finished)
    if kind == "RayJob":
        return ChildRunTimes(
            started=parse_time(status.get("startTime")), finished=parse_time(status.get("endTime"))
        )
    return ChildRunTimes()


def _finishing_condition_time(status: Mapping[str, Any]) -> datetime | None:
    for condition_type in _FINISHING_CONDITIONS:
        condition = condition_of(status, condition_type)
        if condition is not None and condition.get("status") == "True":
            return parse_time(condition.get("lastTransitionTime"))
    return None


def observe_children(
    *,
    cluster: ClusterState,
    owner_uid: str,
    name: str,
    child_kind: ChildKind,
    downloads_configured: bool,
    namespace: str = "",
) -> ObservedChildren:
    """Collect a workload's children from the cluster state (children are named after it)."""
    child = cluster.child_of(owner_uid, kind=child_kind, name=main_child_name(name))
    child_uid = object_uid(child) if child else ""
    ray_service = None
    if child_kind == "AppWrapper":
        ray_service = (cluster.child_of(child_uid, kind="RayService") if child_uid else None) or (
            cluster.child_of(owner_uid, kind="RayService")
        )
    pods = cluster.objects_labelled(
        RUN_ID_LABEL, owner_uid, kind="Pod", namespace=namespace or None
    )
    if child_kind == "Deployment":
        # Kueue admits a Deployment pod by pod: one Workload per pod carrying our run-id.
        workloads = tuple(w for pod in pods for w in cluster.kueue_workloads_for(object_uid(pod)))
    else:
        workloads = cluster.kueue_workloads_for(child_uid) if child_uid else ()
    earlier: tuple[Mapping[str, Any], ...] = ()
    if child is None and child_kind in KUEUE_MANAGED_CHILDREN:
        earlier = cluster.kueue_workloads_of_job_named(namespace, child_kind, main_child_name(name))
    switched_from = (
        cluster.child_of(owner_uid, kind=OTHER_MAIN_KIND[child_kind], name=main_child_name(name))
        if child is None
        else None
    )
    return ObservedChildren(
        child_kind=child_kind,
        child=child,
        earlier_kueue_workloads=earlier,
        switched_from=switched_from,
        ray_service=ray_service,
        kueue_workloads=workloads,
        downloads_configured=downloads_configured,
        download_job=cluster.child_of(owner_uid, kind="Job", name=child_name(name, "download")),
        pvcs=tuple(
            c for c in cluster.children_of(owner_uid) if c.get("kind") == "PersistentVolumeClaim"
        ),
        pods=pods,
    )


def child_phase(
    observed: ObservedChildren, *, previous_phase: WorkloadStatus
) -> WorkloadStatus | None:
    """The phase the main child reports, or None when it does not exist yet."""
    child = observed.child
    if child is None:
        return None
    if observed.child_kind == "Job":
        return batch_job_phase(child, previous_phase=previous_phase)
    if observed.child_kind == "RayJob":
        return _ray_job_phase(child)
    if observed.child_kind == "Deployment":
        return _deployment_phase(child, observed.pods)
    failure = app_wrapper_failure(child)
    if failure is not None and failure.get("reason") != COMPONENT_DELETED:
        return WorkloadStatus.FAILED
    return _ray_service_phase(observed)


COMPONENT_DELETED = "MissingComponent"
"""Why the AppWrapper controller fails an AppWrapper whose RayService someone deleted: at
once, without retries. The plan makes such an AppWrapper anew (decision 0185)."""


def app_wrapper_failure(app_wrapper: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """Why the AppWrapper controller failed an AppWrapper for good (its phase ``Failed``: its
    retries spent, or its RayService deleted), as its ``Unhealthy`` condition says; None while
    it is not failed. It deletes the RayService of a failed AppWrapper and never makes it
    again, so the service's phase can no longer come from the RayService (decision 0185)."""
    status = app_wrapper.get("status") or {}
    if status.get("phase") != "Failed":
        return None
    return condition_of(status, "Unhealthy") or {}


KUBERNETES_DEFAULT_BACKOFF_LIMIT = 6
"""What the Job controller allows when a Job names no ``backoffLimit`` (the API server stores
it, so only a hand-made object lacks it)."""


def batch_job_phase(job: Mapping[str, Any], *, previous_phase: WorkloadStatus) -> WorkloadStatus:
    """A batch/v1 Job's state as a workload phase (upstream §7.3, also accepting Complete).

    First match wins; a Job that was RUNNING stays so while its pods finish. Failed pods make
    the workload FAILED only once they are more than the Job's ``backoffLimit``: before that
    the Job controller starts another pod (decision 0119).
    """
    status = job.get("status") or {}
    # The conditions that hold, read once (asked every plan of a Job), then the rules in order.
    holding = {c.get("type") for c in status.get("conditions") or () if c.get("status") == "True"}
    ended = _ended_phase(holding, job.get("spec") or {}, status)
    if ended is not None:
        return ended
    if int(status.get("ready") or 0) > 0 or previous_phase is WorkloadStatus.RUNNING:
        return WorkloadStatus.RUNNING
    if int(status.get("active") or 0) > 0 or int(status.get("failed") or 0) > 0:
        # failed: a failed pod within the limit, its replacement not created yet (a retry)
        return WorkloadStatus.STARTING
    return WorkloadStatus.PENDING


def _ended_phase(
    holding: set[Any], spec: Mapping[str, Any], status: Mapping[str, Any]
) -> WorkloadStatus | None:
    """The phase of a Job its conditions (those ``holding``) or its failed pods settle, or
    that Kueue suspended; None while it may run."""
    if "SuccessCriteriaMet" in holding or "Complete" in holding:
        return WorkloadStatus.COMPLETE
    if "FailureTarget" in holding or "Failed" in holding:
        return WorkloadStatus.FAILED
    if "Suspended" in holding:
        return WorkloadStatus.PENDING
    return WorkloadStatus.FAILED if _retries_exhausted(spec, status) else None


def _retries_exhausted(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """More pods failed than the Job's ``backoffLimit`` allows: the Job will fail, though the
    controller may not have said so yet.

    With ``backoffLimitPerIndex`` the count spans indexes that each have their own limit, so
    only the Job's own ``FailureTarget``/``Failed`` condition tells.
    """
    failed = int(status.get("failed") or 0)
    if failed == 0 or spec.get("backoffLimitPerIndex") is not None:
        return False
    limit = spec.get("backoffLimit")
    return failed > (limit if isinstance(limit, int) else KUBERNETES_DEFAULT_BACKOFF_LIMIT)


def _ray_job_phase(ray_job: Mapping[str, Any]) -> WorkloadStatus:
    status = ray_job.get("status") or {}
    deployment_status = status.get("jobDeploymentStatus")
    if deployment_status in ("Failed", "ValidationFailed"):
        # ValidationFailed: KubeRay refused the RayJob's spec and will not run it (Kueue
        # counts it finished too), so it is final, not a start that never ends.
        return WorkloadStatus.FAILED
    if deployment_status == "Retrying":
        # An attempt failed within the RayJob's backoffLimit: KubeRay keeps its jobStatus
        # FAILED while it replaces the cluster for the next attempt (decision 0119).
        return WorkloadStatus.STARTING
    return {
        "RUNNING": WorkloadStatus.RUNNING,
        "FAILED": WorkloadStatus.FAILED,
        "SUCCEEDED": WorkloadStatus.COMPLETE,
        "STOPPED": WorkloadStatus.TERMINATED,
    }.get(str(status.get("jobStatus") or ""), WorkloadStatus.STARTING)


def _deployment_phase(
    deployment: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]
) -> WorkloadStatus:
    if past_progress_deadline(deployment):
        return WorkloadStatus.ERROR
    return deployment_serving_phase(deployment, pods=pods)


def past_progress_deadline(deployment: Mapping[str, Any]) -> bool:
    """The Deployment controller says the rollout made no progress within the Deployment's
    ``progressDeadlineSeconds`` (it goes on rolling: the condition only tells)."""
    return any(
        condition.get("type") == "Progressing"
        and condition.get("status") == "False"
        and condition.get("reason") == "ProgressDeadlineExceeded"
        for condition in (deployment.get("status") or {}).get("conditions") or ()
    )


def deployment_serving_phase(
    deployment: Mapping[str, Any], *, pods: Sequence[Mapping[str, Any]]
) -> WorkloadStatus:
    """What a Deployment's pods do, whatever its rollout: READY when as many replicas as it
    asks for are available; RUNNING with some available or Ready, or with a pod of it running
    (:func:`running_pods`: the seeds' "pods are up but may not yet be fully ready/healthy",
    decision 0214); STARTING otherwise. ``pods``: the workload's observed pods, of which
    only the Deployment's own count."""
    status = deployment.get("status") or {}
    # Upstream says STARTING while the Deployment controller has not observed a new spec
    # (``observedGeneration`` behind). The pods counted below still serve meanwhile, and a
    # rolling update keeps them until their successors are available: a READY service stays
    # READY through a rollout, and one asked for more replicas is RUNNING (decision 0135).
    available, wanted = deployment_replicas(deployment)
    if available >= wanted:
        return WorkloadStatus.READY
    if available > 0 or int(status.get("readyReplicas") or 0) > 0:
        return WorkloadStatus.RUNNING
    if running_pods(deployment, pods):
        # The Deployment's counts are of Ready pods only: a server that loads a model for
        # minutes before its readiness probe answers runs all that time (decision 0214).
        return WorkloadStatus.RUNNING
    return WorkloadStatus.STARTING


def running_pods(
    deployment: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]
) -> tuple[Mapping[str, Any], ...]:
    """The pods of ``deployment`` that run: made by one of its ReplicaSets
    (:func:`~kaiwo_contracts.gpu_workloads.deployment_of_pod`, in its namespace), in phase
    ``Running`` (bound, every container created, one running or restarting) and not being
    deleted. What the Job controller counts of a Job's pods leaves out the same: a pod being
    deleted and a finished one (decision 0214). A pod Kueue still gates, or that waits for a
    node or its images, is ``Pending``."""
    metadata = deployment.get("metadata") or {}
    name, namespace = metadata.get("name"), metadata.get("namespace") or ""
    return tuple(
        pod
        for pod in pods
        if name
        and deployment_of_pod(pod) == name
        and ((pod.get("metadata") or {}).get("namespace") or "") == namespace
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase") == "Running"
    )


def deployment_replicas(deployment: Mapping[str, Any]) -> tuple[int, int]:
    """``(available, asked)`` replicas of a Deployment."""
    replicas = (deployment.get("spec") or {}).get("replicas")
    # The API server defaults a Deployment's replicas to 1 (found by fuzzing: a null one).
    wanted = replicas if isinstance(replicas, int) else 1
    return int((deployment.get("status") or {}).get("availableReplicas") or 0), wanted


FAILING_APPLICATION = frozenset({"UNHEALTHY", "DEPLOY_FAILED"})
"""Ray Serve application statuses that mean the service does not serve as configured."""

RAY_NODE_TYPE_LABEL: Final = "ray.io/node-type"
"""KubeRay's label of a Ray cluster's pods: ``head`` or ``worker``."""


@dataclass(frozen=True, slots=True)
class FailingApplication:
    """A Serve application of a RayService in one of :data:`FAILING_APPLICATION`.

    ``cluster``: the Ray cluster it runs on; ``serving``: the other cluster, which still
    serves, when this one was started to take an edit ("" when it is the only one)."""

    name: str
    status: str
    message: str
    cluster: str
    serving: str = ""


def failing_applications(ray_service: Mapping[str, Any] | None) -> tuple[FailingApplication, ...]:
    """The failing applications of both clusters of ``ray_service``, the serving one's
    first, each in name order. KubeRay keeps those of the cluster it starts apart, and a
    first deployment whose application fails stays there for good (decision 0186)."""
    clusters = ray_service_status_clusters((ray_service or {}).get("status") or {})
    serving = next((cluster.name for cluster in clusters if cluster.serving), "")
    return tuple(
        FailingApplication(
            name=name,
            status=str(application["status"]),
            message=str(application.get("message") or ""),
            cluster=cluster.name,
            serving="" if cluster.serving else serving,
        )
        for cluster in clusters
        for name, application in cluster.applications
        if application.get("status") in FAILING_APPLICATION
    )


def ray_service_clusters(ray_service: Mapping[str, Any] | None) -> list[str]:
    """The names of the Ray clusters a RayService's status has, the serving one first."""
    clusters = ray_service_status_clusters((ray_service or {}).get("status") or {})
    return [cluster.name for cluster in clusters if cluster.name]


def ray_cluster_of(pod: Mapping[str, Any]) -> str | None:
    """The Ray cluster that controls ``pod``, if one does."""
    controller = controller_reference(pod) or {}
    name = controller.get("name")
    return str(name) if controller.get("kind") == "RayCluster" and name else None


def _ray_service_phase(observed: ObservedChildren) -> WorkloadStatus:
    """READY once KubeRay says the service serves; ERROR while an application of either
    cluster fails; RUNNING once either cluster is up (the seeds' "pods are up but may not
    yet be fully ready": Ray Serve deploying, which can take minutes); else STARTING."""
    ray_service = observed.ray_service
    if ray_service is None:
        return WorkloadStatus.STARTING
    status = ray_service.get("status") or {}
    if ray_service_serves(status):
        return WorkloadStatus.READY
    if failing_applications(ray_service):
        # ERROR, not upstream's FAILED: FAILED is final (nothing applied any more), and Ray
        # Serve restarts unhealthy replicas and redeploys on a new serveConfigV2, the edit a
        # user makes to fix it (decision 0134).
        return WorkloadStatus.ERROR
    clusters = ray_service_status_clusters(status)
    if any(c.state == "ready" or (c.name and _cluster_up(observed.pods, c.name)) for c in clusters):
        return WorkloadStatus.RUNNING
    return WorkloadStatus.STARTING


def _cluster_up(pods: tuple[Mapping[str, Any], ...], cluster: str) -> bool:
    """Whether Ray cluster ``cluster`` has its head and every other live pod Ready. KubeRay
    writes a RayService's status only when its applications change, so the cluster's state
    there can say it starts long after its pods are up (decision 0186)."""
    live = [
        pod
        for pod in pods
        if ray_cluster_of(pod) == cluster
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
    ]
    head = any(
        ((pod.get("metadata") or {}).get("labels") or {}).get(RAY_NODE_TYPE_LABEL) == "head"
        for pod in live
    )
    return head and all(has_condition(pod.get("status") or {}, "Ready") for pod in live)
