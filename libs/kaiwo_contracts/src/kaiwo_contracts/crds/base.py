"""The conventions every API model follows.

* camelCase on the wire (``gpus_per_replica`` <-> ``gpusPerReplica``), snake_case in Python;
  models accept either name when parsing.
* Unknown fields are rejected (``extra="forbid"``) so a typo in a manifest is an error that
  names the field, not a silently ignored setting. Open sub-trees that Kubernetes itself keeps
  verbatim (embedded Job/Deployment/RayJob specs, pod templates) are typed with
  :data:`OpenObject` or :data:`EmbeddedObject` and keep every unknown field.
* Models are frozen value objects: planners receive them and never mutate them.
* :meth:`KubeModel.to_wire` dumps exactly what was given (``exclude_unset``), which makes
  ``Model.from_wire(json).to_wire() == json`` for JSON the API server returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# Schema markers understood by the CRD generator (kaiwo_contracts.crds.schema). They are
# ordinary JSON-schema extensions, so they also show up in ``model_json_schema()``.
PRESERVE_UNKNOWN = "x-kubernetes-preserve-unknown-fields"
EMBEDDED_RESOURCE = "x-kubernetes-embedded-resource"
INT_OR_STRING = "x-kubernetes-int-or-string"
LIST_TYPE = "x-kubernetes-list-type"
LIST_MAP_KEYS = "x-kubernetes-list-map-keys"

OpenObject = Annotated[dict[str, Any], Field(json_schema_extra={PRESERVE_UNKNOWN: True})]
"""A free-form object whose unknown fields Kubernetes keeps (for example a PodSpec)."""

EmbeddedObject = Annotated[
    dict[str, Any],
    Field(json_schema_extra={PRESERVE_UNKNOWN: True, EMBEDDED_RESOURCE: True}),
]
"""A whole Kubernetes object (apiVersion, kind, metadata, spec) embedded in a field."""


class KubeModel(BaseModel):
    """Base of every API type (nested or top-level)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        frozen=True,
        use_enum_values=False,
    )

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Self:
        """Parse the JSON form the Kubernetes API (or a manifest) uses."""
        return cls.model_validate(data)

    def to_wire(self) -> dict[str, Any]:
        """The JSON form, with only the fields that were set (lossless round trip)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


Scope = Literal["Namespaced", "Cluster"]


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    """An ``additionalPrinterColumns`` entry: what ``kubectl get`` shows."""

    name: str
    type: Literal["string", "integer", "number", "boolean", "date"]
    json_path: str
    description: str = ""
    priority: int = 0


@dataclass(frozen=True, slots=True)
class ScaleSubresource:
    """The ``scale`` subresource paths (Model uses it for ``kubectl scale``)."""

    spec_replicas_path: str
    status_replicas_path: str
    label_selector_path: str | None = None


@dataclass(frozen=True, slots=True)
class CrdInfo:
    """What the CRD generator needs beyond the schema."""

    group: str
    version: str
    kind: str
    plural: str
    scope: Scope
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    status_subresource: bool = True
    scale: ScaleSubresource | None = None
    description: str = ""
    singular: str = field(default="")

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()
