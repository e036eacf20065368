"""Defaulting: the ``default`` values the API server fills into a custom resource.

A property's default goes in when the field is absent, or null where the schema does not allow
null; list items and map values that are such nulls take their schema's default. Defaults fill
only objects that exist (a default under ``spec.a.b`` does not create ``spec.a``), and a
default value is itself defaulted, so ``default: {}`` on an object brings its fields' defaults.
"""

from __future__ import annotations

from typing import Any

from kaiwo_kubefake.structural_schema import StructuralSchema


def apply_defaults(value: Any, schema: StructuralSchema | None) -> Any:
    """``value`` with ``schema``'s defaults filled in (a new value; the argument is untouched)."""
    if schema is None:
        return value
    if isinstance(value, dict):
        filled = dict(value)
        for key, prop in schema.properties.items():
            if prop.has_default and (key not in filled or _replaceable_null(filled[key], prop)):
                filled[key] = prop.default()
        return {key: _default_child(child, schema.child(key)) for key, child in filled.items()}
    if isinstance(value, list):
        return [_default_child(item, schema.items) for item in value]
    return value


def _default_child(value: Any, schema: StructuralSchema | None) -> Any:
    if schema is not None and schema.has_default and _replaceable_null(value, schema):
        value = schema.default()
    return apply_defaults(value, schema)


def _replaceable_null(value: Any, schema: StructuralSchema) -> bool:
    return value is None and not schema.nullable
