"""Never adopt: what the executor writes is only ever its owner's own.

A child a plan wants names its owner as its controller (an ownerReference with
``controller: true`` and the owner's uid). When an object of that name already exists and
this owner does not control it (nobody does, or another owner does), applying the manifest
over it would adopt it: server-side apply adds the owner reference, and deleting the owner
lets the garbage collector delete an object that was never the operator's. So the executor
changes nothing on it (:func:`name_conflict`), and withholds the plan's other objects that
could use it by name (:func:`withheld_by`): children refer to each other and to
cluster-scoped objects by name, never to objects of another namespace. The owner is told:
a Warning Event and the condition ``NameConflict`` (:func:`with_name_conflicts`), which the
executor alone writes and clears once no object of the plan conflicts any more.

An object controlled by an earlier incarnation of the owner (the same kind and name, another
uid: the user deleted the workload and submitted it again) is no one else's: that owner is
gone, so the garbage collector is removing the object (a claim stays while a terminating pod
uses it). It is left and waited for the same way, but told as what it is: the condition
``PreviousRunRemoving`` and a Normal Event, not a conflict to resolve (decision 0165).

Pure: the caller reads the live objects and passes the time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from kaiwo_contracts.plans import ObjectRef

NAME_CONFLICT: Final = "NameConflict"
"""The condition type and the Event reason."""
NAME_TAKEN: Final = "NameTaken"
"""The condition's reason."""
PREVIOUS_RUN_REMOVING: Final = "PreviousRunRemoving"
"""The condition type and the Event reason for an earlier incarnation's object."""
STILL_BEING_REMOVED: Final = "StillBeingRemoved"
"""That condition's reason."""
MAX_NAMED: Final = 5
"""Conflicting objects named in the condition's message (the Events name each one)."""
INVENTORY_LABEL: Final = ("app.kubernetes.io/managed-by", "kaiwo")
"""The label the planner puts on everything it creates, and by which the watcher observes
the children and shared volumes (``kaiwo_planner.domain.children.labels``)."""


@dataclass(frozen=True, slots=True)
class NameConflict:
    """An object that holds a name the plan wants, and who controls it."""

    target: ObjectRef
    controller: str | None
    """``Kind name (uid …)`` of its controller, or None: nobody controls it."""
    previous_run: bool = False
    """Its controller is the owner's kind and name with another uid: an earlier incarnation
    of the owner, deleted, whose children the garbage collector is removing."""
    unseen: bool = False
    """A shared object (no controller by design) that lacks the label the operator observes
    its objects by: see :func:`unseen_shared`."""

    @property
    def message(self) -> str:
        if self.unseen:
            key, value = INVENTORY_LABEL
            return (
                f"{self.target.display()} exists without the label {key}={value}, so Kaiwo "
                "does not see it: left as it is and not used; label it so to share it with "
                "Kaiwo's Models, or remove it"
            )
        if self.previous_run:
            return (
                f"{self.target.kind} {self.target.name} of the previous {self.controller} is "
                "still being removed: this run goes on once it is gone"
            )
        holder = f"controlled by {self.controller}" if self.controller else "controlled by nobody"
        return (
            f"{self.target.display()} exists and is not this owner's ({holder}): left as it "
            "is; rename or remove it"
        )


def controller_reference(metadata: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The ownerReference marked ``controller: true``, if any."""
    for reference in (metadata or {}).get("ownerReferences") or ():
        if isinstance(reference, Mapping) and reference.get("controller") is True:
            return reference
    return None


def controlled_by(metadata: Mapping[str, Any] | None, uid: str) -> bool:
    """Whether the object's controller is the owner with ``uid``."""
    reference = controller_reference(metadata)
    return reference is not None and bool(uid) and reference.get("uid") == uid


def wanted_controller(manifest: Mapping[str, Any]) -> str | None:
    """The uid of the controller the manifest names (None: it names none, e.g. a Node intent
    or a shared volume, which are never applied over someone else's object anyway)."""
    reference = controller_reference(manifest.get("metadata"))
    uid = reference.get("uid") if reference is not None else None
    return str(uid) if uid else None


def name_conflict(
    manifest: Mapping[str, Any], live: Mapping[str, Any] | None
) -> NameConflict | None:
    """Whether writing ``manifest`` would take over ``live`` (None: it does not exist)."""
    uid = wanted_controller(manifest)
    if live is None or uid is None:
        return None
    metadata = live.get("metadata") or {}
    if controlled_by(metadata, uid):
        return None
    reference = controller_reference(metadata)
    wanted = controller_reference(manifest.get("metadata")) or {}
    controller = (
        f"{reference.get('kind', '')} {reference.get('name', '')} (uid {reference.get('uid', '')})"
        if reference is not None
        else None
    )
    return NameConflict(
        target=ObjectRef(
            api_version=str(live.get("apiVersion") or manifest.get("apiVersion", "")),
            kind=str(live.get("kind") or manifest.get("kind", "")),
            name=str(metadata.get("name", "")),
            namespace=metadata.get("namespace") or None,
            uid=metadata.get("uid") or None,
        ),
        controller=controller,
        previous_run=reference is not None and _same_owner_named(reference, wanted),
    )


def unseen_shared(live: Mapping[str, Any] | None) -> NameConflict | None:
    """Whether the shared object exists without the inventory label
    (None: it does not exist, or carries the label and was simply not observed yet).

    A Model cache's volume has no controller (every Model of the profile shares it), so
    ownership cannot tell whose it is; the label is the operator's mark, and the one the
    watcher observes by. Without it, someone else made the volume (a KubeAI install, a
    platform team pre-provisioning it) or took the mark off: the planner never sees it, so
    every plan asks for it again, and a Model would load into, serve from and evict from a
    volume it cannot follow. It is not taken over; the Model is told how to hand it over."""
    if live is None:
        return None
    metadata = live.get("metadata") or {}
    key, value = INVENTORY_LABEL
    if (metadata.get("labels") or {}).get(key) == value:
        return None
    return NameConflict(
        target=ObjectRef(
            api_version=str(live.get("apiVersion", "")),
            kind=str(live.get("kind", "")),
            name=str(metadata.get("name", "")),
            namespace=metadata.get("namespace") or None,
            uid=metadata.get("uid") or None,
        ),
        controller=None,
        unseen=True,
    )


KUEUE_GROUP: Final = "kueue.x-k8s.io"
LOOKED_AGAIN_ANNOTATION: Final = "kaiwo.silogen.ai/removal-looked-at"
"""Set to the time on a previous run's Kueue object still being removed: the change makes
Kueue reconcile it again (see :func:`kept_by_kueue`)."""


def kept_by_kueue(conflict: NameConflict, live: Mapping[str, Any] | None) -> bool:
    """Whether ``conflict`` is a previous run's Kueue object, deleted and still held by a
    finalizer: Kueue drops its finalizers once nothing uses the object, as its own cache
    sees it, and can miss that moment (decision 0200). Touching the object makes it look
    again; it is the operator's own (its previous run's), so the touch takes nothing over."""
    if not conflict.previous_run or live is None:
        return False
    if _group(live) != KUEUE_GROUP:
        return False
    metadata = live.get("metadata") or {}
    return bool(metadata.get("deletionTimestamp")) and bool(metadata.get("finalizers"))


def _same_owner_named(held_by: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether two controller references name the same kind and name (the uids differ):
    names are unique per kind and namespace, so the one held by is gone."""
    return (
        bool(held_by.get("name"))
        and all(held_by.get(key) == wanted.get(key) for key in ("kind", "name"))
        and _group(held_by) == _group(wanted)
    )


def _group(reference: Mapping[str, Any]) -> str:
    api_version = str(reference.get("apiVersion") or "")
    return api_version.rpartition("/")[0]


def withheld_by(
    manifest: Mapping[str, Any], conflicts: Sequence[NameConflict]
) -> NameConflict | None:
    """The conflict that keeps ``manifest`` from being written: one in its namespace, or of a
    cluster-scoped object (which objects of every namespace may name)."""
    namespace = (manifest.get("metadata") or {}).get("namespace") or None
    for conflict in conflicts:
        if conflict.target.namespace is None or conflict.target.namespace == namespace:
            return conflict
    return None


def with_name_conflicts(
    status: Mapping[str, Any], conflicts: Sequence[NameConflict], *, since: datetime
) -> dict[str, Any]:
    """``status`` with the ``NameConflict`` condition when there are ``conflicts`` of others'
    objects, and ``PreviousRunRemoving`` when there are some of an earlier incarnation of the
    owner (their ``lastTransitionTime`` is ``since``), and without them when there are none:
    the planner never sets those conditions, so whatever it carried over is the executor's
    to drop."""
    conditions = [
        dict(condition)
        for condition in status.get("conditions") or ()
        if not (
            isinstance(condition, Mapping)
            and condition.get("type") in (NAME_CONFLICT, PREVIOUS_RUN_REMOVING)
        )
    ]
    for kind, reason, told in (
        (NAME_CONFLICT, NAME_TAKEN, [c for c in conflicts if not c.previous_run]),
        (PREVIOUS_RUN_REMOVING, STILL_BEING_REMOVED, [c for c in conflicts if c.previous_run]),
    ):
        if not told:
            continue
        named = "; ".join(conflict.message for conflict in told[:MAX_NAMED])
        more = len(told) - MAX_NAMED
        conditions.append(
            {
                "type": kind,
                "status": "True",
                "lastTransitionTime": _format_time(since),
                "reason": reason,
                "message": named + (f"; and {more} more" if more > 0 else ""),
            }
        )
    if not conditions and "conditions" not in status:
        return dict(status)
    return {**status, "conditions": conditions}


def _format_time(moment: datetime) -> str:
    """RFC 3339 in UTC, whole seconds: what ``metav1.Time`` holds."""
    return moment.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
