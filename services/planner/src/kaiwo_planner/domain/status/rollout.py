"""A serving Deployment's rollout that waits for Kueue's quota (decision 0168).

In a namespace Kueue manages, each pod of a Deployment is admitted on its own. A rolling
update keeps the old pods until their successors are available, so when the queue's quota is
held by the old pods themselves, the new pods wait, gated, and the rollout passes its
``progressDeadlineSeconds``: the Deployment controller says ``ProgressDeadlineExceeded``
(and goes on rolling once the pods are admitted). The old pods serve all along; that is not
a failure of the workload, it is a rollout waiting for quota, and it is told as such. A
rollout stuck for any other reason (a container that cannot start or keeps crashing, a pod
no node fits) is still an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from kaiwo_contracts.plans import EventIntent

from kaiwo_planner.domain.state.first_few import first_few
from kaiwo_planner.domain.status.child_health import pod_trouble, unschedulable
from kaiwo_planner.domain.status.child_phase import (
    ObservedChildren,
    deployment_replicas,
    past_progress_deadline,
)
from kaiwo_planner.domain.status.conditions import (
    ConditionSpec,
    condition_of,
    observed_condition,
)
from kaiwo_planner.domain.status.kueue_admission import (
    ADMITTED,
    kueue_admitted,
    kueue_waiting_reason,
)

ROLLOUT_WAITING_FOR_QUOTA: Final = "RolloutWaitingForQuota"
"""The ``Admitted`` reason (and Event reason) of a Deployment whose rollout waits for quota."""

_SHOWN: Final = 2
"""Waiting pods named in a message; the rest are counted."""


def rollout_waiting_for_quota(observed: ObservedChildren) -> tuple[str, ...]:
    """The pods a Deployment past its progress deadline waits on, when all it waits on is
    Kueue's admission of them: some of its pods are admitted and the others' Workloads are
    not, no live pod has a container in trouble (``child_health.CONTAINER_TROUBLES``) and no
    admitted pod is refused by the scheduler. Empty otherwise: the deadline then means what
    it says."""
    child = observed.child
    if observed.child_kind != "Deployment" or child is None or not past_progress_deadline(child):
        return ()
    waiting = [w for w in observed.kueue_workloads if not kueue_admitted(w.get("status") or {})]
    if not waiting or len(waiting) == len(observed.kueue_workloads):
        return ()
    if any(pod_trouble(pod) is not None or unschedulable(pod) for pod in observed.pods):
        return ()
    return tuple(sorted(_pod_name(w) for w in waiting))


def rollout_waiting_condition(
    pods: Sequence[str], observed: ObservedChildren, cluster_queue: str
) -> ConditionSpec:
    """``Admitted`` True, reason ``RolloutWaitingForQuota``: which pods wait, for which
    queue, Kueue's words, and how many replicas serve meanwhile."""
    child = observed.child or {}
    name = str((child.get("metadata") or {}).get("name") or "")
    available, wanted = deployment_replicas(child)
    why = kueue_waiting_reason(observed.kueue_workloads)
    limit = (child.get("spec") or {}).get("progressDeadlineSeconds")
    deadline = f" of {limit}" if isinstance(limit, int) else ""
    return ConditionSpec(
        ADMITTED,
        "True",
        ROLLOUT_WAITING_FOR_QUOTA,
        f"The rollout of Deployment {name} waits for quota: pod"
        f"{'s' if len(pods) > 1 else ''} {first_few(list(pods), shown=_SHOWN)} pending "
        f"admission into '{cluster_queue}'" + (f": {why}" if why else "") + f"; {available} of "
        f"{wanted} replicas are available and serve meanwhile (the Deployment keeps its old "
        "pods until their successors are available; it passed its progressDeadlineSeconds"
        f"{deadline} and goes on once Kueue admits the new pods)",
    )


def rollout_events(
    previous: Mapping[str, Any], conditions: Sequence[ConditionSpec]
) -> tuple[EventIntent, ...]:
    """A Normal ``RolloutWaitingForQuota`` Event with the condition's message when a
    rollout's wait for quota is first seen; none while it lasts."""
    now = observed_condition(conditions, ADMITTED)
    if now is None or now.reason != ROLLOUT_WAITING_FOR_QUOTA:
        return ()
    before = condition_of(previous, ADMITTED)
    if before is not None and before.get("reason") == ROLLOUT_WAITING_FOR_QUOTA:
        return ()
    return (EventIntent(type="Normal", reason=ROLLOUT_WAITING_FOR_QUOTA, message=now.message),)


def _pod_name(workload: Mapping[str, Any]) -> str:
    """The pod a pod Workload is Kueue's for (its owner), else the Workload's own name."""
    meta = workload.get("metadata") or {}
    for owner in meta.get("ownerReferences") or ():
        if owner.get("kind") == "Pod" and owner.get("name"):
            return str(owner["name"])
    return str(meta.get("name") or "")
