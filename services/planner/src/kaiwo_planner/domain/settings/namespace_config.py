"""What an AIMNamespaceConfig changes for the Kaiwo workloads of its namespace.

* ``images.imagePullSecrets`` are added to every generated pod (after the workload's own).
* ``credentials`` are default Secret references: a download item that names no credentials
  takes the namespace's (S3 by matching endpoint, GCS and Azure Blob the first entry), and
  ``huggingFaceToken`` becomes ``HF_TOKEN`` (``valueFrom.secretKeyRef``) in the download job
  and in the workload's containers unless the workload sets ``HF_TOKEN`` itself.
* ``gateway`` exposes every KaiwoService through a Gateway API HTTPRoute attached to that
  Gateway, under the path prefix ``/<namespace>/<name>`` (rewritten to ``/``;
  :mod:`kaiwo_planner.domain.children.http_route` builds it).

See docs/aimnamespaceconfig.md for the user-facing description.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kaiwo_contracts.crds.config_v1alpha1 import AIMNamespaceConfig, SecretValueReference

from kaiwo_planner.domain.state.json_trees import copy_tree

HF_TOKEN_ENV = "HF_TOKEN"  # noqa: S105 - a variable name, not a secret


@dataclass(frozen=True, slots=True)
class SecretKeyRef:
    secret_name: str
    secret_key: str

    def as_value_reference(self) -> dict[str, str]:
        return {"secretName": self.secret_name, "secretKey": self.secret_key}


@dataclass(frozen=True, slots=True)
class S3Credential:
    endpoint_url: str
    access_key_id: SecretKeyRef | None
    secret_key: SecretKeyRef | None


@dataclass(frozen=True, slots=True)
class GatewayTarget:
    name: str
    namespace: str


@dataclass(frozen=True, slots=True)
class NamespaceSettings:
    """The parts of an AIMNamespaceConfig the child planners use; empty when there is none."""

    image_pull_secrets: tuple[str, ...] = ()
    hugging_face_token: SecretKeyRef | None = None
    s3: tuple[S3Credential, ...] = ()
    gcs: tuple[SecretKeyRef, ...] = ()
    azure_blob: tuple[SecretKeyRef, ...] = ()
    gateway: GatewayTarget | None = None


def _ref(value: SecretValueReference | None) -> SecretKeyRef | None:
    if value is None or not value.secret_name or not value.secret_key:
        return None
    return SecretKeyRef(secret_name=value.secret_name, secret_key=value.secret_key)


def namespace_settings(config: AIMNamespaceConfig | None, namespace: str) -> NamespaceSettings:
    """The settings ``config`` gives workloads in ``namespace`` (none from another namespace)."""
    if config is None or (config.metadata.namespace or namespace) != namespace:
        return NamespaceSettings()
    spec = config.spec
    credentials = spec.credentials
    gateway = None
    if spec.gateway is not None and spec.gateway.name:
        gateway = GatewayTarget(
            name=spec.gateway.name, namespace=spec.gateway.namespace or namespace
        )
    # Each name once: the CRD lets a name repeat, and a pod spec with a pull secret twice is
    # refused by server-side apply (a Model's Pods, the cache and download Jobs).
    pull_secrets = tuple(dict.fromkeys(spec.images.image_pull_secrets or ())) if spec.images else ()
    if credentials is None:
        return NamespaceSettings(image_pull_secrets=pull_secrets, gateway=gateway)
    return NamespaceSettings(
        image_pull_secrets=pull_secrets,
        hugging_face_token=_ref(credentials.hugging_face_token),
        s3=tuple(
            S3Credential(
                endpoint_url=item.endpoint_url or "",
                access_key_id=_ref(item.access_key_id),
                secret_key=_ref(item.secret_access_key),
            )
            for item in credentials.s3 or ()
        ),
        gcs=tuple(
            ref for item in credentials.gcs or () if (ref := _ref(item.application_credentials))
        ),
        azure_blob=tuple(
            ref for item in credentials.azure_blob or () if (ref := _ref(item.connection_string))
        ),
        gateway=gateway,
    )


def hf_token_env(settings: NamespaceSettings) -> dict[str, Any] | None:
    """``HF_TOKEN`` from the namespace's Hugging Face token Secret, if it names one."""
    token = settings.hugging_face_token
    if token is None:
        return None
    return {
        "name": HF_TOKEN_ENV,
        "valueFrom": {"secretKeyRef": {"name": token.secret_name, "key": token.secret_key}},
    }


def _names_secret(ref: Mapping[str, Any] | None) -> bool:
    return bool(ref and ref.get("secretName"))


def _s3_credential(endpoint: str, settings: NamespaceSettings) -> S3Credential | None:
    """The credential for ``endpoint``: same URL (ignoring a trailing slash), else one without."""
    wanted = endpoint.rstrip("/")
    for credential in settings.s3:
        if credential.endpoint_url and credential.endpoint_url.rstrip("/") == wanted:
            return credential
    return next((c for c in settings.s3 if not c.endpoint_url), None)


def with_default_credentials(
    downloads: Mapping[str, Any], settings: NamespaceSettings
) -> dict[str, Any]:
    """A copy of the download items where items without credentials take the namespace's."""
    result = copy_tree(dict(downloads))
    for item in result.get("s3") or []:
        if _names_secret(item.get("accessKeyId")) or _names_secret(item.get("secretKey")):
            continue
        credential = _s3_credential(item.get("endpointUrl", ""), settings)
        if credential is None:
            continue
        if credential.access_key_id is not None:
            item["accessKeyId"] = credential.access_key_id.as_value_reference()
        if credential.secret_key is not None:
            item["secretKey"] = credential.secret_key.as_value_reference()
    for kind, field_name, refs in (
        ("gcs", "applicationCredentials", settings.gcs),
        ("azureBlob", "connectionString", settings.azure_blob),
    ):
        for item in result.get(kind) or []:
            if not _names_secret(item.get(field_name)) and refs:
                item[field_name] = refs[0].as_value_reference()
    return result
