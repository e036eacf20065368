"""Node intents: the partial Nodes the queue planner asks for, turned into a merge patch.

Why not server-side apply. A Node's ``spec.taints`` is an atomic list for server-side apply:
applying a list with our taint would make ``kaiwo`` own the whole list and replace what the
node lifecycle controller, the cloud provider or an admin put there. A JSON merge patch
(RFC 7386) merges labels and annotations key by key, but also replaces lists whole, so the
executor builds the taint list itself from the node as it is *now*:

* every taint the node carries is kept;
* each taint of the intent replaces the node's taint with the same key and effect (that pair
  identifies a taint), or is appended.

A label of the intent is left out when the node carries the key with another value that
``kaiwo`` did not write (no ``managedFields`` entry of the operator's field manager owns it):
an admin's ``kaiwo/nodepool=amd-gpu-nodes``, which their flavors select, stays (decision
0110). A value the operator wrote itself is updated as the node's pool changes.

The intent carries only Kaiwo's own labels and taint, never a copy of the node's other taints:
a copy taken from an older observation would put back a taint the node controller has removed
since (``node.kubernetes.io/not-ready`` once the node is ready). So the executor only ever adds
or updates Kaiwo's keys, and Kaiwo never removes its taint, as upstream.

The patch carries the node's ``resourceVersion``, so a node that changed between the read
and the patch answers 409 Conflict and the whole read-merge-patch is retried.
"""

from __future__ import annotations

import copy
from typing import Any

_IDENTITY_FIELDS = ("apiVersion", "kind")


def taint_identity(taint: dict[str, Any]) -> tuple[str, str]:
    return (str(taint.get("key", "")), str(taint.get("effect", "")))


def merged_taints(
    current: list[dict[str, Any]], wanted: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The node's taints with the wanted ones put in (replacing same key and effect)."""
    merged = [dict(taint) for taint in current]
    positions = {taint_identity(taint): index for index, taint in enumerate(merged)}
    for taint in wanted:
        index = positions.get(taint_identity(taint))
        if index is None:
            positions[taint_identity(taint)] = len(merged)
            merged.append(dict(taint))
        elif merged[index].get("value") != taint.get("value"):
            # Same value: the node's copy stays as is (with the server's timeAdded, if any).
            merged[index] = dict(taint)
    return merged


def merge_patch_result(target: Any, patch: Any) -> Any:
    """RFC 7386 applied to ``target``: what the server will store (pure, for no-op checks)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch_result(result.get(key), value)
    return result


def labels_owned_by(live: dict[str, Any], manager: str) -> frozenset[str]:
    """The label keys ``manager`` owns on ``live``, from its ``managedFields``."""
    owned: set[str] = set()
    for entry in (live.get("metadata") or {}).get("managedFields") or ():
        if not isinstance(entry, dict) or entry.get("manager") != manager:
            continue
        labels = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:labels") or {}
        owned.update(key[2:] for key in labels if key.startswith("f:"))
    return frozenset(owned)


def node_patch(
    intent: dict[str, Any], live: dict[str, Any], *, manager: str = "kaiwo"
) -> dict[str, Any] | None:
    """The merge patch that makes ``live`` carry ``intent``, or None when it already does.

    ``intent`` is a partial Node (``metadata.labels``/``annotations``, ``spec.taints``...);
    its name, apiVersion and kind only address the node. A label whose value on the node
    another manager wrote is not patched (see the module docstring).
    """
    intent = copy.deepcopy(intent)
    wanted_labels = (intent.get("metadata") or {}).get("labels")
    if isinstance(wanted_labels, dict):
        present = (live.get("metadata") or {}).get("labels") or {}
        ours = labels_owned_by(live, manager)
        for key in [k for k, v in wanted_labels.items() if k in present and present[k] != v]:
            if key not in ours:
                del wanted_labels[key]
        if not wanted_labels:
            del intent["metadata"]["labels"]
    patch = {
        key: copy.deepcopy(value) for key, value in intent.items() if key not in _IDENTITY_FIELDS
    }
    metadata = {k: v for k, v in (patch.pop("metadata", None) or {}).items() if k != "name"}
    if metadata:
        patch["metadata"] = metadata
    spec = patch.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("taints"), list):
        current = list((live.get("spec") or {}).get("taints") or [])
        spec["taints"] = merged_taints(current, spec["taints"])
    if merge_patch_result(live, patch) == live:
        return None
    version = (live.get("metadata") or {}).get("resourceVersion")
    if version:
        patch.setdefault("metadata", {})["resourceVersion"] = version
    return patch
