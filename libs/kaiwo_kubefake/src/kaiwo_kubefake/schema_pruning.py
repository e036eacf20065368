"""Pruning: the fields of a custom resource the API server drops before storing it.

* A field not named in ``properties`` goes, unless the object has ``additionalProperties``
  (then every value is pruned by that schema). An object or list without a schema loses every
  field of its objects.
* Under ``x-kubernetes-preserve-unknown-fields`` unknown fields stay, but the fields the node
  does declare are still pruned by their own schemas.
* An ``x-kubernetes-embedded-resource`` object and the resource root keep ``apiVersion``,
  ``kind`` and ``metadata``; that metadata is cut down to the ``ObjectMeta`` fields, with empty
  ones omitted, as a round trip through the Go type does.
* ``null`` goes where the schema neither allows it (``nullable``) nor replaces it with a
  default; see :func:`prune_nulls` for server-side apply.

All functions return new values and leave their arguments untouched.
"""

from __future__ import annotations

from typing import Any

from kaiwo_kubefake.structural_schema import StructuralSchema

TYPE_AND_OBJECT_META = frozenset({"apiVersion", "kind", "metadata"})

# metav1.ObjectMeta's JSON fields, and which values its `omitempty` drops. A pointer field
# (deletionGracePeriodSeconds) keeps its zero, so only null counts as empty there.
_OBJECT_META_EMPTY: dict[str, tuple[Any, ...]] = {
    "name": ("",),
    "generateName": ("",),
    "namespace": ("",),
    "selfLink": ("",),
    "uid": ("",),
    "resourceVersion": ("",),
    "generation": (0,),
    "creationTimestamp": ("",),
    "deletionTimestamp": ("",),
    "deletionGracePeriodSeconds": (),
    "labels": ({},),
    "annotations": ({},),
    "ownerReferences": ([],),
    "finalizers": ([],),
    "managedFields": ([],),
}
OBJECT_META_FIELDS = frozenset(_OBJECT_META_EMPTY)
_OWNER_REFERENCE_FIELDS = ("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")


def prune(value: Any, schema: StructuralSchema | None) -> Any:
    """``value`` without the fields ``schema`` does not specify."""
    if schema is not None and schema.preserve_unknown_fields:
        return _prune_declared(value, schema)
    if isinstance(value, dict):
        if schema is None:
            return {}
        return {
            key: child if _is_type_or_object_meta(schema, key) else prune(child, schema.child(key))
            for key, child in value.items()
            if _is_type_or_object_meta(schema, key) or schema.declares(key)
        }
    if isinstance(value, list):
        items = schema.items if schema is not None else None
        return [prune(item, items) for item in value]
    return value


def _prune_declared(value: Any, schema: StructuralSchema | None) -> Any:
    """Below x-kubernetes-preserve-unknown-fields: unknown fields stay, declared ones are pruned."""
    if schema is None:
        return value
    if isinstance(value, dict):
        return {
            key: child
            if _is_type_or_object_meta(schema, key) or not schema.declares(key)
            else prune(child, schema.child(key))
            for key, child in value.items()
        }
    if isinstance(value, list):
        return [_prune_declared(item, schema.items) for item in value]
    return value


def _is_type_or_object_meta(schema: StructuralSchema, key: str) -> bool:
    return schema.embedded_resource and key in TYPE_AND_OBJECT_META


def coerce_object_meta(value: Any, schema: StructuralSchema | None) -> Any:
    """``value`` with the metadata of every embedded resource (the root included, if the root
    schema says ``embedded_resource``) cut down to ObjectMeta."""
    if schema is None:
        return value
    if isinstance(value, dict):
        coerced = {
            key: coerce_object_meta(child, schema.child(key)) for key, child in value.items()
        }
        if schema.embedded_resource and isinstance(coerced.get("metadata"), dict):
            coerced["metadata"] = object_meta(coerced["metadata"])
        return coerced
    if isinstance(value, list):
        return [coerce_object_meta(item, schema.items) for item in value]
    return value


def object_meta(metadata: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` as a round trip through metav1.ObjectMeta leaves it."""
    kept = {key: value for key, value in metadata.items() if not _omitted(key, value)}
    if isinstance(kept.get("ownerReferences"), list):
        kept["ownerReferences"] = [
            {k: v for k, v in reference.items() if k in _OWNER_REFERENCE_FIELDS and v is not None}
            if isinstance(reference, dict)
            else reference
            for reference in kept["ownerReferences"]
        ]
    return kept


def _omitted(key: str, value: Any) -> bool:
    if key not in _OBJECT_META_EMPTY or value is None:
        return True
    return any(type(value) is type(empty) and value == empty for empty in _OBJECT_META_EMPTY[key])


def prune_nulls(value: Any, schema: StructuralSchema | None, *, untyped_only: bool = False) -> Any:
    """``value`` without the nulls of fields that are neither nullable nor defaulted.

    Nulls in lists stay (validation rejects them where items are not nullable). Server-side
    apply keeps the nulls of typed fields too, for validation to reject (422), and drops only
    those of fields whose schema names no type: ``untyped_only``, as a v1.36 server does.
    """
    if isinstance(value, dict):
        fields = [(key, child, _child_schema(schema, key)) for key, child in value.items()]
        return {
            key: prune_nulls(child, child_schema, untyped_only=untyped_only)
            for key, child, child_schema in fields
            if not _droppable_null(child, child_schema, untyped_only=untyped_only)
        }
    if isinstance(value, list):
        items = schema.items if schema is not None else None
        return [prune_nulls(item, items, untyped_only=untyped_only) for item in value]
    return value


def _child_schema(schema: StructuralSchema | None, key: str) -> StructuralSchema | None:
    return schema.child(key) if schema is not None else None


def _droppable_null(value: Any, schema: StructuralSchema | None, *, untyped_only: bool) -> bool:
    if value is not None or schema is None or schema.nullable or schema.has_default:
        return False
    return not (untyped_only and schema.type_name)
