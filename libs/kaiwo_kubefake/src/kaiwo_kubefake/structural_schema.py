"""A CRD version's structural schema, reduced to what pruning and defaulting read.

The API server prunes, defaults and null-checks a custom resource against the
``openAPIV3Schema`` of the version in the request. Those walks look only at a node's
``type``, ``properties``, ``items``, ``additionalProperties``, ``default``, ``nullable`` and
the ``x-kubernetes-preserve-unknown-fields``, ``-embedded-resource`` and ``-int-or-string``
flags; value validations (``enum``, ``pattern``, ``anyOf``, CEL rules ...) are not kept.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

_NO_PROPERTIES: Mapping[str, StructuralSchema] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class StructuralSchema:
    """One node of a structural schema."""

    type: str = ""
    properties: Mapping[str, StructuralSchema] = field(default_factory=lambda: _NO_PROPERTIES)
    items: StructuralSchema | None = None
    # additionalProperties is either absent, or present with a schema for the values, or
    # present as true/false: then the keys stay and the values have no schema.
    has_additional_properties: bool = False
    additional_properties: StructuralSchema | None = None
    # Kept as JSON text: the node stays immutable and each use decodes a fresh copy.
    default_json: str | None = None
    nullable: bool = False
    preserve_unknown_fields: bool = False
    embedded_resource: bool = False
    int_or_string: bool = False

    @property
    def has_default(self) -> bool:
        return self.default_json is not None

    def default(self) -> Any:
        assert self.default_json is not None
        return json.loads(self.default_json)

    def child(self, key: str) -> StructuralSchema | None:
        """The schema of field ``key`` of an object: its property, else the map values'."""
        found = self.properties.get(key)
        return found if found is not None else self.additional_properties

    def declares(self, key: str) -> bool:
        """Whether pruning keeps field ``key`` of an object described by this node."""
        return key in self.properties or self.has_additional_properties

    @property
    def type_name(self) -> str:
        """The type validation reports (``integer,string`` for int-or-string), or ""."""
        return "integer,string" if self.int_or_string else self.type


def parse_schema(schema: Mapping[str, Any]) -> StructuralSchema:
    """The structural schema of an ``openAPIV3Schema`` (or any node of one)."""
    additional = schema.get("additionalProperties")
    items = schema.get("items")
    default = schema.get("default")
    return StructuralSchema(
        type=str(schema.get("type") or ""),
        properties=MappingProxyType(
            {key: parse_schema(node) for key, node in (schema.get("properties") or {}).items()}
        ),
        items=parse_schema(items) if isinstance(items, Mapping) else None,
        has_additional_properties=additional is not None,
        additional_properties=parse_schema(additional) if isinstance(additional, Mapping) else None,
        # A null default is no default, as on the API server.
        default_json=json.dumps(default) if default is not None else None,
        nullable=bool(schema.get("nullable")),
        preserve_unknown_fields=bool(schema.get("x-kubernetes-preserve-unknown-fields")),
        embedded_resource=bool(schema.get("x-kubernetes-embedded-resource")),
        int_or_string=bool(schema.get("x-kubernetes-int-or-string")),
    )


def as_resource_root(schema: StructuralSchema) -> StructuralSchema:
    """The root of a resource keeps apiVersion, kind and metadata like an embedded resource."""
    return schema if schema.embedded_resource else replace(schema, embedded_resource=True)


def is_open(schema: StructuralSchema) -> bool:
    """A root that preserves every field and declares none: nothing to prune or default."""
    return (
        schema.preserve_unknown_fields
        and not schema.properties
        and not schema.has_additional_properties
        and not schema.has_default
    )
