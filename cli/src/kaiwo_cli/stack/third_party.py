"""Minimal CRDs for the third-party kinds the operator drives, for a *fake* cluster only.

A real cluster gets Kueue, KubeRay, AppWrapper and the Gateway API from those projects (see
docs/operations.md). The fake API server serves a custom kind only once its CRD exists, so
``kaiwo up --fake`` registers these open-schema stand-ins; the operator never validates
third-party objects itself.
"""

from __future__ import annotations

from typing import Any

from kaiwo_kube import resources
from kaiwo_kube.resources import ResourceType

DRIVEN_KINDS: tuple[ResourceType, ...] = (
    resources.RAY_JOB,
    resources.RAY_SERVICE,
    resources.APP_WRAPPER,
    resources.HTTP_ROUTE,
    resources.KUEUE_RESOURCE_FLAVOR,
    resources.KUEUE_CLUSTER_QUEUE,
    resources.KUEUE_LOCAL_QUEUE,
    resources.KUEUE_WORKLOAD_PRIORITY_CLASS,
    resources.KUEUE_WORKLOAD,
    resources.KUEUE_TOPOLOGY,
)


def open_schema_crd(resource: ResourceType) -> dict[str, Any]:
    """A CRD serving ``resource`` with a status subresource and an open schema. A group under
    ``k8s.io`` (Gateway API) carries the API-approval annotation a real API server requires,
    saying it is not the approved definition."""
    metadata: dict[str, Any] = {"name": f"{resource.plural}.{resource.group}"}
    if resource.group.endswith((".k8s.io", ".kubernetes.io")):
        metadata["annotations"] = {
            "api-approved.kubernetes.io": "unapproved, a stand-in for local sandboxes"
        }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": {
            "group": resource.group,
            "scope": "Namespaced" if resource.namespaced else "Cluster",
            "names": {
                "plural": resource.plural,
                "singular": resource.kind.lower(),
                "kind": resource.kind,
                "listKind": f"{resource.kind}List",
            },
            "versions": [
                {
                    "name": resource.version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


def driven_kind_crds() -> list[dict[str, Any]]:
    return [open_schema_crd(resource) for resource in DRIVEN_KINDS]
