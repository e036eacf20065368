"""Metadata every child carries: name, namespace, labels and the controller reference."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaiwo_planner.domain.children.labels import inventory_labels
from kaiwo_planner.domain.state.workload_identity import WorkloadIdentity


def owner_reference(identity: WorkloadIdentity) -> dict[str, Any]:
    """The controller reference: deleting the workload garbage-collects the child."""
    return {
        "apiVersion": identity.api_version,
        "kind": identity.kind,
        "name": identity.name,
        "uid": identity.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def child_metadata(
    identity: WorkloadIdentity,
    *,
    name: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``metadata`` of a child; the inventory labels are added last so they always hold."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": identity.namespace,
        "labels": {**labels, **inventory_labels(identity.uid)},
        "ownerReferences": [owner_reference(identity)],
    }
    if annotations:
        metadata["annotations"] = dict(annotations)
    return metadata
