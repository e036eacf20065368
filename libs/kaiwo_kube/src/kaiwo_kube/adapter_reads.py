"""The adapter's reading part: :class:`~kaiwo_kube.port.ObjectReader` (get, list by pages,
watch) and a pod's log for the command, over an :class:`~kaiwo_kube.api_transport.ApiTransport`.
What every part shares (the connection, the kinds discovered, the page size) is here too."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import aiohttp

from kaiwo_kube.api_transport import ApiTransport, KindDiscovery, Query
from kaiwo_kube.errors import ResourceExpired, Retryable
from kaiwo_kube.port import ObjectList, WatchEvent
from kaiwo_kube.resources import POD, ResourceType
from kaiwo_kube.responses import list_page_of, watch_event_of


def flag(value: bool) -> str:
    return "true" if value else "false"


def _selectors(label_selector: str | None, field_selector: str | None) -> Query:
    query: Query = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query


class Connected:
    """What every part of the adapter shares: the connection, the kinds it discovered, and
    the page size of its lists."""

    def __init__(self, transport: ApiTransport, *, page_size: int) -> None:
        self.transport = transport
        self._kinds = KindDiscovery(transport)
        self._page_size = page_size


class ObjectReads(Connected):
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
            ("allowWatchBookmarks", flag(bookmarks)),
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
