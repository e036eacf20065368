"""Confinement of the plans that preempt a workload or create the GpuWorkload that tracks one:
only the workload the GpuWorkload names, in the way its kind is preempted, and only when it
or its Namespace opted in as the API server holds them now (decision 0047).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kaiwo_contracts.confinement.kinds import GPU_WORKLOAD, Confinement
from kaiwo_contracts.gpu_preemption import opted_in
from kaiwo_contracts.gpu_workloads import gpu_workload_name, preempt_action
from kaiwo_contracts.plans import ObjectRef, Plan


@dataclass(frozen=True, slots=True)
class PreemptionTarget:
    """The workload a GpuWorkload names and its Namespace, as the API server holds them now
    (None: not found)."""

    workload: Mapping[str, Any] | None
    namespace: Mapping[str, Any] | None


def preemption_target_ref(plan: Plan) -> ObjectRef | None:
    """The workload whose live state admission needs for ``plan``: the one it preempts, or
    the one a GpuWorkload it creates names; None for every other plan."""
    if plan.preempt is not None:
        return plan.preempt.target
    if plan.create_only and (plan.owner.api_version, plan.owner.kind) == GPU_WORKLOAD:
        for manifest in plan.desired:
            reference = ((manifest.get("spec") or {}).get("workloadRef")) or {}
            if isinstance(reference, Mapping):
                return ObjectRef(
                    api_version=str(reference.get("apiVersion") or ""),
                    kind=str(reference.get("kind") or ""),
                    name=str(reference.get("name") or ""),
                    namespace=(manifest.get("metadata") or {}).get("namespace"),
                    uid=str(reference.get("uid") or "") or None,
                )
    return None


def preempt_refusals(
    plan: Plan,
    owner: Mapping[str, Any] | None,
    *,
    confinement: Confinement,
    target: PreemptionTarget | None,
) -> list[str]:
    intent = plan.preempt
    if intent is None:
        return []
    if not confinement.preempts:
        return [f"a {plan.owner.kind} may not preempt anything"]
    wanted = intent.target
    what = f"preemption of {wanted.display()}"
    named = ((owner or {}).get("spec") or {}).get("workloadRef") or {}
    if (named.get("apiVersion"), named.get("kind"), named.get("name"), named.get("uid")) != (
        wanted.api_version,
        wanted.kind,
        wanted.name,
        wanted.uid,
    ) or wanted.namespace != plan.owner.namespace:
        return [f"{what}: not the workload {plan.owner.display()} names"]
    if preempt_action(wanted.api_version, wanted.kind) != intent.action:
        return [f"{what}: a {wanted.kind} is not preempted by {intent.action}"]
    return _opt_in_refusals(what, wanted, target)


def _opt_in_refusals(what: str, wanted: ObjectRef, target: PreemptionTarget | None) -> list[str]:
    live = target.workload if target is not None else None
    if live is None or (live.get("metadata") or {}).get("uid") != wanted.uid:
        return [f"{what}: the workload does not exist with uid {wanted.uid}"]
    namespace = target.namespace if target is not None else None
    if not opted_in(
        workload_annotations=_annotations_of(live),
        namespace_annotations=_annotations_of(namespace or {}),
    ):
        return [f"{what}: neither the workload nor its namespace opted in to GPU idle preemption"]
    return []


def _annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    found = (obj.get("metadata") or {}).get("annotations") or {}
    return (
        {str(key): str(value) for key, value in found.items()} if isinstance(found, Mapping) else {}
    )


def gpu_workload_creation_refusals(
    plan: Plan, *, target: PreemptionTarget | None
) -> tuple[str, ...]:
    ref = plan.owner
    extra = (
        plan.prune
        or plan.delete
        or plan.shared
        or plan.finalizers is not None
        or plan.scale is not None
        or plan.owner_labels is not None
        or plan.preempt is not None
        or plan.delete_owner
        or plan.status is not None
    )
    identities = [
        (
            m.get("apiVersion"),
            m.get("kind"),
            (m.get("metadata") or {}).get("namespace"),
            (m.get("metadata") or {}).get("name"),
        )
        for m in plan.desired
    ]
    if extra or identities != [(ref.api_version, ref.kind, ref.namespace, ref.name)]:
        return (f"a plan creating {ref.display()} may create that object and nothing else",)
    wanted = preemption_target_ref(plan)
    if wanted is None or not wanted.uid or preempt_action(wanted.api_version, wanted.kind) is None:
        return (f"{ref.display()} names no workload of a kind GPU idle preemption tracks",)
    expected = gpu_workload_name(kind=wanted.kind, name=wanted.name, uid=wanted.uid)
    if ref.name != expected or not ref.namespace:
        return (f"{ref.display()} must be named {expected} in its workload's namespace",)
    return tuple(_opt_in_refusals(f"tracking of {wanted.display()}", wanted, target))
