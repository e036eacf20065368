"""The structural schema the API server demands, rewritten from pydantic's JSON schema.

pydantic's JSON schema is close to, but not, a *structural schema* as the API server demands.
:func:`structural_schema` rewrites it:

* every ``$ref`` is inlined (CRDs have no ``$defs``); a field's own description wins over the
  referenced class docstring;
* ``X | None`` becomes the schema of ``X``. ``nullable: true`` is added only where an explicit
  ``null`` means something different from leaving the field out: a required field, a field
  whose default is not ``null``, list items and map values. Elsewhere the API server simply
  prunes a ``null``, which is what leaving the field out means;
* ``title`` is dropped, ``const`` becomes a one-value ``enum``, numeric ``exclusiveMinimum`` /
  ``exclusiveMaximum`` become the OpenAPI v3.0 boolean form, ``uniqueItems`` on a list of
  scalars becomes ``x-kubernetes-list-type: set``;
* :data:`~kaiwo_contracts.crds.quantity.Quantity` (``x-kubernetes-int-or-string``) keeps only the
  flag and the one ``anyOf: [integer, string]`` form the API server allows; a string pattern is
  lifted next to it;
* ``dict[str, Any]`` sub-trees (:data:`~kaiwo_contracts.crds.base.OpenObject`) become
  ``type: object`` with ``x-kubernetes-preserve-unknown-fields: true``; ``Any`` becomes a node
  with only that flag; a model with ``extra="allow"`` keeps its properties and the flag;
* a default made by a ``default_factory`` that builds a model is written as the model's wire
  form (usually ``{}``) so the API server applies the nested defaults, as kubebuilder's
  ``default={}`` does; empty list and map factories are not written, and ``null`` defaults never;
* a field annotated with :data:`NoCrdDefault` keeps its Python default but gets none in the CRD:
  for defaults that are only Go's zero value (``false``, ``0``, ``""``), which the API reference
  does not list and the API server should not write into every stored object. ``spec`` and
  ``status`` of a top-level kind never get a default.

:data:`~kaiwo_contracts.crds.base.EmbeddedObject` is written like ``OpenObject``, **without**
``x-kubernetes-embedded-resource``. The flag is structurally valid, but the API server then
requires ``apiVersion`` and ``kind`` inside the embedded value and validates its ``metadata``,
whereas manifests written for upstream Kaiwo give ``spec.job``/``spec.deployment`` as just
``{spec: ...}`` (the upstream CRD describes them as ordinary objects). Keeping the flag would
reject manifests users already have.

Anything with no structural equivalent (unions of different types, recursive models, tuples)
raises :class:`SchemaGenerationError` naming the path, so a model change can never produce a CRD
the API server rejects without the generator saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue, NoDefault
from pydantic_core import core_schema

from kaiwo_contracts.crds.base import (
    EMBEDDED_RESOURCE,
    INT_OR_STRING,
    LIST_MAP_KEYS,
    LIST_TYPE,
    PRESERVE_UNKNOWN,
    KubeModel,
)

OMIT_CRD_DEFAULT = "x-kaiwo-omit-crd-default"
NoCrdDefault = Field(json_schema_extra={OMIT_CRD_DEFAULT: True})
"""Field metadata: keep the Python default, write no ``default`` into the CRD.

``storage_enabled: Annotated[bool, NoCrdDefault] = False``
"""

MAP_TYPE = "x-kubernetes-map-type"
VALIDATIONS = "x-kubernetes-validations"

_REF_PREFIX = "#/$defs/"
_SCALAR_TYPES = frozenset({"string", "integer", "number", "boolean"})
# Formats the API server knows; any other one (pydantic's "uri-reference", ...) is dropped.
_KNOWN_FORMATS = frozenset(
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
# Keys copied as they are once the node has been rewritten.
_COPIED = (
    "description",
    "type",
    "format",
    "enum",
    "default",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "required",
    LIST_TYPE,
    LIST_MAP_KEYS,
    MAP_TYPE,
    VALIDATIONS,
)
# Keys the rewrite consumes itself (or drops on purpose).
_HANDLED = frozenset(
    {
        *_COPIED,
        "$ref",
        "title",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "properties",
        "additionalProperties",
        "items",
        "uniqueItems",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        PRESERVE_UNKNOWN,
        EMBEDDED_RESOURCE,
        INT_OR_STRING,
        OMIT_CRD_DEFAULT,
    }
)


class SchemaGenerationError(ValueError):
    """A model uses a construct that has no structural-schema equivalent."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class _KubeJsonSchema(GenerateJsonSchema):
    """pydantic's generator, with defaults written the way the API server should apply them."""

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if factory is None:
            return super().get_default_value(schema)
        if schema.get("default_factory_takes_data"):
            return NoDefault
        produced = factory()  # type: ignore[call-arg]
        # A nested model's factory default ({}) lets the API server fill in its defaults;
        # empty lists and maps would only be persisted noise.
        return produced if isinstance(produced, BaseModel) else NoDefault

    def encode_default(self, dft: Any) -> Any:
        if isinstance(dft, KubeModel):
            return dft.to_wire()
        return super().encode_default(dft)

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        json_schema = super().default_schema(schema)
        if json_schema.get("default", NoDefault) is None:
            del json_schema["default"]
        return json_schema


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of ``model`` (any model, top-level or nested)."""
    raw = model.model_json_schema(
        by_alias=True, mode="validation", schema_generator=_KubeJsonSchema
    )
    definitions = raw.pop("$defs", {})
    return _Rewriter(definitions).node(raw, path=model.__name__, null_meaningful=False)


class _Rewriter:
    """Turns one pydantic JSON schema (with its ``$defs``) into a structural schema."""

    def __init__(self, definitions: Mapping[str, Any]) -> None:
        self._definitions = definitions
        self._resolving: list[str] = []

    def node(self, raw: Mapping[str, Any], *, path: str, null_meaningful: bool) -> dict[str, Any]:
        if raw.get(OMIT_CRD_DEFAULT):
            raw = {k: v for k, v in raw.items() if k not in {"default", OMIT_CRD_DEFAULT}}
        if "$ref" in raw:
            return self._referenced(raw, path=path, null_meaningful=null_meaningful)
        for junctor in ("anyOf", "oneOf", "allOf"):
            if junctor in raw and not raw.get(INT_OR_STRING):
                return self._union(raw, junctor, path=path, null_meaningful=null_meaningful)
        unknown = sorted(set(raw) - _HANDLED)
        if unknown:
            raise SchemaGenerationError(path, f"unsupported JSON-schema keywords {unknown}")
        if raw.get(INT_OR_STRING):
            return self._int_or_string(raw, path=path)
        return self._typed(raw, path=path)

    def _referenced(
        self, raw: Mapping[str, Any], *, path: str, null_meaningful: bool
    ) -> dict[str, Any]:
        ref = raw["$ref"]
        if not ref.startswith(_REF_PREFIX):
            raise SchemaGenerationError(path, f"unsupported reference {ref}")
        name = ref.removeprefix(_REF_PREFIX)
        if name in self._resolving:
            raise SchemaGenerationError(path, f"recursive type {name} has no structural schema")
        # The field's own keys (description, default, extensions) override the class's.
        merged = {**self._definitions[name], **{k: v for k, v in raw.items() if k != "$ref"}}
        self._resolving.append(name)
        try:
            return self.node(merged, path=path, null_meaningful=null_meaningful)
        finally:
            self._resolving.pop()

    def _union(
        self, raw: Mapping[str, Any], junctor: str, *, path: str, null_meaningful: bool
    ) -> dict[str, Any]:
        branches = raw[junctor]
        outer = {k: v for k, v in raw.items() if k != junctor}
        if junctor == "allOf" and len(branches) == 1:
            return self.node({**branches[0], **outer}, path=path, null_meaningful=null_meaningful)
        if junctor == "allOf":
            raise SchemaGenerationError(path, "allOf with several schemas is not supported")
        values = [branch for branch in branches if branch != {"type": "null"}]
        nullable = len(values) < len(branches)
        if len(values) == 1:
            merged = {**values[0], **outer}
        elif values == [{"type": "integer"}, {"type": "string"}]:
            merged = {**outer, INT_OR_STRING: True}
        elif (choices := self._enum_choices(values)) is not None:
            merged = {**outer, "enum": choices}
        else:
            raise SchemaGenerationError(path, "a union of different types has no structural form")
        converted = self.node(merged, path=path, null_meaningful=null_meaningful)
        if nullable and null_meaningful:
            converted["nullable"] = True
        return converted

    def _enum_choices(self, values: list[Mapping[str, Any]]) -> list[Any] | None:
        """The values of a union of enums and literals (``Effect | Literal[""]``), else None."""
        choices: list[Any] = []
        for branch in values:
            value = branch
            if "$ref" in branch:
                value = self._definitions.get(branch["$ref"].removeprefix(_REF_PREFIX), {})
            if not set(value) <= {"type", "enum", "const", "title", "description"}:
                return None
            if "const" in value:
                choices.append(value["const"])
            elif "enum" in value:
                choices.extend(value["enum"])
            else:
                return None
        return list(dict.fromkeys(choices))

    def _int_or_string(self, raw: Mapping[str, Any], *, path: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if "description" in raw:
            out["description"] = raw["description"]
        out[INT_OR_STRING] = True
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        patterns = {branch["pattern"] for branch in raw.get("anyOf", []) if "pattern" in branch} | (
            {raw["pattern"]} if "pattern" in raw else set()
        )
        if len(patterns) > 1:
            raise SchemaGenerationError(path, "an int-or-string with several patterns")
        if patterns:
            out["pattern"] = patterns.pop()
        for key in ("minimum", "default", VALIDATIONS):
            if key in raw:
                out[key] = raw[key]
        return out

    def _typed(self, raw: Mapping[str, Any], *, path: str) -> dict[str, Any]:
        out: dict[str, Any] = {key: raw[key] for key in _COPIED if key in raw}
        if "const" in raw:
            out["enum"] = [raw["const"]]
        if "enum" in out and "type" not in out:
            out["type"] = _enum_type(out["enum"], path=path)
        if out.get("format") not in _KNOWN_FORMATS:
            out.pop("format", None)
        self._exclusive_bounds(out)
        if "required" in out and not out["required"]:
            del out["required"]
        preserve = bool(raw.get(PRESERVE_UNKNOWN)) or raw.get("additionalProperties") is True
        if "properties" in raw:
            out["properties"] = {
                name: self._property(sub, name=name, parent=raw, path=f"{path}.{name}")
                for name, sub in raw["properties"].items()
            }
        additional = raw.get("additionalProperties")
        if isinstance(additional, Mapping):
            if "properties" in raw:
                raise SchemaGenerationError(path, "properties and a typed map at once")
            out["additionalProperties"] = self.node(
                additional, path=f"{path}[*]", null_meaningful=True
            )
        if "items" in raw:
            out["items"] = self.node(raw["items"], path=f"{path}[]", null_meaningful=True)
        if raw.get("uniqueItems"):
            self._unique_items(out, path=path)
        if preserve:
            out.setdefault("type", "object")
            out[PRESERVE_UNKNOWN] = True
        if "type" not in out and not preserve:
            # `Any`: every JSON value is allowed and kept as it is.
            return {k: v for k, v in out.items() if k == "description"} | {PRESERVE_UNKNOWN: True}
        return out

    def _property(
        self, sub: Mapping[str, Any], *, name: str, parent: Mapping[str, Any], path: str
    ) -> dict[str, Any]:
        required = name in parent.get("required", ())
        has_value_default = sub.get("default") is not None and "default" in sub
        return self.node(sub, path=path, null_meaningful=required or has_value_default)

    @staticmethod
    def _exclusive_bounds(out: dict[str, Any]) -> None:
        for exclusive, inclusive in (
            ("exclusiveMinimum", "minimum"),
            ("exclusiveMaximum", "maximum"),
        ):
            bound = out.get(exclusive)
            if isinstance(bound, bool) or bound is None:
                continue
            out[inclusive] = bound
            out[exclusive] = True

    @staticmethod
    def _unique_items(out: dict[str, Any], *, path: str) -> None:
        items = out.get("items", {})
        if items.get("type") not in _SCALAR_TYPES:
            raise SchemaGenerationError(path, "a set of non-scalar items has no structural form")
        out.setdefault(LIST_TYPE, "set")


def _json_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return None


def _enum_type(values: list[Any], *, path: str) -> str:
    kinds = {_json_type(value) for value in values}
    if len(kinds) != 1 or None in kinds:
        raise SchemaGenerationError(path, f"enum values of mixed or unsupported types {values}")
    kind = kinds.pop()
    assert kind is not None
    return kind
