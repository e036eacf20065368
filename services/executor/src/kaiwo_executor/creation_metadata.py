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

A RayJob still waiting in its queue takes the whole edit in place (decision 0123), removals
too, down to a variable of a container: ``kaiwo-create`` then gives up every spec field it
holds that the update under ``kaiwo`` no longer sent (the two entries of ``managedFields``
compared; decision 0225), and holds on to the rest. Only the fields the owner left out go,
and only where no other manager holds them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kaiwo_contracts.child_spec_fields import removable_spec_fields
from kaiwo_contracts.plans import CREATE_SUSPENDED_FIELD_MANAGER, OPERATOR_FIELD_MANAGER

_GIVEN_UP = ("labels", "annotations")
_WHOLE_EDIT_WHILE_WAITING = frozenset({("ray.io/v1", "RayJob")})
"""The kinds whose child, still waiting in its queue, takes every change of its spec in place
(decision 0123: Kueue updates its Workload to match). Not a Job: its template cannot change,
and a waiting one is replaced to take an edit (decision 0129); nor an AppWrapper, whose
components cannot change."""


def creation_metadata_release(
    applied: Mapping[str, Any], manifest: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The apply under ``kaiwo-create`` that gives up its stale labels, annotations and
    removable spec fields on ``applied`` (the object an update of ``manifest`` under ``kaiwo``
    returned), or None when it holds none that ``manifest`` left out: no request then, which
    is nearly always. Of a RayJob still waiting in its queue, every spec field ``kaiwo`` no
    longer sends (:func:`_release_the_stale`)."""
    owned = _created_fields(applied)
    if owned is None:
        return None
    if _waits_taking_the_whole_edit(applied):
        return _release_the_stale(applied, owned, manifest)
    held = [key[2:] for key in owned.get("f:spec") or {} if key.startswith("f:")]
    given_up = _removed_spec_fields(held, applied, manifest)
    if not given_up and not _stale_keys(owned, manifest):
        return None
    release = _identity(applied)
    spec = applied.get("spec")
    if isinstance(spec, Mapping):
        # The spec fields kaiwo-create holds, as they are now: held on, never changed.
        kept = {name: spec[name] for name in held if name in spec and name not in given_up}
        if kept:
            release["spec"] = kept
    return release


def _identity(applied: Mapping[str, Any]) -> dict[str, Any]:
    """A release's body without fields: the object's kind and name, no metadata."""
    metadata = applied.get("metadata") or {}
    identity: dict[str, Any] = {"name": metadata.get("name")}
    if metadata.get("namespace"):
        identity["namespace"] = metadata["namespace"]
    return {
        "apiVersion": applied.get("apiVersion"),
        "kind": applied.get("kind"),
        "metadata": identity,
    }


def _waits_taking_the_whole_edit(applied: Mapping[str, Any]) -> bool:
    """Whether ``applied`` is of a kind that takes the whole edit while it waits in its queue,
    and is suspended (waiting, as far as the object tells)."""
    kind = (str(applied.get("apiVersion")), str(applied.get("kind")))
    spec = applied.get("spec")
    return (
        kind in _WHOLE_EDIT_WHILE_WAITING
        and isinstance(spec, Mapping)
        and spec.get("suspend") is True
    )


def _release_the_stale(
    applied: Mapping[str, Any], owned: Mapping[str, Any], manifest: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The apply under ``kaiwo-create`` that gives up the spec fields it holds and ``kaiwo``
    did not send in this update, at any depth (a variable of a container, a key of
    ``rayStartParams``), or None when there are none and no stale label: no request then.

    Told by field ownership, not by value: ``kaiwo``'s own entry holds exactly what the update
    sent. The rest ``kaiwo-create`` holds (``suspend``, and what ``kaiwo`` still sends) is sent
    again as it is, so it stays held: once the RayJob runs, a field the planner does not keep
    as observed is still not taken from it (decisions 0123, 0133)."""
    held = owned.get("f:spec") or {}
    sent = (_sent_fields(applied) or {}).get("f:spec") or {}
    stale = {k: v for k, v in held.items() if k != "f:suspend"}
    if not _held_beyond(stale, sent) and not _stale_keys(owned, manifest):
        return None
    release = _identity(applied)
    kept = _common(held, {**sent, "f:suspend": {}})
    spec = applied.get("spec")
    if kept and isinstance(spec, Mapping):
        release["spec"] = _values_of(spec, kept)
    return release


def _common(held: Mapping[str, Any], sent: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``held`` that ``sent`` holds too (both ``fieldsV1``). A field held with
    fields under it whose every one is gone is left out: held as a whole, it would keep
    them all."""
    common: dict[str, Any] = {}
    for key, below in held.items():
        if key == "." or key not in sent:
            continue
        if not below or not sent[key]:
            common[key] = {}  # held or sent whole: a leaf, kept as it is
            continue
        inner = _common(below, sent[key])
        if inner:
            common[key] = inner
    return common


def _values_of(value: Any, fields: Mapping[str, Any]) -> Any:
    """The part of ``value`` that ``fields`` (``fieldsV1``) names, as it is: map fields
    (``f:``) and the items of lists merged by key (``k:``) or value (``v:``)."""
    if not fields:
        return value
    if isinstance(value, Mapping):
        return {
            key[2:]: _values_of(value[key[2:]], below)
            for key, below in fields.items()
            if key.startswith("f:") and key[2:] in value
        }
    if isinstance(value, list):
        items: list[Any] = []
        for key, below in fields.items():
            if key.startswith("k:"):
                wanted = json.loads(key[2:])
                items.extend(
                    {**wanted, **_values_of(item, below)}
                    for item in value
                    if isinstance(item, Mapping)
                    and all(item.get(name) == given for name, given in wanted.items())
                )
            elif key.startswith("v:"):
                items.append(json.loads(key[2:]))
        return items
    return value


def _sent_fields(applied: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """What ``kaiwo``'s own apply owns on ``applied``: what the update sent."""
    for entry in (applied.get("metadata") or {}).get("managedFields") or ():
        if (
            entry.get("manager") == OPERATOR_FIELD_MANAGER
            and entry.get("operation") == "Apply"
            and not entry.get("subresource")
        ):
            fields = entry.get("fieldsV1")
            return fields if isinstance(fields, Mapping) else None
    return None


def _held_beyond(held: Mapping[str, Any], sent: Mapping[str, Any]) -> bool:
    """Whether the field set ``held`` (``fieldsV1``) has a field that ``sent`` has not."""
    for key, below in held.items():
        if key == ".":
            continue  # the node itself, held wherever a field under it is
        if key not in sent:
            return True
        if isinstance(below, Mapping) and _held_beyond(below, sent[key] or {}):
            return True
    return False


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
