"""Admission webhooks of a controller run as a local process, whose certificate rotator
(open-policy-agent's cert-controller, which Kueue and the AppWrapper controller both embed) is
handed certificates rather than left to make its own.

The rotator keeps a Secret's certificates when its CA verifies for the CA name it expects and
its serving certificate for the webhook Service's DNS name, and neither expires within 90 days;
it then injects that CA into the webhook configurations it is told the names of. A local
process cannot be reached at a Service, so the certificates made here also name ``127.0.0.1``
and each webhook's ``clientConfig`` is rewritten to a loopback URL carrying the CA.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kaiwo_envtest.pki import Credentials, certificate_authority, serving_credentials

CERTIFICATE_DAYS: Final = 3650
"""Longer than the rotator's look-ahead (90 days), so it keeps what it is given."""
CONFIGURATION_KINDS: Final = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


@dataclass(frozen=True, slots=True)
class RotatedWebhooks:
    """What one controller's rotator checks, as its own deployment names it."""

    namespace: str
    service: str
    secret: str
    ca_name: str
    configuration_names: Mapping[str, str]
    """Per kind of :data:`CONFIGURATION_KINDS`, the name the rotator injects its CA into."""
    file_prefix: str
    """Names the certificate files, so two controllers' can share a directory."""

    @property
    def dns_name(self) -> str:
        return f"{self.service}.{self.namespace}.svc"


@dataclass(frozen=True, slots=True)
class WebhookCertificates:
    ca: Credentials
    serving: Credentials

    def secret(self, webhooks: RotatedWebhooks) -> dict[str, Any]:
        """The Secret the rotator reads (``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``)."""
        files = {
            "ca.crt": self.ca.certificate,
            "ca.key": self.ca.key,
            "tls.crt": self.serving.certificate,
            "tls.key": self.serving.key,
        }
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": webhooks.secret, "namespace": webhooks.namespace},
            "type": "Opaque",
            "data": {key: base64_text(path.read_bytes()) for key, path in files.items()},
        }

    def install_into(self, directory: Path) -> Path:
        """``tls.crt`` and ``tls.key`` where the webhook server reads them."""
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "tls.crt").write_bytes(self.serving.certificate.read_bytes())
        (directory / "tls.key").write_bytes(self.serving.key.read_bytes())
        return directory


def webhook_certificates(directory: Path, webhooks: RotatedWebhooks) -> WebhookCertificates:
    """New certificates for ``webhooks``, or those an earlier call left in ``directory``."""
    prefix = webhooks.file_prefix
    ca = Credentials(directory / f"{prefix}-ca.crt", directory / f"{prefix}-ca.key")
    serving = Credentials(directory / f"{prefix}-webhook.crt", directory / f"{prefix}-webhook.key")
    if serving.certificate.exists():
        return WebhookCertificates(ca=ca, serving=serving)
    ca = certificate_authority(
        directory,
        f"{prefix}-ca",
        common_name=webhooks.ca_name,
        dns_names=(webhooks.ca_name,),
        days=CERTIFICATE_DAYS,
        rsa=True,  # the rotator parses its CA's key as PKCS#1 RSA
    )
    serving = serving_credentials(
        directory,
        ca,
        name=f"{prefix}-webhook",
        dns_names=(webhooks.dns_name,),
        ip_addresses=("127.0.0.1",),
        days=CERTIFICATE_DAYS,
    )
    return WebhookCertificates(ca=ca, serving=serving)


Adjust = Callable[[dict[str, Any]], None]


def loopback_configurations(
    documents: Iterable[Mapping[str, Any]],
    webhooks: RotatedWebhooks,
    *,
    base_url: str,
    ca: bytes,
    adjust: Adjust = lambda _webhook: None,
) -> list[dict[str, Any]]:
    """The mutating and validating configurations among ``documents``, named as the rotator
    expects, each webhook reached at ``base_url`` + its Service path and trusting ``ca``, then
    passed to ``adjust`` (which may change it in place)."""
    found = []
    for document in documents:
        kind = document.get("kind")
        if kind not in CONFIGURATION_KINDS:
            continue
        configuration = copy.deepcopy(dict(document))
        configuration["metadata"] = {"name": webhooks.configuration_names[str(kind)]}
        for webhook in configuration.get("webhooks") or []:
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": base_url + path, "caBundle": base64_text(ca)}
            adjust(webhook)
        found.append(configuration)
    if len(found) != len(CONFIGURATION_KINDS):
        raise ValueError(
            f"the {webhooks.file_prefix} webhook manifests lack a mutating or validating "
            "configuration"
        )
    return found


def base64_text(data: bytes) -> str:
    return base64.b64encode(data).decode()
