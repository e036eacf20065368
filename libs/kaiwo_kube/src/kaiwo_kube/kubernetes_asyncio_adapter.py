"""The Kubernetes port over kubernetes_asyncio's ApiClient (the only module that imports it).

Requests go through ``ApiClient.call_api`` with raw paths and JSON bodies, so every kind, built-in
or custom, is handled the same way and objects stay plain dicts. The client's own
authentication (kubeconfig, exec plugins, in-cluster service account) and TLS set-up are used
as they are. :meth:`KubernetesAsyncioAdapter.from_kubeconfig_quickly` swaps the ApiClient
for :class:`~kaiwo_kube.plain_client.PlainApiClient` when the kubeconfig needs only
certificates or a token, so that a command starts without importing the client library
(``kubernetes_asyncio`` is imported on first use, not with this module). This adapter does
not retry: it raises :class:`~kaiwo_kube.errors.Retryable` and
the caller (the executor's backoff) decides.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncGenerator, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

import aiohttp

from kaiwo_kube.api_transport import ApiTransport, KindDiscovery, Query
from kaiwo_kube.errors import (
    AlreadyExists,
    ResourceExpired,
    Retryable,
)
from kaiwo_kube.events import event_manifest
from kaiwo_kube.plain_client import PlainApiClient, read_plain_credentials
from kaiwo_kube.port import EventType, ObjectList, PropagationPolicy, WatchEvent
from kaiwo_kube.resources import (
    CUSTOM_RESOURCE_DEFINITION,
    EVENT,
    POD,
    ResourceType,
)
from kaiwo_kube.responses import crd_established, list_page_of, watch_event_of

if TYPE_CHECKING:
    from kubernetes_asyncio import client as k8s_client

APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _selectors(label_selector: str | None, field_selector: str | None) -> Query:
    query: Query = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query


def _for_apply(obj: dict[str, Any]) -> dict[str, Any]:
    """The apply body: server-maintained metadata the API server refuses in an apply is dropped."""
    metadata = {
        k: v
        for k, v in (obj.get("metadata") or {}).items()
        if k not in ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation")
    }
    return {**obj, "metadata": metadata}


class _Connected:
    """What every part of the adapter shares: the connection, the kinds it discovered, and
    the page size of its lists."""

    def __init__(self, transport: ApiTransport, *, page_size: int) -> None:
        self.transport = transport
        self._kinds = KindDiscovery(transport)
        self._page_size = page_size


class ObjectReads(_Connected):
    """:class:`~kaiwo_kube.port.ObjectReader`, and a pod's log for the command."""

    async def resolve(self, api_version: str, kind: str) -> ResourceType:
        """The resource type of an apiVersion/kind: the catalogue first, then discovery."""
        return await self._kinds.resolve(api_version, kind)

    async def get(
        self, resource: ResourceType, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        return await self.transport.request("GET", resource.path(namespace=namespace, name=name))

    async def list(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        path = resource.path(namespace=namespace)
        selectors = _selectors(label_selector, field_selector)
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            query = [*selectors, ("limit", str(self._page_size))]
            if token:
                query.append(("continue", token))
            try:
                page = await self.transport.request("GET", path, query=query)
            except ResourceExpired:
                if not token:
                    raise
                # The continue token outlived the server's history: one full list instead.
                page = await self.transport.request("GET", path, query=selectors)
                items = []
            decoded = list_page_of(page)
            items.extend(decoded.items)
            token = decoded.continue_token
            if not token:
                return ObjectList(items=items, resource_version=decoded.resource_version)

    async def pod_log_lines(
        self,
        name: str,
        *,
        namespace: str,
        container: str | None = None,
        tail_lines: int | None = None,
        follow: bool = False,
    ) -> AsyncGenerator[str, None]:
        """A pod's log, line by line (``kaiwo logs``; not part of the operator's port: no
        service reads logs). With ``follow`` it ends when the container does."""
        query: Query = []
        if container:
            query.append(("container", container))
        if tail_lines is not None:
            query.append(("tailLines", str(tail_lines)))
        if follow:
            query.append(("follow", "true"))
        path = f"{POD.path(namespace=namespace, name=name)}/log"
        response = await self.transport.open(
            "GET",
            path,
            query=query,
            accept="text/plain, */*",
            request_timeout=aiohttp.ClientTimeout(total=None) if follow else None,
        )
        if not 200 <= response.status < 300:
            await self.transport.fail(response)
        try:
            async for line in response.content:
                yield line.decode("utf-8", errors="replace").rstrip("\n")
        except (aiohttp.ClientError, TimeoutError) as error:
            raise Retryable(f"GET {path}: {error}", code=0) from error
        finally:
            response.release()

    async def watch(
        self,
        resource: ResourceType,
        *,
        resource_version: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int | None = None,
        bookmarks: bool = True,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Events until the server ends the watch. Close it early with ``contextlib.aclosing``."""
        query: Query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", _flag(bookmarks)),
            *_selectors(label_selector, field_selector),
        ]
        if timeout_seconds is not None:
            query.append(("timeoutSeconds", str(timeout_seconds)))
        # No total timeout: only a read that stays silent far past the server's own timeout.
        read_timeout = float(timeout_seconds or 3600) + 60.0
        response = await self.transport.open(
            "GET",
            resource.path(namespace=namespace),
            query=query,
            request_timeout=aiohttp.ClientTimeout(
                connect=self.transport.request_timeout, sock_read=read_timeout
            ),
        )
        if not 200 <= response.status < 300:
            await self.transport.fail(response)
        buffer = b""
        try:
            async for chunk in response.content.iter_any():
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        yield watch_event_of(line)
            if buffer.strip():
                yield watch_event_of(buffer)
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, TimeoutError) as error:
            raise Retryable(f"watch {resource}: {error}", code=0) from error
        finally:
            response.close()


class ObjectWrites(_Connected):
    """:class:`~kaiwo_kube.port.ObjectWriter`."""

    def _object_path(self, resource: ResourceType, obj: dict[str, Any], *, sub: str = "") -> str:
        metadata = obj.get("metadata") or {}
        return resource.path(
            namespace=metadata.get("namespace"),
            name=metadata.get("name", ""),
            subresource=sub or None,
        )

    async def create(
        self, obj: dict[str, Any], *, field_manager: str | None = None
    ) -> dict[str, Any]:
        resource = await self._kinds.type_of(obj, None)
        namespace = (obj.get("metadata") or {}).get("namespace")
        query = [("fieldManager", field_manager)] if field_manager else []
        return await self.transport.request(
            "POST", resource.path(namespace=namespace), query=query, body=obj
        )

    async def replace(
        self, obj: dict[str, Any], *, field_manager: str | None = None
    ) -> dict[str, Any]:
        resource = await self._kinds.type_of(obj, None)
        query = [("fieldManager", field_manager)] if field_manager else []
        return await self.transport.request(
            "PUT", self._object_path(resource, obj), query=query, body=obj
        )

    async def apply(
        self,
        obj: dict[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        resource: ResourceType | None = None,
    ) -> dict[str, Any]:
        resource = await self._kinds.type_of(obj, resource)
        return await self.transport.request(
            "PATCH",
            self._object_path(resource, obj),
            query=[("fieldManager", field_manager), ("force", _flag(force))],
            body=_for_apply(obj),
            content_type=APPLY_PATCH,
        )

    async def merge_patch(
        self,
        resource: ResourceType,
        name: str,
        patch: dict[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        query = [("fieldManager", field_manager)] if field_manager else []
        return await self.transport.request(
            "PATCH",
            resource.path(namespace=namespace, name=name),
            query=query,
            body=patch,
            content_type=MERGE_PATCH,
        )

    async def json_patch(
        self,
        resource: ResourceType,
        name: str,
        operations: Sequence[dict[str, Any]],
        *,
        namespace: str | None = None,
        field_manager: str,
    ) -> dict[str, Any]:
        return await self.transport.request(
            "PATCH",
            resource.path(namespace=namespace, name=name),
            query=[("fieldManager", field_manager)],
            body=list(operations),
            content_type=JSON_PATCH,
        )

    async def delete(
        self,
        resource: ResourceType,
        name: str,
        *,
        namespace: str | None = None,
        propagation: PropagationPolicy = "Background",
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> None:
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": propagation,
        }
        preconditions = {
            key: value
            for key, value in (("uid", uid), ("resourceVersion", resource_version))
            if value
        }
        if preconditions:
            options["preconditions"] = preconditions
        await self.transport.request(
            "DELETE", resource.path(namespace=namespace, name=name), body=options
        )


class Subresources(_Connected):
    """:class:`~kaiwo_kube.port.StatusWriter` and :class:`~kaiwo_kube.port.Scaler`."""

    async def patch_status(
        self,
        resource: ResourceType,
        name: str,
        status: dict[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str,
        method: Literal["apply", "merge"] = "apply",
        force: bool = True,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        path = resource.path(namespace=namespace, name=name, subresource="status")
        precondition = {"resourceVersion": resource_version} if resource_version else {}
        if method == "merge":
            return await self.transport.request(
                "PATCH",
                path,
                query=[("fieldManager", field_manager)],
                body={"status": status, **({"metadata": precondition} if precondition else {})},
                content_type=MERGE_PATCH,
            )
        metadata = {"name": name, **({"namespace": namespace} if namespace else {}), **precondition}
        body = {
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "metadata": metadata,
            "status": status,
        }
        return await self.transport.request(
            "PATCH",
            path,
            query=[("fieldManager", field_manager), ("force", _flag(force))],
            body=body,
            content_type=APPLY_PATCH,
        )

    async def get_scale(
        self, resource: ResourceType, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        return await self.transport.request(
            "GET", resource.path(namespace=namespace, name=name, subresource="scale")
        )

    async def patch_scale(
        self,
        resource: ResourceType,
        name: str,
        *,
        replicas: int,
        expected_replicas: int | None = None,
        namespace: str | None = None,
        field_manager: str,
    ) -> dict[str, Any]:
        # "add" sets the field whether the object has it or not; "replace" needs it.
        operations: list[dict[str, Any]] = [
            {"op": "add", "path": "/spec/replicas", "value": replicas}
        ]
        if expected_replicas is not None:
            operations = [
                {"op": "test", "path": "/spec/replicas", "value": expected_replicas},
                {"op": "replace", "path": "/spec/replicas", "value": replicas},
            ]
        return await self.transport.request(
            "PATCH",
            resource.path(namespace=namespace, name=name, subresource="scale"),
            query=[("fieldManager", field_manager)],
            body=operations,
            content_type=JSON_PATCH,
        )


class EventsAndCrds(ObjectReads, ObjectWrites):
    """:class:`~kaiwo_kube.port.EventRecorder` and :class:`~kaiwo_kube.port.CrdInstaller`
    (an Event seen twice in a second is counted; a CRD is applied, then read until served)."""

    async def create_event(
        self,
        *,
        involved: dict[str, Any],
        type: EventType,
        reason: str,
        message: str,
        component: str,
        now: datetime | None = None,
    ) -> dict[str, Any]:
        event = event_manifest(
            involved=involved,
            event_type=type,
            reason=reason,
            message=message,
            component=component,
            now=now or datetime.now(UTC),
        )
        namespace = event["metadata"]["namespace"]
        try:
            return await self.transport.request("POST", EVENT.path(namespace=namespace), body=event)
        except AlreadyExists:
            # The same event in the same second: count it, as kubectl's recorder does.
            existing = await self.get(EVENT, event["metadata"]["name"], namespace=namespace)
            return await self.merge_patch(
                EVENT,
                event["metadata"]["name"],
                namespace=namespace,
                patch={
                    "count": int(existing.get("count") or 1) + 1,
                    "lastTimestamp": event["lastTimestamp"],
                },
            )

    async def apply_crd(self, crd: dict[str, Any], *, field_manager: str) -> dict[str, Any]:
        self._kinds.forget()
        return await self.apply(
            crd, field_manager=field_manager, force=True, resource=CUSTOM_RESOURCE_DEFINITION
        )

    async def ensure_crds(
        self, crds: Iterable[dict[str, Any]], *, field_manager: str, within: float = 30.0
    ) -> None:
        names = [
            (await self.apply_crd(crd, field_manager=field_manager))["metadata"]["name"]
            for crd in crds
        ]
        deadline = time.monotonic() + within
        for name in names:
            while not crd_established(await self.get(CUSTOM_RESOURCE_DEFINITION, name)):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"CustomResourceDefinition {name} is not Established")
                await asyncio.sleep(0.2)


class KubernetesAsyncioAdapter(EventsAndCrds, Subresources):
    """:class:`~kaiwo_kube.port.KubernetesPort` over a kubernetes_asyncio ApiClient: one part
    per protocol of the port, and how to connect."""

    def __init__(
        self,
        api_client: k8s_client.ApiClient | PlainApiClient,
        *,
        request_timeout: float = 30.0,
        page_size: int = 500,
        user_agent: str | None = None,
    ) -> None:
        """``user_agent`` names the caller in the API server's audit log (e.g.
        ``kaiwo-executor/0.1.0``), so an operator's writes can be told from others'."""
        if user_agent:
            api_client.user_agent = user_agent
        super().__init__(
            ApiTransport(api_client, request_timeout=request_timeout), page_size=page_size
        )

    @classmethod
    async def from_kubeconfig(
        cls,
        path: str | Path | None = None,
        *,
        context: str | None = None,
        request_timeout: float = 30.0,
        page_size: int = 500,
        user_agent: str | None = None,
    ) -> Self:
        """From a kubeconfig file (default: ``$KUBECONFIG`` or ``~/.kube/config``)."""
        from kubernetes_asyncio import config as k8s_config

        api = await k8s_config.new_client_from_config(
            config_file=str(path) if path is not None else os.environ.get("KUBECONFIG"),
            context=context,
            persist_config=False,
        )
        return cls(api, request_timeout=request_timeout, page_size=page_size, user_agent=user_agent)

    @classmethod
    async def in_cluster(cls, *, user_agent: str | None = None) -> Self:
        """From the pod's service account."""
        from kubernetes_asyncio import client as k8s_client
        from kubernetes_asyncio import config as k8s_config

        configuration = k8s_client.Configuration()
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return cls(k8s_client.ApiClient(configuration=configuration), user_agent=user_agent)

    @classmethod
    async def from_kubeconfig_quickly(
        cls,
        path: str | Path | None = None,
        *,
        context: str | None = None,
        user_agent: str | None = None,
    ) -> Self:
        """As :meth:`from_kubeconfig`, without loading the client library when the kubeconfig
        needs only certificates or a token (for commands, whose start-up it dominates)."""
        listed = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
        where = Path(path) if path is not None else Path(listed) if listed else None
        where = where or Path.home() / ".kube" / "config"
        credentials = read_plain_credentials(where.expanduser(), context=context)
        if credentials is None:
            return await cls.from_kubeconfig(path, context=context, user_agent=user_agent)
        return cls(PlainApiClient(credentials), user_agent=user_agent)

    @classmethod
    async def from_environment(
        cls, kubeconfig: str | Path | None = None, *, user_agent: str | None = None
    ) -> Self:
        """In-cluster when running in a pod and no kubeconfig is named, else the kubeconfig."""
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            return await cls.in_cluster(user_agent=user_agent)
        return await cls.from_kubeconfig(kubeconfig, user_agent=user_agent)

    async def close(self) -> None:
        await self.transport.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
