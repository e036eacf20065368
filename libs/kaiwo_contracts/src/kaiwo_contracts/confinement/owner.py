"""Confinement of what a plan does to its owner: that it exists with the plan's uid, the
finalizers, labels and scale it sets, its deletion, and the creation of a cluster singleton.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaiwo_contracts.confinement.kinds import SINGLETON, SINGLETON_KINDS, Confinement
from kaiwo_contracts.plans import ObjectRef, Plan, ScaleIntent


def owner_change_refusals(plan: Plan, *, confinement: Confinement) -> list[str]:
    """What a plan changes of its owner itself: its status, finalizers, labels, its
    deletion."""
    kind = plan.owner.kind
    reasons = []
    if plan.status is not None and not confinement.has_status:
        reasons.append(f"a {kind} has no status a plan may write")
    if plan.finalizers is not None:
        foreign = sorted(set(plan.finalizers) - confinement.finalizers)
        if foreign:
            reasons.append(f"finalizers a {kind} may not set: {', '.join(foreign)}")
    foreign_labels = sorted(k for k in plan.owner_labels or {} if not confinement.owns_label(k))
    if foreign_labels:
        reasons.append(f"labels a {kind} may not set: {', '.join(foreign_labels)}")
    if plan.delete_owner and not confinement.may_delete_itself:
        reasons.append(f"a {kind} may not be deleted by a plan")
    return reasons


def singleton_refusals(plan: Plan) -> tuple[str, ...]:
    ref = plan.owner
    manifests = [
        (m.get("apiVersion"), m.get("kind"), (m.get("metadata") or {}).get("name"))
        for m in plan.desired
    ]
    wanted = [(ref.api_version, ref.kind, ref.name)]
    if (ref.api_version, ref.kind) not in SINGLETON_KINDS or ref.name != SINGLETON:
        return (f"only the {SINGLETON!r} KaiwoConfig and KaiwoQueueConfig are created by a plan",)
    extra = (
        plan.prune
        or plan.delete
        or plan.shared
        or plan.finalizers is not None
        or plan.scale is not None
        or plan.owner_labels is not None
        or plan.release_finalizers
    )
    if manifests != wanted or extra or plan.delete_owner or plan.status is not None:
        return (f"a plan creating {ref.display()} may create that object and nothing else",)
    return ()


def owner_refusals(
    ref: ObjectRef, owner: Mapping[str, Any] | None, *, confinement: Confinement
) -> tuple[str, ...]:
    if owner is None:
        return (f"the owner {ref.display()} does not exist",)
    uid = (owner.get("metadata") or {}).get("uid")
    if not ref.uid or uid != ref.uid:
        return (f"the owner {ref.display()} has uid {uid}, not the plan's {ref.uid}",)
    if confinement.namespaced != bool(ref.namespace):
        return (f"the owner {ref.display()} is in the wrong scope",)
    return ()


def scale_refusals(
    plan: Plan, *, confinement: Confinement, owner: Mapping[str, Any] | None
) -> list[str]:
    if plan.scale is None:
        return []
    wrong_target = _scale_target_refusals(plan, plan.scale, confinement=confinement)
    if wrong_target:
        return wrong_target
    live = (owner or {}).get("spec")
    live = live if isinstance(live, Mapping) else {}
    if live.get("autoscalingDisabled") is True:
        return [f"a {plan.owner.kind} with autoscalingDisabled is scaled by its users only"]
    maximum = live.get("maxReplicas")
    if isinstance(maximum, int) and plan.scale.replicas > maximum:
        return [f"scale to {plan.scale.replicas} replicas: above the owner's maxReplicas {maximum}"]
    return []


def _scale_target_refusals(
    plan: Plan, scale: ScaleIntent, *, confinement: Confinement
) -> list[str]:
    owner, target = plan.owner, scale.target
    if not confinement.scalable:
        return [f"a {owner.kind} may not be scaled by a plan"]
    same = (target.api_version, target.kind, target.namespace, target.name, target.uid) == (
        owner.api_version,
        owner.kind,
        owner.namespace,
        owner.name,
        owner.uid,
    )
    if not same:
        return [f"scale of {target.display()}: a plan scales only its owner {owner.display()}"]
    return []
