"""Kubernetes core/v1 types (and the meta/v1 label selector) that the served kinds embed.

Only what the Kaiwo and KubeAI APIs reference is modelled, field for field as the Kubernetes API
defines it, so that manifests written for the upstream operators parse unchanged. Fields keep
their Kubernetes names on the wire (camelCase) and snake_case names in Python.

Other modules may append classes at the end of this file; existing names stay stable.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from kaiwo_contracts.crds.base import KubeModel
from kaiwo_contracts.crds.label_syntax import checked_label_key, checked_labels
from kaiwo_contracts.crds.quantity import Quantity

# ------------------------------------------------------------------ object references


class LocalObjectReference(KubeModel):
    """A reference to an object in the same namespace, by name (e.g. an image pull secret)."""

    name: str = ""


# ------------------------------------------------------------------ environment variables


class ObjectFieldSelector(KubeModel):
    """Selects a field of the pod (``metadata.name``, ``status.podIP``, ...)."""

    api_version: str | None = None
    field_path: str


class ResourceFieldSelector(KubeModel):
    """Selects a container's resource request or limit (``limits.cpu``, ...)."""

    container_name: str | None = None
    resource: str
    divisor: Quantity | None = None


class ConfigMapKeySelector(KubeModel):
    """One key of a ConfigMap."""

    name: str = ""
    key: str
    optional: bool | None = None


class SecretKeySelector(KubeModel):
    """One key of a Secret."""

    name: str = ""
    key: str
    optional: bool | None = None


class EnvVarSource(KubeModel):
    """Where an environment variable's value comes from; exactly one source is set."""

    field_ref: ObjectFieldSelector | None = None
    resource_field_ref: ResourceFieldSelector | None = None
    config_map_key_ref: ConfigMapKeySelector | None = None
    secret_key_ref: SecretKeySelector | None = None


class EnvVar(KubeModel):
    """An environment variable of a container: a literal ``value`` or a ``valueFrom`` source."""

    name: str = Field(min_length=1)
    value: str | None = None
    value_from: EnvVarSource | None = None


# ------------------------------------------------------------------ resources


class ResourceClaim(KubeModel):
    """A dynamic resource claim a container uses (``resources.claims``)."""

    name: str
    request: str | None = None


class ResourceRequirements(KubeModel):
    """Compute resource requests and limits, keyed by resource name (``cpu``, ``memory``, ...)."""

    limits: dict[str, Quantity] | None = None
    requests: dict[str, Quantity] | None = None
    claims: list[ResourceClaim] | None = None


PersistentVolumeAccessMode = Literal[
    "ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"
]
"""How a PersistentVolumeClaim may be mounted."""


# ------------------------------------------------------------------ taints and tolerations

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Taint(KubeModel):
    """A node taint: pods that do not tolerate it are kept off (or evicted from) the node."""

    key: str = Field(min_length=1)
    value: str | None = None
    effect: TaintEffect
    time_added: datetime | None = None


class Toleration(KubeModel):
    """Lets a pod schedule onto nodes with a matching taint.

    An empty ``key`` with operator ``Exists`` tolerates everything; ``effect`` empty matches
    every effect (``""`` is what the API server stores for that).
    """

    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: TaintEffect | Literal[""] | None = None
    toleration_seconds: int | None = None


# ------------------------------------------------------------------ meta/v1 label selector


class LabelSelectorRequirement(KubeModel):
    """One expression of a label selector (meta/v1)."""

    key: Annotated[str, AfterValidator(checked_label_key)]
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] | None = None


class LabelSelector(KubeModel):
    """meta/v1 LabelSelector: all of ``matchLabels`` and ``matchExpressions`` must hold.

    An empty selector matches everything; a missing one (None) matches nothing.
    """

    match_labels: Annotated[dict[str, str] | None, AfterValidator(checked_labels)] = None
    match_expressions: list[LabelSelectorRequirement] | None = None


# ------------------------------------------------------------------ environment from sources
# (appended for KubeAI's Model.spec.envFrom)


class ConfigMapEnvSource(KubeModel):
    """Every key of a ConfigMap becomes an environment variable."""

    name: str = ""
    optional: bool | None = None


class SecretEnvSource(KubeModel):
    """Every key of a Secret becomes an environment variable."""

    name: str = ""
    optional: bool | None = None


class EnvFromSource(KubeModel):
    """A source of many environment variables (``envFrom``); names get ``prefix`` prepended."""

    prefix: str | None = None
    config_map_ref: ConfigMapEnvSource | None = None
    secret_ref: SecretEnvSource | None = None
