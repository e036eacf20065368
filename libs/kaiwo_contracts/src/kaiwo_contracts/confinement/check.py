"""The executor's verdict on a plan: every reason it must not be carried out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaiwo_contracts.confinement.kinds import (
    CONFINEMENTS,
    DEFAULT_GPU_TAINT_KEY,
    GPU_WORKLOAD,
    NODE,
    ROLE,
    ROLE_BINDING,
    SINGLETON,
)
from kaiwo_contracts.confinement.objects import (
    node_refusals,
    object_refusals,
    role_binding_refusals,
    role_refusals,
    shared_refusals,
)
from kaiwo_contracts.confinement.owner import (
    owner_change_refusals,
    owner_refusals,
    scale_refusals,
    singleton_refusals,
)
from kaiwo_contracts.confinement.preemption import (
    PreemptionTarget,
    gpu_workload_creation_refusals,
    preempt_refusals,
)
from kaiwo_contracts.confinement.removals import deletion_refusals, prune_refusals, release_refusals
from kaiwo_contracts.plans import Plan


def refusals(
    plan: Plan,
    *,
    owner: Mapping[str, Any] | None,
    gpu_taint_key: str = DEFAULT_GPU_TAINT_KEY,
    target: PreemptionTarget | None = None,
) -> tuple[str, ...]:
    """Why ``plan`` must not be carried out (empty: it may). ``owner`` is the owner as the
    API server holds it now (None: it does not exist); ``target``, for a plan that preempts
    or creates a GpuWorkload, the workload it names (:func:`preemption_target_ref`)."""
    if plan.create_only and (plan.owner.api_version, plan.owner.kind) == GPU_WORKLOAD:
        return gpu_workload_creation_refusals(plan, target=target)
    if plan.create_only:
        return singleton_refusals(plan)
    ref = plan.owner
    confinement = CONFINEMENTS.get((ref.api_version, ref.kind))
    if confinement is None:
        return (f"a {ref.kind} owns no children",)
    found = owner_refusals(ref, owner, confinement=confinement)
    if found:
        return found
    if not confinement.namespaced and ref.name != SINGLETON and (plan.desired or plan.prune):
        # Another KaiwoQueueConfig only gets the status that says it is not acted on.
        return (f"only the {SINGLETON!r} {ref.kind} owns children",)
    reasons: list[str] = []
    for manifest in plan.desired:
        reasons += object_refusals(manifest, ref, confinement=confinement)
        kind = (manifest.get("apiVersion"), manifest.get("kind"))
        if kind == NODE:
            reasons += node_refusals(manifest, gpu_taint_key=gpu_taint_key)
        elif kind == ROLE:
            reasons += role_refusals(manifest)
        elif kind == ROLE_BINDING:
            reasons += role_binding_refusals(manifest, ref, plan=plan)
    reasons += prune_refusals(plan, confinement=confinement)
    reasons += deletion_refusals(plan, confinement=confinement)
    reasons += release_refusals(plan, confinement=confinement)
    reasons += shared_refusals(plan, confinement=confinement)
    reasons += scale_refusals(plan, confinement=confinement, owner=owner)
    reasons += preempt_refusals(plan, owner, confinement=confinement, target=target)
    reasons += owner_change_refusals(plan, confinement=confinement)
    return tuple(reasons)
