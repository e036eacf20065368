"""The proxied request's headers for the model server, and its answer streamed back to the
caller as it comes (both through the header filters of :mod:`kaiwo_gateway.domain.headers`),
or read whole within a limit (the messenger's answers fit in one message); and which failures
of a request to a model server left it unsent."""

from __future__ import annotations

from typing import Final

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from kaiwo_gateway.domain.headers import request_headers_for_backend, response_headers_for_caller

ANSWER_READ_CHUNK = 64 * 1024

NOT_CONNECTED: Final = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
"""The failures of a request to a model server before a byte of it was sent, so another
endpoint may have it (decisions 0023 and 0219): the connection was refused, unreachable or
not resolved (``ClientConnectorError``), or not accepted within the connect timeout
(``ConnectionTimeoutError``, which aiohttp raises only while connecting). Not every
``ServerTimeoutError``: its other kind, ``SocketTimeoutError``, is a read timeout once the
request was sent, when a completion may have started."""


def forwarded_headers(headers: CIMultiDictProxy[str], content_type: str | None) -> CIMultiDict[str]:
    forwarded = CIMultiDict(request_headers_for_backend(headers.items()))
    forwarded.popall("Content-Type", None)
    forwarded["Content-Type"] = content_type or "application/json"
    return forwarded


async def relay(request: web.Request, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
    for key, value in response_headers_for_caller(upstream.headers.items()):
        response.headers.add(key, value)
    await response.prepare(request)
    async for chunk in upstream.content.iter_any():
        await response.write(chunk)
    await response.write_eof()
    return response


async def read_limited(upstream: aiohttp.ClientResponse, limit: int) -> bytes | None:
    """The response body, or None once it passes ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in upstream.content.iter_chunked(ANSWER_READ_CHUNK):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
