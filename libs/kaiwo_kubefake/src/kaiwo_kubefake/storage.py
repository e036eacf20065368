"""The fake cluster's state and the API server's write rules, behind one object.

Every write commits through :class:`~kaiwo_kubefake.object_table.ObjectTable`, which bumps the
one global resourceVersion and hands the change to the
:class:`~kaiwo_kubefake.watching.ChangeFeed` (a bounded history for watch resumption, and the
watchers). A write that changes nothing commits nothing: no new resourceVersion, no event,
as on the real API server. What a write may do is :mod:`kaiwo_kubefake.object_rules`;
deletion, finalizers and garbage collection are :mod:`kaiwo_kubefake.lifecycle`.

Methods raise :class:`~kaiwo_kubefake.errors.ApiError` with the code and Status the real server
would answer with. Objects go in and out as deep copies.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kaiwo_kubefake import errors
from kaiwo_kubefake.custom_resources import check_apply_configuration, conform
from kaiwo_kubefake.kinds import CRD_KIND, KindRegistry, ResourceKind
from kaiwo_kubefake.lifecycle import ObjectLifecycle
from kaiwo_kubefake.object_rules import (
    NO_PRECONDITIONS,
    Preconditions,
    check_preconditions,
    content,
    main_resource_update,
    meta,
    parse_resource_version,
    prepare_new,
    spec_changed,
)
from kaiwo_kubefake.object_table import ObjectKey, ObjectTable
from kaiwo_kubefake.ownership import (
    Ownership,
    read_ownership,
    record_update,
    server_side_apply,
    write_ownership,
)
from kaiwo_kubefake.patching import APPLY_PATCH, apply_patch
from kaiwo_kubefake.selectors import FieldSelector, LabelSelector
from kaiwo_kubefake.watching import ChangeFeed, Watcher

__all__ = [
    "DEFAULT_NAMESPACES",
    "ObjectKey",
    "ObjectStore",
    "Preconditions",
    "timestamp",
    "utc_now",
]

_EVERYTHING = LabelSelector()
_ANY_FIELDS = FieldSelector()
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def utc_now() -> datetime:
    return datetime.now(UTC)


def timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ObjectStore:
    """All objects of the fake cluster, with the API server's write rules."""

    def __init__(
        self,
        *,
        history_limit: int = 10_000,
        require_namespaces: bool = True,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.kinds = KindRegistry()
        self.feed = ChangeFeed(history_limit=history_limit)
        self.table = ObjectTable(
            kinds=self.kinds, feed=self.feed, require_namespaces=require_namespaces
        )
        self._clock = clock
        self._lifecycle = ObjectLifecycle(self.table, now=self._now)
        self.write_requests: Counter[tuple[str, str, str, str]] = Counter()
        self.changes = self.table.changes
        namespaces = self.kinds.lookup(group="", version="v1", plural="namespaces")
        assert namespaces is not None
        for name in DEFAULT_NAMESPACES:
            self.create(namespaces, namespace=None, body={"metadata": {"name": name}})

    # ------------------------------------------------------------------ bookkeeping

    @property
    def resource_version(self) -> int:
        return self.table.resource_version

    def compact(self) -> None:
        """Forget the whole change history: older resourceVersions now answer 410 Gone."""
        self.feed.compact(through=self.table.resource_version)

    def count_write_request(self, kind: ResourceKind, namespace: str | None, name: str) -> None:
        self.write_requests[(kind.group, kind.plural, namespace or "", name)] += 1

    def _now(self) -> str:
        return timestamp(self._clock())

    # ------------------------------------------------------------------ reads

    def get(self, kind: ResourceKind, *, namespace: str | None, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.table.live(kind, namespace, name))

    def find(
        self, kind: ResourceKind, *, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        return self.table.find(kind, namespace=namespace, name=name)

    def list_objects(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        labels: LabelSelector = _EVERYTHING,
        fields: FieldSelector = _ANY_FIELDS,
    ) -> tuple[list[dict[str, Any]], int]:
        """Matching objects in (namespace, name) order, and the list's resourceVersion."""
        return self.table.list_objects(kind, namespace=namespace, labels=labels, fields=fields)

    def watch(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        resource_version: str | None,
    ) -> Watcher:
        """Subscribe; events after ``resource_version`` are queued first.

        No version (or "0") starts with an ADDED event per existing object, as the real server
        does. A version older than the kept history raises 410 Gone. ``feed.unwatch`` ends it.
        """
        watcher = Watcher(
            kind_key=kind.key,
            namespace=namespace if kind.namespaced else None,
            labels=labels,
            fields=fields,
        )
        if resource_version in (None, "", "0"):
            items, _ = self.list_objects(
                kind, namespace=watcher.namespace, labels=labels, fields=fields
            )
            for item in items:
                watcher.queue.put_nowait(("ADDED", item))
            self.feed.open(watcher)
        else:
            self.feed.resume(watcher, since=parse_resource_version(resource_version))
        return watcher

    # ------------------------------------------------------------------ writes

    def create(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        body: dict[str, Any],
        manager: str = "unknown",
    ) -> dict[str, Any]:
        obj = self._new(kind, namespace=namespace, body=body)
        metadata = obj["metadata"]
        if self.table.bucket(kind).get(
            self.table.key(kind, metadata.get("namespace"), metadata["name"])
        ):
            raise errors.already_exists(name=metadata["name"], group=kind.group, plural=kind.plural)
        # The creator owns what it sent, not what the server defaulted; but a custom
        # resource's body is pruned and defaulted by its schema before ownership is taken.
        sent = conform(kind, body)
        ownership = record_update(
            old=None,
            new={**sent, "metadata": {**(sent.get("metadata") or {}), "name": metadata["name"]}},
            manager=manager,
            subresource="",
            status_subresource=kind.status_subresource,
        )
        write_ownership(obj, ownership, previous={}, now=self._now())
        created = self.table.commit(kind, change_type="ADDED", obj=obj, old=None)
        self._lifecycle.after_write(kind, created)
        return created

    def replace(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        name: str,
        body: dict[str, Any],
        manager: str = "unknown",
        subresource: str = "",
    ) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request("the body must be a JSON object")
        body_name = (body.get("metadata") or {}).get("name")
        if body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        live = self.table.live(kind, namespace, name)
        check_preconditions(
            kind,
            live,
            Preconditions(
                uid=(body.get("metadata") or {}).get("uid"),
                resource_version=(body.get("metadata") or {}).get("resourceVersion"),
            ),
        )
        body = conform(kind, body)
        ownership = record_update(
            old=live,
            new=body,
            manager=manager,
            subresource=subresource,
            status_subresource=kind.status_subresource,
        )
        return self._settle(
            kind, live=live, candidate=body, subresource=subresource, ownership=ownership
        )

    def patch(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        name: str,
        content_type: str,
        body: Any,
        manager: str | None,
        force: bool = False,
        subresource: str = "",
    ) -> dict[str, Any]:
        if content_type == APPLY_PATCH:
            return self._apply(
                kind,
                namespace=namespace,
                name=name,
                body=body,
                manager=manager,
                force=force,
                subresource=subresource,
            )
        live = self.table.live(kind, namespace, name)
        candidate = conform(kind, apply_patch(content_type=content_type, target=live, body=body))
        check_preconditions(
            kind,
            live,
            Preconditions(
                uid=(candidate.get("metadata") or {}).get("uid"),
                resource_version=(candidate.get("metadata") or {}).get("resourceVersion"),
            ),
        )
        ownership = record_update(
            old=live,
            new=candidate,
            manager=manager or "unknown",
            subresource=subresource,
            status_subresource=kind.status_subresource,
        )
        return self._settle(
            kind, live=live, candidate=candidate, subresource=subresource, ownership=ownership
        )

    def _apply(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        name: str,
        body: Any,
        manager: str | None,
        force: bool,
        subresource: str,
    ) -> dict[str, Any]:
        if not manager:
            raise errors.bad_request("PATCH, application/apply-patch+yaml requires fieldManager")
        if not isinstance(body, dict):
            raise errors.bad_request("an apply configuration must be an object")
        metadata = body.get("metadata") or {}
        if not body.get("apiVersion") or not body.get("kind"):
            raise errors.bad_request("an apply configuration needs apiVersion and kind")
        if metadata.get("name") != name:
            raise errors.bad_request(
                f"the name of the object ({metadata.get('name')}) does not match the name on "
                f"the URL ({name})"
            )
        check_apply_configuration(kind, body)
        live = self.find(kind, namespace=namespace, name=name)
        if live is None:
            if subresource:
                raise errors.not_found(name=name, group=kind.group, plural=kind.plural)
            merged = server_side_apply(
                live=None,
                applied=body,
                manager=manager,
                force=force,
                subresource="",
                status_subresource=kind.status_subresource,
            )
            obj = merged.obj
            obj["metadata"] = {**obj.get("metadata", {}), "name": name}
            if kind.namespaced and namespace:
                obj["metadata"]["namespace"] = namespace
            obj = self._new(kind, namespace=namespace, body=obj, applied=True)
            write_ownership(obj, merged.ownership, previous={}, now=self._now())
            created = self.table.commit(kind, change_type="ADDED", obj=obj, old=None)
            self._lifecycle.after_write(kind, created)
            return created
        check_preconditions(
            kind, live, Preconditions(resource_version=metadata.get("resourceVersion"))
        )
        merged = server_side_apply(
            live=live,
            applied=body,
            manager=manager,
            force=force,
            subresource=subresource,
            status_subresource=kind.status_subresource,
        )
        return self._settle(
            kind,
            live=live,
            candidate=conform(kind, merged.obj, applied=True),
            subresource=subresource,
            ownership=merged.ownership,
        )

    def _settle(
        self,
        kind: ResourceKind,
        *,
        live: dict[str, Any],
        candidate: dict[str, Any],
        subresource: str,
        ownership: Ownership,
    ) -> dict[str, Any]:
        """Turn a proposed new state into the stored one; commit it unless nothing changed."""
        if subresource == "status":
            new = copy.deepcopy(live)
            if "status" in candidate:
                new["status"] = copy.deepcopy(candidate["status"])
            else:
                new.pop("status", None)
        else:
            new = main_resource_update(kind, live=live, candidate=candidate)
        write_ownership(new, ownership, previous=read_ownership(live), now=self._now())
        new["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
        if content(new) == content(live):
            return copy.deepcopy(live)
        if kind.has_generation and spec_changed(kind, live, new):
            new["metadata"]["generation"] = int(live["metadata"].get("generation") or 0) + 1
        updated = self.table.commit(kind, change_type="MODIFIED", obj=new, old=live)
        self._lifecycle.after_write(kind, updated)
        return (
            self.find(
                kind,
                namespace=updated["metadata"].get("namespace"),
                name=updated["metadata"]["name"],
            )
            or updated
        )

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
        return self._lifecycle.delete(
            kind,
            namespace=namespace,
            name=name,
            propagation=propagation,
            preconditions=preconditions,
        )

    def delete_collection(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        propagation: str | None = None,
    ) -> list[dict[str, Any]]:
        items, _ = self.list_objects(kind, namespace=namespace, labels=labels, fields=fields)
        return [
            self.delete(
                kind,
                namespace=item["metadata"].get("namespace"),
                name=item["metadata"]["name"],
                propagation=propagation,
            )
            for item in items
        ]

    def _new(
        self,
        kind: ResourceKind,
        *,
        namespace: str | None,
        body: dict[str, Any],
        applied: bool = False,
    ) -> dict[str, Any]:
        return prepare_new(
            kind,
            namespace=namespace,
            body=body,
            now=self._now(),
            check_namespace=self.table.check_namespace,
            applied=applied,
        )

    # ------------------------------------------------------------------ custom resources

    def register_crd(self, crd: dict[str, Any]) -> dict[str, Any]:
        """Create (or update) a CustomResourceDefinition as a client would; its kinds get served."""
        name = (crd.get("metadata") or {}).get("name", "")
        if self.find(CRD_KIND, namespace=None, name=name) is None:
            return self.create(CRD_KIND, namespace=None, body=crd, manager="kaiwo-kubefake")
        live = self.table.live(CRD_KIND, None, name)
        body = {**copy.deepcopy(crd), "metadata": {**crd.get("metadata", {}), "name": name}}
        body["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
        return self.replace(
            CRD_KIND, namespace=None, name=name, body=body, manager="kaiwo-kubefake"
        )

    # ------------------------------------------------------------------ test conveniences

    def put(self, kind: ResourceKind, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` as given (status included), creating or overwriting; tests use this to
        play the part of other controllers. Server fields are filled in; watchers are told."""
        metadata = obj.get("metadata") or {}
        live = self.find(kind, namespace=metadata.get("namespace"), name=metadata.get("name", ""))
        if live is None:
            fresh = self._new(kind, namespace=metadata.get("namespace"), body=obj)
            if "status" in obj:
                fresh["status"] = copy.deepcopy(obj["status"])
                fresh = conform(kind, fresh)
            created = self.table.commit(kind, change_type="ADDED", obj=fresh, old=None)
            self._lifecycle.after_write(kind, created)
            return created
        new = copy.deepcopy(obj)
        new["apiVersion"], new["kind"] = live["apiVersion"], live["kind"]
        new = conform(kind, new)
        new_metadata = meta(new)
        for fixed in ("uid", "creationTimestamp", "namespace", "managedFields"):
            if fixed in live["metadata"]:
                new_metadata.setdefault(fixed, live["metadata"][fixed])
        if kind.has_generation and spec_changed(kind, live, new):
            new_metadata["generation"] = int(live["metadata"].get("generation") or 0) + 1
        else:
            new_metadata["generation"] = live["metadata"].get("generation")
            if new_metadata["generation"] is None:
                del new_metadata["generation"]
        updated = self.table.commit(kind, change_type="MODIFIED", obj=new, old=live)
        self._lifecycle.after_write(kind, updated)
        return updated

    def set_status(
        self, kind: ResourceKind, *, namespace: str | None, name: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        """Replace an object's status as its controller would (e.g. a Job's ``succeeded``)."""
        live = self.get(kind, namespace=namespace, name=name)
        return self.put(kind, {**live, "status": copy.deepcopy(status)})
