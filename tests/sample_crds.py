"""Custom resource definitions the Kubernetes tests install for kinds of their own."""

from __future__ import annotations

from typing import Any

OPEN_SCHEMA: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
"""A schema that takes any object and keeps every field."""

STATUS_ONLY: dict[str, Any] = {"status": {}}


def crd_for(
    group: str,
    *,
    kind: str,
    plural: str,
    versions: dict[str, dict[str, Any]],
    scope: str = "Namespaced",
    subresources: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A CRD serving ``versions`` (name -> schema); the first is the storage version. Every
    version has ``subresources`` (None: the status subresource; ``{}``: none)."""
    served = STATUS_ONLY if subresources is None else subresources
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [
                {
                    "name": name,
                    "served": True,
                    "storage": index == 0,
                    "schema": {"openAPIV3Schema": schema},
                    **({"subresources": served} if served else {}),
                }
                for index, (name, schema) in enumerate(versions.items())
            ],
        },
    }


def gadget_crd(group: str) -> dict[str, Any]:
    """A cluster-scoped kind with an open schema and no status subresource."""
    return crd_for(
        group,
        kind="Gadget",
        plural="gadgets",
        versions={"v1alpha1": OPEN_SCHEMA},
        scope="Cluster",
        subresources={},
    )
