"""Labels, annotations and mutable spec fields a child was created with, given up once the
owner no longer has them.

A child created suspended for Kueue is created under the field manager ``kaiwo-create``
(decision 0085), and updated later under ``kaiwo``. Server-side apply removes a field a
manager stops sending only when no other manager owns it, and ``kaiwo-create`` still owns
every field of the creation. So a label removed from a KaiwoJob stayed on its Job for good
(decision 0128), and so did a removed ``spec.job.spec.activeDeadlineSeconds``, which then
still ended the running Job (decision 0133).

After an update under ``kaiwo`` the executor therefore applies once more under
``kaiwo-create``: the object's identity and the spec fields ``kaiwo-create`` holds, as the
update left them, but no metadata, and without the held spec fields the update no longer sent
that the kind lets go on a running child (:func:`~kaiwo_contracts.child_spec_fields.
removable_spec_fields`). That apply gives up those fields and the labels and annotations
``kaiwo-create`` held: those ``kaiwo`` still sends stay (it owns them), the rest go. Every
other spec field ``kaiwo-create`` holds is sent as it is, so nothing else changes: ``suspend``
stays until Kueue takes it over, and an immutable field the owner no longer sets (a Job's
``podFailurePolicy``) is never taken away (the API server would refuse).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaiwo_contracts.child_spec_fields import removable_spec_fields
from kaiwo_contracts.plans import CREATE_SUSPENDED_FIELD_MANAGER

_GIVEN_UP = ("labels", "annotations")


def creation_metadata_release(
    applied: Mapping[str, Any], manifest: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The apply under ``kaiwo-create`` that gives up its stale labels, annotations and
    removable spec fields on ``applied`` (the object an update of ``manifest`` under ``kaiwo``
    returned), or None when it holds none that ``manifest`` left out: no request then, which
    is nearly always."""
    owned = _created_fields(applied)
    if owned is None:
        return None
    held = [key[2:] for key in owned.get("f:spec") or {} if key.startswith("f:")]
    given_up = _removed_spec_fields(held, applied, manifest)
    if not given_up and not _stale_keys(owned, manifest):
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
    if isinstance(spec, Mapping):
        # The spec fields kaiwo-create holds, as they are now: held on, never changed.
        kept = {name: spec[name] for name in held if name in spec and name not in given_up}
        if kept:
            release["spec"] = kept
    return release


def _created_fields(applied: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """What ``kaiwo-create``'s apply owns on ``applied`` (``fieldsV1``), if it owns any."""
    for entry in (applied.get("metadata") or {}).get("managedFields") or ():
        if entry.get("manager") == CREATE_SUSPENDED_FIELD_MANAGER:
            fields = entry.get("fieldsV1")
            return fields if isinstance(fields, Mapping) else None
    return None


def _removed_spec_fields(
    held: list[str], applied: Mapping[str, Any], manifest: Mapping[str, Any]
) -> frozenset[str]:
    """The spec fields in ``held`` that ``manifest`` no longer sends and that the kind of
    ``applied`` lets go on a running child."""
    removable = removable_spec_fields(applied.get("apiVersion"), applied.get("kind"))
    if not removable:
        return frozenset()
    sent = manifest.get("spec")
    if not isinstance(sent, Mapping):
        return frozenset()  # a manifest without a spec asks nothing of it
    return frozenset(name for name in held if name in removable and name not in sent)


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
