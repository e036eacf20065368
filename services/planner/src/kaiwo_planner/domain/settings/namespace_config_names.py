"""The names an AIMNamespaceConfig hands to children, checked where they are written.

The CRD takes any string for these names (upstream's schema, and the object has no status),
but what the children do with them has rules (decision 0206):

* a Secret reference (``credentials``: ``huggingFaceToken``, ``s3[].accessKeyId`` and
  ``secretAccessKey``, ``gcs[].applicationCredentials``, ``azureBlob[].connectionString``)
  becomes an ``env[].valueFrom.secretKeyRef`` (``HF_TOKEN``: the API server refuses a name
  that is not a lowercase RFC 1123 subdomain, and a key that is not a config key) or a Secret
  volume of the download job (accepted, but no Secret can be so named: the pod never starts);
* a pull secret (``images.imagePullSecrets[]``) goes into every generated pod's
  ``imagePullSecrets``: accepted, but no Secret can be so named (the kubelet pulls without it);
* the gateway (``gateway.namespace``, ``gateway.name``) becomes an HTTPRoute's
  ``parentRefs[0]``: the Gateway API refuses a namespace that is not a lowercase RFC 1123
  label of at most 63 characters, and a name longer than 253; a name that is not a lowercase
  RFC 1123 subdomain is accepted, but no Gateway can be so named.

:func:`namespace_config_name_problems` names each field (in the object's own wire form, such
as ``spec.images.imagePullSecrets[1]``) and its rule. The planner reports them on the
AIMNamespaceConfig (:mod:`~kaiwo_planner.domain.status.config_events`) and leaves the
children as they are: pure, no state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Final

from kaiwo_contracts.crds.config_v1alpha1 import AIMNamespaceConfig, SecretValueReference
from kaiwo_contracts.crds.meta import DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN
from kaiwo_contracts.validation import Problem

MAX_NAME_LENGTH: Final = 253
MAX_NAMESPACE_LENGTH: Final = 63
_SUBDOMAIN: Final = re.compile(DNS_SUBDOMAIN_PATTERN)
_LABEL: Final = re.compile(DNS_LABEL_PATTERN)
_CONFIG_KEY: Final = re.compile(r"^[-._a-zA-Z0-9]+$")

OBJECT_NAME_RULE: Final = (
    "must be a Secret's name: a lowercase RFC 1123 subdomain of at most 253 characters, "
    "such as hf-creds"
)
CONFIG_KEY_RULE: Final = (
    "must be a Secret's key: at most 253 letters, digits, '-', '_' or '.', "
    "not '.' or '..' and not starting with '..', such as token"
)
GATEWAY_NAMESPACE_RULE: Final = (
    "must be a namespace's name: a lowercase RFC 1123 label of at most 63 characters, "
    "such as gateway-system"
)
GATEWAY_NAME_RULE: Final = (
    "must be a Gateway's name: a lowercase RFC 1123 subdomain of at most 253 characters, "
    "such as kgw-default"
)


def is_object_name(value: str) -> bool:
    """``value`` is a name a Secret or a Gateway can have (a DNS-1123 subdomain)."""
    return len(value) <= MAX_NAME_LENGTH and _SUBDOMAIN.match(value) is not None


def is_namespace_name(value: str) -> bool:
    """``value`` is a namespace's name (a DNS-1123 label)."""
    return len(value) <= MAX_NAMESPACE_LENGTH and _LABEL.match(value) is not None


def is_secret_key(value: str) -> bool:
    """``value`` is a key a Secret can hold (the API server's ``IsConfigMapKey``)."""
    return (
        len(value) <= MAX_NAME_LENGTH
        and _CONFIG_KEY.match(value) is not None
        and value not in {".", ".."}
        and not value.startswith("..")
    )


def namespace_config_name_problems(config: AIMNamespaceConfig) -> tuple[Problem, ...]:
    """Every name of ``config`` that its children cannot use, field by field, in the order
    of the spec (empty: every name is usable)."""
    return tuple(_problems(config))


def _problems(config: AIMNamespaceConfig) -> Iterator[Problem]:
    spec = config.spec
    if spec.gateway is not None:
        if spec.gateway.namespace and not is_namespace_name(spec.gateway.namespace):
            yield _problem("spec.gateway.namespace", spec.gateway.namespace, GATEWAY_NAMESPACE_RULE)
        if spec.gateway.name and not is_object_name(spec.gateway.name):
            yield _problem("spec.gateway.name", spec.gateway.name, GATEWAY_NAME_RULE)
    credentials = spec.credentials
    if credentials is not None:
        path = "spec.credentials"
        yield from _reference(f"{path}.huggingFaceToken", credentials.hugging_face_token)
        for index, s3 in enumerate(credentials.s3 or ()):
            yield from _reference(f"{path}.s3[{index}].accessKeyId", s3.access_key_id)
            yield from _reference(f"{path}.s3[{index}].secretAccessKey", s3.secret_access_key)
        for index, gcs in enumerate(credentials.gcs or ()):
            yield from _reference(
                f"{path}.gcs[{index}].applicationCredentials", gcs.application_credentials
            )
        for index, azure in enumerate(credentials.azure_blob or ()):
            yield from _reference(
                f"{path}.azureBlob[{index}].connectionString", azure.connection_string
            )
    images = spec.images
    for index, name in enumerate((images.image_pull_secrets if images else None) or ()):
        if not is_object_name(name):
            yield _problem(f"spec.images.imagePullSecrets[{index}]", name, OBJECT_NAME_RULE)


def _reference(path: str, reference: SecretValueReference | None) -> Iterator[Problem]:
    """A reference given whole (the planner ignores a half one, decision 0121)."""
    if reference is None or not reference.secret_name or not reference.secret_key:
        return
    if not is_object_name(reference.secret_name):
        yield _problem(f"{path}.secretName", reference.secret_name, OBJECT_NAME_RULE)
    if not is_secret_key(reference.secret_key):
        yield _problem(f"{path}.secretKey", reference.secret_key, CONFIG_KEY_RULE)


def _problem(path: str, value: str, rule: str) -> Problem:
    shown = value if len(value) <= 80 else f"{value[:77]}..."
    return Problem(path, f"{json.dumps(shown)} {rule}")
