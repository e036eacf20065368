"""How objects leave the fake cluster, as the API server and its garbage collector do it:
deletion now, or marked for deletion while finalizers remain and finished once the last one
goes; ``Background``, ``Foreground`` and ``Orphan`` propagation to dependents (by
``ownerReferences``); a deleted namespace emptied; a deleted CRD's objects dropped with it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from kaiwo_kubefake import errors
from kaiwo_kubefake.kinds import CRD_KIND, ResourceKind
from kaiwo_kubefake.object_rules import (
    NAMESPACES,
    NO_PRECONDITIONS,
    Preconditions,
    check_preconditions,
)
from kaiwo_kubefake.object_table import ObjectTable


class ObjectLifecycle:
    def __init__(self, table: ObjectTable, *, now: Callable[[], str]) -> None:
        self._table = table
        self._now = now
        self._pending_propagation: dict[str, str] = {}

    def delete(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        name: str,
        propagation: str | None = None,
        preconditions: Preconditions = NO_PRECONDITIONS,
    ) -> dict[str, Any]:
        """Delete now, or mark for deletion when finalizers remain (returns the object)."""
        live = self._table.live(kind, namespace, name)
        check_preconditions(kind, live, preconditions)
        policy = propagation or kind.default_propagation
        if policy not in ("Background", "Foreground", "Orphan"):
            raise errors.bad_request(f"unsupported propagationPolicy {policy!r}")
        if live["metadata"].get("finalizers"):
            if "deletionTimestamp" in live["metadata"]:
                return copy.deepcopy(live)
            self._pending_propagation[live["metadata"]["uid"]] = policy
            marked = copy.deepcopy(live)
            marked["metadata"]["deletionTimestamp"] = self._now()
            marked["metadata"]["deletionGracePeriodSeconds"] = 0
            return self._table.commit(kind, change_type="MODIFIED", obj=marked, old=live)
        return self._remove(kind, live, policy=policy)

    def after_write(self, kind: ResourceKind, obj: dict[str, Any]) -> None:
        """What follows a stored write: a CRD's kinds are served; an object marked for
        deletion whose last finalizer went is removed, with the propagation it was deleted
        with."""
        metadata = obj["metadata"]
        if kind.key == CRD_KIND.key:
            self._table.serve_crd(obj)
        if "deletionTimestamp" in metadata and not metadata.get("finalizers"):
            live = self._table.live(kind, metadata.get("namespace"), metadata["name"])
            policy = self._pending_propagation.get(metadata["uid"], kind.default_propagation)
            self._remove(kind, live, policy=policy)

    def _remove(self, kind: ResourceKind, live: dict[str, Any], *, policy: str) -> dict[str, Any]:
        uid = live["metadata"]["uid"]
        if policy == "Foreground":
            self._delete_dependents(uid)
        if kind.key == NAMESPACES.key:
            self._empty_namespace(live["metadata"]["name"])
        removed = self._table.commit(kind, change_type="DELETED", obj=copy.deepcopy(live), old=live)
        self._pending_propagation.pop(uid, None)
        if kind.key == CRD_KIND.key:
            self._table.drop_crd(live)
        if policy == "Orphan":
            self._orphan_dependents(uid)
        elif policy == "Background":
            self._delete_dependents(uid)
        return removed

    def _dependents(self, owner_uid: str) -> list[tuple[ResourceKind, dict[str, Any]]]:
        found = []
        for kind in self._table.storage_kinds():
            for obj in list(self._table.bucket(kind).values()):
                references = obj["metadata"].get("ownerReferences") or []
                if any(reference.get("uid") == owner_uid for reference in references):
                    found.append((kind, obj))
        return found

    def _delete_dependents(self, owner_uid: str) -> None:
        for kind, obj in self._dependents(owner_uid):
            metadata = obj["metadata"]
            if self._table.find(kind, namespace=metadata.get("namespace"), name=metadata["name"]):
                self.delete(
                    kind,
                    namespace=metadata.get("namespace"),
                    name=metadata["name"],
                    propagation="Background",
                )

    def _orphan_dependents(self, owner_uid: str) -> None:
        for kind, obj in self._dependents(owner_uid):
            orphaned = copy.deepcopy(obj)
            kept = [
                reference
                for reference in orphaned["metadata"]["ownerReferences"]
                if reference.get("uid") != owner_uid
            ]
            if kept:
                orphaned["metadata"]["ownerReferences"] = kept
            else:
                del orphaned["metadata"]["ownerReferences"]
            self._table.commit(kind, change_type="MODIFIED", obj=orphaned, old=obj)

    def _empty_namespace(self, namespace: str) -> None:
        for kind in self._table.storage_kinds():
            if not kind.namespaced:
                continue
            for (object_namespace, _name), obj in list(self._table.bucket(kind).items()):
                if object_namespace == namespace:
                    self._remove(kind, obj, policy="Background")
