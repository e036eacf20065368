"""Who holds GPUs past their duration and who waits for them, read from the observed workloads.

Builds the inputs of :func:`~kaiwo_planner.domain.scheduling.preemption.decide_preemptions` from the
KaiwoJobs and KaiwoServices in the cluster state (wire form, read defensively: a workload that
cannot be read simply does not take part). A RUNNING or READY workload with a ``startTime``
is running; a PENDING one is waiting since its ``Admitted`` condition turned False (after its
downloads, or when Kueue evicted it), or else since its ``creationTimestamp`` (decision 0191:
upstream always counts from the creation, so a workload evicted after hours of running pressed
for preemption at once).

GPUs on their way to a waiting workload (decisions 0148, 0150) count in every decision, in
both moments of a termination:

* decided, not yet observed: a running workload whose uid is in
  :attr:`~kaiwo_planner.domain.state.planning_context.PlanningContext.preempting` (the
  planner published its termination; its status still says it runs);
* observed: a workload whose status says it was terminated by either preemption
  (``WorkloadTerminatedEarly`` reason ``DurationExceededWithActiveGpuDemand`` or
  ``GpuIdlePreemption``), in the window :mod:`~kaiwo_planner.domain.scheduling.freed_gpus`
  gives it: naming the waiting workload (``status.preemptedFor``), while TERMINATING, while
  its pods are still observed, and for :data:`FREED_GPUS_SETTLE` after it became
  TERMINATED (its quota goes back to Kueue, which admits the waiting workload on its next
  pass); naming none (an ``Always`` idle victim), while TERMINATING or its pods are
  observed, for the first waiting workload it competes with. The status is the durable
  record: a restarted planner reads it too. Still waiting after that, the workload presses
  again, and is planned again then (:func:`freed_gpus_settle_for`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kaiwo_contracts.crds.config_v1alpha1 import KaiwoConfig
from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus
from kaiwo_contracts.plans import ObjectRef

from kaiwo_planner.domain.scheduling.freed_gpus import (
    FREED_GPUS_SETTLE,
    ObservedVictim,
    observed_victim,
    still_freeing,
)
from kaiwo_planner.domain.scheduling.gpu_allocation import (
    GpuStats,
    ReleasingJob,
    StatsOf,
    allocated_gpus,
    released_pods_for,
    releasing_job,
    running_child_of,
    vendor_gpu_stats,
)
from kaiwo_planner.domain.scheduling.preemption import (
    FreeingWorkload,
    PendingWorkload,
    PreemptionDecision,
    RunningWorkload,
    decide_preemptions,
)
from kaiwo_planner.domain.scheduling.replicas_waiting import replicas_waiting
from kaiwo_planner.domain.settings.cluster_settings import (
    KAIWO_CONFIG_KIND,
    NAMESPACE_KIND,
    NODE_KIND,
    WORKLOAD_KIND_PAIRS,
    kaiwo_config,
    namespace_being_deleted,
    parse_optional_duration,
    parse_time,
    workload_queue,
    workloads,
)
from kaiwo_planner.domain.state.cluster import object_uid
from kaiwo_planner.domain.state.index_entry import KUEUE_GROUP
from kaiwo_planner.domain.state.planning_context import EVERY_KIND, PlanningContext
from kaiwo_planner.domain.status.kueue_admission import pending_since, run_start

_RUNNING = frozenset({WorkloadStatus.RUNNING.value, WorkloadStatus.READY.value})
_CANDIDATE_KINDS = (
    *WORKLOAD_KIND_PAIRS,
    KAIWO_CONFIG_KIND,
    NODE_KIND,
    NAMESPACE_KIND,
    # Their reclaimablePods: the pods of a running Job that hold no quota (decision 0152).
    (KUEUE_GROUP, "Workload"),
)
_CANDIDATES_KEY = ("preemption-candidates",)


@dataclass(frozen=True, slots=True)
class StoppedForDemand:
    """A workload observed terminated by either preemption (decision 0150): what it frees,
    for the waiting workload its status names if any, and what its status says."""

    freeing: FreeingWorkload
    victim: ObservedVictim


_Candidate = RunningWorkload | PendingWorkload | StoppedForDemand | None
_Read = tuple[Mapping[str, Any], _Candidate, int, ReleasingJob | None]
_Reads = Mapping[int, _Read]
"""What each workload object was read as, by ``id``, with the pods of its batch Job Kueue had
released then (:func:`released_pods_for`) and the Job whose released pods it reads
(:func:`releasing_job`, None for any other workload: a function of the object, so it is
worked out once per object, not once per state). The entry holds its object, so no other
object can take that id while the entry is there: an id found is that very object."""


@dataclass(frozen=True, slots=True)
class PreemptionCandidates:
    running: tuple[RunningWorkload, ...] = ()
    pending: tuple[PendingWorkload, ...] = ()
    stopped: tuple[StoppedForDemand, ...] = ()
    config: KaiwoConfig | None = field(default=None, compare=False, repr=False)
    """The KaiwoConfig the workloads were read with."""
    gpu_stats: Mapping[str, GpuStats] | None = field(default=None, compare=False, repr=False)
    """The GPU statistics of each vendor the workloads' GPUs were counted with (their
    allocation depends on the nodes' size)."""
    reads: _Reads | None = field(default=None, compare=False, repr=False)
    """How each workload object was read, for the next candidates to reuse."""


def running_workload(
    obj: Mapping[str, Any],
    config: KaiwoConfig,
    stats_of: StatsOf,
    *,
    running_child: Mapping[str, Any] | None = None,
    released: int = 0,
) -> RunningWorkload | None:
    """The workload as a running GPU holder, or None when it is not running; it holds the
    GPUs its allocation gives its pods (``stats_of``: the nodes' statistics by vendor), or
    the split by node size its ``running_child`` was made with (decision 0137), less those
    of the ``released`` pods of its batch Job, whose quota Kueue gave back (decision 0152)."""
    status = obj.get("status")
    spec = obj.get("spec")
    if not isinstance(status, Mapping) or not isinstance(spec, Mapping):
        return None
    start = run_start(status)  # the current run's: an eviction started it over (0169)
    if status.get("status") not in _RUNNING or start is None:
        return None
    return RunningWorkload(
        key=ObjectRef.key_of(obj),
        gpu_vendor=str(spec.get("gpuVendor") or "amd"),
        gpus=allocated_gpus(obj, stats_of, running_child=running_child, released=released),
        cluster_queue=workload_queue(spec, config),
        start_time=start,
        duration=parse_optional_duration(spec.get("duration")),
    )


def pending_workload(
    obj: Mapping[str, Any], config: KaiwoConfig, stats_of: StatsOf
) -> PendingWorkload | None:
    """The workload as one waiting for GPUs, or None when it is not PENDING or is being
    deleted (decision 0130: it waits for nothing, though a foreground deletion keeps it, still
    PENDING, until its Job is gone); it waits for the GPUs its allocation will give its pods."""
    status = obj.get("status")
    spec = obj.get("spec")
    meta = obj.get("metadata")
    if not isinstance(status, Mapping) or not isinstance(spec, Mapping):
        return None
    if isinstance(meta, Mapping) and meta.get("deletionTimestamp"):
        return None
    created = parse_time(
        (meta or {}).get("creationTimestamp") if isinstance(meta, Mapping) else None
    )
    if status.get("status") != WorkloadStatus.PENDING.value or created is None:
        return None
    return PendingWorkload(
        key=ObjectRef.key_of(obj),
        gpu_vendor=str(spec.get("gpuVendor") or "amd"),
        gpus=allocated_gpus(obj, stats_of),
        cluster_queue=workload_queue(spec, config),
        pending_since=pending_since(status) or created,
    )


def preemption_candidates(context: PlanningContext) -> PreemptionCandidates:
    """Running and pending workloads of the cluster.

    Kept across states until a workload, the KaiwoConfig or a node changes; then only the
    workload objects that changed are read again: the projection replaces an object when it
    changes and never edits one in place, so an earlier read stays valid for its object while
    the KaiwoConfig and the GPU statistics it was counted with are the same.
    """
    return context.derived(
        _CANDIDATES_KEY,
        reads=_CANDIDATE_KINDS,
        carried=True,
        compute=lambda: _candidates(context, context.earlier(_CANDIDATES_KEY)),
    )


def _candidates(
    context: PlanningContext, earlier: PreemptionCandidates | None
) -> PreemptionCandidates:
    config = kaiwo_config(context)
    used: dict[str, GpuStats] = {}

    def stats_of(vendor: str) -> GpuStats:
        found = used.get(vendor)
        if found is None:
            found = used[vendor] = vendor_gpu_stats(context, vendor)
        return found

    known: _Reads = {}
    if (
        earlier is not None
        and earlier.config is config
        and earlier.reads is not None
        and earlier.gpu_stats is not None
        and all(stats_of(vendor) == stats for vendor, stats in earlier.gpu_stats.items())
    ):
        known = earlier.reads
    objects = workloads(context.cluster)
    ids = list(map(id, objects))
    reads = [
        _reread(obj, read, config, stats_of, context)
        for obj, read in zip(objects, map(known.get, ids), strict=True)
    ]
    candidates = [read[1] for read in reads]
    pending = [c for c in candidates if type(c) is PendingWorkload]
    leaving = _namespaces_being_deleted({c.key[2] for c in pending}, context)
    return PreemptionCandidates(
        running=tuple(c for c in candidates if type(c) is RunningWorkload),
        pending=tuple(c for c in pending if c.key[2] not in leaving),
        stopped=tuple(c for c in candidates if type(c) is StoppedForDemand),
        config=config,
        gpu_stats=used,
        # Only the current objects stay (the old versions are let go).
        reads=dict(zip(ids, reads, strict=True)),
    )


def _namespaces_being_deleted(namespaces: set[str], context: PlanningContext) -> frozenset[str]:
    """Those of ``namespaces`` being deleted: a waiting workload in one waits for no GPUs, as
    the namespace controller removes it within seconds (decision 0130; its own
    ``deletionTimestamp`` is read with the object). Asked here, not in the reads kept per
    workload object, as the Namespace changes apart from the workload; once per namespace,
    not per waiting workload."""
    return frozenset(n for n in namespaces if namespace_being_deleted(context.cluster, n))


def _reread(
    obj: Mapping[str, Any],
    known: _Read | None,
    config: KaiwoConfig,
    stats_of: StatsOf,
    context: PlanningContext,
) -> _Read:
    """The earlier read of ``obj`` (``known``) while Kueue has released as many of its
    pods as then, else ``obj`` read again. The released pods are looked up for a parallel
    batch Job only (:func:`releasing_job`), so the other reads cost a lookup of the kept
    read: a waiting workload's plan reads every workload of the cluster."""
    if known is None:
        releasing = releasing_job(obj)
    else:
        releasing = known[3]
        if releasing is None:
            return known
    released = released_pods_for(context.cluster, releasing)
    if known is not None and known[2] == released:
        return known
    candidate = _read(obj, config, stats_of, context, released=released)
    return obj, candidate, released, releasing


def _read(
    obj: Mapping[str, Any],
    config: KaiwoConfig,
    stats_of: StatsOf,
    context: PlanningContext,
    *,
    released: int = 0,
) -> _Candidate:
    """``obj`` as a candidate. A running one counts the split its main child was made with
    (decision 0137). The children are no input of the kept reads, on purpose: that split
    changes only when a plan applies another, after an edit of ``spec.gpus`` (a new
    workload object, read again, whose child not yet changed says another ``spec.gpus`` and
    so counts as the nodes split it: what the plan applies) or a change of the nodes (every
    workload read again); re-reading on every status change of every child would cost far
    more than it could change. ``released``: the pods of its batch Job whose quota Kueue has
    released (decision 0152); a running one does not hold them, a stopped one does not free
    them."""
    running = running_workload(
        obj,
        config,
        stats_of,
        running_child=running_child_of(context.cluster, obj),
        released=released,
    )
    return (
        running
        or pending_workload(obj, config, stats_of)
        or stopped_for_demand(obj, config, stats_of, released=released)
    )


def stopped_for_demand(
    obj: Mapping[str, Any], config: KaiwoConfig, stats_of: StatsOf, *, released: int = 0
) -> StoppedForDemand | None:
    """The workload as one terminated by either preemption (module docstring), or None."""
    status = obj.get("status")
    spec = obj.get("spec")
    if not isinstance(status, Mapping) or not isinstance(spec, Mapping):
        return None
    victim = observed_victim(status)
    if victim is None:
        return None
    return StoppedForDemand(
        freeing=FreeingWorkload(
            key=ObjectRef.key_of(obj),
            gpu_vendor=str(spec.get("gpuVendor") or "amd"),
            gpus=allocated_gpus(obj, stats_of, released=released),
            cluster_queue=workload_queue(spec, config),
            beneficiary=victim.beneficiary,
        ),
        victim=victim,
    )


def freeing_workloads(
    context: PlanningContext, candidates: PreemptionCandidates, *, now: datetime
) -> tuple[FreeingWorkload, ...]:
    """The workloads whose GPUs are on their way to a waiting workload at ``now`` (module
    docstring)."""
    unobserved = tuple(
        FreeingWorkload(
            key=w.key, gpu_vendor=w.gpu_vendor, gpus=w.gpus, cluster_queue=w.cluster_queue
        )
        for w in candidates.running
        if w.key[4] in context.preempting
    )
    observed = tuple(
        stopped.freeing
        for stopped in candidates.stopped
        if still_freeing(stopped.victim, stopped.freeing.key[4], context.cluster, now=now)
    )
    return unobserved + observed


def freed_gpus_settle_for(uid: str, context: PlanningContext) -> datetime | None:
    """When the last GPUs freed for the waiting workload ``uid`` stop counting as on their way
    to it (None: none were freed for it): it must be planned then, to press again if it
    still waits."""
    ends = [
        stopped.victim.terminated_at + FREED_GPUS_SETTLE
        for stopped in preemption_candidates(context).stopped
        if stopped.victim.beneficiary == uid and stopped.victim.terminated_at is not None
    ]
    return max(ends, default=None)


def preemption_decision(context: PlanningContext, *, now: datetime) -> PreemptionDecision:
    """Which expired workloads to terminate at ``now`` (worked out once per state and time)."""

    # Per state (EVERY_KIND): a value per ``now`` kept across states would pile up. It
    # reads the preemptions under way too (decision 0148), so they are in its key.
    return context.derived(
        ("preemption-decision", now, context.preempting),
        reads=EVERY_KIND,
        compute=lambda: _decide(context, now),
    )


def _decide(context: PlanningContext, now: datetime) -> PreemptionDecision:
    candidates = preemption_candidates(context)
    return decide_preemptions(
        running=candidates.running,
        pending=candidates.pending + _replicas_waiting(context, candidates),
        scheduling=kaiwo_config(context).spec.scheduling,
        now=now,
        freeing=freeing_workloads(context, candidates, now=now),
    )


def _replicas_waiting(
    context: PlanningContext, candidates: PreemptionCandidates
) -> tuple[PendingWorkload, ...]:
    """The running services whose pods Kueue has not all admitted, waiting for those pods'
    GPUs (:func:`~kaiwo_planner.domain.scheduling.replicas_waiting.replicas_waiting`), as GPU
    idle preemption counts them (decision 0256). Read per state, not with the candidates
    kept per workload object: the pods' Workloads change apart from the workload."""
    running = {w.key[4]: w for w in candidates.running}
    found = []
    for obj in workloads(context.cluster):
        holder = running.get(object_uid(obj))
        if holder is None or holder.gpus <= 0:
            continue
        # Its GPUs were worked out with the candidates already.
        waiting = replicas_waiting(obj, context.cluster, functools.partial(int, holder.gpus))
        if waiting is None:
            continue
        found.append(
            PendingWorkload(
                key=holder.key,
                gpu_vendor=holder.gpu_vendor,
                gpus=waiting.gpus,
                cluster_queue=holder.cluster_queue,
                pending_since=waiting.since,
            )
        )
    return tuple(found)


def preemption_victims(context: PlanningContext, *, now: datetime) -> tuple[ObjectRef, ...]:
    """The workloads the preemption decision at ``now`` terminates, in decision order.

    For active-active planners (decision 0030): the holder of a victim's partition need not
    hold its beneficiary's, so it asks this on its own clock instead of being told by the
    beneficiary's plan. Not kept in the context's cache: a new ``now`` every round would
    pile values up in a state that does not change.
    """
    return tuple(p.victim for p in _decide(context, now).preemptions)
