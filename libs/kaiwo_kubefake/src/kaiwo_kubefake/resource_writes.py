"""The write verbs on a resource URL: create (POST), replace (PUT), patch (PATCH: JSON,
merge, strategic merge, server-side apply; scale subresource too) and delete (one, or a
collection), each counted as a write request, answered as the real server answers them."""

from __future__ import annotations

import json
from typing import Any

import yaml
from aiohttp import web

from kaiwo_kubefake import errors
from kaiwo_kubefake.patching import (
    APPLY_PATCH,
    MERGE_PATCH,
    PATCH_TYPES,
    STRATEGIC_MERGE_PATCH,
    apply_patch,
)
from kaiwo_kubefake.scaling import scale_view, with_replicas
from kaiwo_kubefake.storage import ObjectStore, Preconditions
from kaiwo_kubefake.targets import Target, answer, field_manager, selectors, served_as, truthy


class ResourceWrites:
    """The handlers of the write verbs, over an :class:`ObjectStore`."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        content_type = request.content_type
        if not raw:
            return None
        try:
            if content_type == APPLY_PATCH and not raw.lstrip().startswith(b"{"):
                return yaml.safe_load(raw)
            # JSON is YAML; clients send apply bodies as JSON, and the YAML parser is slow.
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as error:
            raise errors.bad_request(f"the request body could not be decoded: {error}") from None

    async def create(self, request: web.Request, target: Target) -> web.Response:
        body = await self._body(request)
        name = (
            ((body or {}).get("metadata") or {}).get("name", "") if isinstance(body, dict) else ""
        )
        try:
            created = self.store.create(
                target.kind, namespace=target.namespace, body=body, manager=field_manager(request)
            )
        finally:
            self.store.count_write_request(target.kind, target.namespace, name)
        return answer(target, created, status=201)

    async def replace(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        self.store.count_write_request(target.kind, target.namespace, target.name)
        body = await self._body(request)
        if target.subresource == "scale":
            live = self.store.get(target.kind, namespace=target.namespace, name=target.name)
            body = with_replicas(target.kind, live, body or {})
        updated = self.store.replace(
            target.kind,
            namespace=target.namespace,
            name=target.name,
            body=body,
            manager=field_manager(request),
            subresource="status" if target.subresource == "status" else "",
        )
        return answer(target, updated)

    async def patch(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        self.store.count_write_request(target.kind, target.namespace, target.name)
        content_type = request.content_type
        custom = target.kind.custom
        if content_type not in PATCH_TYPES or (custom and content_type == STRATEGIC_MERGE_PATCH):
            raise errors.unsupported_media_type(custom=custom)
        body = await self._body(request)
        if target.subresource == "scale":
            live = self.store.get(target.kind, namespace=target.namespace, name=target.name)
            scale = scale_view(target.kind, live, for_update=True)
            patched_scale = apply_patch(
                content_type=MERGE_PATCH if content_type == APPLY_PATCH else content_type,
                target=scale,
                body=body,
            )
            new = with_replicas(target.kind, live, patched_scale)
            updated = self.store.replace(
                target.kind,
                namespace=target.namespace,
                name=target.name,
                body=new,
                manager=field_manager(request),
            )
            return answer(target, updated)
        existed = (
            self.store.find(target.kind, namespace=target.namespace, name=target.name) is not None
        )
        patched = self.store.patch(
            target.kind,
            namespace=target.namespace,
            name=target.name,
            content_type=content_type,
            body=body,
            manager=request.query.get("fieldManager")
            or (None if content_type == APPLY_PATCH else field_manager(request)),
            force=truthy(request.query.get("force")),
            subresource="status" if target.subresource == "status" else "",
        )
        return answer(target, patched, status=200 if existed else 201)

    def _delete_options(self, request: web.Request, body: Any) -> tuple[str | None, Preconditions]:
        options = body if isinstance(body, dict) else {}
        propagation = request.query.get("propagationPolicy") or options.get("propagationPolicy")
        orphan = options.get("orphanDependents", request.query.get("orphanDependents"))
        if propagation is None and orphan is not None:
            propagation = "Orphan" if orphan in (True, "true") else "Background"
        preconditions = options.get("preconditions") or {}
        return propagation, Preconditions(
            uid=preconditions.get("uid"), resource_version=preconditions.get("resourceVersion")
        )

    async def delete(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        self.store.count_write_request(target.kind, target.namespace, target.name)
        propagation, preconditions = self._delete_options(request, await self._body(request))
        deleted = self.store.delete(
            target.kind,
            namespace=target.namespace,
            name=target.name,
            propagation=propagation,
            preconditions=preconditions,
        )
        still_there = (
            self.store.find(target.kind, namespace=target.namespace, name=target.name) is not None
        )
        return answer(target, deleted, status=202 if still_there else 200)

    async def delete_collection(self, request: web.Request, target: Target) -> web.Response:
        labels, fields = selectors(request, target)
        propagation, _ = self._delete_options(request, await self._body(request))
        deleted = self.store.delete_collection(
            target.kind,
            namespace=target.namespace,
            labels=labels,
            fields=fields,
            propagation=propagation,
        )
        for obj in deleted:
            metadata = obj["metadata"]
            self.store.count_write_request(target.kind, metadata.get("namespace"), metadata["name"])
        return web.json_response(
            {
                "kind": f"{target.kind.kind}List",
                "apiVersion": target.kind.api_version,
                "metadata": {"resourceVersion": str(self.store.resource_version)},
                "items": [served_as(target, obj) for obj in deleted],
            }
        )
