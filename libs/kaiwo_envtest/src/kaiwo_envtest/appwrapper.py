"""The AppWrapper controller of a control plane, with its admission webhooks reached on
loopback.

It runs from ``tools/k8s/appwrapper``'s own command: upstream's controller packages at the
pinned version, configured by flags (upstream's manager reads a ConfigMap and serves its
webhooks on port 9443 of every interface, which two stacks on one machine could not share).
Its configuration is upstream's default but for Autopilot's node monitor, which reads GPU
health labels no test node has. The webhooks are upstream's
(``config/webhook/manifests.yaml``, named as its kustomization prefixes them): the mutating one
labels an AppWrapper with its creator, and the validating one refuses an AppWrapper whose
components its creator could not create directly (a SubjectAccessReview per component) and
any change of a component once made.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from kaiwo_envtest.rotated_webhooks import RotatedWebhooks, loopback_configurations

NAMESPACE: Final = "appwrapper-system"
WEBHOOKS: Final = RotatedWebhooks(
    namespace=NAMESPACE,
    service="appwrapper-webhook-service",
    secret="appwrapper-webhook-server-cert",  # noqa: S106 - a Secret's name
    ca_name="appwrapper-ca",
    configuration_names={
        "MutatingWebhookConfiguration": "appwrapper-mutating-webhook-configuration",
        "ValidatingWebhookConfiguration": "appwrapper-validating-webhook-configuration",
    },
    file_prefix="appwrapper",
)


def appwrapper_flags(
    *, kubeconfig: Path, webhook_port: int, health_port: int, cert_dir: Path
) -> list[str]:
    return [
        f"--kubeconfig={kubeconfig}",
        f"--namespace={NAMESPACE}",
        "--webhook-host=127.0.0.1",
        f"--webhook-port={webhook_port}",
        f"--cert-dir={cert_dir}",
        f"--health-probe-bind-address=127.0.0.1:{health_port}",
    ]


def webhook_configurations(
    documents: Iterable[Mapping[str, Any]], *, base_url: str, ca: bytes
) -> list[dict[str, Any]]:
    """The AppWrapper webhooks, reached at ``base_url`` and trusting ``ca``."""
    return loopback_configurations(documents, WEBHOOKS, base_url=base_url, ca=ca)
