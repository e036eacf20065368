"""What an AIMNamespaceConfig changes for the Kaiwo workloads of its namespace.

* ``images.imagePullSecrets`` are added to every generated pod (after the workload's own).
* ``credentials`` are default Secret references: a download item that names no credentials
  takes the namespace's (S3 by matching endpoint, :func:`s3_credential_for`; GCS and Azure
  Blob the first entry that names a Secret), and ``huggingFaceToken`` becomes ``HF_TOKEN``
  (``valueFrom.secretKeyRef``) in the download job and in the workload's containers unless
  the workload sets ``HF_TOKEN`` itself.
* ``gateway`` exposes every KaiwoService through a Gateway API HTTPRoute attached to that
  Gateway, under the path prefix ``/<namespace>/<name>`` (rewritten to ``/``;
  :mod:`kaiwo_planner.domain.children.http_route` builds it).

Entries that can never reach a workload or Model (no Secret named, or behind an entry that is
always chosen first) are listed by :func:`unused_credential_entries` for the config's Event
(decision 0233). See docs/aimnamespaceconfig.md for the user-facing description.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from kaiwo_contracts.crds.config_v1alpha1 import AIMNamespaceConfig, SecretValueReference
from kaiwo_contracts.validation import Problem

from kaiwo_planner.domain.state.json_trees import copy_tree

HF_TOKEN_ENV = "HF_TOKEN"  # noqa: S105 - a variable name, not a secret

# The hosts of AWS's own S3 endpoint in the commercial partition (s3.amazonaws.com,
# s3.<region>.amazonaws.com and the older s3-<region>.amazonaws.com): what a client without an
# endpoint reaches, with the same account keys in every region. GovCloud (us-gov-*), ISO
# (us-iso-*) and China (*.amazonaws.com.cn) take other keys and are left out, as are the
# dualstack, FIPS and access-point forms (decision 0233).
_AWS_DEFAULT_HOST: Final = re.compile(r"^s3(?:[.-][a-z]{2}-[a-z]+-[0-9]+)?\.amazonaws\.com$")


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

    @property
    def names_a_secret(self) -> bool:
        return self.access_key_id is not None or self.secret_key is not None


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


def names_aws_default_endpoint(endpoint_url: str) -> bool:
    """``endpoint_url`` is AWS's own S3 endpoint, which an item without an endpoint reaches."""
    try:
        parts = urlsplit(endpoint_url.strip())
        port = parts.port
    except ValueError:
        return False
    return (
        parts.scheme in {"http", "https"}
        and port is None
        and parts.username is None
        and parts.path in {"", "/"}
        and not parts.query
        and _AWS_DEFAULT_HOST.match(parts.hostname or "") is not None
    )


def s3_credential_for(endpoint: str, credentials: Sequence[S3Credential]) -> S3Credential | None:
    """The namespace's S3 credential for ``endpoint`` (a download item's ``endpointUrl``, a
    Model's ``AWS_ENDPOINT_URL``; empty: AWS's default), or None.

    An entry that names no Secret is passed over (it would give nothing and hide the next
    one). An endpoint takes the entry of the same URL (a trailing ``/`` ignored), else one
    without ``endpointUrl``. No endpoint takes an entry without ``endpointUrl``, else one whose
    ``endpointUrl`` is AWS's own (:func:`names_aws_default_endpoint`), where such a client
    goes. The first in the list wins each step."""
    usable = [c for c in credentials if c.names_a_secret]
    without_endpoint = next((c for c in usable if not c.endpoint_url), None)
    wanted = endpoint.rstrip("/")
    if not wanted:
        return without_endpoint or next(
            (c for c in usable if names_aws_default_endpoint(c.endpoint_url)), None
        )
    same = (c for c in usable if c.endpoint_url and c.endpoint_url.rstrip("/") == wanted)
    return next(same, None) or without_endpoint


def with_default_credentials(
    downloads: Mapping[str, Any], settings: NamespaceSettings
) -> dict[str, Any]:
    """A copy of the download items where items without credentials take the namespace's."""
    result = copy_tree(dict(downloads))
    for item in result.get("s3") or []:
        if _names_secret(item.get("accessKeyId")) or _names_secret(item.get("secretKey")):
            continue
        credential = s3_credential_for(str(item.get("endpointUrl") or ""), settings.s3)
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


def unused_credential_entries(config: AIMNamespaceConfig) -> tuple[Problem, ...]:
    """Each ``spec.credentials`` entry of ``config`` that no download item or Model can get,
    by its field, in the order of the spec (empty: every entry can be used)."""
    return tuple(_unused_entries(config))


def _unused_entries(config: AIMNamespaceConfig) -> Iterator[Problem]:
    credentials = config.spec.credentials
    if credentials is None:
        return
    path = "spec.credentials"
    first_of_endpoint: dict[str, int] = {}
    for index, s3 in enumerate(credentials.s3 or ()):
        if _ref(s3.access_key_id) is None and _ref(s3.secret_access_key) is None:
            yield Problem(
                f"{path}.s3[{index}]",
                "names neither an accessKeyId nor a secretAccessKey Secret, so it has no effect",
            )
            continue
        endpoint = (s3.endpoint_url or "").rstrip("/")
        first = first_of_endpoint.setdefault(endpoint, index)
        if first != index:
            yield Problem(
                f"{path}.s3[{index}]",
                f"has the endpointUrl of {path}.s3[{first}], which is always chosen first, "
                "so it has no effect",
            )
    yield from _unused_first_wins(
        f"{path}.gcs",
        "applicationCredentials",
        [_ref(item.application_credentials) for item in credentials.gcs or ()],
    )
    yield from _unused_first_wins(
        f"{path}.azureBlob",
        "connectionString",
        [_ref(item.connection_string) for item in credentials.azure_blob or ()],
    )


def _unused_first_wins(
    path: str, field_name: str, refs: Sequence[SecretKeyRef | None]
) -> Iterator[Problem]:
    """GCS and Azure Blob entries have nothing to choose them by: the first one that names a
    Secret is every item's, the others none's."""
    used: int | None = None
    for index, ref in enumerate(refs):
        if ref is None:
            yield Problem(f"{path}[{index}]", f"names no {field_name} Secret, so it has no effect")
        elif used is None:
            used = index
        else:
            yield Problem(
                f"{path}[{index}]",
                f"is never used: an item without {field_name} takes the first entry that "
                f"names a Secret, {path}[{used}] (entries have no selector)",
            )
