"""The workload's ``Evicted`` condition: Kueue took back what it had admitted, and why (pure).

Kueue tells an eviction on its Workload (``Evicted`` True, ``ClusterQueueStopped``,
``Preempted``, ``LocalQueueStopped``, ``PodsReadyTimeout``...), and only while that Workload
lives. A KaiwoJob's Workload lives on (its Job is suspended and admitted again), but each pod
of a Deployment-based KaiwoService has a Workload of its own: Kueue deletes the evicted pods,
their Workloads go with them, and the ReplicaSet's new pods get fresh Workloads that only say
they wait ("ClusterQueue svc is inactive"). So the workload keeps Kueue's reason itself while
it waits since the eviction, read from its previous status (decision 0180).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus

from kaiwo_planner.domain.status.conditions import ConditionSpec
from kaiwo_planner.domain.status.kueue_admission import (
    KUEUE_EVICTED,
    every_one_admitted,
    eviction_told,
    kueue_eviction,
)

EVICTED: Final = KUEUE_EVICTED
"""The workload's condition, named as Kueue's on its Workload, whose reason and message it
mirrors."""
READMITTED: Final = "Readmitted"
READMITTED_MESSAGE: Final = "Kueue admitted the workload again after evicting it"

_ADMITTED_PHASES: Final = frozenset(
    {WorkloadStatus.STARTING, WorkloadStatus.RUNNING, WorkloadStatus.READY}
)
"""Phases of a workload Kueue admitted: an eviction seen from one of them takes back an
admission (a Workload stopped before its first admission carries ``Evicted`` too, and that
tells nothing new)."""


def eviction_condition(
    previous: Mapping[str, Any],
    phase: WorkloadStatus,
    kueue_workloads: Sequence[Mapping[str, Any]],
) -> ConditionSpec | None:
    """``Evicted`` of a workload whose next phase is ``phase``; None leaves it as it is.

    * PENDING after an admission (from STARTING, RUNNING or READY, or already ``Evicted``):
      True with the reason and message of Kueue's ``Evicted`` condition on any of its
      Workloads; when none says so any more (a service's pods replaced, their fresh Workloads
      waiting), the reason it had, kept until Kueue admits it again.
    * Admitted again after that: False, ``Readmitted``. That is Kueue's word, not the phase's:
      STARTING, RUNNING or READY with every one of its Workloads admitted and none evicted (a
      service drained from a stopped queue may show a ready phase for a moment while its old
      pods go and its new ones wait), or COMPLETE, which only a run can reach.
    """
    kept = eviction_told(previous)
    if phase is WorkloadStatus.PENDING:
        if kept is None and previous.get("status") not in _ADMITTED_PHASES:
            return None
        found = kueue_eviction(kueue_workloads) or kept
        return None if found is None else ConditionSpec(EVICTED, "True", *found)
    if kept is not None and _readmitted(phase, kueue_workloads):
        return ConditionSpec(EVICTED, "False", READMITTED, READMITTED_MESSAGE)
    return None


def _readmitted(phase: WorkloadStatus, kueue_workloads: Sequence[Mapping[str, Any]]) -> bool:
    if phase is WorkloadStatus.COMPLETE:
        return True
    return phase in _ADMITTED_PHASES and every_one_admitted(kueue_workloads)


__all__ = ["EVICTED", "READMITTED", "eviction_condition"]
