"""The whole plan for one KaiwoJob or KaiwoService: children, status, Events, pruning, timers.

Steps, each a pure function of the workload, the cluster state and ``now``:

1. KaiwoConfig, the AIMNamespaceConfig of the namespace and the KaiwoQueueConfig's queues
   come from the cluster state (:mod:`~kaiwo_planner.domain.settings.cluster_settings`).
2. GPU statistics of the vendor -> the allocation (for a running workload, the split by node
   size its main child was made with, decision 0137; run in each Ray worker group, decision
   0146) -> the Schedulable verdict.
3. The observed children -> the download job's state -> the children to apply
   (:func:`~kaiwo_planner.domain.children.workload_children.plan_children`), reconciled with the
   existing main child so that a Job change Kubernetes cannot apply is reported, not attempted.
4. Stopping it early (:mod:`~kaiwo_planner.domain.workload_preemption`): preemption by
   duration, when the workload runs past its ``duration``;
   GPU idle preemption and termination of an underutilized workload, from the monitor's
   latest finding (:mod:`~kaiwo_planner.domain.status.findings`,
   :mod:`~kaiwo_planner.domain.scheduling.idle_preemption`); the ``ResourceUnderutilization``
   condition from the same finding.
5. The status (:func:`~kaiwo_planner.domain.status.workload_status.derive_status`) and its Events.

What the plan applies and prunes depends on the phase:

* not schedulable (ERROR from the Schedulable check): nothing applied, nothing pruned; the
  children that exist stay (a node that went away must not delete a running workload);
* admitted by Kueue before the nodes stopped holding what it asks for (``Schedulable`` True,
  ``AdmittedBeforeNodeChange``, decision 0132): nothing applied, nothing pruned either, but
  the status follows the children (it completes, fails, or waits for its lost pods);
* COMPLETE or FAILED before this plan: nothing applied, nothing pruned (the finished Job and
  its logs stay for inspection, and a Job deleted by its TTL is not created again);
* TERMINATING before this plan (now TERMINATED) and TERMINATED: nothing desired, and the
  children of every kind upstream deletes on termination are pruned, PVCs included;
* otherwise: the children, pruning those no longer desired (PVCs never; see children.py);
  a main child Kueue admits whole that someone deleted is made again only once Kueue's
  Workload of the deleted one is gone (decision 0139).

A workload being deleted (its ``deletionTimestamp`` set, or its Namespace's) gets a plan that
does nothing: no child applied or pruned, no status, no Event, no timer. Kubernetes' garbage
collector removes its children; a foreground deletion keeps the workload until they are gone,
and planning it meanwhile re-created each child the collector had just deleted (a download
Job, a PVC, the main Job) and moved its phase back to PENDING or DOWNLOADING with the Events
of a start (decision 0130).

Events beyond the phase transitions: ``SettingsIgnored`` (Warning) once per generation when
the spec sets something that has no effect, ``ChildSpecNotApplied`` (Warning) when a change
cannot reach the existing Job, ``ChildReplacing`` (Normal) when a waiting AppWrapper is
replaced to take one (decision 0129), or a Job, RayJob or Ray service's AppWrapper Kueue
started in a node pool no node is in any more, or an AppWrapper failed for its deleted
RayService, is made anew (decisions 0183, 0185),
``GpusRoundedDown``/``GpusRecalculated`` (Normal) when the pods hold another total than
``spec.gpus`` (decision 0118), once per change of that note; ``AdmittedBeforeNodeChange``
(Warning) when the nodes no longer hold what an admitted workload asks for (decision 0132),
once per change of its message; ``ChildDeleted`` (Warning) when the main child of a workload
that ran is gone and is made again (not when the operator replaced it), ``PvcDeleting``
(Warning) when a volume the pods use is being deleted (decision 0139), once each.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import (
    KaiwoConfig,
    KaiwoResourceMonitoringConfig,
)
from kaiwo_contracts.crds.kaiwo_v1alpha1.common import CommonMetaSpec, WorkloadStatus
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwojob import KaiwoJob, on_existing_ray_cluster
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoservice import KaiwoService
from kaiwo_contracts.plans import EventIntent, ObjectRef, Plan, PruneRule

from kaiwo_planner.domain.children.downloads import claims_made_anew
from kaiwo_planner.domain.children.http_route import GATEWAY_GROUP
from kaiwo_planner.domain.children.job_changes import CONDITION_TYPE as CHILD_SPEC_APPLIED
from kaiwo_planner.domain.children.job_changes import REASON_REPLACING
from kaiwo_planner.domain.children.kind_switch import (
    JobChildKind,
    kind_kept_message,
    planned_as,
    running_child_of_the_other_kind,
)
from kaiwo_planner.domain.children.labels import inventory_labels
from kaiwo_planner.domain.children.naming import main_child_name
from kaiwo_planner.domain.children.partial_admission import partial_admission_min_pods
from kaiwo_planner.domain.children.ray_job import kaiwo_cluster_note
from kaiwo_planner.domain.children.ray_service import kaiwo_service_cluster_note
from kaiwo_planner.domain.children.resources import gpu_resource_key
from kaiwo_planner.domain.children.workload_children import (
    PRUNED_KINDS,
    ChildrenDecision,
    DownloadState,
    plan_children,
)
from kaiwo_planner.domain.queues.queues_in_force import cluster_queue_namespaces
from kaiwo_planner.domain.scheduling.gpu_allocation import (
    RAY_JOB_CLUSTER,
    RAY_SERVICE_CLUSTER,
    WorkerGroupHosts,
    WorkloadShape,
    allocate_workload_gpus,
    child_runs,
    child_worker_groups,
    in_worker_groups,
    job_pods,
    keep_running_split,
    ray_worker_groups,
    vendor_gpu_stats,
)
from kaiwo_planner.domain.scheduling.gpu_model_flavors import (
    FlavorLabels,
    flavors_admitted_without_models,
    gpu_model_flavors,
)
from kaiwo_planner.domain.scheduling.schedulable import (
    DEFAULT_LOCAL_QUEUE,
    GPUS_ADJUSTED_REASONS,
    REASON_ADMITTED_BEFORE_NODE_CHANGE,
    SCHEDULABLE,
    decide_schedulable,
)
from kaiwo_planner.domain.settings.cluster_settings import (
    gpu_taint_on_nodes,
    kaiwo_config,
    known_priority_classes,
    namespace_being_deleted,
    namespace_config,
    parse_optional_duration,
    parse_time,
    pools_with_nodes,
    queue_config_invalid,
    recorded_gpu_taint_keys,
)
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.index_entry import KUEUE_GROUP
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.state.priority_classes import NO_PRIORITY, choose_priority
from kaiwo_planner.domain.state.workload_finding import WorkloadFinding
from kaiwo_planner.domain.status.child_health import main_child_made_anew
from kaiwo_planner.domain.status.child_phase import (
    ChildKind,
    ObservedChildren,
    batch_job_phase,
    observe_children,
)
from kaiwo_planner.domain.status.conditions import ConditionSpec, condition_of, merge_conditions
from kaiwo_planner.domain.status.findings import (
    REASON_LOW,
    RESOURCE_UNDERUTILIZATION,
    underutilization_condition,
)
from kaiwo_planner.domain.status.gpu_idle import (
    GPU_IDLE,
    gpu_idle_condition,
    gpu_idle_once_ended,
)
from kaiwo_planner.domain.status.invalid_owner import REASON_VALID, VALID_CONDITION
from kaiwo_planner.domain.status.kueue_admission import kueue_admitted
from kaiwo_planner.domain.status.route_acceptance import (
    REASON_GATEWAY_NOT_PROGRAMMED,
    REASON_NO_GATEWAY,
    ROUTE_ACCEPTED,
    ROUTE_NOT_ACCEPTED_EVENT,
    route_condition,
)
from kaiwo_planner.domain.status.storage_phase import (
    DOWNLOAD_JOB_SUCCEEDED,
    PVC_DELETING,
    PVC_READY,
    VOLUME_MADE_ANEW,
    succeeded_at,
)
from kaiwo_planner.domain.status.workload_status import (
    WorkloadKind,
    derive_status,
)
from kaiwo_planner.domain.workload_preemption import (
    is_running,
    replan_moment,
    termination_request,
    victims_for,
    waiting_since_of,
)

TERMINATION_PRUNE: tuple[PruneRule, ...] = (
    *PRUNED_KINDS,
    PruneRule(api_version="v1", kind="PersistentVolumeClaim"),
)
"""What a terminated workload loses: its children and its PVCs. Upstream deletes the Job,
RayJob, Deployment, RayService, AppWrapper and PVCs, and keeps ConfigMaps; this also removes
the download ConfigMap, the Service and the HTTPRoute, which nothing runs or serves behind any
more (decision 0195)."""

SETTINGS_IGNORED = "SettingsIgnored"
CHILD_SPEC_NOT_APPLIED = "ChildSpecNotApplied"
CHILD_REPLACING = "ChildReplacing"
CHILD_DELETED = "ChildDeleted"
PVC_DELETING_EVENT = "PvcDeleting"

Workload = KaiwoJob | KaiwoService


@dataclass(frozen=True, slots=True)
class WorkloadPlanning:
    """The plan, when to plan again at the latest, and which other owners to plan now.

    ``also_replan``: workloads a preemption decision made here affects (the expired ones to
    terminate for this waiting workload); their own plans carry out the termination.
    """

    plan: Plan
    replan_at: datetime | None = None
    also_replan: tuple[ObjectRef, ...] = ()


def plan_workload(
    *,
    workload: Workload,
    context: PlanningContext,
    now: datetime,
) -> WorkloadPlanning:
    """Everything that must be true for one valid KaiwoJob or KaiwoService (module docstring)."""
    cluster = context.cluster
    config = kaiwo_config(context)
    meta = workload.metadata
    spec = workload.spec
    name, namespace, uid = meta.name or "", meta.namespace or "", meta.uid or ""
    ref = ObjectRef(
        api_version=workload.api_version,
        kind=workload.kind,
        name=name,
        namespace=namespace or None,
        uid=uid or None,
    )
    if being_deleted(workload, context):
        return WorkloadPlanning(
            plan=Plan(
                owner=ref,
                observed_generation=meta.generation,
                observed_resource_version=meta.resource_version,
            )
        )
    # A KaiwoJob's ray switched while its child runs: planned as the kind that runs, which
    # keeps running (decision 0247).
    kind_kept: JobChildKind | None = None
    if isinstance(workload, KaiwoJob):
        kind_kept = running_child_of_the_other_kind(workload, cluster)
        if kind_kept is not None:
            workload = planned_as(workload, kind_kept)
            spec = workload.spec
    generation = meta.generation or 0
    previous = workload.status.to_wire()
    previous_phase = workload.status.status
    queue = spec.cluster_queue or config.spec.default_cluster_queue_name

    stats = vendor_gpu_stats(context, spec.gpu_vendor)
    # The pods its Job runs at once count, as Kueue counts them (decision 0147); Kueue may
    # start it with fewer when the user allows it (partial admission, decision 0155).
    job_pod_count = job_pods(workload.spec.job) if isinstance(workload, KaiwoJob) else 1
    shape = _workload_shape(workload)
    allocation = allocate_workload_gpus(
        shape=shape,
        gpus=spec.gpus,
        replicas=spec.replicas,
        gpus_per_replica=spec.gpus_per_replica,
        vendor=spec.gpu_vendor,
        stats=stats,
        batch_job_pods=job_pod_count,
        batch_job_min_pods=(
            partial_admission_min_pods(workload.spec.job, job_pod_count)
            if isinstance(workload, KaiwoJob)
            else None
        ),
        # A given Deployment's, batch Job's or Ray cluster's own GPUs count when the spec
        # asks for none (decisions 0163, 0166, 0167).
        given=_given_object(workload, shape),
    )
    observed = observe_children(
        cluster=cluster,
        owner_uid=uid,
        name=name,
        child_kind=_child_kind(workload),
        downloads_configured=downloads_configured(spec),
        namespace=namespace,
    )
    # Kueue's own word (its Workloads), whether or not a child runs yet.
    admitted = bool(observed.kueue_workloads) and all(
        kueue_admitted(w.get("status") or {}) for w in observed.kueue_workloads
    )
    # A running workload keeps the split by node size its child was made with; the nodes of
    # now split only what does not run yet, or a spec.gpus edited since (decision 0137).
    allocation = keep_running_split(
        allocation,
        asked=spec.gpus,
        child=observed.child,
        runs=admitted or child_runs(observed.child),
    )
    # Every worker group of a Ray cluster runs the split (decision 0146).
    allocation = in_worker_groups(
        allocation,
        _worker_groups(workload, observed.child, runs=admitted or child_runs(observed.child)),
    )
    priority = choose_priority(spec.priority_class or "", known_priority_classes(context))
    on_existing = isinstance(workload, KaiwoJob) and on_existing_ray_cluster(workload.spec.ray_job)
    verdict = decide_schedulable(
        cluster_queue=queue,
        namespace=namespace,
        queue_namespaces=cluster_queue_namespaces(context),
        queue_config_invalid=queue_config_invalid(context),
        allocation=allocation,
        stats=stats,
        priority_class=spec.priority_class or "",
        priority=priority,
        # A kept split is one the running child holds: the node checks are waived for it
        # as for a workload Kueue admitted (decision 0132).
        admitted=admitted or allocation.rule == "kept",
        queued=not on_existing,
        # Kueue would queue, suspend and so kill a RayJob made there (decision 0159); one
        # made before the LocalQueue came is not Kueue's (its webhook labels on create only).
        default_local_queue=(
            on_existing
            and observed.child is None
            and not previous_phase.is_terminal
            and _has_default_local_queue(cluster, namespace)
        ),
    )
    if verdict.schedulable:
        # A given rayJob or rayService that names no cluster runs Kaiwo's (decisions 0151,
        # 0154): said where the cluster's size is said.
        note = (
            kaiwo_cluster_note(workload.spec.ray_job)
            if isinstance(workload, KaiwoJob)
            else kaiwo_service_cluster_note(workload.spec.ray_service)
        )
        if note:
            verdict = dataclasses.replace(verdict, message=f"{verdict.message}; {note}")
    children = None
    node_pools = pools_with_nodes(context)
    if (
        verdict.schedulable
        and verdict.reason != REASON_ADMITTED_BEFORE_NODE_CHANGE
        and not (previous_phase.is_terminal or previous_phase is WorkloadStatus.TERMINATING)
    ):
        model_flavors, without_models = _gpu_model_flavors(
            context, spec, config, queue=queue, observed=observed
        )
        children = plan_children(
            workload=workload,
            allocation=allocation,
            config=config,
            priority=priority or NO_PRIORITY,
            namespace_config=namespace_config(context, namespace),
            download_state=download_state(observed, previous),
            observed_main_child=observed.child,
            observed_download_job=observed.download_job,
            observed_claims=observed.pvcs,
            context=context,
            gpu_taint_on_nodes=gpu_taint_on_nodes(context, config.spec.nodes.default_gpu_taint_key),
            recorded_gpu_taint_keys=recorded_gpu_taint_keys(context),
            main_made_anew=_main_made_anew(
                observed,
                previous,
                node_pools,
                flavors_without_models=without_models,
                generation=generation,
            ),
            gpu_model_flavors=model_flavors,
            admitted_without_models=bool(without_models),
            kind_kept=kind_kept_message(kind_kept) if kind_kept is not None else None,
        )
        if observed.child is None and observed.earlier_kueue_workloads:
            children = _main_child_held(children)
    duration = parse_optional_duration(spec.duration)
    decision = derive_status(
        workload_kind=_workload_kind(workload),
        generation=generation,
        previous_status=previous,
        observed=observed,
        schedulable=verdict,
        cluster_queue=queue,
        now=now,
        duration=duration,
        termination=termination_request(ref, previous, duration, context=context, now=now),
        extra_conditions=(
            *_child_conditions(children),
            *_finding_conditions(
                cluster.findings.get(uid), config.spec.resource_monitoring, namespace, previous
            ),
            *_gpu_idle_conditions(workload, previous, context=context, now=now),
            *_route_conditions(children, previous, cluster, uid=uid, name=name),
        ),
        ended_conditions={GPU_IDLE: gpu_idle_once_ended(previous)},
        node_pools=node_pools,
    )
    status = _with_valid_spec(decision.status, previous, generation=generation, now=now)
    desired, prune = _desired_and_prune(previous_phase, children)
    events = (
        *decision.events,
        *_settings_events(children, previous, generation),
        *_child_spec_events(status, previous),
        *_gpus_adjusted_events(status, previous),
        *_node_change_events(status, previous),
        *_underutilization_events(status, previous),
        *_child_deleted_events(previous_phase, previous, observed, children),
        *_pvc_deleting_events(status, previous),
        *_volume_made_anew_events(status, previous),
        *_route_events(status, previous),
    )
    waiting_since = waiting_since_of(
        workload, decision.phase, allocation, previous, context=context
    )
    plan = Plan(
        owner=ref,
        observed_generation=meta.generation,
        observed_resource_version=meta.resource_version,
        desired=desired,
        status=status,
        events=events,
        prune=prune if uid else (),
        prune_selector=inventory_labels(uid) if uid else {},
    )
    return WorkloadPlanning(
        plan=plan,
        replan_at=replan_moment(
            ref, decision.replan_after, waiting_since, context=context, now=now
        ),
        also_replan=victims_for(ref, waiting_since, context=context, now=now),
    )


# ------------------------------------------------------------------ inputs


def being_deleted(workload: Workload, context: PlanningContext) -> bool:
    """The workload, or the Namespace it is in, is being deleted: whatever the plan applied
    would be deleted again (by the garbage collector, or the namespace controller, which
    removes the children and the workload in no set order: a Job deleted first made a
    running KaiwoJob FAILED, told as a failure, seconds before it went itself)."""
    if workload.metadata.deletion_timestamp is not None:
        return True
    return namespace_being_deleted(context.cluster, workload.metadata.namespace or "")


def _has_default_local_queue(cluster: ClusterState, namespace: str) -> bool:
    """Whether ``namespace`` has a Kueue LocalQueue named ``default`` (Kaiwo's, made for a
    ClusterQueue of that name, or anyone's), in which Kueue's webhook puts every job made
    there without a queue label (``LocalQueueDefaulting``, decision 0159)."""
    found = cluster.find_object(
        group=KUEUE_GROUP, kind="LocalQueue", name=DEFAULT_LOCAL_QUEUE, namespace=namespace
    )
    return found is not None


def _child_kind(workload: Workload) -> ChildKind:
    if isinstance(workload, KaiwoJob):
        return "RayJob" if workload.spec.is_ray_job else "Job"
    return "AppWrapper" if workload.spec.is_ray_service else "Deployment"


def _worker_groups(
    workload: Workload, child: Mapping[str, Any] | None, *, runs: bool
) -> WorkerGroupHosts:
    """The Ray worker groups the workload's split runs in, with their hosts: a running
    child's (a running RayJob or AppWrapper keeps its cluster as observed, decision 0123),
    else the spec's; ``(1,)`` for a Deployment or a batch Job."""
    if _workload_shape(workload) != "ray":
        return (1,)
    if runs and child is not None:
        found = child_worker_groups(child)
        if found is not None:
            return found
    if isinstance(workload, KaiwoJob):
        return ray_worker_groups(workload.spec.ray_job, cluster_key=RAY_JOB_CLUSTER)
    return ray_worker_groups(workload.spec.ray_service, cluster_key=RAY_SERVICE_CLUSTER)


def _given_object(workload: Workload, shape: WorkloadShape) -> Mapping[str, Any] | None:
    """The object the workload gives for its shape (``spec.job``, ``spec.deployment``,
    ``spec.rayJob`` or ``spec.rayService``), whose own GPUs count when the spec asks for
    none."""
    if isinstance(workload, KaiwoJob):
        return workload.spec.ray_job if shape == "ray" else workload.spec.job
    return workload.spec.ray_service if shape == "ray" else workload.spec.deployment


def _workload_shape(workload: Workload) -> WorkloadShape:
    child_kind = _child_kind(workload)
    if child_kind == "Job":
        return "batch-job"
    if child_kind == "Deployment":
        return "deployment"
    return "ray"


def _workload_kind(workload: Workload) -> WorkloadKind:
    return "KaiwoJob" if isinstance(workload, KaiwoJob) else "KaiwoService"


def downloads_configured(spec: CommonMetaSpec) -> bool:
    """A download job is part of the workload: the contract's rule, which the children
    planner's ``StorageInputs`` follows too."""
    storage = spec.storage
    return storage is not None and storage.storage_enabled and storage.has_downloads


def download_state(observed: ObservedChildren, previous: Mapping[str, Any]) -> DownloadState:
    """The download job's outcome; a job that succeeded and was since removed still counts,
    unless a claim it filled was deleted since: the new one is empty (decision 0140)."""
    job = observed.download_job
    done_at = succeeded_at(condition_of(previous, DOWNLOAD_JOB_SUCCEEDED))
    if claims_made_anew(job, observed.pvcs, succeeded_at=done_at):
        return DownloadState.PENDING
    if job is None:
        return DownloadState.SUCCEEDED if done_at is not None else DownloadState.PENDING
    phase = batch_job_phase(job, previous_phase=WorkloadStatus.NEW)
    if phase is WorkloadStatus.COMPLETE:
        return DownloadState.SUCCEEDED
    if phase is WorkloadStatus.FAILED:
        return DownloadState.FAILED
    return DownloadState.PENDING


def _finding_conditions(
    finding: WorkloadFinding | None,
    monitoring: KaiwoResourceMonitoringConfig,
    namespace: str,
    previous: Mapping[str, Any],
) -> tuple[ConditionSpec, ...]:
    condition = underutilization_condition(finding, monitoring, namespace, previous_status=previous)
    return () if condition is None else (condition,)


def _gpu_idle_conditions(
    workload: Workload, previous: Mapping[str, Any], *, context: PlanningContext, now: datetime
) -> tuple[ConditionSpec, ...]:
    """``GpuIdle`` of a running workload that opted in to GPU idle preemption, withdrawn
    from one that no longer runs or opted out."""
    meta = workload.metadata
    found = gpu_idle_condition(
        {"metadata": {"namespace": meta.namespace or "", "annotations": meta.annotations or {}}},
        context.cluster.findings.get(meta.uid or ""),
        vendor=str(workload.spec.gpu_vendor or "amd").lower(),
        context=context,
        now=now,
        running=is_running(previous),
        previous_status=previous,
    )
    return () if found is None else (found,)


# ------------------------------------------------------------------ outputs


def _child_conditions(children: ChildrenDecision | None) -> tuple[ConditionSpec, ...]:
    # The download condition is the status step's own (it knows the previous status).
    if children is None:
        return ()
    return tuple(
        ConditionSpec(c.type, c.status, c.reason, c.message)
        for c in children.conditions
        if c.type != DOWNLOAD_JOB_SUCCEEDED
    )


def _route_conditions(
    children: ChildrenDecision | None,
    previous: Mapping[str, Any],
    cluster: ClusterState,
    *,
    uid: str,
    name: str,
) -> tuple[ConditionSpec, ...]:
    """``RouteAccepted`` of a KaiwoService whose namespace names a gateway, or that said it
    once (decision 0269); nothing for a plan that makes no children."""
    if children is None:
        return ()
    desired = next((c for c in children.desired if c.get("kind") == "HTTPRoute"), None)
    observed = (
        cluster.child_of(uid, kind="HTTPRoute", name=main_child_name(name))
        if desired is not None
        else None
    )
    condition = route_condition(desired, observed, previous, _gateway_of(desired, cluster))
    return () if condition is None else (condition,)


def _gateway_of(route: Mapping[str, Any] | None, cluster: ClusterState) -> Mapping[str, Any] | None:
    """The observed Gateway the desired ``route`` attaches to (None: no route, or not seen)."""
    if route is None:
        return None
    parent = route["spec"]["parentRefs"][0]
    return cluster.find_object(
        group=GATEWAY_GROUP, kind="Gateway", name=parent["name"], namespace=parent["namespace"]
    )


def _desired_and_prune(
    previous_phase: WorkloadStatus, children: ChildrenDecision | None
) -> tuple[tuple[dict[str, Any], ...], tuple[PruneRule, ...]]:
    if previous_phase in {WorkloadStatus.TERMINATING, WorkloadStatus.TERMINATED}:
        return (), TERMINATION_PRUNE
    if children is None:
        return (), ()
    return children.desired, children.prune


def _main_child_held(children: ChildrenDecision) -> ChildrenDecision:
    """``children`` without the main child, which waits until Kueue's Workload of an earlier
    child of its name is gone (decision 0139).

    Kueue finds a job's Workload by the job's name: a Job made again at once, while the
    garbage collector had not yet removed the deleted Job's admitted Workload, was started
    on that Workload, then suspended for good when the collector removed it (Kueue's new
    Workload ``Finished`` with ``FailedToStart``): the KaiwoJob stayed PENDING forever.
    Nothing of the main child's kind is pruned meanwhile: one created by an earlier plan
    and not observed yet is no stray to delete.
    """
    main = children.main_child
    if main is None:
        return children
    return dataclasses.replace(
        children,
        desired=tuple(
            d
            for d in children.desired
            if (d.get("kind"), (d.get("metadata") or {}).get("name")) != (main.kind, main.name)
        ),
        prune=tuple(rule for rule in children.prune if rule.kind != main.kind),
    )


_PHASES_OF_A_CHILD_THAT_RAN = frozenset(
    {WorkloadStatus.STARTING, WorkloadStatus.RUNNING, WorkloadStatus.READY}
)


def _gpu_model_flavors(
    context: PlanningContext,
    spec: CommonMetaSpec,
    config: KaiwoConfig,
    *,
    queue: str,
    observed: ObservedChildren,
) -> tuple[tuple[FlavorLabels, ...], tuple[str, ...]]:
    """The node labels of the flavors of ``queue`` that hold the spec's ``gpuModels``
    (decision 0237), and the flavors Kueue admitted the main child into that hold none of
    them (decision 0264)."""
    gpu_key = gpu_resource_key(
        spec.gpu_vendor, default_key=config.spec.nodes.default_gpu_resource_key
    )
    holding = gpu_model_flavors(
        context, queue=queue, gpu_key=gpu_key, gpu_models=spec.gpu_models or ()
    )
    without = flavors_admitted_without_models(
        context, kueue_workloads=observed.kueue_workloads, gpu_key=gpu_key, holding=holding
    )
    return holding, without


def _main_made_anew(
    observed: ObservedChildren,
    previous: Mapping[str, Any],
    node_pools: frozenset[str],
    *,
    flavors_without_models: tuple[str, ...],
    generation: int,
) -> str | None:
    """Why the main child is made anew (:func:`main_child_made_anew`), and still for as long
    as the child the previous status said was replaced is observed (decision 0291): a RayJob
    stays until KubeRay removes its finalizer, and the prune's deletion of its pods and of
    Kueue's Workload may be seen before its own, so that it no longer looks stranded.
    Applying the main child meanwhile would say it matches, and its going would look like
    someone's deletion (``ChildDeleted``). A child not being deleted yet, only within the
    spec's ``generation`` that said so: an edit since (one undone, say) is planned from the
    spec, as the executor refuses the replacing plan of a spec no longer the owner's."""
    found = main_child_made_anew(
        observed, node_pools, flavors_without_models=flavors_without_models
    )
    child = observed.child
    if found is not None or child is None:
        return found
    said = condition_of(previous, CHILD_SPEC_APPLIED) or {}
    if said.get("reason") != REASON_REPLACING or not _made_before(child, said):
        return None
    going = bool((child.get("metadata") or {}).get("deletionTimestamp"))
    if not going and said.get("observedGeneration") != generation:
        return None
    return str(said.get("message") or "")


def _made_before(child: Mapping[str, Any], said: Mapping[str, Any]) -> bool:
    """Whether ``child`` is the one replaced: created before the status ``said`` so. A child
    created since is the new one (a status write that was stale can leave ``Replacing``
    behind it), and is not deleted in turn."""
    created = parse_time((child.get("metadata") or {}).get("creationTimestamp"))
    decided = parse_time(said.get("lastTransitionTime"))
    return created is None or decided is None or created <= decided


def _child_deleted_events(
    previous_phase: WorkloadStatus,
    previous: Mapping[str, Any],
    observed: ObservedChildren,
    children: ChildrenDecision | None,
) -> tuple[EventIntent, ...]:
    """A Warning when the main child of a workload that was admitted and ran (or started) is
    gone and is to be made again: someone deleted it (a workload being deleted, or in a
    Namespace being deleted, is never planned so far). The new child starts from the
    beginning: the pods, and whatever they had done, are lost. Once: the phase this plan
    writes is no longer one of a child that ran (decision 0139). Not when the operator
    replaced it itself, as the previous status says (``ChildSpecApplied`` ``Replacing``), nor
    when the workload's ``ray`` was switched: its child of the other kind is still observed,
    and that one is replaced by a child of the kind asked for now (decision 0293)."""
    if (
        observed.child is not None
        or observed.switched_from is not None
        or children is None
        or children.main_child is None
        or previous_phase not in _PHASES_OF_A_CHILD_THAT_RAN
        or (condition_of(previous, CHILD_SPEC_APPLIED) or {}).get("reason") == REASON_REPLACING
    ):
        return ()
    child = children.main_child
    restart = (
        "its run starts over from the beginning"
        if observed.child_kind in ("Job", "RayJob")
        else "its pods start again"
    )
    waits = (
        ", once Kueue's Workload of the deleted one is gone"
        if observed.earlier_kueue_workloads
        else ""
    )
    return (
        EventIntent(
            type="Warning",
            reason=CHILD_DELETED,
            message=(
                f"The {child.kind} {child.name} was deleted while the workload was "
                f"{previous_phase.value}: the operator creates it again{waits}, and {restart}"
            ),
        ),
    )


def _with_valid_spec(
    status: dict[str, Any], previous: Mapping[str, Any], *, generation: int, now: datetime
) -> dict[str, Any]:
    """``status`` with a ``Valid=False`` condition from an earlier invalid spec turned True."""
    earlier = condition_of(previous, VALID_CONDITION)
    if earlier is None or earlier.get("status") == "True":
        return status
    conditions = merge_conditions(
        status.get("conditions") or (),
        [ConditionSpec(VALID_CONDITION, "True", REASON_VALID, "The spec is valid")],
        generation=generation,
        now=now,
    )
    return {**status, "conditions": conditions}


def _settings_events(
    children: ChildrenDecision | None, previous: Mapping[str, Any], generation: int
) -> tuple[EventIntent, ...]:
    # Once per generation: the same spec gives the same remark, which people read once.
    if children is None or previous.get("observedGeneration") == generation:
        return ()
    return tuple(
        EventIntent(type="Warning", reason=SETTINGS_IGNORED, message=note)
        for note in children.notes
    )


def _gpus_adjusted_events(
    status: Mapping[str, Any], previous: Mapping[str, Any]
) -> tuple[EventIntent, ...]:
    """A Normal Event when the Schedulable condition first says the pods hold another total
    than ``spec.gpus``, or says it in other words (new nodes, a new spec); then no more."""
    told = _newly_said(
        status, previous, SCHEDULABLE, lambda c: c.get("reason") in GPUS_ADJUSTED_REASONS
    )
    if told is None:
        return ()
    return (
        EventIntent(
            type="Normal", reason=str(told["reason"]), message=str(told.get("message") or "")
        ),
    )


def _node_change_events(
    status: Mapping[str, Any], previous: Mapping[str, Any]
) -> tuple[EventIntent, ...]:
    """A Warning Event when the Schedulable condition first says the nodes no longer hold what
    the admitted workload asks for (its pods may be lost, or never placed again), or says it
    in other words; then no more."""
    told = _newly_said(
        status,
        previous,
        SCHEDULABLE,
        lambda c: c.get("reason") == REASON_ADMITTED_BEFORE_NODE_CHANGE,
    )
    if told is None:
        return ()
    return (
        EventIntent(
            type="Warning",
            reason=REASON_ADMITTED_BEFORE_NODE_CHANGE,
            message=str(told.get("message") or ""),
        ),
    )


def _underutilization_events(
    status: Mapping[str, Any], previous: Mapping[str, Any]
) -> tuple[EventIntent, ...]:
    """A Warning Event ``GpuUtilizationLow`` when ``ResourceUnderutilization`` first says the
    workload's GPUs are underused, or a new stretch of it (its message names when the stretch
    began); then no more. Upstream wrote one for every low sample of every pod, each polling
    interval (decision 0197)."""
    told = _newly_said(
        status, previous, RESOURCE_UNDERUTILIZATION, lambda c: c.get("reason") == REASON_LOW
    )
    if told is None:
        return ()
    return (EventIntent(type="Warning", reason=REASON_LOW, message=str(told.get("message") or "")),)


def _pvc_deleting_events(
    status: Mapping[str, Any], previous: Mapping[str, Any]
) -> tuple[EventIntent, ...]:
    """A Warning when ``PvcReady`` first says a volume of the workload is being deleted while
    pods use it (decision 0139); then no more."""
    told = _newly_said(status, previous, PVC_READY, lambda c: c.get("reason") == PVC_DELETING)
    if told is None:
        return ()
    return (
        EventIntent(type="Warning", reason=PVC_DELETING_EVENT, message=str(told.get("message"))),
    )


def _volume_made_anew_events(
    status: Mapping[str, Any], previous: Mapping[str, Any]
) -> tuple[EventIntent, ...]:
    """A Warning when ``DownloadJobSucceeded`` first says a volume the download filled was
    deleted and is downloaded into again (decision 0140); then no more."""
    told = _newly_said(
        status, previous, DOWNLOAD_JOB_SUCCEEDED, lambda c: c.get("reason") == VOLUME_MADE_ANEW
    )
    if told is None:
        return ()
    return (EventIntent(type="Warning", reason=VOLUME_MADE_ANEW, message=str(told.get("message"))),)


def _route_events(
    status: Mapping[str, Any], previous: Mapping[str, Any]
) -> tuple[EventIntent, ...]:
    """A Warning when ``RouteAccepted`` first says the Gateway refuses the route or is not
    programmed, or says why in other words (decisions 0269, 0273); not for a gateway taken out
    of the config."""
    told = _newly_said(
        status,
        previous,
        ROUTE_ACCEPTED,
        lambda c: c.get("status") == "False" and c.get("reason") != REASON_NO_GATEWAY,
    )
    if told is None:
        return ()
    reason = (
        REASON_GATEWAY_NOT_PROGRAMMED
        if told.get("reason") == REASON_GATEWAY_NOT_PROGRAMMED
        else ROUTE_NOT_ACCEPTED_EVENT
    )
    return (EventIntent(type="Warning", reason=reason, message=str(told.get("message"))),)


def _child_spec_events(
    status: Mapping[str, Any], previous: Mapping[str, Any]
) -> tuple[EventIntent, ...]:
    told = _newly_said(status, previous, CHILD_SPEC_APPLIED, lambda c: c.get("status") == "False")
    if told is None:
        return ()
    message = str(told.get("message") or "")
    if told.get("reason") == REASON_REPLACING:  # the edit is taken: nothing to warn of
        return (EventIntent(type="Normal", reason=CHILD_REPLACING, message=message),)
    return (EventIntent(type="Warning", reason=CHILD_SPEC_NOT_APPLIED, message=message),)


def _newly_said(
    status: Mapping[str, Any],
    previous: Mapping[str, Any],
    condition_type: str,
    says: Callable[[Mapping[str, Any]], bool],
) -> Mapping[str, Any] | None:
    """The condition when it ``says`` something it did not say in the same words on the
    previous status (None otherwise): an Event per change of what it says, not per plan."""
    now = condition_of(status, condition_type)
    if now is None or not says(now):
        return None
    before = condition_of(previous, condition_type)
    if before is not None and says(before) and before.get("message") == now.get("message"):
        return None
    return now
