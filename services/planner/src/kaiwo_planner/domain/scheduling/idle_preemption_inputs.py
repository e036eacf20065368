"""Who is idle, who waits for GPUs and what is being freed, read from the cluster state and
the monitor's findings: the inputs of
:func:`~kaiwo_planner.domain.scheduling.idle_preemption.decide_idle_preemptions`.

* idle: RUNNING (or READY) KaiwoJobs/KaiwoServices that opted in to GPU idle preemption and
  whose fresh finding shows an idle stretch that counts. The planner resolves the opt-in,
  threshold, aggregation, policy and grace period itself, from the annotations of the
  workload and of its Namespace as it observes them and the KaiwoConfig
  (:func:`kaiwo_contracts.gpu_preemption.gpu_preemption_settings`); the finding contributes
  readings only: the stretch counts when the reading (combined with the workload's own
  aggregation) is below the workload's threshold and the monitor judged it against a
  threshold no higher (decision 0038). A forged finding cannot opt a workload in, shorten its
  grace period or change its policy;
* waiting: PENDING ones with GPUs, and running Deployment-based KaiwoServices for the GPUs
  of their pods Kueue has not admitted (a scale-up or rollout waiting for quota), pending for
  longer than
  ``KaiwoConfig.spec.scheduling.pendingThresholdForPreemption`` (every new workload passes
  through PENDING briefly; that is not pressure), since their current wait began
  (:func:`~kaiwo_planner.domain.status.kueue_admission.pending_since`, decision 0191), or
  their ``creationTimestamp``; not those being deleted, or in a Namespace being deleted
  (decision 0130);
* where Kueue counts each one's GPUs (:mod:`~kaiwo_planner.domain.scheduling.quota_scope`,
  decision 0236): its queue (``spec.clusterQueue`` or the KaiwoConfig's default, the
  LocalQueue the operator makes under that name), and where the observed ClusterQueue of that
  name lends and borrows (decision 0272), flavor by flavor (decision 0279); and for a
  waiting one with ``gpuModels``, the flavors of its queue that hold one of them (decision
  0280). A Deployment-based KaiwoService none of whose pods Kueue made a Workload for (a
  namespace Kueue does not manage) holds no quota: its scope is unknown;
* in flight: workloads whose preemption this planner decided and has not observed yet
  (:attr:`~kaiwo_planner.domain.state.planning_context.PlanningContext.preempting`): a
  decision made in the moments before it is observed, from other readings (another
  workload's idle stretch confirmed meanwhile), would otherwise choose a second victim for the
  same demand (seen on the real stack). Those include workloads terminated for duration
  preemption (decision 0148): their GPUs are on their way to a waiting workload too. Each
  with its quota scope: Kueue gives the GPUs back to its queue (decision 0256);
* freed, observed (decision 0150, :mod:`~kaiwo_planner.domain.scheduling.freed_gpus`): the
  victims of either preemption, idle (``GpuIdlePreemption``) or duration
  (``DurationExceededWithActiveGpuDemand``). One that names its waiting workload
  (``status.preemptedFor``) counts for that workload only, while TERMINATING, while its pods
  are observed, and for :data:`FREED_GPUS_SETTLE` after it became TERMINATED; one that names
  none (an ``Always`` idle victim) counts in flight for its vendor and quota scope while
  TERMINATING or its pods are observed. Without the duration victims, the moment one was
  observed TERMINATING its waiting workload looked unserved and an idle workload was
  preempted for it as well.

GPU workloads no Kaiwo kind owns (decision 0047) take part beside them: idle, the roots whose
GpuWorkload is tracked, opted in as the planner observes the root and its Namespace, with a
fresh finding whose idle stretch counts (:mod:`~kaiwo_planner.domain.scheduling.
gpu_workload_state`); waiting, the tracked roots that wait for GPUs
(:mod:`~kaiwo_planner.domain.scheduling.gpu_waiting`, decision 0056: Kueue does not admit them
for GPUs, or the scheduler cannot place a bare Pod, or a pod of a Job, Deployment or
StatefulSet, for GPUs: decision 0066) for longer than the same pending threshold, for the GPUs
they wait for; in flight, those whose GpuWorkload says ``Preempting``, and those gone whose
GpuWorkload does not say so yet (neither ``Preempted`` nor ``Deleted``). The watcher observes
a root and its record on separate watches: the root's deletion can reach the planner before
the ``Preempting`` the executor wrote first, and the GPUs being freed must not look like room
nobody asked for (seen on the real stack: a second idle workload went for the same demand).
Each is counted where its ``kueue.x-k8s.io/queue-name`` label puts it (decision 0260: the
LocalQueue's ClusterQueue); one Kueue does not queue matches any by vendor, as upstream.

Once a GpuWorkload says ``Preempted`` for a waiting workload, that workload is no pressure for
:data:`FREED_GPUS_SETTLE`: the GPUs freed for it are on their way (the victim's pods
terminate, the scheduler or Kueue places it on the next event), and the one decision that
chose the victims covered its whole demand. Without it, a second victim went for the same
demand in the seconds between the first one's deletion and the scheduler placing the waiting
pod (seen on the real stack). Still waiting after that, it presses again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoConfig, KaiwoGpuPreemptionConfig
from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus
from kaiwo_contracts.gpu_preemption import GpuPreemptionSettings
from kaiwo_contracts.gpu_workloads import (
    DEPLOYMENT,
    JOB,
    STATEFUL_SET,
    gpu_vendor,
    held_gpus,
    kind_of,
)
from kaiwo_contracts.plans import ObjectRef, Plan

from kaiwo_planner.domain.children.resources import gpu_resource_key
from kaiwo_planner.domain.scheduling.freed_gpus import (
    FREED_GPUS_SETTLE,
    observed_victim,
    still_freeing,
)
from kaiwo_planner.domain.scheduling.gpu_allocation import (
    allocated_gpus,
    main_child_of,
    released_pods_of,
    running_child_of,
    vendor_gpu_stats,
)
from kaiwo_planner.domain.scheduling.gpu_model_flavors import gpu_model_flavor_names
from kaiwo_planner.domain.scheduling.gpu_waiting import GpuWait, gpu_wait
from kaiwo_planner.domain.scheduling.gpu_workload_state import (
    DELETED,
    PREEMPTED,
    PREEMPTING,
    gpu_workloads,
    reading_of,
    root_of,
    settings_of,
)
from kaiwo_planner.domain.scheduling.idle_preemption import (
    REASON_IDLE,
    GpuDemand,
    IdlePreemptionDecision,
    IdleWorkload,
    InFlight,
    QuotaScope,
    decide_idle_preemptions,
)
from kaiwo_planner.domain.scheduling.placeable import could_be_placed
from kaiwo_planner.domain.scheduling.preemption import PREEMPTION_REASON
from kaiwo_planner.domain.scheduling.quota_scope import (
    QuotaTrees,
    foreign_quota_scope,
    kaiwo_quota_scope,
)
from kaiwo_planner.domain.scheduling.replicas_waiting import replicas_waiting
from kaiwo_planner.domain.scheduling.selected_flavors import selected_flavor_names
from kaiwo_planner.domain.settings.cluster_settings import (
    kaiwo_config,
    parse_time,
    pending_threshold,
    waits_for_nothing,
    workload_queue,
    workloads,
)
from kaiwo_planner.domain.state.cluster import ClusterState, object_uid
from kaiwo_planner.domain.state.planning_context import EVERY_KIND, PlanningContext
from kaiwo_planner.domain.state.workload_finding import WorkloadFinding
from kaiwo_planner.domain.status.kueue_admission import pending_since
from kaiwo_planner.domain.status.workload_events import WORKLOAD_TERMINATED_EARLY

_RUNNING = frozenset({WorkloadStatus.RUNNING.value, WorkloadStatus.READY.value})


def idle_preemption_decision(context: PlanningContext, *, now: datetime) -> IdlePreemptionDecision:
    """The idle-preemption decision at ``now`` (worked out once per state and time)."""
    return context.derived(
        ("idle-preemption", now, context.preempting),
        reads=EVERY_KIND,
        compute=lambda: _decide(context, now),
    )


def _decide(context: PlanningContext, now: datetime) -> IdlePreemptionDecision:
    cluster = context.cluster
    threshold = pending_threshold(context)
    config = kaiwo_config(context)
    idle: list[IdleWorkload] = []
    unweighed: list[tuple[Mapping[str, Any], IdleWorkload]] = []
    pending: list[GpuDemand] = []
    in_flight: list[InFlight] = []
    freed_for: dict[str, int] = defaultdict(int)
    trees = QuotaTrees.of(cluster)

    for obj in workloads(cluster):
        status, spec = obj.get("status"), obj.get("spec")
        if not isinstance(status, Mapping) or not isinstance(spec, Mapping):
            continue
        phase = status.get("status")
        vendor = str(spec.get("gpuVendor") or "amd").lower()
        uid = object_uid(obj)
        # The GPUs held are worked out only for a workload that takes part (decision 0158):
        # most running ones are not idle, and finished ones hold nothing.
        if uid in context.preempting:
            scope = kaiwo_quota_scope(obj, cluster, config, trees)
            in_flight.append(InFlight(vendor, _held_gpus(obj, context), scope))
        elif phase in _RUNNING:
            part = _running_part(obj, context, vendor, config, trees, now=now)
            if isinstance(part, IdleWorkload):
                unweighed.append((obj, part))
            elif part is not None and now - part.pending_since > threshold:
                pending.append(part)
        elif phase == _PENDING and (gpus := _held_gpus(obj, context)) > 0:
            if waits_for_nothing(obj, cluster):
                continue
            since = pending_since(status) or parse_time(
                (obj.get("metadata") or {}).get("creationTimestamp")
            )
            if since is not None and now - since > threshold:
                scope = kaiwo_quota_scope(obj, cluster, config, trees, wanting=gpus)
                flavors = _kaiwo_demand_flavors(obj, vendor, scope, context, config)
                key = ObjectRef.key_of(obj)
                pending.append(GpuDemand(key, vendor, gpus, since, scope, flavors))
        elif (victim := observed_victim(status)) and still_freeing(victim, uid, cluster, now=now):
            if victim.beneficiary is None:
                scope = kaiwo_quota_scope(obj, cluster, config, trees)
                in_flight.append(InFlight(vendor, _held_gpus(obj, context), scope))
            else:
                freed_for[victim.beneficiary] += _held_gpus(obj, context)
    _foreign(context, trees, idle=idle, pending=pending, in_flight=in_flight, now=now)
    # What an idle Kaiwo workload holds, and where Kueue counts it, is worked out only for
    # one that may be chosen: past its grace period, and Always or with some workload
    # waiting. Of a thousand running, most plans find none such (bench/planner.py, Idle).
    idle += [
        replace(
            sketch,
            gpus=_held_gpus(obj, context),
            quota=kaiwo_quota_scope(obj, cluster, config, trees, held_now=True),
        )
        for obj, sketch in unweighed
        if sketch.may_be_chosen(now, pressed=bool(pending))
    ]
    return decide_idle_preemptions(
        idle=idle, pending=pending, in_flight=in_flight, freed_for=freed_for, now=now
    )


_PENDING = WorkloadStatus.PENDING.value


def _running_part(
    obj: Mapping[str, Any],
    context: PlanningContext,
    vendor: str,
    config: KaiwoConfig,
    trees: QuotaTrees,
    *,
    now: datetime,
) -> IdleWorkload | GpuDemand | None:
    """A running workload's part in the decision: idle (its idle stretch counts; its GPUs
    and quota scope not worked out yet), waiting for the GPUs of its pods Kueue has not
    admitted (:func:`_replicas_waiting`), or none."""
    cluster = context.cluster
    finding = cluster.findings.get(object_uid(obj))
    counted = _idle_reading(obj, finding, cluster, config.spec.gpu_preemption, now=now)
    if counted is not None:
        return _idle(obj, counted, vendor=vendor)
    return _replicas_waiting(obj, context, vendor, config, trees)


def _replicas_waiting(
    obj: Mapping[str, Any],
    context: PlanningContext,
    vendor: str,
    config: KaiwoConfig,
    trees: QuotaTrees,
) -> GpuDemand | None:
    """The GPUs of a running Deployment-based KaiwoService's pods that Kueue has not admitted
    (:func:`~kaiwo_planner.domain.scheduling.replicas_waiting.replicas_waiting`): its status
    says RUNNING or READY, so it was no pressure (decision 0236)."""
    cluster = context.cluster
    waiting = replicas_waiting(obj, cluster, lambda: _held_gpus(obj, context))
    if waiting is None:
        return None
    scope = kaiwo_quota_scope(obj, cluster, config, trees, wanting=waiting.gpus)
    flavors = _kaiwo_demand_flavors(obj, vendor, scope, context, config)
    return GpuDemand(ObjectRef.key_of(obj), vendor, waiting.gpus, waiting.since, scope, flavors)


def _kaiwo_demand_flavors(
    obj: Mapping[str, Any],
    vendor: str,
    scope: QuotaScope | None,
    context: PlanningContext,
    config: KaiwoConfig,
) -> frozenset[str]:
    """The flavors Kueue may admit a waiting Kaiwo workload into: those of its ``gpuModels``
    (decision 0237), narrowed by what its observed main child's pods select (a ``spec.job``
    or pod template the user wrote may hold a node selector, affinity or tolerations,
    decision 0283); none: any (also where the two leave none: Kueue admits it nowhere, and
    nobody's GPUs are judged by it)."""
    models = _model_flavors(obj.get("spec") or {}, vendor, context, config)
    child = main_child_of(context.cluster, obj)
    if child is None or scope is None:
        return models
    selected = selected_flavor_names(context, child, queue=scope.cluster_queue)
    if not models or not selected:
        return models or selected
    return models & selected


def _model_flavors(
    spec: Mapping[str, Any], vendor: str, context: PlanningContext, config: KaiwoConfig
) -> frozenset[str]:
    """The flavors of the workload's queue that hold one of its ``gpuModels``, the only ones
    Kueue admits it into (decision 0237); none: any."""
    models = spec.get("gpuModels")
    if not isinstance(models, list) or not models:
        return frozenset()
    gpu_key = gpu_resource_key(vendor, default_key=config.spec.nodes.default_gpu_resource_key)
    return gpu_model_flavor_names(
        context,
        queue=workload_queue(spec, config),
        gpu_key=gpu_key,
        gpu_models=[str(model) for model in models],
    )


def _held_gpus(obj: Mapping[str, Any], context: PlanningContext) -> int:
    """What the allocation gives the workload's pods, by the planner's own rule (decision
    0118), or the split by node size its running child was made with (decision 0137), less
    the pods of its batch Job whose quota Kueue has released (decision 0152)."""
    cluster = context.cluster
    return allocated_gpus(
        obj,
        lambda vendor: vendor_gpu_stats(context, vendor),
        running_child=running_child_of(cluster, obj),
        released=released_pods_of(cluster, obj),
    )


def _foreign(
    context: PlanningContext,
    trees: QuotaTrees,
    *,
    idle: list[IdleWorkload],
    pending: list[GpuDemand],
    in_flight: list[InFlight],
    now: datetime,
) -> None:
    """Add the GPU workloads no Kaiwo kind owns to ``idle``, ``pending`` and ``in_flight``
    (module docstring), each with the quota scope its queue label gives it (decision 0260)."""
    cluster = context.cluster
    defaults = kaiwo_config(context).spec.gpu_preemption
    threshold = pending_threshold(context)
    served: set[str] = set()
    for record in gpu_workloads(cluster):
        status = record.get("status") or {}
        root = root_of(record, cluster)
        served |= _served_recently(status, now)
        if (
            status.get("phase") == PREEMPTING
            or (root is None and _still_told_held(status))
            or object_uid(record) in context.preempting
        ):
            vendor = gpu_vendor(root) if root else str(status.get("vendor") or "amd")
            gpus = held_gpus(root) if root else int(status.get("gpus") or 0)
            # A root gone leaves no label to read: its GPUs may serve anyone, as before.
            scope = foreign_quota_scope(root, cluster, trees) if root else None
            in_flight.append(InFlight(vendor, gpus, scope))
            continue
        settings = settings_of(root, cluster, defaults) if root is not None else None
        if root is None or settings is None:
            continue
        metadata = root.get("metadata") or {}
        waiting = waiting_of(root, cluster)
        if waiting is not None:
            # A pod no node could hold is helped by nobody's GPUs (decision 0256).
            if now - waiting.since > threshold and could_be_placed(root, cluster.nodes):
                scope = foreign_quota_scope(root, cluster, trees, wanting=waiting.gpus)
                key = ObjectRef.key_of(root)
                flavors = (
                    selected_flavor_names(context, root, queue=scope.cluster_queue)
                    if scope is not None
                    else frozenset()
                )
                demand = GpuDemand(
                    key, gpu_vendor(root), waiting.gpus, waiting.since, scope, flavors
                )
                pending.append(demand)
            continue
        reading = reading_of(
            cluster.findings.get(str(metadata.get("uid") or "")),
            settings,
            now=now,
            not_before=parse_time(status.get("preemptedAt")),
        )
        if reading.idle_since is None or reading.at is None:
            continue
        idle.append(
            IdleWorkload(
                key=ObjectRef.key_of(root),
                vendor=gpu_vendor(root),
                gpus=held_gpus(root),
                idle_since=reading.idle_since,
                evidence_at=reading.at,
                grace=settings.grace_period,
                policy=settings.policy,
                quota=foreign_quota_scope(root, cluster, trees, held_now=True),
            )
        )
    pending[:] = [demand for demand in pending if demand.key[4] not in served]


def preemption_unobserved(plan: Plan, owner: Mapping[str, Any]) -> bool:
    """``plan`` preempts for GPU demand (a GpuWorkload's plan preempting its workload, a
    KaiwoJob's or KaiwoService's status terminating it for ``GpuIdlePreemption`` or, decision
    0148, for ``DurationExceededWithActiveGpuDemand``) and the observed ``owner`` does not
    say so yet: its uid belongs in
    :attr:`~kaiwo_planner.domain.state.planning_context.PlanningContext.preempting` until
    it does."""
    observed = owner.get("status")
    seen: Mapping[str, Any] = observed if isinstance(observed, Mapping) else {}
    if plan.preempt is not None:
        return seen.get("phase") not in (PREEMPTING, PREEMPTED)
    planned = plan.status or {}
    return any(
        _terminated_early_for(planned, reason) and not _terminated_early_for(seen, reason)
        for reason in (REASON_IDLE, PREEMPTION_REASON)
    )


def _still_told_held(status: Mapping[str, Any]) -> bool:
    """The record of a workload that is gone still says it holds its GPUs: they are being
    freed, whoever deleted it, until the record's plan says Preempted or Deleted."""
    return bool(status) and status.get("phase") not in (PREEMPTED, DELETED)


def _served_recently(status: Mapping[str, Any], now: datetime) -> set[str]:
    """The uid of the workload a GpuWorkload's workload was preempted for, while that is
    less than :data:`FREED_GPUS_SETTLE` ago (module docstring); else nothing."""
    at = parse_time(status.get("preemptedAt"))
    beneficiary = status.get("preemptedFor")
    if status.get("phase") != PREEMPTED or at is None or not isinstance(beneficiary, Mapping):
        return set()
    uid = str(beneficiary.get("uid") or "")
    return {uid} if uid and now - at < FREED_GPUS_SETTLE else set()


def waiting_of(root: Mapping[str, Any], cluster: ClusterState) -> GpuWait | None:
    """Since when the tracked ``root`` waits for GPUs, and for how many (None: it does not)."""
    return gpu_wait(root, cluster.kueue_workloads_for(object_uid(root)), pods_of(root, cluster))


def pods_of(root: Mapping[str, Any], cluster: ClusterState) -> tuple[Mapping[str, Any], ...]:
    """The observed pods of a root that are not the root itself: a Job's or a StatefulSet's
    (their controller), a Deployment's (its ReplicaSet's, filed under its name). The watcher
    publishes those that wait for GPUs (decision 0066)."""
    metadata = root.get("metadata") or {}
    if kind_of(root) == DEPLOYMENT:
        namespace = str(metadata.get("namespace") or "")
        return cluster.pods_of_deployment(namespace, str(metadata.get("name") or ""))
    if kind_of(root) in (JOB, STATEFUL_SET):
        children = cluster.children_of(str(metadata.get("uid") or ""))
        return tuple(child for child in children if child.get("kind") == "Pod")
    return ()


def counts_as_idle(
    obj: Mapping[str, Any],
    finding: WorkloadFinding | None,
    context: PlanningContext,
    *,
    now: datetime,
) -> bool:
    """Whether the running workload ``obj`` (wire form), whose latest finding is ``finding``,
    is idle as :func:`idle_preemption_decision` counts it (opted in, an idle stretch that
    counts). Only such a workload can be that decision's victim, so the plan of any other
    need not work the decision out: it reads every workload of the cluster, and every
    running workload's finding brings a plan (decision 0158)."""
    defaults = kaiwo_config(context).spec.gpu_preemption
    return _idle_reading(obj, finding, context.cluster, defaults, now=now) is not None


_IdleReading = tuple[WorkloadFinding, GpuPreemptionSettings, datetime]
"""A reading whose idle stretch counts: the finding, the settings, the stretch's start."""


def _idle_reading(
    obj: Mapping[str, Any],
    finding: WorkloadFinding | None,
    cluster: ClusterState,
    defaults: KaiwoGpuPreemptionConfig,
    *,
    now: datetime,
) -> _IdleReading | None:
    """The reading of the running workload ``obj``, when its idle stretch counts. The finding
    is looked at first: most running workloads are busy, and their opt-in settings (their
    annotations and their Namespace's) cost far more to resolve than their finding."""
    if finding is None or finding.idle_since is None or not finding.fresh(now):
        return None
    settings = settings_of(obj, cluster, defaults)
    if settings is None or not _idle_stretch_counts(finding, settings):
        return None
    return finding, settings, finding.idle_since


def _idle(obj: Mapping[str, Any], counted: _IdleReading, *, vendor: str) -> IdleWorkload:
    """The idle workload ``obj``, whose reading counts (:func:`_idle_reading`), before its
    GPUs and its quota scope are worked out (none yet)."""
    finding, settings, idle_since = counted
    return IdleWorkload(
        key=ObjectRef.key_of(obj),
        vendor=vendor,
        gpus=0,
        idle_since=idle_since,
        evidence_at=finding.at,
        grace=settings.grace_period,
        policy=settings.policy,
    )


def _idle_stretch_counts(finding: WorkloadFinding, settings: GpuPreemptionSettings) -> bool:
    """The reading is the workload's own measure (its aggregation), below its threshold, and
    the stretch was judged against a threshold no higher than that."""
    threshold = settings.threshold_ratio
    reading, judged_against = finding.idle_utilization_ratio, finding.idle_threshold_ratio
    return (
        finding.idle_aggregation == settings.aggregation
        and reading is not None
        and reading < threshold
        and judged_against is not None
        and judged_against <= threshold
    )


def _terminated_early_for(status: Mapping[str, Any], reason: str) -> bool:
    return any(
        isinstance(c, Mapping)
        and c.get("type") == WORKLOAD_TERMINATED_EARLY
        and c.get("reason") == reason
        for c in status.get("conditions") or ()
    )
