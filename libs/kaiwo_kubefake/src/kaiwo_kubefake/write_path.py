"""The fake API server's write path: creating and updating objects as the API server does
(defaults, the write rules of :mod:`kaiwo_kubefake.object_rules`, preconditions, field
ownership with managedFields and server-side apply, generations); an update that changes
nothing commits nothing."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from kaiwo_kubefake import errors
from kaiwo_kubefake.custom_resources import check_apply_configuration, conform
from kaiwo_kubefake.kinds import ResourceKind
from kaiwo_kubefake.lifecycle import ObjectLifecycle
from kaiwo_kubefake.object_rules import (
    Preconditions,
    check_preconditions,
    content,
    main_resource_update,
    meta,
    prepare_new,
    spec_changed,
)
from kaiwo_kubefake.object_table import ObjectTable
from kaiwo_kubefake.ownership import (
    Ownership,
    read_ownership,
    record_update,
    server_side_apply,
    write_ownership,
)
from kaiwo_kubefake.patching import APPLY_PATCH, apply_patch


class WritePath:
    """Create, replace, patch (server-side apply included) and put, committed to the table."""

    def __init__(
        self, table: ObjectTable, *, lifecycle: ObjectLifecycle, now: Callable[[], str]
    ) -> None:
        self._table = table
        self._lifecycle = lifecycle
        self._now = now

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
        if self._table.bucket(kind).get(
            self._table.key(kind, metadata.get("namespace"), metadata["name"])
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
        created = self._table.commit(kind, change_type="ADDED", obj=obj, old=None)
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
        live = self._table.live(kind, namespace, name)
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
        live = self._table.live(kind, namespace, name)
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
        live = self._table.find(kind, namespace=namespace, name=name)
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
            created = self._table.commit(kind, change_type="ADDED", obj=obj, old=None)
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
        updated = self._table.commit(kind, change_type="MODIFIED", obj=new, old=live)
        self._lifecycle.after_write(kind, updated)
        return (
            self._table.find(
                kind,
                namespace=updated["metadata"].get("namespace"),
                name=updated["metadata"]["name"],
            )
            or updated
        )

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
            check_namespace=self._table.check_namespace,
            applied=applied,
        )

    def put(self, kind: ResourceKind, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` as given (status included), creating or overwriting; tests use this to
        play the part of other controllers. Server fields are filled in; watchers are told."""
        metadata = obj.get("metadata") or {}
        live = self._table.find(
            kind, namespace=metadata.get("namespace"), name=metadata.get("name", "")
        )
        if live is None:
            fresh = self._new(kind, namespace=metadata.get("namespace"), body=obj)
            if "status" in obj:
                fresh["status"] = copy.deepcopy(obj["status"])
                fresh = conform(kind, fresh)
            created = self._table.commit(kind, change_type="ADDED", obj=fresh, old=None)
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
        updated = self._table.commit(kind, change_type="MODIFIED", obj=new, old=live)
        self._lifecycle.after_write(kind, updated)
        return updated
