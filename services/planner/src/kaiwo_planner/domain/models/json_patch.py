"""RFC 6902 JSON Patch, applied to a model-server Pod (``modelServerPods.jsonPatches``).

Upstream applies the configured patches to every model-server Pod before hashing its spec, so
a patch that changes what Pods run rolls them. All six operations (add, remove, replace,
move, copy, test), JSON Pointer paths (RFC 6901: ``~1`` is ``/``, ``~0`` is ``~``, ``-`` the
end of an array). A patch that cannot be applied raises :class:`JsonPatchError`; upstream then
silently creates no Pods, here the Model's ``Configured`` condition says which patch failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kaiwo_planner.domain.state.json_trees import copy_tree


class JsonPatchError(ValueError):
    """A patch operation that cannot be applied (the message names it)."""


def apply_patches(document: Any, operations: Sequence[Mapping[str, Any]]) -> Any:
    """``document`` with ``operations`` applied in order (``document`` is not changed)."""
    result = copy_tree(document)
    for index, operation in enumerate(operations):
        try:
            result = _apply(result, operation)
        except JsonPatchError as error:
            raise JsonPatchError(f"jsonPatches[{index}] ({operation.get('op')}): {error}") from None
    return result


def _apply(document: Any, operation: Mapping[str, Any]) -> Any:
    op, path = operation.get("op"), str(operation.get("path", ""))
    match op:
        case "add":
            return _add(document, _pointer(path), copy_tree(_value(operation)))
        case "remove":
            return _remove(document, _pointer(path))[0]
        case "replace":
            removed, _ = _remove(document, _pointer(path))
            return _add(removed, _pointer(path), copy_tree(_value(operation)))
        case "move":
            source = _pointer(str(operation.get("from", "")))
            removed, value = _remove(document, source)
            return _add(removed, _pointer(path), value)
        case "copy":
            value = _get(document, _pointer(str(operation.get("from", ""))))
            return _add(document, _pointer(path), copy_tree(value))
        case "test":
            if _get(document, _pointer(path)) != _value(operation):
                raise JsonPatchError(f"{path} does not hold the tested value")
            return document
    raise JsonPatchError(f"unknown operation {op!r}")


def _value(operation: Mapping[str, Any]) -> Any:
    if "value" not in operation:
        raise JsonPatchError("no value")
    return operation["value"]


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise JsonPatchError(f"{path!r} is not a JSON Pointer")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _index(container: list[Any], step: str, *, inserting: bool) -> int:
    if step == "-" and inserting:
        return len(container)
    if not step.isdigit() or (step != "0" and step.startswith("0")):
        raise JsonPatchError(f"{step!r} is not an array index")
    index = int(step)
    if index > len(container) or (index == len(container) and not inserting):
        raise JsonPatchError(f"index {index} is out of range")
    return index


def _get(document: Any, parts: list[str]) -> Any:
    found = document
    for step in parts:
        if isinstance(found, dict):
            if step not in found:
                raise JsonPatchError(f"no member {step!r}")
            found = found[step]
        elif isinstance(found, list):
            found = found[_index(found, step, inserting=False)]
        else:
            raise JsonPatchError(f"cannot descend into {type(found).__name__} at {step!r}")
    return found


def _add(document: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent = _get(document, parts[:-1])
    step = parts[-1]
    if isinstance(parent, dict):
        parent[step] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, step, inserting=True), value)
    else:
        raise JsonPatchError(f"cannot add into {type(parent).__name__}")
    return document


def _remove(document: Any, parts: list[str]) -> tuple[Any, Any]:
    if not parts:
        raise JsonPatchError("cannot remove the whole document")
    parent = _get(document, parts[:-1])
    step = parts[-1]
    if isinstance(parent, dict):
        if step not in parent:
            raise JsonPatchError(f"no member {step!r}")
        return document, parent.pop(step)
    if isinstance(parent, list):
        return document, parent.pop(_index(parent, step, inserting=False))
    raise JsonPatchError(f"cannot remove from {type(parent).__name__}")
