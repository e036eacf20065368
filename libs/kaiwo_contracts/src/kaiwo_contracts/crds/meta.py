"""Object metadata and the standard condition type (meta/v1), as the API server returns them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from kaiwo_contracts.crds.base import KubeModel


class OwnerReference(KubeModel):
    """A controller or owner reference (meta/v1 OwnerReference)."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KubeModel):
    """meta/v1 ObjectMeta. Unknown metadata fields are kept, as the API server may add some."""

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None
    managed_fields: list[dict[str, Any]] | None = None


class ListMeta(KubeModel):
    """meta/v1 ListMeta."""

    model_config = ConfigDict(extra="allow")

    resource_version: str | None = None
    continue_: str | None = Field(default=None, alias="continue")
    remaining_item_count: int | None = None


ConditionStatus = Literal["True", "False", "Unknown"]


DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
"""The name most kinds take (RFC 1123 subdomain, at most 253 characters): for fields that
become the name of an object the operator creates."""
EMPTY_OR_DNS_SUBDOMAIN_PATTERN = r"^$|" + DNS_SUBDOMAIN_PATTERN
"""Such a name or nothing: a pod's ``schedulerName``, where empty means the default."""
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""A namespace's name (RFC 1123 label, at most 63 characters)."""

_CONDITION_TYPE = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
"""A condition's ``reason`` as the API server's metav1.Condition validation takes it."""


class Condition(KubeModel):
    """meta/v1 Condition: one aspect of an object's state, with the generation it describes."""

    type: str = Field(max_length=316, pattern=_CONDITION_TYPE)
    status: ConditionStatus
    observed_generation: int | None = Field(default=None, ge=0)
    last_transition_time: datetime
    reason: str = Field(max_length=1024, min_length=1, pattern=CONDITION_REASON_PATTERN)
    message: str = Field(default="", max_length=32768)
