"""Confinement of the objects a plan writes: its desired children (Nodes, Roles and
RoleBindings field by field) and the shared objects it creates for others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaiwo_contracts.confinement.kinds import (
    GPU_TAINT_EFFECT,
    GPU_TAINT_RECORD_ANNOTATION,
    KAIWO_NODE_LABEL_PREFIX,
    LOCAL_QUEUE,
    MANAGED_BY_LABEL,
    NODE,
    ROLE,
    ROLE_VERBS,
    Confinement,
    Kind,
)
from kaiwo_contracts.plans import ObjectRef, Plan


def object_refusals(
    manifest: Mapping[str, Any], owner: ObjectRef, *, confinement: Confinement
) -> list[str]:
    kind: Kind = (str(manifest.get("apiVersion", "")), str(manifest.get("kind", "")))
    metadata = manifest.get("metadata") or {}
    what = f"{kind[1]} {metadata.get('namespace', '')}/{metadata.get('name', '')}".replace(
        " /", " "
    )
    if kind not in confinement.children:
        return [f"{what}: a {owner.kind} may not write a {kind[1]} of {kind[0]}"]
    if confinement.namespaced and metadata.get("namespace") != owner.namespace:
        return [f"{what}: outside the owner's namespace {owner.namespace}"]
    if kind == NODE:
        return []  # a node intent names no owner: it is checked field by field
    if not confinement.namespaced and kind != LOCAL_QUEUE and metadata.get("namespace"):
        return [f"{what}: a cluster-scoped kind with a namespace"]
    if not _controlled_by(metadata, owner):
        return [f"{what}: does not name {owner.display()} as its controller"]
    return []


def is_owners(
    metadata: Mapping[str, Any], *, selector: Mapping[str, str], owner_uid: str | None
) -> bool:
    """Whether an object found by name or by a prune's list is the owner's child: it carries
    the owner's inventory labels (``selector``) and names the owner (``owner_uid``) as its
    controller. The executor asks it before it deletes or prunes, and the planner's resync
    (decision 0250) asks it to tell what the executor would still delete."""
    labels = metadata.get("labels") or {}
    if not selector or any(labels.get(key) != value for key, value in selector.items()):
        return False
    return not owner_uid or any(
        isinstance(reference, Mapping)
        and reference.get("controller") is True
        and reference.get("uid") == owner_uid
        for reference in metadata.get("ownerReferences") or ()
    )


def _controlled_by(metadata: Mapping[str, Any], owner: ObjectRef) -> bool:
    return any(
        isinstance(reference, Mapping)
        and reference.get("uid") == owner.uid
        and reference.get("kind") == owner.kind
        and reference.get("controller") is True
        for reference in metadata.get("ownerReferences") or ()
    )


def node_refusals(manifest: Mapping[str, Any], *, gpu_taint_key: str) -> list[str]:
    """Why a Node intent must not be merged: it may carry only Kaiwo's labels, Kaiwo's GPU
    taint of the key in force and, with that taint, the record of its key (the executor moves
    the operator's taint from the key a node's record names to this one, decision 0145)."""
    metadata = manifest.get("metadata") or {}
    name = metadata.get("name", "")
    reasons = []
    extra_top = set(manifest) - {"apiVersion", "kind", "metadata", "spec"}
    extra_meta = set(metadata) - {"name", "labels", "annotations"}
    extra_spec = set(manifest.get("spec") or {}) - {"taints"}
    if extra_top or extra_meta or extra_spec:
        fields = sorted(
            extra_top | {f"metadata.{f}" for f in extra_meta} | {f"spec.{f}" for f in extra_spec}
        )
        reasons.append(
            f"Node {name}: may set only Kaiwo's labels and taint, not {', '.join(fields)}"
        )
    foreign = sorted(
        k for k in metadata.get("labels") or {} if not k.startswith(KAIWO_NODE_LABEL_PREFIX)
    )
    if foreign:
        reasons.append(f"Node {name}: labels that are not Kaiwo's: {', '.join(foreign)}")
    ours = (gpu_taint_key, GPU_TAINT_EFFECT)
    taints = (manifest.get("spec") or {}).get("taints") or ()
    reasons.extend(
        f"Node {name}: a taint that is not Kaiwo's {gpu_taint_key}:NoSchedule"
        for taint in taints
        if not isinstance(taint, Mapping) or (taint.get("key"), taint.get("effect")) != ours
    )
    return reasons + _taint_record_refusals(name, metadata, taints, gpu_taint_key=gpu_taint_key)


def _taint_record_refusals(
    name: str, metadata: Mapping[str, Any], taints: Any, *, gpu_taint_key: str
) -> list[str]:
    annotations = metadata.get("annotations") or {}
    foreign = sorted(k for k in annotations if k != GPU_TAINT_RECORD_ANNOTATION)
    reasons = []
    if foreign:
        reasons.append(f"Node {name}: annotations that are not Kaiwo's: {', '.join(foreign)}")
    if GPU_TAINT_RECORD_ANNOTATION not in annotations:
        return reasons
    recorded = annotations[GPU_TAINT_RECORD_ANNOTATION]
    if recorded != gpu_taint_key:
        reasons.append(
            f"Node {name}: records the GPU taint key {recorded!r}, not the one in force "
            f"{gpu_taint_key!r}"
        )
    elif not taints:
        # A record without the taint would only move the operator's taint away: removing it
        # when the setting goes off stays upstream's "never" (decision 0132).
        reasons.append(f"Node {name}: records Kaiwo's GPU taint without carrying it")
    return reasons


def _what(manifest: Mapping[str, Any]) -> str:
    metadata = manifest.get("metadata") or {}
    return f"{manifest.get('kind', '')} {metadata.get('namespace', '')}/{metadata.get('name', '')}"


def shared_refusals(plan: Plan, *, confinement: Confinement) -> list[str]:
    reasons = []
    for manifest in plan.shared:
        kind: Kind = (str(manifest.get("apiVersion", "")), str(manifest.get("kind", "")))
        metadata = manifest.get("metadata") or {}
        what = f"shared {_what(manifest)}"
        if kind not in confinement.shared:
            reasons.append(f"{what}: a {plan.owner.kind} may not share a {kind[1]}")
        elif metadata.get("namespace") != plan.owner.namespace:
            reasons.append(f"{what}: outside the owner's namespace {plan.owner.namespace}")
        elif metadata.get("ownerReferences"):
            reasons.append(f"{what}: a shared object has no owner")
        elif (metadata.get("labels") or {}).get(MANAGED_BY_LABEL) != "kaiwo":
            reasons.append(f"{what}: not labelled {MANAGED_BY_LABEL}=kaiwo")
    return reasons


def role_refusals(manifest: Mapping[str, Any]) -> list[str]:
    rules = manifest.get("rules") or ()
    allowed = all(
        isinstance(rule, Mapping)
        and list(rule.get("apiGroups") or ()) == [""]
        and list(rule.get("resources") or ()) == ["pods"]
        and set(rule.get("verbs") or ()) <= ROLE_VERBS
        and bool(rule.get("resourceNames"))
        and set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"}
        for rule in rules
    )
    if allowed and rules:
        return []
    return [f"{_what(manifest)}: may only grant get and patch of named Pods"]


def role_binding_refusals(
    manifest: Mapping[str, Any], owner: ObjectRef, *, plan: Plan
) -> list[str]:
    roles = {
        (m.get("metadata") or {}).get("name")
        for m in plan.desired
        if (m.get("apiVersion"), m.get("kind")) == ROLE
    }
    role_ref = manifest.get("roleRef") or {}
    subjects = manifest.get("subjects") or ()
    own_role = (
        role_ref.get("apiGroup") == "rbac.authorization.k8s.io"
        and role_ref.get("kind") == "Role"
        and role_ref.get("name") in roles
    )
    local_accounts = all(
        isinstance(subject, Mapping)
        and subject.get("kind") == "ServiceAccount"
        and subject.get("namespace") == owner.namespace
        for subject in subjects
    )
    if own_role and local_accounts and subjects:
        return []
    return [
        f"{_what(manifest)}: may only bind a Role of the same plan to service accounts of "
        f"{owner.namespace}"
    ]
