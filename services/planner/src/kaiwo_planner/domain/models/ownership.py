"""Who a Model's objects belong to: the controller reference and the inventory labels the
executor prunes and the watcher selects by."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kaiwo_contracts.plans import ObjectRef

from kaiwo_planner.domain.children.labels import inventory_labels

MODEL_API_VERSION: Final = "kubeai.org/v1"
MODEL_KIND: Final = "Model"


def model_ref(*, name: str, namespace: str, uid: str) -> ObjectRef:
    """The reference to a Model (its uid None until the API server gave it one)."""
    return ObjectRef(
        api_version=MODEL_API_VERSION,
        kind=MODEL_KIND,
        name=name,
        namespace=namespace,
        uid=uid or None,
    )


def model_owner_reference(identity: ObjectRef) -> dict[str, Any]:
    """The controller reference: deleting the Model garbage-collects the object."""
    return {
        "apiVersion": MODEL_API_VERSION,
        "kind": MODEL_KIND,
        "name": identity.name,
        "uid": identity.uid or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def model_child_metadata(
    identity: ObjectRef,
    *,
    name: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``metadata`` of an object the Model owns; the inventory labels always hold."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": identity.namespace or "",
        "labels": {**(labels or {}), **inventory_labels(identity.uid or "")},
        "ownerReferences": [model_owner_reference(identity)],
    }
    if annotations:
        metadata["annotations"] = dict(annotations)
    return metadata
