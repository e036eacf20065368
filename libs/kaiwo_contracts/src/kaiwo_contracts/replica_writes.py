"""Whether a write of replicas (a Model's scale, ``Plan.scale``; a GPU workload scaled to zero,
``Plan.preempt``) is still to be made on an object as it is now.

The executor asks it of the object it has just read before it patches (decision 0172), and
the planner's resync asks it of the object as observed to tell a scale or a preemption the
executor gave up on (decision 0263): one judgement, so the resync publishes again only what
the executor would still write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from kaiwo_contracts.plans import PreemptIntent, ScaleIntent

ReplicasVerdict = Literal["done", "moved", "stale", "to-write"]
"""``done``: the object shows the replicas wanted; ``moved``: its replicas are no longer those
the decision started from (someone scaled it since; the next decision starts from theirs);
``stale``: a scale's owner is no longer the generation the plan was made from; ``to-write``:
none of these, the write is to be made."""


def replicas_verdict(
    live: Mapping[str, Any],
    intent: ScaleIntent,
    *,
    preemption: bool,
    planned_generation: int | None,
) -> ReplicasVerdict:
    """What ``intent`` asks of ``live`` (the object of the intent's uid): see
    :data:`ReplicasVerdict`. ``preemption``: a GPU workload's replicas set to zero (its
    generation is not the plan's, which is the GpuWorkload's)."""
    current = (live.get("spec") or {}).get("replicas")
    fills_unset = writes_unset_replicas(intent, preemption=preemption)
    if (current if fills_unset else (current or 0)) == intent.replicas:
        return "done"
    if (current or 0) != intent.from_replicas:
        return "moved"
    if not preemption and spec_moved(live, planned_generation):
        return "stale"
    return "to-write"


def to_zero(intent: PreemptIntent) -> ScaleIntent:
    """The replicas a ``scale-to-zero`` preemption writes: 0, from those it was decided on."""
    return ScaleIntent(target=intent.target, replicas=0, from_replicas=intent.from_replicas or 0)


def writes_unset_replicas(intent: ScaleIntent, *, preemption: bool) -> bool:
    """Whether a scale only writes down replicas the object leaves unset: a Model's
    ``spec.replicas`` absent, which its bounds read as ``minReplicas``, 0 here (the planner's
    ``replica_bounds_intent`` says so with ``from_replicas == replicas``, decision 0223).
    Elsewhere an absent field counts as 0, so such a scale would find the Model "already
    there" and its scale subresource would keep answering 500. It writes the field only while
    it is absent: a number anyone set since stands (a preemption's own 0-from-0 is not one)."""
    return not preemption and intent.from_replicas == intent.replicas


def spec_moved(live: Mapping[str, Any], planned_generation: int | None) -> bool:
    """Whether ``live``'s spec is no longer the generation the plan (and the autoscaler's
    decision it carries) was made from: the user set ``autoscalingDisabled``, edited the
    bounds or scaled it by hand since. Such a scale is left to the next decision."""
    if planned_generation is None:
        return False
    return (live.get("metadata") or {}).get("generation") != planned_generation
