"""A KaiwoJob's or KaiwoService's part in preemption: stopping it, and what its wait asks.

A running workload stops early (:func:`termination_request`) when its duration ran out while
GPUs are wanted, when it is an idle GPU holder chosen for preemption, or when it stayed
underutilized too long. A workload waiting for GPUs past the pending threshold names the
workloads to preempt for it (:func:`victims_for`), and is planned again the moment its wait
becomes long enough (:func:`replan_moment`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwojob import KaiwoJob
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoservice import KaiwoService
from kaiwo_contracts.plans import ObjectRef

from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation
from kaiwo_planner.domain.scheduling.idle_preemption_inputs import (
    counts_as_idle,
    idle_preemption_decision,
)
from kaiwo_planner.domain.scheduling.preemption_candidates import (
    freed_gpus_settle_for,
    preemption_decision,
)
from kaiwo_planner.domain.scheduling.replicas_waiting import replicas_waiting
from kaiwo_planner.domain.settings.cluster_settings import (
    kaiwo_config,
    parse_time,
    pending_threshold,
)
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.status.findings import underutilization_termination
from kaiwo_planner.domain.status.kueue_admission import pending_since, run_start
from kaiwo_planner.domain.status.workload_status import TerminationRequest

_RUNNING = frozenset({WorkloadStatus.RUNNING.value, WorkloadStatus.READY.value})
_ONE_SECOND = timedelta(seconds=1)


def is_running(previous: Mapping[str, Any]) -> bool:
    """The workload's last status says it runs (RUNNING, or READY for a service)."""
    return previous.get("status") in _RUNNING


def termination_request(
    ref: ObjectRef,
    previous: Mapping[str, Any],
    duration: timedelta | None,
    *,
    context: PlanningContext,
    now: datetime,
) -> TerminationRequest | None:
    """Why this running workload must stop now, if it must: its duration ran out while GPUs
    are wanted, it is an idle GPU holder to preempt, or it stayed underutilized too long."""
    if not is_running(previous):
        return None
    started = run_start(previous)
    if duration is not None and started is not None and started + duration <= now:
        by_duration = preemption_decision(context, now=now).termination_for(ref)
        if by_duration is not None:
            return by_duration
    finding = context.cluster.findings.get(ref.uid or "")
    if finding is None:
        return None
    observed = context.cluster.by_uid(ref.uid or "") or {}
    if counts_as_idle(observed, finding, context, now=now):
        idle = idle_preemption_decision(context, now=now).for_victim(ref)
        if idle is not None:
            return idle.request
    return underutilization_termination(
        finding, kaiwo_config(context).spec.resource_monitoring, ref.namespace or "", now=now
    )


def waiting_since_of(
    workload: KaiwoJob | KaiwoService,
    phase: WorkloadStatus,
    allocation: GpuAllocation,
    observed: Mapping[str, Any],
    *,
    context: PlanningContext,
) -> datetime | None:
    """When this workload started waiting for GPUs (None unless it waits for some): PENDING
    with GPUs, when its ``observed`` status says its current wait began, or at its creation.
    The observed status, as every other workload's is read (:mod:`preemption_candidates`): a
    condition this plan writes for the first time carries ``now``, not the wait's start. A
    running service whose pods Kueue has not all admitted, since the first of their
    Workloads was made (decision 0256): it names its victims and is planned again when its
    wait is long enough, as a PENDING one is."""
    if allocation.gpus <= 0:
        return None
    if phase is WorkloadStatus.PENDING:
        return pending_since(observed) or parse_time(workload.metadata.creation_timestamp)
    if phase.value not in _RUNNING:
        return None
    obj = context.cluster.by_uid(workload.metadata.uid or "")
    waiting = (
        None if obj is None else replicas_waiting(obj, context.cluster, lambda: allocation.gpus)
    )
    return None if waiting is None else waiting.since


def replan_moment(
    ref: ObjectRef,
    replan_after: timedelta | None,
    waiting_since: datetime | None,
    *,
    context: PlanningContext,
    now: datetime,
) -> datetime | None:
    """The earliest of: the duration deadline, the moment this workload's wait becomes
    long enough to preempt others, and the moment the GPUs freed for it stop counting as on
    their way (decision 0148): it must be planned then to name others, if it still waits."""
    moments = []
    if replan_after is not None:
        moments.append(now + replan_after)
    if waiting_since is not None:
        # Preemption needs a wait strictly longer than the threshold.
        preempting_from = waiting_since + pending_threshold(context) + _ONE_SECOND
        if preempting_from > now:
            moments.append(preempting_from)
        else:
            # Only a workload that presses has GPUs freed for it: asking before would walk
            # every workload of the cluster in the plan of every short wait (replay 6%).
            settled = freed_gpus_settle_for(ref.uid or "", context)
            if settled is not None and settled > now:
                moments.append(settled)
    return min(moments) if moments else None


def victims_for(
    ref: ObjectRef, waiting_since: datetime | None, *, context: PlanningContext, now: datetime
) -> tuple[ObjectRef, ...]:
    """The running workloads the preemption decision stops for this one, once it waited
    longer than the pending threshold."""
    if waiting_since is None or now - waiting_since <= pending_threshold(context):
        return ()
    decision = preemption_decision(context, now=now)
    key = ref.sort_key()
    return tuple(p.victim for p in decision.preemptions if p.beneficiary.sort_key() == key)
