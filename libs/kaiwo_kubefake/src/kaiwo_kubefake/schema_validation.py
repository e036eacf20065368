"""The schema checks of the API server that pruning and defaulting leave visible.

* :func:`violations`: a null left where the schema names a type and does not say ``nullable``
  (a list item, or anything in a server-side apply) is 422 ``must be of type``; an embedded
  resource without ``apiVersion`` or ``kind`` is 422 ``Required value``. Other value
  validations (types of non-null values, enum, pattern, CEL ...) are not checked.
* :func:`undeclared_fields`: server-side apply turns the applied configuration into a typed
  object first; a field the schema does not declare fails there (a 500 on a v1.36 server)
  instead of being pruned. Below ``x-kubernetes-preserve-unknown-fields``, and in an object
  that declares neither ``properties`` nor ``additionalProperties``, any field is declared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kaiwo_kubefake.schema_pruning import OBJECT_META_FIELDS, TYPE_AND_OBJECT_META
from kaiwo_kubefake.structural_schema import StructuralSchema


@dataclass(frozen=True, slots=True)
class Violation:
    """One 422 cause: reason, field path and message, as the API server words them."""

    reason: str
    field: str
    message: str


def violations(value: Any, schema: StructuralSchema | None, *, path: str = "") -> list[Violation]:
    """Disallowed nulls first, then embedded resources missing apiVersion or kind."""
    return _null_violations(value, schema, path=path) + _embedded_violations(
        value, schema, path=path
    )


def _null_violations(value: Any, schema: StructuralSchema | None, *, path: str) -> list[Violation]:
    if schema is None:
        return []
    if value is None:
        if schema.nullable or not schema.type_name:
            return []
        return [
            Violation(
                reason="FieldValueTypeInvalid",
                field=path,
                message=f'Invalid value: "null": {path} in body must be of type '
                f'{schema.type_name}: "null"',
            )
        ]
    found: list[Violation] = []
    for child_path, child, child_schema in _children(value, schema, path=path):
        found += _null_violations(child, child_schema, path=child_path)
    return found


def _embedded_violations(
    value: Any, schema: StructuralSchema | None, *, path: str
) -> list[Violation]:
    if schema is None:
        return []
    found = [
        Violation(reason="FieldValueRequired", field=f"{path}.{key}", message="Required value")
        for key in ("apiVersion", "kind")
        if schema.embedded_resource and isinstance(value, dict) and not value.get(key)
    ]
    for child_path, child, child_schema in _children(value, schema, path=path):
        found += _embedded_violations(child, child_schema, path=child_path)
    return found


def _children(
    value: Any, schema: StructuralSchema, *, path: str
) -> list[tuple[str, Any, StructuralSchema | None]]:
    """(path, value, schema) of each field or item, the embedded type and object meta aside."""
    if isinstance(value, dict):
        return [
            (f"{path}.{key}" if path else key, child, schema.child(key))
            for key, child in value.items()
            if not (schema.embedded_resource and key in TYPE_AND_OBJECT_META)
        ]
    if isinstance(value, list):
        return [(f"{path}[{index}]", item, schema.items) for index, item in enumerate(value)]
    return []


def undeclared_fields(applied: dict[str, Any], schema: StructuralSchema) -> list[str]:
    """Paths (``.spec.items[0].x``) of the fields of an apply configuration the schema lacks,
    sorted; the root's metadata may hold only ObjectMeta fields."""
    return sorted(_undeclared(applied, schema, path="", root=True))


def _undeclared(value: Any, schema: StructuralSchema | None, *, path: str, root: bool) -> list[str]:
    embedded = root or (schema is not None and schema.embedded_resource)
    if schema is None or (schema.preserve_unknown_fields and not embedded):
        return []
    if isinstance(value, list):
        found: list[str] = []
        for index, item in enumerate(value):
            found += _undeclared(item, schema.items, path=f"{path}[{index}]", root=False)
        return found
    if not isinstance(value, dict):
        return []
    found = []
    for key, child in value.items():
        child_path = f"{path}.{key}"
        if embedded and key == "metadata" and isinstance(child, dict):
            found += [f"{child_path}.{name}" for name in child if name not in OBJECT_META_FIELDS]
        elif (embedded and key in TYPE_AND_OBJECT_META) or schema.preserve_unknown_fields:
            continue  # preserved fields are declared all the way down
        elif schema.declares(key):
            found += _undeclared(child, schema.child(key), path=child_path, root=False)
        elif schema.properties:
            found.append(child_path)
    return found
