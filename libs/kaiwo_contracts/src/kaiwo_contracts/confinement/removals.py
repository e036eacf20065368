"""Confinement of what a plan removes: prune rules, explicit deletions and the finalizers it
releases from the objects it deletes.
"""

from __future__ import annotations

from kaiwo_contracts.confinement.kinds import NODE, Confinement, inventory_selector
from kaiwo_contracts.plans import Plan


def prune_refusals(plan: Plan, *, confinement: Confinement) -> list[str]:
    reasons = [
        f"prune of {rule.kind} of {rule.api_version}: not a kind the owner writes"
        for rule in plan.prune
        if (rule.api_version, rule.kind) not in confinement.children
        or (rule.api_version, rule.kind) == NODE
    ]
    required = inventory_selector(plan.owner)
    if plan.prune and not required.items() <= plan.prune_selector.items():
        reasons.append(
            f"prune selector {plan.prune_selector} does not ask for the owner's own {required}"
        )
    return reasons


def deletion_refusals(plan: Plan, *, confinement: Confinement) -> list[str]:
    reasons = []
    for target in plan.delete:
        what = f"deletion of {target.display()}"
        if (target.api_version, target.kind) not in confinement.children or (
            target.api_version,
            target.kind,
        ) == NODE:
            reasons.append(f"{what}: not a kind the owner writes")
        elif confinement.namespaced and target.namespace != plan.owner.namespace:
            reasons.append(f"{what}: outside the owner's namespace {plan.owner.namespace}")
        elif not target.uid:
            reasons.append(f"{what}: names no uid")
    return reasons


def release_refusals(plan: Plan, *, confinement: Confinement) -> list[str]:
    deleted = {(t.api_version, t.kind, t.namespace, t.name, t.uid) for t in plan.delete}
    reasons = []
    for release in plan.release_finalizers:
        target = release.target
        what = f"finalizers of {target.display()}"
        if (target.api_version, target.kind, target.namespace, target.name, target.uid) not in (
            deleted
        ):
            reasons.append(f"{what}: not an object the plan deletes")
        foreign = sorted(set(release.finalizers) - confinement.releasable_finalizers)
        if foreign:
            reasons.append(f"{what}: may not release {', '.join(foreign)}")
    return reasons
