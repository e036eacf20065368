"""Labels and annotations a child was created with, given up once the owner no longer has them.

A child created suspended for Kueue is created under the field manager ``kaiwo-create``
(decision 0085), and updated later under ``kaiwo``. Server-side apply removes a field a
manager stops sending only when no other manager owns it, and ``kaiwo-create`` still owns
every label and annotation of the creation. So a label removed from a KaiwoJob stayed on its
Job for good, though the operator applied the Job without it (decision 0128).

After an update under ``kaiwo`` the executor therefore applies once more under
``kaiwo-create``: the object's identity and its spec as the update left it, and no metadata.
That apply gives up the labels and annotations ``kaiwo-create`` held: those ``kaiwo`` still
sends stay (it owns them), the rest go. The spec fields ``kaiwo-create`` holds are sent as
they are, so nothing in the spec changes: ``suspend`` stays until Kueue takes it over, and an
immutable field the owner no longer sets is never taken away (the API server would refuse).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaiwo_contracts.plans import CREATE_SUSPENDED_FIELD_MANAGER

_GIVEN_UP = ("labels", "annotations")


def creation_metadata_release(
    applied: Mapping[str, Any], manifest: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The apply under ``kaiwo-create`` that gives up its stale labels and annotations on
    ``applied`` (the object an update of ``manifest`` under ``kaiwo`` returned), or None when
    it holds none that ``manifest`` left out: no request then, which is nearly always."""
    owned = _created_fields(applied)
    if owned is None or not _stale_keys(owned, manifest):
        return None
    metadata = applied.get("metadata") or {}
    identity: dict[str, Any] = {"name": metadata.get("name")}
    if metadata.get("namespace"):
        identity["namespace"] = metadata["namespace"]
    release: dict[str, Any] = {
        "apiVersion": applied.get("apiVersion"),
        "kind": applied.get("kind"),
        "metadata": identity,
    }
    spec = applied.get("spec")
    held = [key[2:] for key in owned.get("f:spec") or {} if key.startswith("f:")]
    if isinstance(spec, Mapping) and held:
        # The spec fields kaiwo-create holds, as they are now: held on, never changed.
        release["spec"] = {name: spec[name] for name in held if name in spec}
    return release


def _created_fields(applied: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """What ``kaiwo-create``'s apply owns on ``applied`` (``fieldsV1``), if it owns any."""
    for entry in (applied.get("metadata") or {}).get("managedFields") or ():
        if entry.get("manager") == CREATE_SUSPENDED_FIELD_MANAGER:
            fields = entry.get("fieldsV1")
            return fields if isinstance(fields, Mapping) else None
    return None


def _stale_keys(owned: Mapping[str, Any], manifest: Mapping[str, Any]) -> list[str]:
    """The label and annotation keys in ``owned`` that ``manifest`` does not send."""
    sent = manifest.get("metadata") or {}
    held = owned.get("f:metadata") or {}
    return [
        key
        for field in _GIVEN_UP
        for key in held.get(f"f:{field}") or {}
        if key.startswith("f:") and key[2:] not in (sent.get(field) or {})
    ]
