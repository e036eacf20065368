"""The Kueue manager of a control plane: its configuration, its webhooks reached on loopback,
and the certificates they are served with.

Kueue is installed from its own module's files at the pinned version (the stack's
``manifests``): its CRDs, and its webhook configurations
(``config/components/webhook/manifests.yaml``). For a local process these change where the API
server finds the webhooks: each ``clientConfig`` names ``https://127.0.0.1:<port><path>`` and
carries the CA of the certificate Kueue serves (the in-cluster Service cannot be reached
here), and Kueue's CRDs that convert between ``v1beta1`` and ``v1beta2`` do so through the
same server's ``/convert`` (the CRDs upstream's kustomization patches for it).

Certificates: Kueue v0.17 started with internal certificate management off reads its metrics
certificate from the fixed path ``/etc/kueue/metrics/certs``, which a process run by a user
cannot provide. So its internal management stays on, and is handed certificates this module
makes (:func:`webhook_certificates`): a CA named as Kueue's rotator expects (``kueue-ca``) and
a serving certificate for both the Service name the rotator checks and ``127.0.0.1``, valid
long enough that the rotator keeps them rather than making its own. They are in the Secret it
reads and in its certificate directory, where a pod would have them mounted.

Configured as upstream Kaiwo configures Kueue (for Kueue v0.12): the integrations the
operator's children need (``batch/job``, ``ray.io/rayjob``, ``ray.io/raycluster``,
``workload.codeflare.dev/appwrapper``, ``pod``, ``deployment``, ``statefulset``; upstream's
Kubeflow and JobSet integrations are left out, as their CRDs are not installed), pods managed
only in namespaces labelled ``kueue-managed: "true"``, and, as in v0.12, that selector
applying to pod-based integrations only (``ManagedJobsNamespaceSelectorAlwaysRespected=false``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kaiwo_envtest import rotated_webhooks
from kaiwo_envtest.crds import is_kueue, load_crds, with_conversion_webhook
from kaiwo_envtest.rotated_webhooks import (
    RotatedWebhooks,
    WebhookCertificates,
    loopback_configurations,
)

NAMESPACE: Final = "kueue-system"
WEBHOOK_SERVICE: Final = "kueue-webhook-service"
WEBHOOK_SECRET: Final = "kueue-webhook-server-cert"  # noqa: S105 - a Secret's name
CA_NAME: Final = "kueue-ca"
"""The name Kueue's certificate rotator verifies its CA's certificate for."""
CONFIGURATION_NAMES: Final = {
    "MutatingWebhookConfiguration": "kueue-mutating-webhook-configuration",
    "ValidatingWebhookConfiguration": "kueue-validating-webhook-configuration",
}
"""As Kueue's kustomization names them: the rotator injects its CA into these names."""
CONVERTED_KINDS: Final = frozenset(
    {"localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters"}
)
"""The Kueue CRDs whose versions a webhook converts (upstream's ``webhook_in_*`` patches)."""
POD_BASED_WEBHOOKS: Final = frozenset(
    {
        "mpod.kb.io",
        "vpod.kb.io",
        "mdeployment.kb.io",
        "vdeployment.kb.io",
        "mstatefulset.kb.io",
        "vstatefulset.kb.io",
    }
)
SYSTEM_NAMESPACES: Final = ("kube-system", NAMESPACE)
"""Namespaces the pod-based webhooks never see (as Kueue's kustomization sets it)."""
FRAMEWORKS: Final = (
    "batch/job",
    "ray.io/rayjob",
    "ray.io/raycluster",
    "workload.codeflare.dev/appwrapper",
    "pod",
    "deployment",
    "statefulset",
)
MANAGED_NAMESPACE_LABEL: Final = "kueue-managed"


@dataclass(frozen=True, slots=True)
class KueueOptions:
    frameworks: tuple[str, ...] = FRAMEWORKS
    managed_namespace_labels: Mapping[str, str] = field(
        default_factory=lambda: {MANAGED_NAMESPACE_LABEL: "true"}
    )
    """Pods (and Deployments, StatefulSets) are managed only in namespaces with these labels."""
    feature_gates: Mapping[str, bool] = field(
        default_factory=lambda: {
            "ManagedJobsNamespaceSelectorAlwaysRespected": False,
            # An aggregated API server with certificates of its own under /visibility; the
            # operator does not use it.
            "VisibilityOnDemand": False,
        }
    )


WEBHOOKS: Final = RotatedWebhooks(
    namespace=NAMESPACE,
    service=WEBHOOK_SERVICE,
    secret=WEBHOOK_SECRET,
    ca_name=CA_NAME,
    configuration_names=CONFIGURATION_NAMES,
    file_prefix="kueue",
)


def webhook_certificates(directory: Path) -> WebhookCertificates:
    return rotated_webhooks.webhook_certificates(directory, WEBHOOKS)


def kueue_configuration(
    options: KueueOptions, *, webhook_port: int, health_port: int, cert_dir: Path
) -> dict[str, Any]:
    """Kueue's ``Configuration`` for a local process (see the module's docstring)."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": WEBHOOK_SERVICE,
            "webhookSecretName": WEBHOOK_SECRET,
        },
        "manageJobsWithoutQueueName": False,
        "managedJobsNamespaceSelector": {"matchLabels": dict(options.managed_namespace_labels)},
        "integrations": {"frameworks": list(options.frameworks)},
        "featureGates": dict(options.feature_gates),
    }


def webhook_configurations(
    documents: Iterable[Mapping[str, Any]], *, base_url: str, ca: bytes
) -> list[dict[str, Any]]:
    """Kueue's webhook configurations, named as its rotator expects, each webhook reached at
    ``base_url`` + its Service path and trusting ``ca``; the pod-based ones skip
    :data:`SYSTEM_NAMESPACES`."""
    return loopback_configurations(
        documents, WEBHOOKS, base_url=base_url, ca=ca, adjust=_skip_system_namespaces
    )


def _skip_system_namespaces(webhook: dict[str, Any]) -> None:
    if webhook["name"] in POD_BASED_WEBHOOKS:
        webhook["namespaceSelector"] = {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": list(SYSTEM_NAMESPACES),
                }
            ]
        }


def converted_crds(crds: Sequence[dict[str, Any]], *, url: str, ca: bytes) -> list[dict[str, Any]]:
    """``crds`` with Kueue's multi-version ones converting through ``url``; others as given."""
    return [
        with_conversion_webhook(crd, url=url, ca=ca)
        if is_kueue(crd) and crd["spec"]["names"]["plural"] in CONVERTED_KINDS
        else crd
        for crd in crds
    ]


def stack_crds(manifests: Path) -> list[dict[str, Any]]:
    return load_crds(manifests / "crds")


def kueue_flags(*, configuration: Path, kubeconfig: Path) -> list[str]:
    return [f"--config={configuration}", f"--kubeconfig={kubeconfig}", "--zap-log-level=info"]
