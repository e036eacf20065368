"""The preemption of a GPU root: what to ask of it, and whether it still holds.

A Pod, Job, RayJob or RayCluster is preempted by deleting it; a Deployment or StatefulSet by
scaling it to zero (:func:`~kaiwo_contracts.gpu_workloads.preempt_action`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaiwo_contracts.gpu_workloads import preempt_action
from kaiwo_contracts.plans import ObjectRef, PreemptIntent


def still_holds(root: Mapping[str, Any]) -> bool:
    """The preemption is not done: a workload preempted by deletion exists (it is gone once
    done); one preempted by scaling still asks for replicas."""
    kind = (str(root.get("apiVersion")), str(root.get("kind")))
    if preempt_action(*kind) == "delete":
        return True
    return root_replicas(root) > 0


def preempt_intent(root: Mapping[str, Any]) -> PreemptIntent:
    """The preemption to ask of the executor: delete the root, or scale it to zero."""
    metadata = root.get("metadata") or {}
    api_version, kind = str(root.get("apiVersion")), str(root.get("kind"))
    action = preempt_action(api_version, kind) or "delete"
    return PreemptIntent(
        target=ObjectRef(
            api_version=api_version,
            kind=kind,
            name=str(metadata.get("name") or ""),
            namespace=str(metadata.get("namespace") or "") or None,
            uid=str(metadata.get("uid") or "") or None,
        ),
        action=action,
        from_replicas=root_replicas(root) if action == "scale-to-zero" else None,
    )


def root_replicas(root: Mapping[str, Any]) -> int:
    """The root's replicas (1 for a kind without them)."""
    value = (root.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else 1
