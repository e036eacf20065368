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

A label the intent names with ``None`` (RFC 7386 null: remove it) is removed only when the
operator's field manager owns it and no other does: Kaiwo's pool labels on a control-plane
node that ``excludeMasterNodesFromNodePools`` leaves out (decision 0224). A value an admin
wrote, or applied beside the operator's (server-side apply makes both its owners), stays; a
key the node does not carry is left out of the patch, so a settled node gets none.

The intent carries only Kaiwo's own labels and taint, never a copy of the node's other taints:
a copy taken from an older observation would put back a taint the node controller has removed
since (``node.kubernetes.io/not-ready`` once the node is ready). So the executor only ever adds
or updates Kaiwo's keys, removes only the labels of its own described above, and one taint
only: the GPU taint the operator itself added under a key that is no longer the one in force
(decision 0145).

Which taint is the operator's. ``spec.taints`` is atomic, so ``managedFields`` name only the
last writer of the whole list (``kubectl taint`` takes it over), never who added which taint.
The GPU taint therefore goes with a record: the annotation ``kaiwo/gpu-taint`` naming its key,
written in the same patch that adds it. The record counts only while the operator's field
manager owns it (an admin's annotation of that name is no record of ours). The intent's record
names the key in force; with it:

* a taint the record names under another key (``<old-key>=true:NoSchedule``) is removed: the
  operator added it and the key was renamed;
* the taint of the key in force is added when the node lacks it, and then recorded;
* a node that already carries that taint (an admin's, with no record of ours) keeps it, and
  it is not recorded: it stays the admin's, never removed by a later rename.

Without a record in the intent (``addTaintsToGpuNodes`` off, or a CPU node) nothing is removed:
the operator keeps its taint, as upstream (decision 0132).

The patch carries the node's ``resourceVersion``, so a node that changed between the read
and the patch answers 409 Conflict and the whole read-merge-patch is retried.
"""

from __future__ import annotations

import copy
from typing import Any

from kaiwo_contracts.confinement import (
    GPU_TAINT_EFFECT,
    GPU_TAINT_RECORD_ANNOTATION,
    GPU_TAINT_VALUE,
)

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
    return _metadata_keys_owned_by(live, manager, "f:labels")


def labels_owned_by_others(live: dict[str, Any], manager: str) -> frozenset[str]:
    """The label keys some field manager other than ``manager`` owns on ``live``."""
    return _metadata_keys_owned_by(live, manager, "f:labels", others=True)


def annotations_owned_by(live: dict[str, Any], manager: str) -> frozenset[str]:
    """The annotation keys ``manager`` owns on ``live``, from its ``managedFields``."""
    return _metadata_keys_owned_by(live, manager, "f:annotations")


def _metadata_keys_owned_by(
    live: dict[str, Any], manager: str, field: str, *, others: bool = False
) -> frozenset[str]:
    owned: set[str] = set()
    for entry in (live.get("metadata") or {}).get("managedFields") or ():
        if not isinstance(entry, dict) or (entry.get("manager") == manager) is others:
            continue
        keys = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get(field) or {}
        owned.update(key[2:] for key in keys if key.startswith("f:"))
    return frozenset(owned)


def recorded_gpu_taint_key(live: dict[str, Any], manager: str) -> str | None:
    """The key of the GPU taint the operator added to ``live``, by the record its own field
    manager wrote (None: no record of ours)."""
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    if GPU_TAINT_RECORD_ANNOTATION not in annotations_owned_by(live, manager):
        return None
    value = annotations.get(GPU_TAINT_RECORD_ANNOTATION)
    return str(value) if value else None


def moved_gpu_taint(
    current: list[dict[str, Any]], wanted: list[dict[str, Any]], *, key: str, recorded: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """The node's taints with the operator's GPU taint under ``key``, and the record to keep.

    ``recorded``: the key the node's record of ours names. Its taint is removed when it is
    not ``key``; the taint of ``key`` is recorded when it is added now or was recorded
    before, and not when the node already carried it otherwise (someone else's)."""
    old = (recorded, GPU_TAINT_EFFECT, GPU_TAINT_VALUE)
    kept = [
        taint
        for taint in current
        if recorded == key or (*taint_identity(taint), taint.get("value")) != old
    ]
    carried = any(taint_identity(taint) == (key, GPU_TAINT_EFFECT) for taint in kept)
    record = key if not carried or recorded == key else None
    return merged_taints(kept, wanted), record


def labels_to_patch(
    wanted: dict[str, Any], live: dict[str, Any], *, manager: str
) -> dict[str, Any]:
    """The intent's labels the patch carries: a value is set unless the node carries another
    that ``manager`` did not write; ``None`` (removed) only where the node carries the key
    and ``manager`` alone wrote it (see the module docstring)."""
    present = (live.get("metadata") or {}).get("labels") or {}
    ours = labels_owned_by(live, manager)
    shared = labels_owned_by_others(live, manager) if None in wanted.values() else frozenset()
    kept: dict[str, Any] = {}
    for key, value in wanted.items():
        if value is None:
            if key in present and key in ours and key not in shared:
                kept[key] = None
        elif key not in present or present[key] == value or key in ours:
            kept[key] = value
    return kept


def node_patch(
    intent: dict[str, Any], live: dict[str, Any], *, manager: str = "kaiwo"
) -> dict[str, Any] | None:
    """The merge patch that makes ``live`` carry ``intent``, or None when it already does.

    ``intent`` is a partial Node (``metadata.labels``/``annotations``, ``spec.taints``...);
    its name, apiVersion and kind only address the node. A label whose value on the node
    another manager wrote is not patched, nor removed; a label named ``None`` is removed when
    the operator alone wrote it (see the module docstring).
    """
    intent = copy.deepcopy(intent)
    intent_metadata = intent.get("metadata") or {}
    gpu_taint_key = (intent_metadata.pop("annotations", None) or {}).get(
        GPU_TAINT_RECORD_ANNOTATION
    )
    wanted_labels = intent_metadata.get("labels")
    if isinstance(wanted_labels, dict):
        labels = labels_to_patch(wanted_labels, live, manager=manager)
        if labels:
            intent_metadata["labels"] = labels
        else:
            del intent_metadata["labels"]
    patch = {
        key: copy.deepcopy(value) for key, value in intent.items() if key not in _IDENTITY_FIELDS
    }
    metadata = {k: v for k, v in (patch.pop("metadata", None) or {}).items() if k != "name"}
    spec = patch.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("taints"), list):
        current = list((live.get("spec") or {}).get("taints") or [])
        if gpu_taint_key is None:
            spec["taints"] = merged_taints(current, spec["taints"])
        else:
            recorded = recorded_gpu_taint_key(live, manager)
            spec["taints"], record = moved_gpu_taint(
                current, spec["taints"], key=str(gpu_taint_key), recorded=recorded
            )
            if record != recorded:  # None: the record goes (merge patch null)
                metadata["annotations"] = {GPU_TAINT_RECORD_ANNOTATION: record}
    if metadata:
        patch["metadata"] = metadata
    if merge_patch_result(live, patch) == live:
        return None
    version = (live.get("metadata") or {}).get("resourceVersion")
    if version:
        patch.setdefault("metadata", {})["resourceVersion"] = version
    return patch
