"""PATCH bodies: JSON merge patch, JSON patch and (approximately) strategic merge patch.

Strategic merge patch is a JSON merge patch with two additions: lists whose items are all
objects carrying ``name`` are merged item by item on ``name`` (containers, env, volumes, ports
with names, volumeMounts keyed by name only, imagePullSecrets), and a ``{"$patch": "delete"}``
item or ``"$patch": "replace"`` map directive is honoured. Every other list is replaced whole.
The real API server knows a merge key per field from the Go types (``containerPort``,
``mountPath``, ``uid`` for ownerReferences ...); the fake does not, which only matters for
patches that rely on those other keys.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from kaiwo_kubefake.errors import ApiError, bad_request

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (MERGE_PATCH, JSON_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: dict[str, Any], operations: Any) -> dict[str, Any]:
    """RFC 6902 operations; a failing ``test`` or a bad path is a 422 as on the real server."""
    if not isinstance(operations, list):
        raise bad_request("a JSON patch must be a list of operations")
    try:
        result = jsonpatch.JsonPatch(operations).apply(target)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
        raise ApiError(code=422, reason="Invalid", message=f"the patch failed: {error}") from error
    if not isinstance(result, dict):
        raise bad_request("a JSON patch must leave an object")
    return result


def _is_named_list(items: list[Any]) -> bool:
    return all(isinstance(item, dict) and "name" in item for item in items)


def _merge_named_lists(target: list[Any], patch: list[Any]) -> list[Any]:
    merged = [copy.deepcopy(item) for item in target]
    positions = {item["name"]: index for index, item in enumerate(merged)}
    deleted: set[str] = set()
    for item in patch:
        name = item["name"]
        if item.get("$patch") == "delete":
            deleted.add(name)
        elif name in positions:
            merged[positions[name]] = strategic_merge_patch(merged[positions[name]], item)
        else:
            positions[name] = len(merged)
            merged.append(strategic_merge_patch({}, item))
    return [item for item in merged if item["name"] not in deleted]


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """A merge patch that merges lists of named objects by name (see the module docstring)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key == "$patch":
            continue
        current = result.get(key)
        if value is None:
            result.pop(key, None)
        elif (
            isinstance(value, list)
            and isinstance(current, list)
            and _is_named_list(value)
            and _is_named_list(current)
        ):
            result[key] = _merge_named_lists(current, value)
        else:
            merged = strategic_merge_patch(current, value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
    return result


def apply_patch(*, content_type: str, target: dict[str, Any], body: Any) -> dict[str, Any]:
    """Apply a merge, JSON or strategic merge patch (apply patches go through ``ssa``)."""
    if content_type == JSON_PATCH:
        return json_patch(target, body)
    if not isinstance(body, dict):
        raise bad_request("a merge patch must be a JSON object")
    if content_type == MERGE_PATCH:
        result = merge_patch(target, body)
    else:
        result = strategic_merge_patch(target, body)
    assert isinstance(result, dict)
    return result
