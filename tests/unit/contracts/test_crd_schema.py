"""The CRD generator: structural-schema rules of kube-apiserver 1.30+, on toy and real models.

`crd_violations` below restates what the API server checks when a CRD is created
(apiextensions-apiserver: structural schema, defaults, list types, root restrictions with the
status subresource, scale paths). It is tested on hand-written bad schemas first, so that a
clean result on the generated CRDs means something.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

import pytest
from kaiwo_contracts.crds.base import (
    CrdInfo,
    EmbeddedObject,
    KubeModel,
    OpenObject,
    PrinterColumn,
    ScaleSubresource,
)
from kaiwo_contracts.crds.quantity import Quantity
from kaiwo_contracts.crds.schema import (
    NoCrdDefault,
    SchemaGenerationError,
    custom_resource_definition,
    custom_resource_definitions,
    structural_schema,
)
from pydantic import ConfigDict, Field

# Kubernetes' quantity grammar without the minus sign, as written into the CRDs.
QUANTITY_GRAMMAR = (
    r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]+))?$"
)

# ---------------------------------------------------------------- the structural-schema checker

_ALLOWED_KEYS = frozenset(
    {
        "description",
        "type",
        "format",
        "default",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "multipleOf",
        "enum",
        "maxProperties",
        "minProperties",
        "required",
        "items",
        "allOf",
        "oneOf",
        "anyOf",
        "not",
        "properties",
        "additionalProperties",
        "nullable",
        "example",
        "externalDocs",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-list-type",
        "x-kubernetes-map-type",
        "x-kubernetes-validations",
    }
)
_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})
_SCALARS = frozenset({"string", "integer", "number", "boolean"})
_FORMATS = frozenset(
    {
        "date-time",
        "date",
        "duration",
        "byte",
        "int32",
        "int64",
        "float",
        "double",
        "password",
        "uri",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "mac",
        "uuid",
    }
)
_INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]
# With the status subresource on, the root may hold only these (apiextensions validation.go).
_ROOT_KEYS_WITH_STATUS = frozenset(
    {
        "description",
        "type",
        "properties",
        "required",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-validations",
    }
)
_PRINTER_TYPES = frozenset({"integer", "number", "string", "boolean", "date"})


_JSON_TYPES = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
    (type(None), "null"),
)


def _json_type_of(value: Any) -> str:
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), "unknown")


def value_violations(value: Any, node: Mapping[str, Any], path: str) -> list[str]:
    """Why ``value`` does not validate against the structural ``node`` (and would not survive
    pruning unchanged): the check the API server runs on every default."""
    if value is None:
        return [] if node.get("nullable") else [f"{path}: null in a non-nullable node"]
    if node.get("x-kubernetes-int-or-string"):
        ok = _json_type_of(value) in {"integer", "string"}
        return [] if ok else [f"{path}: {value!r} is neither integer nor string"]
    expected = node.get("type")
    if expected is None:
        return []
    actual = _json_type_of(value)
    if actual != expected and not (expected == "number" and actual == "integer"):
        return [f"{path}: {value!r} is {actual}, the schema says {expected}"]
    problems: list[str] = []
    if "enum" in node and value not in node["enum"]:
        problems.append(f"{path}: {value!r} is not in enum {node['enum']}")
    if isinstance(value, str):
        problems += _string_violations(value, node, path)
    if actual in {"integer", "number"}:
        problems += _number_violations(value, node, path)
    if isinstance(value, list):
        problems += _array_value_violations(value, node, path)
    if isinstance(value, dict):
        problems += _object_value_violations(value, node, path)
    return problems


def _string_violations(value: str, node: Mapping[str, Any], path: str) -> list[str]:
    problems = []
    if "pattern" in node and re.search(node["pattern"], value) is None:
        problems.append(f"{path}: {value!r} does not match {node['pattern']}")
    if len(value) < node.get("minLength", 0) or len(value) > node.get("maxLength", len(value)):
        problems.append(f"{path}: {value!r} has a length out of bounds")
    return problems


def _number_violations(value: float, node: Mapping[str, Any], path: str) -> list[str]:
    problems = []
    if "minimum" in node:
        low = node["minimum"]
        if value < low or (node.get("exclusiveMinimum") and value == low):
            problems.append(f"{path}: {value} is below the minimum {low}")
    if "maximum" in node:
        high = node["maximum"]
        if value > high or (node.get("exclusiveMaximum") and value == high):
            problems.append(f"{path}: {value} is above the maximum {high}")
    return problems


def _array_value_violations(value: list[Any], node: Mapping[str, Any], path: str) -> list[str]:
    problems = []
    if len(value) < node.get("minItems", 0) or len(value) > node.get("maxItems", len(value)):
        problems.append(f"{path}: {len(value)} items is out of bounds")
    for index, item in enumerate(value):
        problems += value_violations(item, node.get("items", {}), f"{path}[{index}]")
    return problems


def _object_value_violations(
    value: dict[str, Any], node: Mapping[str, Any], path: str
) -> list[str]:
    problems = []
    properties = node.get("properties", {})
    additional = node.get("additionalProperties")
    for key, item in value.items():
        if key in properties:
            problems += value_violations(item, properties[key], f"{path}.{key}")
        elif isinstance(additional, Mapping):
            problems += value_violations(item, additional, f"{path}.{key}")
        elif not node.get("x-kubernetes-preserve-unknown-fields"):
            problems.append(f"{path}.{key}: unknown field, the API server would prune it")
    problems += [
        f"{path}.{key}: required field missing"
        for key in node.get("required", ())
        if key not in value
    ]
    if len(value) > node.get("maxProperties", len(value)):
        problems.append(f"{path}: more than maxProperties entries")
    return problems


def schema_violations(
    node: Any, path: str = "", *, in_junctor: bool = False, in_map_values: bool = False
) -> list[str]:
    """Every structural-schema rule ``node`` (and what it contains) breaks."""
    if not isinstance(node, Mapping):
        return [f"{path}: a schema must be an object"]
    problems = [
        f"{path}: unknown or forbidden keyword {key}" for key in node if key not in _ALLOWED_KEYS
    ]
    if in_junctor:
        problems += _junctor_violations(node, path)
    else:
        problems += _type_violations(node, path)
    problems += _extension_violations(node, path)
    problems += _value_validation_violations(node, path)
    if "default" in node:
        if in_map_values or in_junctor:
            problems.append(f"{path}: default inside additionalProperties or a junctor")
        problems += value_violations(node["default"], node, f"{path}(default)")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{path}: properties and additionalProperties together")
    additional = node.get("additionalProperties")
    if isinstance(additional, bool):
        problems.append(f"{path}: additionalProperties must be a schema, not {additional}")
    elif additional is not None:
        problems += schema_violations(
            additional, f"{path}[*]", in_junctor=in_junctor, in_map_values=True
        )
    for name, sub in node.get("properties", {}).items():
        problems += schema_violations(
            sub, f"{path}.{name}", in_junctor=in_junctor, in_map_values=in_map_values
        )
    if "items" in node:
        problems += schema_violations(
            node["items"], f"{path}[]", in_junctor=in_junctor, in_map_values=in_map_values
        )
    for junctor in ("allOf", "anyOf", "oneOf"):
        for index, sub in enumerate(node.get(junctor, ())):
            problems += schema_violations(sub, f"{path}.{junctor}[{index}]", in_junctor=True)
    if "not" in node:
        problems += schema_violations(node["not"], f"{path}.not", in_junctor=True)
    return problems


def _junctor_violations(node: Mapping[str, Any], path: str) -> list[str]:
    # Inside allOf/anyOf/oneOf/not only value validations are allowed; the one exception is
    # the int-or-string pair, checked where it is used.
    forbidden = {"description", "default", "nullable", "additionalProperties", "title"}
    forbidden |= {key for key in node if key.startswith("x-kubernetes-")}
    found = sorted(forbidden & set(node))
    problems = [f"{path}: {found} not allowed inside a junctor"] if found else []
    if "type" in node and node not in _INT_OR_STRING_ANY_OF:
        problems.append(f"{path}: type inside a junctor")
    return problems


def _type_violations(node: Mapping[str, Any], path: str) -> list[str]:
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
    problems = []
    if int_or_string:
        if "type" in node:
            problems.append(f"{path}: type together with x-kubernetes-int-or-string")
        if "anyOf" in node and node["anyOf"] != _INT_OR_STRING_ANY_OF:
            problems.append(f"{path}: int-or-string allows only anyOf [integer, string]")
    elif "type" not in node and not preserve:
        problems.append(f"{path}: no type")
    elif "type" in node and node["type"] not in _TYPES:
        problems.append(f"{path}: unknown type {node['type']!r}")
    problems += [
        f"{path}: {junctor} is not generated and not needed"
        for junctor in ("anyOf", "oneOf", "allOf")
        if junctor in node and not (junctor == "anyOf" and int_or_string)
    ]
    if "format" in node and node["format"] not in _FORMATS:
        problems.append(f"{path}: unknown format {node['format']!r}")
    return problems


def _extension_violations(node: Mapping[str, Any], path: str) -> list[str]:
    flags = (
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
    )
    problems = [
        f"{path}: {flag} must be true or absent"
        for flag in flags
        if flag in node and node[flag] is not True
    ]
    if node.get("x-kubernetes-preserve-unknown-fields") and node.get("type") not in {
        None,
        "object",
    }:
        problems.append(f"{path}: preserve-unknown-fields on a non-object")
    if node.get("x-kubernetes-embedded-resource"):
        if node.get("type") != "object":
            problems.append(f"{path}: embedded-resource needs type object")
        if not (node.get("x-kubernetes-preserve-unknown-fields") or "properties" in node):
            problems.append(f"{path}: embedded-resource needs properties or preserve-unknown")
    problems += _list_type_violations(node, path)
    for index, rule in enumerate(node.get("x-kubernetes-validations", ())):
        if not isinstance(rule, Mapping) or not isinstance(rule.get("rule"), str):
            problems.append(f"{path}: x-kubernetes-validations[{index}] has no rule")
        elif set(rule) - {"rule", "message", "messageExpression", "reason", "fieldPath"}:
            problems.append(f"{path}: x-kubernetes-validations[{index}] has unknown keys")
    return problems


def _list_type_violations(node: Mapping[str, Any], path: str) -> list[str]:
    list_type = node.get("x-kubernetes-list-type")
    keys = node.get("x-kubernetes-list-map-keys")
    if list_type is None:
        return [f"{path}: list-map-keys without list-type map"] if keys else []
    if node.get("type") != "array":
        return [f"{path}: list-type on a non-array"]
    items = node.get("items", {})
    if list_type == "map":
        return _map_list_violations(items, keys, path)
    if keys:
        return [f"{path}: list-map-keys on a {list_type} list"]
    if list_type == "set":
        ok = items.get("type") in _SCALARS or items.get("x-kubernetes-map-type") == "atomic"
        return [] if ok else [f"{path}: list-type set of non-scalar items"]
    return [] if list_type == "atomic" else [f"{path}: unknown list-type {list_type!r}"]


def _map_list_violations(items: Mapping[str, Any], keys: Any, path: str) -> list[str]:
    if items.get("type") != "object" or not keys:
        return [f"{path}: list-type map needs object items and list-map-keys"]
    problems = []
    for key in keys:
        key_schema = items.get("properties", {}).get(key)
        if key_schema is None or key_schema.get("type") not in _SCALARS:
            problems.append(f"{path}: map key {key} is not a scalar property of the items")
        elif key not in items.get("required", ()) and "default" not in key_schema:
            problems.append(f"{path}: map key {key} is neither required nor defaulted")
    return problems


def _value_validation_violations(node: Mapping[str, Any], path: str) -> list[str]:
    problems = [
        f"{path}: {exclusive} must be a boolean (OpenAPI v3.0)"
        for exclusive in ("exclusiveMinimum", "exclusiveMaximum")
        if exclusive in node and not isinstance(node[exclusive], bool)
    ]
    if "enum" in node and node.get("type") in _TYPES:
        problems += [
            f"{path}: enum value {value!r} is not a {node['type']}"
            for value in node["enum"]
            if value_violations(value, {"type": node["type"]}, path)
        ]
    if "pattern" in node:
        try:
            re.compile(node["pattern"])
        except re.error as error:
            problems.append(f"{path}: pattern does not compile: {error}")
    for name in node.get("required", ()):
        if name not in node.get("properties", {}):
            problems.append(f"{path}: required {name} is not a property")
    return problems


def crd_violations(crd: Mapping[str, Any]) -> list[str]:
    """Every rule a kube-apiserver 1.30+ would reject ``crd`` for (as far as statically known)."""
    problems = []
    if crd.get("apiVersion") != "apiextensions.k8s.io/v1":
        problems.append("apiVersion is not apiextensions.k8s.io/v1")
    spec = crd["spec"]
    names = spec["names"]
    if crd["metadata"]["name"] != f"{names['plural']}.{spec['group']}":
        problems.append("metadata.name is not <plural>.<group>")
    problems += [
        f"names.{field} is not lowercase"
        for field in ("plural", "singular")
        if names[field] != names[field].lower()
    ]
    if names.get("listKind") != f"{names['kind']}List":
        problems.append("names.listKind is not <kind>List")
    if spec.get("scope") not in {"Namespaced", "Cluster"}:
        problems.append("scope is neither Namespaced nor Cluster")
    versions = spec["versions"]
    if sum(1 for version in versions if version.get("storage")) != 1:
        problems.append("exactly one version must be the storage version")
    for version in versions:
        problems += _version_violations(version)
    return problems


def _version_violations(version: Mapping[str, Any]) -> list[str]:
    root = version["schema"]["openAPIV3Schema"]
    subresources = version.get("subresources", {})
    problems = schema_violations(root, version["name"])
    if root.get("type") != "object":
        problems.append("root: type must be object")
    properties = root.get("properties", {})
    for name in ("apiVersion", "kind"):
        if properties.get(name, {}).get("type") != "string":
            problems.append(f"root.{name} must be a string")
    if set(properties.get("metadata", {})) - {"type", "description"}:
        problems.append("root.metadata may only be {type: object}")
    if "status" in subresources:
        extra = set(root) - _ROOT_KEYS_WITH_STATUS
        if extra:
            problems.append(f"root: {sorted(extra)} not allowed with the status subresource")
    if "scale" in subresources:
        problems += _scale_violations(subresources["scale"], root)
    for column in version.get("additionalPrinterColumns", ()):
        if column.get("type") not in _PRINTER_TYPES or not column.get("name"):
            problems.append(f"printer column {column} has a bad type or no name")
        if not str(column.get("jsonPath", "")).startswith("."):
            problems.append(f"printer column {column.get('name')} jsonPath must start with .")
    return problems


def _node_at(root: Mapping[str, Any], json_path: str) -> Mapping[str, Any] | None:
    node: Mapping[str, Any] | None = root
    for part in json_path.strip(".").split("."):
        node = (node or {}).get("properties", {}).get(part)
    return node


def _scale_violations(scale: Mapping[str, Any], root: Mapping[str, Any]) -> list[str]:
    problems = []
    for key, prefix in (("specReplicasPath", ".spec."), ("statusReplicasPath", ".status.")):
        path = scale[key]
        node = _node_at(root, path)
        if not path.startswith(prefix) or node is None or node.get("type") != "integer":
            problems.append(f"scale.{key} {path} is not an integer under {prefix}")
    selector = scale.get("labelSelectorPath")
    if selector is not None:
        node = _node_at(root, selector)
        if not selector.startswith((".spec.", ".status.")) or node is None:
            problems.append(f"scale.labelSelectorPath {selector} is not in the schema")
    return problems


# ---------------------------------------------------------------- the checker catches what it must

_BAD_SCHEMAS = [
    ({"$ref": "#/$defs/X"}, "unknown or forbidden keyword $ref"),
    ({"type": "object", "title": "X"}, "unknown or forbidden keyword title"),
    ({"type": "object", "properties": {"a": {}}}, ".a: no type"),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "additionalProperties": {"type": "string"},
        },
        "properties and additionalProperties together",
    ),
    ({"type": "object", "additionalProperties": False}, "must be a schema"),
    (
        {"type": "object", "additionalProperties": {"type": "string", "default": "x"}},
        "default inside additionalProperties",
    ),
    ({"type": "string", "anyOf": [{"type": "string"}, {"type": "null"}]}, "type inside a junctor"),
    ({"type": "integer", "default": "1"}, "is string, the schema says integer"),
    ({"type": "string", "enum": ["a"], "default": "b"}, "is not in enum"),
    ({"type": "string", "pattern": "^[0-9]+$", "default": "x"}, "does not match"),
    ({"type": "integer", "minimum": 1, "default": 0}, "below the minimum"),
    ({"type": "object", "default": {"x": 1}}, "unknown field, the API server would prune it"),
    ({"type": "string", "default": None}, "null in a non-nullable node"),
    ({"type": "integer", "minimum": 0, "exclusiveMinimum": 0}, "must be a boolean"),
    (
        {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "forbidden keyword uniqueItems",
    ),
    (
        {"x-kubernetes-int-or-string": True, "type": "string"},
        "type together with x-kubernetes-int-or-string",
    ),
    (
        {"type": "array", "items": {"type": "object"}, "x-kubernetes-list-type": "set"},
        "list-type set of non-scalar items",
    ),
    (
        {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": {"type": "object", "properties": {"type": {"type": "string"}}},
        },
        "neither required nor defaulted",
    ),
    ({"type": "string", "format": "uri-reference"}, "unknown format"),
    ({"type": "string", "x-kubernetes-preserve-unknown-fields": True}, "non-object"),
    ({"type": "object", "required": ["a"]}, "required a is not a property"),
]


@pytest.mark.parametrize(("schema", "expected"), _BAD_SCHEMAS)
def test_the_checker_rejects_what_the_api_server_rejects(
    schema: dict[str, Any], expected: str
) -> None:
    problems = schema_violations(schema, "x")
    assert any(expected in problem for problem in problems), problems


def test_the_checker_accepts_a_known_good_schema() -> None:
    good = {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "pattern": "^[a-z]+$", "default": "abc"},
            "size": {
                "x-kubernetes-int-or-string": True,
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "default": "1Gi",
            },
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "pod": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "conditions": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
                "items": {
                    "type": "object",
                    "required": ["type"],
                    "properties": {"type": {"type": "string"}},
                },
            },
        },
    }
    assert schema_violations(good, "x") == []


# ---------------------------------------------------------------- toy models


class Colour(StrEnum):
    """A colour."""

    RED = "red"
    NONE = ""


class Volume(KubeModel):
    """Where data lives."""

    mount_path: str = Field(default="/workload", description="Path in the container.")
    size: Quantity | None = None


class Labelled(KubeModel):
    """Keeps every unknown field."""

    model_config = ConfigDict(extra="allow")

    name: str


class ToySpec(KubeModel):
    """What the toy wants."""

    gpus: int = Field(default=0, ge=0, description="GPUs in total.")
    vendor: Literal["amd", "nvidia"] = "amd"
    timeout: str = Field(default="5m", pattern=r"^([0-9]+(s|m|h))+$")
    name: str = Field(min_length=1, max_length=63)
    replicas: int | None = Field(default=1, ge=1)
    volume: Volume = Field(default_factory=Volume, description="The data volume.")
    optional_volume: Volume | None = None
    labels: dict[str, str] | None = Field(default=None, max_length=10)
    tags: list[str] = Field(default_factory=list, max_length=5)
    unique_tags: set[str] | None = None
    when: datetime | None = None
    colour: Colour | None = None
    memory: Quantity = "16Gi"
    template: OpenObject | None = None
    job: EmbeddedObject | None = None
    anything: Any = None
    ratio: float = Field(default=1, ge=0)
    positive: int | None = Field(default=None, gt=0)
    labelled: Labelled | None = None
    enabled: Annotated[bool, NoCrdDefault] = False


class ToyStatus(KubeModel):
    """What the toy is."""

    replicas: int = 0
    phase: Literal["", "RUNNING"] = ""


class Toy(KubeModel):
    """A toy resource."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group="toys.example.com",
        version="v1",
        kind="Toy",
        plural="toys",
        scope="Namespaced",
        short_names=("ty",),
        categories=("all", "toys"),
        printer_columns=(
            PrinterColumn(name="Phase", type="string", json_path=".status.phase"),
            PrinterColumn(
                name="Age", type="date", json_path=".metadata.creationTimestamp", priority=1
            ),
        ),
        scale=ScaleSubresource(
            spec_replicas_path=".spec.replicas", status_replicas_path=".status.replicas"
        ),
    )

    api_version: Literal["toys.example.com/v1"] = "toys.example.com/v1"
    kind: Literal["Toy"] = "Toy"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: ToySpec
    status: ToyStatus | None = None


def _spec_properties() -> dict[str, Any]:
    return structural_schema(ToySpec)["properties"]  # type: ignore[no-any-return]


def test_a_nested_model_is_inlined_and_the_field_description_wins() -> None:
    volume = _spec_properties()["volume"]
    assert volume == {
        "description": "The data volume.",
        "type": "object",
        "default": {},
        "properties": {
            "mountPath": {
                "description": "Path in the container.",
                "type": "string",
                "default": "/workload",
            },
            "size": {
                "x-kubernetes-int-or-string": True,
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "minimum": 0,
                "pattern": QUANTITY_GRAMMAR,
            },
        },
    }


def test_an_optional_model_is_the_model_schema_without_nullable() -> None:
    optional = _spec_properties()["optionalVolume"]
    assert optional["type"] == "object"
    assert optional["description"] == "Where data lives."
    assert "nullable" not in optional
    assert "default" not in optional


def test_nullable_only_where_null_differs_from_leaving_the_field_out() -> None:
    properties = _spec_properties()
    assert properties["replicas"] == {
        "type": "integer",
        "default": 1,
        "minimum": 1,
        "nullable": True,
    }
    assert "nullable" not in properties["labels"]
    assert "nullable" not in properties["when"]


def test_scalar_validations_are_kept() -> None:
    properties = _spec_properties()
    assert properties["gpus"] == {
        "description": "GPUs in total.",
        "type": "integer",
        "default": 0,
        "minimum": 0,
    }
    assert properties["vendor"] == {"type": "string", "enum": ["amd", "nvidia"], "default": "amd"}
    assert properties["timeout"] == {
        "type": "string",
        "default": "5m",
        "pattern": "^([0-9]+(s|m|h))+$",
    }
    assert properties["name"] == {"type": "string", "minLength": 1, "maxLength": 63}
    assert properties["ratio"] == {"type": "number", "default": 1, "minimum": 0}
    assert properties["positive"] == {"type": "integer", "minimum": 0, "exclusiveMinimum": True}


def test_enum_classes_maps_lists_sets_and_times() -> None:
    properties = _spec_properties()
    assert properties["colour"] == {
        "description": "A colour.",
        "type": "string",
        "enum": ["red", ""],
    }
    assert properties["labels"] == {
        "type": "object",
        "maxProperties": 10,
        "additionalProperties": {"type": "string"},
    }
    assert properties["tags"] == {"type": "array", "maxItems": 5, "items": {"type": "string"}}
    assert properties["uniqueTags"] == {
        "type": "array",
        "items": {"type": "string"},
        "x-kubernetes-list-type": "set",
    }
    assert properties["when"] == {"type": "string", "format": "date-time"}


def test_quantities_open_and_embedded_objects() -> None:
    properties = _spec_properties()
    assert properties["memory"] == {
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "default": "16Gi",
        "minimum": 0,
        "pattern": QUANTITY_GRAMMAR,
    }
    preserved = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert properties["template"] == preserved
    # No x-kubernetes-embedded-resource: it would demand apiVersion/kind inside spec.job.
    assert properties["job"] == preserved
    assert properties["anything"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert properties["labelled"] == {
        "description": "Keeps every unknown field.",
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string"}},
        "x-kubernetes-preserve-unknown-fields": True,
    }


def test_a_zero_value_marked_as_no_crd_default_gets_no_default() -> None:
    assert _spec_properties()["enabled"] == {"type": "boolean"}
    assert ToySpec(name="x").enabled is False


class QuietSpec(KubeModel):
    """Everything optional."""

    mount_path: str = "/data"


class QuietStatus(KubeModel):
    phase: str = ""


class Quiet(KubeModel):
    """A kind whose spec and status always exist in Python."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group="toys.example.com", version="v1", kind="Quiet", plural="quiets", scope="Cluster"
    )

    spec: QuietSpec = Field(default_factory=QuietSpec)
    status: QuietStatus = Field(default_factory=QuietStatus)


def test_spec_and_status_of_a_kind_get_no_default() -> None:
    crd = custom_resource_definition(Quiet)
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert root["properties"]["spec"] == {
        "description": "Everything optional.",
        "type": "object",
        "properties": {"mountPath": {"type": "string", "default": "/data"}},
    }
    assert root["properties"]["status"] == {
        "type": "object",
        "properties": {"phase": {"type": "string", "default": ""}},
    }
    assert crd["spec"]["scope"] == "Cluster"
    assert crd_violations(crd) == []


def test_required_fields_and_no_pydantic_leftovers() -> None:
    schema = structural_schema(ToySpec)
    assert schema["required"] == ["name"]
    rendered = repr(schema)
    for leftover in ("$ref", "$defs", "'title'", "'const'", "'anyOf': [{'type': 'null'}"):
        assert leftover not in rendered


class WithExtensions(KubeModel):
    """Carries Kubernetes extensions given by hand."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "has(self.a) || has(self.b)", "message": "a or b"}
            ]
        }
    )

    a: str | None = None
    b: str | None = None
    items: list[Volume] | None = Field(
        default=None,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["mountPath"],
        },
    )


def test_kubernetes_extensions_pass_through() -> None:
    schema = structural_schema(WithExtensions)
    assert schema["x-kubernetes-validations"] == [
        {"rule": "has(self.a) || has(self.b)", "message": "a or b"}
    ]
    items = schema["properties"]["items"]
    assert items["x-kubernetes-list-type"] == "map"
    assert items["x-kubernetes-list-map-keys"] == ["mountPath"]
    assert schema_violations(schema, "x") == []


class TwoShapes(KubeModel):
    shape: Volume | Labelled


class Tree(KubeModel):
    children: list[Tree] = Field(default_factory=list)


class Pair(KubeModel):
    pair: tuple[int, str]


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        (TwoShapes, "a union of different types"),
        (Tree, "recursive type Tree"),
        (Pair, "unsupported JSON-schema keywords"),
    ],
)
def test_constructs_without_a_structural_form_are_refused(
    model: type[KubeModel], reason: str
) -> None:
    with pytest.raises(SchemaGenerationError, match=reason):
        structural_schema(model)


def test_toy_crd_as_a_whole() -> None:
    crd = custom_resource_definition(Toy)
    version = crd["spec"]["versions"][0]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"] == {"name": "toys.toys.example.com"}
    assert crd["spec"]["group"] == "toys.example.com"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"] == {
        "kind": "Toy",
        "listKind": "ToyList",
        "plural": "toys",
        "singular": "toy",
        "shortNames": ["ty"],
        "categories": ["all", "toys"],
    }
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {
        "status": {},
        "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"},
    }
    assert version["additionalPrinterColumns"] == [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "priority": 1},
    ]
    root = version["schema"]["openAPIV3Schema"]
    assert root["description"] == "A toy resource."
    assert root["required"] == ["spec"]
    assert list(root["properties"]) == ["apiVersion", "kind", "metadata", "spec", "status"]
    assert root["properties"]["metadata"] == {"type": "object"}
    assert root["properties"]["status"]["properties"]["phase"] == {
        "type": "string",
        "enum": ["", "RUNNING"],
        "default": "",
    }
    assert crd_violations(crd) == []


def test_two_models_for_one_crd_are_refused() -> None:
    expected = r"a second model for CRD toys\.toys\.example\.com"
    with pytest.raises(SchemaGenerationError, match=expected):
        custom_resource_definitions([Toy, Toy])


def test_a_model_without_crd_info_is_refused() -> None:
    with pytest.raises(SchemaGenerationError, match="has no `crd"):
        custom_resource_definition(ToySpec)


# ---------------------------------------------------------------- the served kinds


def _served_kinds() -> tuple[type[KubeModel], ...]:
    from kaiwo_contracts.crds.registry import SERVED_KINDS

    return SERVED_KINDS  # type: ignore[return-value]


@pytest.mark.parametrize("model", _served_kinds(), ids=lambda model: model.__name__)
def test_every_served_crd_is_structural(model: type[KubeModel]) -> None:
    assert crd_violations(custom_resource_definition(model)) == []


def _conditions_nodes(node: Mapping[str, Any], path: str) -> list[tuple[str, Mapping[str, Any]]]:
    found = []
    for name, sub in node.get("properties", {}).items():
        if name == "conditions":
            found.append((f"{path}.{name}", sub))
        found += _conditions_nodes(sub, f"{path}.{name}")
    if "items" in node:
        found += _conditions_nodes(node["items"], f"{path}[]")
    return found


@pytest.mark.parametrize("model", _served_kinds(), ids=lambda model: model.__name__)
def test_conditions_merge_by_type_under_server_side_apply(model: type[KubeModel]) -> None:
    root = custom_resource_definition(model)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _conditions_nodes(root, model.__name__):
        assert node.get("x-kubernetes-list-type") == "map", path
        assert node.get("x-kubernetes-list-map-keys") == ["type"], path
