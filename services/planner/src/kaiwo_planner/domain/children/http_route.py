"""The HTTPRoute that exposes a KaiwoService through the Gateway its namespace names (the
AIMNamespaceConfig's ``gateway``, :mod:`kaiwo_planner.domain.settings.namespace_config`)."""

from __future__ import annotations

from typing import Any

from kaiwo_planner.domain.children.labels import inherited_labels
from kaiwo_planner.domain.children.naming import main_child_name
from kaiwo_planner.domain.children.ownership import child_metadata
from kaiwo_planner.domain.settings.namespace_config import GatewayTarget
from kaiwo_planner.domain.state.workload_identity import WorkloadIdentity

GATEWAY_GROUP = "gateway.networking.k8s.io"


def route_path_prefix(identity: WorkloadIdentity) -> str:
    return f"/{identity.namespace}/{identity.name}"


def http_route(
    identity: WorkloadIdentity,
    gateway: GatewayTarget,
    *,
    service_name: str,
    port: int,
) -> dict[str, Any]:
    """An HTTPRoute on ``gateway`` sending ``/<namespace>/<name>/...`` to the service at ``/...``.

    The Gateway must allow routes from the workload's namespace (its listeners'
    ``allowedRoutes``) when it lives in another namespace; that is the gateway owner's setting.
    """
    return {
        "apiVersion": f"{GATEWAY_GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": child_metadata(
            identity, name=main_child_name(identity.name), labels=inherited_labels({}, identity)
        ),
        "spec": {
            "parentRefs": [
                {
                    "group": GATEWAY_GROUP,
                    "kind": "Gateway",
                    "name": gateway.name,
                    "namespace": gateway.namespace,
                }
            ],
            "rules": [
                {
                    "matches": [
                        {"path": {"type": "PathPrefix", "value": route_path_prefix(identity)}}
                    ],
                    "filters": [
                        {
                            "type": "URLRewrite",
                            "urlRewrite": {
                                "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}
                            },
                        }
                    ],
                    "backendRefs": [{"name": service_name, "port": port}],
                }
            ],
        },
    }
