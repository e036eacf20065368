"""Field ownership (``metadata.managedFields``) and server-side apply.

A simplified but honest model of the API server's structured merge:

* A field path is a tuple of map keys. Maps are walked into; lists and scalars are leaves,
  so a list is owned as a whole ("atomic"), unlike the real server, which merges lists of
  ``x-kubernetes-list-type: map`` item by item. An empty map is itself a leaf.
* Each (manager, operation, subresource) owns a set of paths, stored in ``managedFields`` in the
  ``FieldsV1`` format (``{"f:spec": {"f:replicas": {}}}``), so a test can read it back.
* Apply: the applied paths go to the manager; a path another manager owns with a different
  value is a conflict (409) unless ``force``, which moves ownership; paths the manager applied
  before and no longer sends are removed from the object when nobody else owns them.
* Create/update/patch: every path whose value changed goes to the writing manager (operation
  ``Update``) and is taken from the others, without conflicts, as on the real server.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kaiwo_kubefake.errors import ApiError

FieldPath = tuple[str, ...]
_MISSING: Any = object()

# Identity and server-maintained fields that nobody owns.
_UNOWNED_METADATA = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
        "generateName",
    }
)


@dataclass(frozen=True, slots=True)
class Owner:
    manager: str
    operation: str  # "Apply" or "Update"
    subresource: str = ""


Ownership = dict[Owner, frozenset[FieldPath]]


def owned_view(
    obj: dict[str, Any], *, subresource: str, status_subresource: bool
) -> dict[str, Any]:
    """The part of ``obj`` a write through ``subresource`` ("" or "status") can own."""
    view: dict[str, Any] = {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "status" and status_subresource and subresource != "status":
            continue
        if subresource == "status" and key != "status":
            continue
        if key == "metadata" and isinstance(value, dict):
            kept = {k: v for k, v in value.items() if k not in _UNOWNED_METADATA}
            if kept:
                view[key] = kept
            continue
        view[key] = value
    return view


def leaf_paths(value: Any, prefix: FieldPath = ()) -> set[FieldPath]:
    if isinstance(value, dict) and value:
        paths: set[FieldPath] = set()
        for key, child in value.items():
            paths |= leaf_paths(child, (*prefix, key))
        return paths
    return {prefix} if prefix else set()


def value_at(obj: Any, path: FieldPath) -> Any:
    current = obj
    for key in path:
        if not isinstance(current, dict) or key not in current:
            return _MISSING
        current = current[key]
    return current


def _set_at(obj: dict[str, Any], path: FieldPath, value: Any) -> None:
    current = obj
    for key in path[:-1]:
        if not isinstance(current.get(key), dict):
            current[key] = {}
        current = current[key]
    if value == {} and isinstance(current.get(path[-1]), dict):
        return  # an applied empty map keeps what is already inside it
    current[path[-1]] = copy.deepcopy(value)


def _remove_at(obj: dict[str, Any], path: FieldPath, *, keep: set[FieldPath]) -> None:
    """Remove ``path``, then parents left empty (below the top level) that nobody keeps."""
    parents: list[dict[str, Any]] = [obj]
    current = obj
    for key in path[:-1]:
        child = current.get(key)
        if not isinstance(child, dict):
            return
        parents.append(child)
        current = child
    current.pop(path[-1], None)
    for depth in range(len(path) - 1, 1, -1):
        node, parent = parents[depth], parents[depth - 1]
        if node or path[:depth] in keep:
            break
        parent.pop(path[depth - 1], None)


def _contests(applied: FieldPath, owned: FieldPath, live: Any) -> bool:
    """Whether applying ``applied`` touches the owned ``owned``: the same path, a parent of
    it, or a path inside an owned atomic value (a list or scalar). A field inside a map the
    other manager owns only as an empty map is free: it set the map, not what goes in it."""
    if not _overlaps(applied, owned) or len(applied) <= len(owned):
        return _overlaps(applied, owned)
    return not isinstance(value_at(live, owned), dict)


def _overlaps(a: FieldPath, b: FieldPath) -> bool:
    shorter = min(len(a), len(b))
    return a[:shorter] == b[:shorter]


# ------------------------------------------------------------------ managedFields encoding


def to_fields_v1(paths: Iterable[FieldPath]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for key in path:
            node = node.setdefault(f"f:{key}", {})
    _mark_owned_parents(tree, set(paths), ())
    return tree


def _mark_owned_parents(node: dict[str, Any], paths: set[FieldPath], prefix: FieldPath) -> None:
    for key, child in node.items():
        path = (*prefix, key[2:])
        if child and path in paths:
            child["."] = {}
        if isinstance(child, dict):
            _mark_owned_parents({k: v for k, v in child.items() if k != "."}, paths, path)


def from_fields_v1(tree: dict[str, Any], prefix: FieldPath = ()) -> set[FieldPath]:
    """Paths in a FieldsV1 tree; list-item keys (``k:``, ``v:``, ``i:``) own their list."""
    paths: set[FieldPath] = set()
    for key, child in tree.items():
        if key == ".":
            if prefix:
                paths.add(prefix)
            continue
        if not key.startswith("f:"):
            if prefix:
                paths.add(prefix)
            continue
        path = (*prefix, key[2:])
        if child:
            paths |= from_fields_v1(child, path)
        else:
            paths.add(path)
    return paths


def read_ownership(obj: dict[str, Any] | None) -> Ownership:
    ownership: Ownership = {}
    for entry in ((obj or {}).get("metadata") or {}).get("managedFields") or []:
        owner = Owner(
            manager=entry.get("manager", ""),
            operation=entry.get("operation", "Update"),
            subresource=entry.get("subresource", ""),
        )
        paths = from_fields_v1(entry.get("fieldsV1") or {})
        ownership[owner] = ownership.get(owner, frozenset()) | frozenset(paths)
    return ownership


def write_ownership(
    obj: dict[str, Any], ownership: Ownership, *, previous: Ownership, now: str
) -> None:
    """Store ``ownership`` in ``obj``; entries that did not change keep their timestamp."""
    old_times = {
        Owner(e.get("manager", ""), e.get("operation", "Update"), e.get("subresource", "")): e.get(
            "time"
        )
        for e in (obj.get("metadata") or {}).get("managedFields") or []
    }
    entries = []
    for owner in sorted(ownership, key=lambda o: (o.manager, o.operation, o.subresource)):
        paths = ownership[owner]
        if not paths:
            continue
        unchanged = previous.get(owner) == paths and old_times.get(owner)
        entry: dict[str, Any] = {
            "manager": owner.manager,
            "operation": owner.operation,
            "apiVersion": obj.get("apiVersion", ""),
            "time": old_times[owner] if unchanged else now,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(paths),
        }
        if owner.subresource:
            entry["subresource"] = owner.subresource
        entries.append(entry)
    metadata = obj.setdefault("metadata", {})
    if entries:
        metadata["managedFields"] = entries
    else:
        metadata.pop("managedFields", None)


# ------------------------------------------------------------------ writes


def record_update(
    *,
    old: dict[str, Any] | None,
    new: dict[str, Any],
    manager: str,
    subresource: str,
    status_subresource: bool,
) -> Ownership:
    """Ownership after a create/update/patch by ``manager`` turned ``old`` into ``new``."""
    ownership = read_ownership(old)
    old_view = owned_view(old or {}, subresource=subresource, status_subresource=status_subresource)
    new_view = owned_view(new, subresource=subresource, status_subresource=status_subresource)
    new_paths = leaf_paths(new_view)
    changed = {p for p in new_paths if value_at(old_view, p) != value_at(new_view, p)}
    full_new = leaf_paths(owned_view(new, subresource="", status_subresource=False))
    result: Ownership = {}
    for owner, paths in ownership.items():
        kept = frozenset(p for p in paths if p in full_new and p not in changed)
        if kept:
            result[owner] = kept
    if changed:
        key = Owner(manager=manager, operation="Update", subresource=subresource)
        result[key] = result.get(key, frozenset()) | frozenset(changed)
    return result


@dataclass(frozen=True, slots=True)
class ApplyResult:
    obj: dict[str, Any]
    ownership: Ownership


def _describe_conflicts(conflicts: dict[str, set[FieldPath]], api_version: str) -> str:
    lines = [
        f'conflict with "{manager}" using {api_version}: '
        + ", ".join("." + ".".join(path) for path in sorted(paths))
        for manager, paths in sorted(conflicts.items())
    ]
    count = sum(len(paths) for paths in conflicts.values())
    noun = "conflict" if count == 1 else "conflicts"
    return f"Apply failed with {count} {noun}: " + "; ".join(lines)


def server_side_apply(
    *,
    live: dict[str, Any] | None,
    applied: dict[str, Any],
    manager: str,
    force: bool,
    subresource: str,
    status_subresource: bool,
) -> ApplyResult:
    """Merge the applied configuration into ``live`` (or a new object) for ``manager``."""
    config = owned_view(applied, subresource=subresource, status_subresource=status_subresource)
    new_paths = leaf_paths(config)
    ownership = read_ownership(live)
    me = Owner(manager=manager, operation="Apply", subresource=subresource)
    conflicts: dict[str, set[FieldPath]] = {}
    for owner, paths in list(ownership.items()):
        if owner == me:
            continue
        contested = {
            p
            for p in new_paths
            if any(_contests(p, q, live) for q in paths)
            and value_at(live, p) != value_at(config, p)
        }
        if not contested:
            continue
        if force:
            ownership[owner] = frozenset(
                q for q in paths if not any(_overlaps(p, q) for p in contested)
            )
        else:
            conflicts.setdefault(owner.manager, set()).update(contested)
    if conflicts:
        raise ApiError(
            code=409,
            reason="Conflict",
            message=_describe_conflicts(conflicts, str(applied.get("apiVersion", ""))),
            details={
                "causes": [
                    {
                        "reason": "FieldManagerConflict",
                        "message": f'conflict with "{manager_name}"',
                        "field": "." + ".".join(path),
                    }
                    for manager_name, paths in sorted(conflicts.items())
                    for path in sorted(paths)
                ]
            },
        )
    result = copy.deepcopy(live) if live is not None else {}
    for path in sorted(new_paths):
        _set_at(result, path, value_at(config, path))
    others = set().union(*(paths for owner, paths in ownership.items() if owner != me))
    for path in sorted(ownership.get(me, frozenset()) - new_paths, key=len, reverse=True):
        if not any(_overlaps(path, q) for q in others | new_paths):
            _remove_at(result, path, keep=others | new_paths)
    ownership[me] = frozenset(new_paths)
    return ApplyResult(obj=result, ownership={o: p for o, p in ownership.items() if p})


def canonical(value: Any) -> str:
    """Equal JSON values give equal strings (used to detect no-op writes)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
