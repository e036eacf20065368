"""HTTP routes: the API server's URL layout, query parameters and content types over the store."""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp import web

from kaiwo_kubefake import discovery, errors
from kaiwo_kubefake.errors import ApiError
from kaiwo_kubefake.kinds import CRD_KIND, ResourceKind
from kaiwo_kubefake.openapi import openapi_v2, openapi_v3_group_version, openapi_v3_index
from kaiwo_kubefake.pod_logs import (
    check_numbers,
    chosen_container,
    kubelet_location,
    kubelet_url,
    stream_from_kubelet,
)
from kaiwo_kubefake.resource_writes import ResourceWrites
from kaiwo_kubefake.storage import ObjectStore
from kaiwo_kubefake.tables import printer_columns, table, wants_table
from kaiwo_kubefake.targets import Target, answer, selectors, served_as, truthy
from kaiwo_kubefake.watch_stream import ServerSettings, WatchStreams

_NAMESPACE_SUBRESOURCES = ("status", "finalize")


def _status_response(error: ApiError) -> web.Response:
    return web.json_response(error.status(), status=error.code)


def _not_served(path: str) -> ApiError:
    """A path in a served group version that names no resource (the real server's words)."""
    del path  # the real server does not repeat it
    return ApiError(
        code=404,
        reason="NotFound",
        message="the server could not find the requested resource",
        details={},
    )


class _GroupVersionNotServedError(Exception):
    """A path under a group or group version nothing serves."""


def _page_not_found() -> web.Response:
    # The real server's mux answers such paths before any API handler, in plain text.
    return web.Response(status=404, text="404 page not found\n", content_type="text/plain")


def _split_resource_path(segments: list[str]) -> tuple[str | None, str, str | None, str]:
    """(namespace, plural, name, subresource) from the segments after the group version."""
    namespace_itself = len(segments) == 3 and segments[2] in _NAMESPACE_SUBRESOURCES
    if segments[0] == "namespaces" and len(segments) >= 3 and not namespace_itself:
        namespace, rest = segments[1], segments[2:]
        return namespace, rest[0], _at(rest, 1), _at(rest, 2) or ""
    return None, segments[0], _at(segments, 1), _at(segments, 2) or ""


def _at(items: list[str], index: int) -> str | None:
    return items[index] if len(items) > index else None


class ApiRoutes:
    """aiohttp handlers serving an :class:`ObjectStore`."""

    def __init__(self, store: ObjectStore, settings: ServerSettings) -> None:
        self.store = store
        self.settings = settings
        self.server_address = ""
        self._watches = WatchStreams(store, settings)
        self._writes = ResourceWrites(store)

    def install(self, app: web.Application) -> None:
        app.router.add_get("/version", self._version)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._healthz)
        app.router.add_get("/api", self._core_versions)
        app.router.add_get("/apis", self._group_list)
        app.router.add_get("/openapi/v2", self._openapi_v2)
        app.router.add_get("/openapi/v3", self._openapi_v3)
        app.router.add_get("/openapi/v3/{path:.+}", self._openapi_v3_path)
        app.router.add_route("*", "/api/{version}{rest:.*}", self._core)
        app.router.add_route("*", "/apis/{group}{rest:.*}", self._grouped)

    # ------------------------------------------------------------------ discovery

    async def _version(self, _request: web.Request) -> web.Response:
        return web.json_response(discovery.server_version())

    def _discoverable(self) -> list[ResourceKind]:
        return self.store.kinds.discoverable(lag=self.settings.discovery_lag)

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _core_versions(self, _request: web.Request) -> web.Response:
        return web.json_response(discovery.core_versions(server_address=self.server_address))

    async def _group_list(self, _request: web.Request) -> web.Response:
        return web.json_response(discovery.group_list(self._discoverable()))

    # ------------------------------------------------------------------ dispatch

    async def _core(self, request: web.Request) -> web.StreamResponse:
        version = request.match_info["version"]
        return await self._dispatch(request, group="", version=version)

    async def _grouped(self, request: web.Request) -> web.StreamResponse:
        rest = [part for part in request.match_info["rest"].split("/") if part]
        group_name = request.match_info["group"]
        if not rest:
            found = discovery.group(group_name, self._discoverable())
            if found is None:
                return _page_not_found()
            if request.method != "GET":
                return _status_response(_not_served(request.path))
            return web.json_response(found)
        return await self._dispatch(request, group=group_name, version=rest[0], skip=1)

    async def _dispatch(
        self, request: web.Request, *, group: str, version: str, skip: int = 0
    ) -> web.StreamResponse:
        segments = [part for part in request.match_info["rest"].split("/") if part][skip:]
        try:
            if not segments:
                return self._resource_list(request, group=group, version=version)
            target = self._target(request, group=group, version=version, segments=segments)
            return await self._handle(request, target)
        except ApiError as error:
            return _status_response(error)
        except _GroupVersionNotServedError:
            return _page_not_found()

    def _resource_list(self, request: web.Request, *, group: str, version: str) -> web.Response:
        kinds = [k for k in self._discoverable() if (k.group, k.version) == (group, version)]
        if not kinds:
            raise _GroupVersionNotServedError
        if request.method != "GET":
            raise _not_served(request.path)
        group_version = f"{group}/{version}" if group else version
        return web.json_response(discovery.resource_list(group_version=group_version, kinds=kinds))

    def _target(
        self, request: web.Request, *, group: str, version: str, segments: list[str]
    ) -> Target:
        if len(segments) > 5:
            raise _not_served(request.path)
        namespace, plural, name, subresource = _split_resource_path(segments)
        kind = self.store.kinds.lookup(group=group, version=version, plural=plural)
        if kind is None and not _group_version_served(self.store.kinds, group, version):
            raise _GroupVersionNotServedError
        if kind is None:
            raise _not_served(request.path)
        if namespace is not None and not kind.namespaced:
            raise _not_served(request.path)
        if subresource and (
            subresource not in ("status", "scale", "log")
            or (subresource == "status" and not kind.status_subresource)
            or (subresource == "scale" and kind.scale is None)
            or (subresource == "log" and kind.key != ("", "pods"))
        ):
            raise _not_served(request.path)
        if kind.namespaced and name is not None and namespace is None:
            raise _not_served(request.path)
        return Target(kind=kind, namespace=namespace, name=name, subresource=subresource)

    async def _handle(self, request: web.Request, target: Target) -> web.StreamResponse:
        if request.query.get("dryRun"):
            raise errors.bad_request("dryRun is not supported by the Kubernetes fake")
        if target.subresource == "log":
            if request.method != "GET":
                raise errors.method_not_allowed(
                    f"{request.method} is not supported on {request.path}"
                )
            return await self._pod_log(request, target)
        handlers: dict[
            tuple[bool, str], Callable[[web.Request, Target], Awaitable[web.StreamResponse]]
        ] = {
            (False, "GET"): self._list_or_watch,
            (False, "POST"): self._writes.create,
            (False, "DELETE"): self._writes.delete_collection,
            (True, "GET"): self._get,
            (True, "PUT"): self._writes.replace,
            (True, "PATCH"): self._writes.patch,
            (True, "DELETE"): self._writes.delete,
        }
        handler = handlers.get((target.name is not None, request.method))
        if handler is None or (target.subresource and request.method in ("DELETE", "POST")):
            raise errors.method_not_allowed(f"{request.method} is not supported on {request.path}")
        return await handler(request, target)

    # ------------------------------------------------------------------ reads

    async def _get(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        obj = self.store.get(target.kind, namespace=target.namespace, name=target.name)
        if not target.subresource and wants_table(request.headers.get("Accept")):
            version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
            return self._table(target, [obj], version)
        return answer(target, obj)

    async def _pod_log(self, request: web.Request, target: Target) -> web.StreamResponse:
        """As the real server: checked against the pod, then streamed from its node's
        kubelet (see :mod:`kaiwo_kubefake.pod_logs`)."""
        assert target.name is not None and target.namespace is not None
        pod = self.store.get(target.kind, namespace=target.namespace, name=target.name)
        container = chosen_container(pod, request.query.get("container"))
        check_numbers(request.query)
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:  # not on a node yet: nothing has written anything
            return web.Response(text="", content_type="text/plain")
        node_kind = self.store.kinds.lookup(group="", version="v1", plural="nodes")
        node = self.store.find(node_kind, namespace=None, name=node_name) if node_kind else None
        if node is None:
            # The real server names the missing node as a pod (checked on 1.36).
            raise errors.not_found(name=node_name, group="", plural="pods")
        address, port = kubelet_location(node)
        url = kubelet_url(
            address,
            port,
            namespace=target.namespace,
            pod=target.name,
            container=container,
            query=request.query,
        )
        return await stream_from_kubelet(request, url, pod=target.name)

    def _table(self, target: Target, items: list[dict[str, Any]], version: str) -> web.Response:
        crd = None
        if target.kind.custom:
            crd = self.store.find(
                CRD_KIND, namespace=None, name=f"{target.kind.plural}.{target.kind.group}"
            )
        columns = printer_columns(crd, version=target.kind.version, plural=target.kind.plural)
        served_items = [served_as(target, item) for item in items]
        return web.json_response(table(served_items, columns, resource_version=version))

    async def _openapi_v2(self, _request: web.Request) -> web.Response:
        return web.json_response(openapi_v2(self._crds()))

    async def _openapi_v3(self, _request: web.Request) -> web.Response:
        return web.json_response(openapi_v3_index(self._crds(), self.store.kinds))

    async def _openapi_v3_path(self, request: web.Request) -> web.Response:
        document = openapi_v3_group_version(
            self._crds(), request.match_info["path"], kinds=list(self.store.kinds)
        )
        if document is None:
            return _page_not_found()
        return web.json_response(document)

    def _crds(self) -> list[dict[str, Any]]:
        return self.store.list_objects(CRD_KIND, namespace=None)[0]

    async def _list_or_watch(self, request: web.Request, target: Target) -> web.StreamResponse:
        if truthy(request.query.get("watch")):
            return await self._watches.serve(request, target)
        labels, fields = selectors(request, target)
        requested = request.query.get("resourceVersion")
        if requested and request.query.get("resourceVersionMatch") == "Exact":
            _check_exact_version(requested, current=self.store.resource_version)
        items, version = self.store.list_objects(
            target.kind, namespace=target.namespace, labels=labels, fields=fields
        )
        items, token = _page(items, request.query.get("limit"), request.query.get("continue"))
        if wants_table(request.headers.get("Accept")):
            return self._table(target, items, str(version))
        metadata: dict[str, Any] = {"resourceVersion": str(version)}
        if token:
            metadata["continue"] = token
        return web.json_response(
            {
                "kind": f"{target.kind.kind}List",
                "apiVersion": target.kind.api_version,
                "metadata": metadata,
                "items": [served_as(target, item) for item in items],
            }
        )


def _page(
    items: list[dict[str, Any]], limit: str | None, token: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """limit/continue over the (namespace, name) order; a page reflects the current state."""
    start = 0
    if token:
        try:
            after = json.loads(base64.urlsafe_b64decode(token.encode()))
        except ValueError:
            raise errors.bad_request("invalid continue token") from None
        start = next(
            (
                index
                for index, item in enumerate(items)
                if [item["metadata"].get("namespace", ""), item["metadata"]["name"]] > after
            ),
            len(items),
        )
    if not limit or int(limit) <= 0 or start + int(limit) >= len(items):
        return items[start:], None
    page = items[start : start + int(limit)]
    last = page[-1]["metadata"]
    next_token = base64.urlsafe_b64encode(
        json.dumps([last.get("namespace", ""), last["name"]]).encode()
    ).decode()
    return page, next_token


def _group_version_served(kinds: Iterable[ResourceKind], group: str, version: str) -> bool:
    return any((k.group, k.version) == (group, version) for k in kinds)


def _check_exact_version(requested: str, *, current: int) -> None:
    """Only the current state is kept: an older exact version is gone, as after compaction."""
    try:
        wanted = int(requested)
    except ValueError:
        raise errors.bad_request(f"invalid resource version: {requested!r}") from None
    if wanted != current:
        raise errors.gone(
            f"The resourceVersion for the provided list is too old: {wanted} (current {current})"
        )
