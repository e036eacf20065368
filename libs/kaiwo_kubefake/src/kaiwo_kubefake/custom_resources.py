"""What the API server does to a custom resource's body against its CRD version's schema.

Every write of a kind that has a structural schema (create, update, every patch, apply, the
status and scale subresources) stores :func:`conform`'s result: pruned, metadata cut down to
ObjectMeta, disallowed nulls dropped, defaulted, then null-checked. The stored object is
therefore what the real server would return on a read, which it also defaults; the fake has
no separate read-time defaulting. Kinds without a schema (built-ins, open schemas) pass
through unchanged.

A CRD's versions share the stored objects (conversion strategy None): a write is conformed to
its own version's schema and then to the storage version's; a read through another version is
pruned by that version's schema (:func:`served`), as a v1.36 server does. When a CRD's schema
changes, the store passes its objects through :func:`read_back` once, which is what the real
server's reads show from then on (same resourceVersion, no watch event).
"""

from __future__ import annotations

from typing import Any

from kaiwo_kubefake import errors
from kaiwo_kubefake.kinds import ResourceKind
from kaiwo_kubefake.schema_defaulting import apply_defaults
from kaiwo_kubefake.schema_pruning import coerce_object_meta, prune, prune_nulls
from kaiwo_kubefake.schema_validation import undeclared_fields, violations
from kaiwo_kubefake.structural_schema import StructuralSchema, as_resource_root


def conform(kind: ResourceKind, obj: dict[str, Any], *, applied: bool = False) -> dict[str, Any]:
    """``obj`` as the API server stores it; 422 Invalid for nulls the schema does not allow.

    ``applied``: the object is the result of a server-side apply, which keeps the nulls of
    typed fields (and so rejects them) where other writes drop them. An object written through
    a version other than the storage version is converted to that one (pruned by its schema)
    and defaulted by it when read back; the fake stores it that way at once.
    """
    result = obj
    if kind.schema is not None:
        root = as_resource_root(kind.schema)
        result = apply_defaults(_pruned(result, root, untyped_only=applied), root)
        _check(kind, result)
    if not kind.storage_version and kind.storage_schema is not None:
        result = _read_back(result, kind.storage_schema)
    return result


def read_back(kind: ResourceKind, obj: dict[str, Any]) -> dict[str, Any]:
    """A stored object as the API server reads it from storage with ``kind``'s schema (that
    of the storage version): pruned and defaulted, not validated."""
    return obj if kind.schema is None else _read_back(obj, kind.schema)


def _read_back(obj: dict[str, Any], schema: StructuralSchema) -> dict[str, Any]:
    root = as_resource_root(schema)
    result: dict[str, Any] = apply_defaults(_pruned(obj, root, untyped_only=False), root)
    return result


def served(kind: ResourceKind, obj: dict[str, Any]) -> dict[str, Any]:
    """A stored object as read through ``kind``'s version: converted from the storage version,
    so pruned by this version's schema (and not defaulted by it)."""
    if kind.storage_version or kind.schema is None:
        return obj
    pruned: dict[str, Any] = _pruned(obj, as_resource_root(kind.schema), untyped_only=False)
    return pruned


def _pruned(obj: Any, root: StructuralSchema, *, untyped_only: bool) -> Any:
    return prune_nulls(coerce_object_meta(prune(obj, root), root), root, untyped_only=untyped_only)


def _check(kind: ResourceKind, obj: dict[str, Any]) -> None:
    assert kind.schema is not None
    found = violations(obj, kind.schema)
    if found:
        raise errors.invalid(
            name=str((obj.get("metadata") or {}).get("name", "")),
            group=kind.group,
            kind=kind.kind,
            causes=[(v.reason, v.field, v.message) for v in found],
        )


def check_apply_configuration(kind: ResourceKind, applied: dict[str, Any]) -> None:
    """Refuse (500, as the real server does) an apply configuration with undeclared fields."""
    if kind.schema is None:
        return
    paths = undeclared_fields(applied, kind.schema)
    if paths:
        metadata = applied.get("metadata") or {}
        raise errors.undeclared_in_schema(
            namespace=str(metadata.get("namespace") or ""),
            name=str(metadata.get("name") or ""),
            api_version=kind.api_version,
            kind=kind.kind,
            paths=paths,
        )
