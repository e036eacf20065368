"""GPUs on their way: the observed victims of either preemption, and how long their GPUs count
as being freed (decision 0150).

Duration preemption (``DurationExceededWithActiveGpuDemand``, decision 0148) and GPU idle
preemption (``GpuIdlePreemption``, decision 0076) stop running workloads for the same waiting
workloads. Each must count the other's victims, or the moment one's victim is observed
stopping, the other sees the waiter still PENDING and stops a second workload for GPUs
already on their way. One rule, for a KaiwoJob or KaiwoService whose status says
``WorkloadTerminatedEarly`` with either reason:

* it names the waiting workload (``status.preemptedFor``: every duration victim, every
  ``OnPressure`` idle victim): its GPUs are on their way to that workload, by uid, while it is
  TERMINATING, while its pods are still observed, and for :data:`FREED_GPUS_SETTLE` after it
  became TERMINATED (its quota goes back to Kueue, which admits the waiter on its next pass);
* it names nobody (an ``Always`` idle victim): its GPUs are being freed for whoever waits for
  them, while it is TERMINATING or its pods are still observed.

A victim whose termination the planner decided and has not observed yet is counted through
:attr:`~kaiwo_planner.domain.state.planning_context.PlanningContext.preempting` instead: its
status still says it runs, so it is never counted both ways.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus

from kaiwo_planner.domain.scheduling.idle_preemption import REASON_IDLE
from kaiwo_planner.domain.scheduling.preemption import PREEMPTION_REASON
from kaiwo_planner.domain.settings.cluster_settings import parse_time
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.index_entry import RUN_ID_LABEL
from kaiwo_planner.domain.status.conditions import condition_of
from kaiwo_planner.domain.status.workload_events import WORKLOAD_TERMINATED_EARLY
from kaiwo_planner.domain.status.workload_status import PREEMPTED_FOR

FREED_GPUS_SETTLE: Final = timedelta(minutes=2)
"""How long GPUs freed for a waiting workload count as on their way to it (decision 0066)."""

_STOPPING: Final = WorkloadStatus.TERMINATING.value
_STOPPED: Final = WorkloadStatus.TERMINATED.value
_PREEMPTION_REASONS: Final = frozenset({PREEMPTION_REASON, REASON_IDLE})
_LONG_AGO: Final = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class ObservedVictim:
    """A workload observed stopped by either preemption: ``beneficiary`` the uid of the
    waiting workload its status names (None: it names none), ``terminated_at`` None while
    TERMINATING, else when it became TERMINATED."""

    beneficiary: str | None
    terminated_at: datetime | None


def observed_victim(status: Mapping[str, Any]) -> ObservedVictim | None:
    """The workload's ``status`` as that of a preemption victim, or None: it is not one."""
    phase = status.get("status")
    if phase not in (_STOPPING, _STOPPED):
        return None
    early = condition_of(status, WORKLOAD_TERMINATED_EARLY)
    if early is None or early.get("reason") not in _PREEMPTION_REASONS:
        return None
    named = status.get(PREEMPTED_FOR)
    beneficiary = str(named.get("uid") or "") if isinstance(named, Mapping) else ""
    terminated_at = None
    if phase == _STOPPED:
        # The condition turned True when the workload became TERMINATED; a status without
        # the time counts as terminated long ago (its GPUs are not held for anyone).
        terminated_at = parse_time(early.get("lastTransitionTime")) or _LONG_AGO
    return ObservedVictim(beneficiary=beneficiary or None, terminated_at=terminated_at)


def still_freeing(
    victim: ObservedVictim, uid: str, cluster: ClusterState, *, now: datetime
) -> bool:
    """The GPUs of victim ``uid`` count as on their way at ``now`` (module docstring); its
    pods (label ``kaiwo.silogen.ai/run-id``) are looked up last."""
    if victim.terminated_at is None:
        return True
    if victim.beneficiary is not None and now < victim.terminated_at + FREED_GPUS_SETTLE:
        return True
    return bool(cluster.objects_labelled(RUN_ID_LABEL, uid, kind="Pod"))
