"""A watch over HTTP: the events of a :class:`~kaiwo_kubefake.watching.Watcher` as JSON lines,
with BOOKMARKs when asked for, until the watch's timeout, the server's stop or the client
going away; a resourceVersion too old is an ERROR event (410), as on the real server."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kaiwo_kubefake.errors import ApiError
from kaiwo_kubefake.storage import ObjectStore
from kaiwo_kubefake.targets import Target, selectors, served_as, truthy


@dataclass(frozen=True, slots=True)
class ServerSettings:
    bookmark_interval: float = 1.0
    default_watch_timeout: float = 1800.0
    # How long a new kind stays out of discovery (a real server's discovery lags Established).
    discovery_lag: float = 0.0


class WatchStreams:
    """Serves ``?watch=true`` on a resource URL."""

    def __init__(self, store: ObjectStore, settings: ServerSettings) -> None:
        self.store = store
        self.settings = settings

    async def serve(self, request: web.Request, target: Target) -> web.StreamResponse:
        labels, fields = selectors(request, target)
        timeout = float(request.query.get("timeoutSeconds") or self.settings.default_watch_timeout)
        bookmarks = truthy(request.query.get("allowWatchBookmarks"))
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        try:
            watcher = self.store.watch(
                target.kind,
                namespace=target.namespace,
                labels=labels,
                fields=fields,
                resource_version=request.query.get("resourceVersion"),
            )
        except ApiError as error:
            if error.code != 410:
                raise
            await response.prepare(request)
            await _send(response, "ERROR", error.status())
            await response.write_eof()
            return response
        await response.prepare(request)
        try:
            await self._stream(
                request, response, watcher.queue, target, duration=timeout, bookmarks=bookmarks
            )
        except ConnectionResetError:
            pass  # the client went away; nothing left to tell it
        finally:
            self.store.feed.unwatch(watcher)
        return response

    async def _stream(
        self,
        request: web.Request,
        response: web.StreamResponse,
        queue: asyncio.Queue[tuple[str, dict[str, Any]] | None],
        target: Target,
        *,
        duration: float,
        bookmarks: bool,
    ) -> None:
        deadline = time.monotonic() + duration
        next_bookmark = time.monotonic() + self.settings.bookmark_interval
        while (remaining := deadline - time.monotonic()) > 0:
            wait = min(remaining, next_bookmark - time.monotonic()) if bookmarks else remaining
            try:
                # Queued events go first: waiting with a zero timeout (a bookmark due) would
                # cancel every get and starve them. Wake at least every second to notice a
                # client that has gone away.
                item = (
                    queue.get_nowait()
                    if not queue.empty()
                    else await asyncio.wait_for(queue.get(), timeout=min(max(wait, 0), 1.0))
                )
            except TimeoutError:
                if request.transport is None or request.transport.is_closing():
                    return
                if bookmarks and time.monotonic() >= next_bookmark and queue.empty():
                    await _send(response, "BOOKMARK", self._bookmark(target))
                    next_bookmark = time.monotonic() + self.settings.bookmark_interval
                continue
            if item is None:
                break
            await _send(response, item[0], served_as(target, item[1]))
        await response.write_eof()

    def _bookmark(self, target: Target) -> dict[str, Any]:
        return {
            "kind": target.kind.kind,
            "apiVersion": target.kind.api_version,
            "metadata": {"resourceVersion": str(self.store.resource_version)},
        }


async def _send(response: web.StreamResponse, event_type: str, obj: dict[str, Any]) -> None:
    line = json.dumps({"type": event_type, "object": obj}, separators=(",", ":")) + "\n"
    await response.write(line.encode())
