"""A serving Deployment's pod that Kueue admitted and that is not Ready in time (decision 0176).

In a namespace Kueue manages, each pod of a Deployment is admitted on its own (decision 0168).
The Deployment controller's ``ProgressDeadlineExceeded`` counts from the rollout's last
progress, which says nothing of a pod admitted late, and while some new pods wait for quota
that condition is read as a wait (:mod:`.rollout`). So the planner keeps its own deadline per
pod: a pod of a rolling Deployment that Kueue admitted and that is not Ready
``progressDeadlineSeconds`` after its admission (the ``Admitted`` condition of its Workload),
or after its ``Ready`` condition last changed when that is later (a pod Ready once and no
more counts from then), is overdue, and the rollout is in error. A pod still within its time
gives the moment to plan again, so that the deadline is seen when it passes, not when some
other change happens to arrive.

A Deployment that completed its rollout (``Progressing`` ``NewRSAvailable``) is not looked at:
the Deployment controller holds no deadline over it either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from kaiwo_planner.domain.settings.cluster_settings import parse_time
from kaiwo_planner.domain.state.cluster import object_uid
from kaiwo_planner.domain.status.child_phase import ObservedChildren
from kaiwo_planner.domain.status.conditions import condition_of, format_time
from kaiwo_planner.domain.status.kueue_admission import ADMITTED, kueue_admitted

KUBERNETES_DEFAULT_PROGRESS_DEADLINE_SECONDS: Final = 600
"""What the API server sets a Deployment's ``progressDeadlineSeconds`` to when it names none."""
ROLLOUT_COMPLETE: Final = "NewRSAvailable"
"""The ``Progressing`` reason the Deployment controller gives a Deployment whose rollout is
complete; it never times such a Deployment out."""
_FINISHED_POD_PHASES: Final = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class OverduePod:
    """A pod admitted by Kueue at ``admitted_at`` and not Ready within the deadline."""

    name: str
    admitted_at: datetime
    pod_phase: str
    node: str

    @property
    def told(self) -> str:
        where = f"on node {self.node}" if self.node else "bound to no node"
        return (
            f"pod {self.name} was admitted by Kueue at {format_time(self.admitted_at)} and is "
            f"not Ready within the deadline ({self.pod_phase} {where})"
        )


@dataclass(frozen=True, slots=True)
class AdmittedPodsDeadline:
    """The admitted pods past their deadline, by name, and the earliest moment a pod still
    within its time runs out of it (None when no pod waits to become Ready)."""

    overdue: tuple[OverduePod, ...] = ()
    next_deadline: datetime | None = None


NO_DEADLINE: Final = AdmittedPodsDeadline()


def admitted_pods_deadline(observed: ObservedChildren, *, now: datetime) -> AdmittedPodsDeadline:
    """Which admitted, live, not Ready pods of a rolling Deployment are past the Deployment's
    ``progressDeadlineSeconds`` at ``now``, and when the next one will be."""
    deployment = observed.child
    if observed.child_kind != "Deployment" or deployment is None or _rollout_complete(deployment):
        return NO_DEADLINE
    deadline = timedelta(seconds=progress_deadline_seconds(deployment))
    pods = {object_uid(pod): pod for pod in observed.pods if object_uid(pod)}
    overdue: list[OverduePod] = []
    upcoming: list[datetime] = []
    for workload in observed.kueue_workloads:
        pod = pods.get(_owning_pod_uid(workload))
        admitted_at = _admitted_at(workload)
        if pod is None or admitted_at is None or not _waits_to_be_ready(pod):
            continue
        ends = max(admitted_at, _readiness_changed(pod) or admitted_at) + deadline
        if ends <= now:
            overdue.append(_overdue(pod, admitted_at))
        else:
            upcoming.append(ends)
    return AdmittedPodsDeadline(
        overdue=tuple(sorted(overdue, key=lambda p: p.name)),
        next_deadline=min(upcoming, default=None),
    )


def progress_deadline_seconds(deployment: Mapping[str, Any]) -> int:
    limit = (deployment.get("spec") or {}).get("progressDeadlineSeconds")
    return limit if isinstance(limit, int) else KUBERNETES_DEFAULT_PROGRESS_DEADLINE_SECONDS


def _rollout_complete(deployment: Mapping[str, Any]) -> bool:
    progressing = condition_of(deployment.get("status") or {}, "Progressing") or {}
    return progressing.get("status") == "True" and progressing.get("reason") == ROLLOUT_COMPLETE


def _admitted_at(workload: Mapping[str, Any]) -> datetime | None:
    """When Kueue admitted the pod's Workload (None while it is not admitted)."""
    status = workload.get("status") or {}
    if not kueue_admitted(status):
        return None
    return parse_time((condition_of(status, ADMITTED) or {}).get("lastTransitionTime"))


def _waits_to_be_ready(pod: Mapping[str, Any]) -> bool:
    """A live pod (not finished, not being deleted) whose ``Ready`` condition is not True."""
    status = pod.get("status") or {}
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    if status.get("phase") in _FINISHED_POD_PHASES:
        return False
    return (condition_of(status, "Ready") or {}).get("status") != "True"


def _readiness_changed(pod: Mapping[str, Any]) -> datetime | None:
    ready = condition_of(pod.get("status") or {}, "Ready") or {}
    return parse_time(ready.get("lastTransitionTime"))


def _overdue(pod: Mapping[str, Any], admitted_at: datetime) -> OverduePod:
    return OverduePod(
        name=str((pod.get("metadata") or {}).get("name") or ""),
        admitted_at=admitted_at,
        pod_phase=str((pod.get("status") or {}).get("phase") or "Pending"),
        node=str((pod.get("spec") or {}).get("nodeName") or ""),
    )


def _owning_pod_uid(workload: Mapping[str, Any]) -> str:
    for owner in (workload.get("metadata") or {}).get("ownerReferences") or ():
        if owner.get("kind") == "Pod" and owner.get("uid"):
            return str(owner["uid"])
    return ""
