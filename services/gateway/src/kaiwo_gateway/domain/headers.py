"""Which headers cross the gateway (decision 0040).

Towards a model server, a request keeps its end-to-end headers (``traceparent``,
``tracestate``, ``Accept``, ``User-Agent``, OpenAI's own) and loses:

* **credentials**: ``Authorization``, ``Proxy-Authorization``, ``Cookie`` and API key
  headers (``X-Api-Key``, ``Api-Key``, any name holding ``api-key``/``api_key``/``apikey``).
  The gateway checked the caller; the model server is a tenant's Pod and must not receive a
  token it could replay against the API server or other tenants;
* **hop-by-hop** headers (RFC 9110 §7.6.1): ``Connection`` and every header it names,
  ``Keep-Alive``, ``TE``, ``Trailer``, ``Transfer-Encoding``, ``Upgrade``,
  ``Proxy-Connection``, and ``Expect``; ``Host`` and ``Content-Length`` (the client library
  sets its own);
* **forwarding claims**: ``Forwarded``, ``X-Forwarded-*``, ``X-Real-IP``. A client can write
  anything there, and the gateway adds none: a model server has no use for the caller's
  address, which the gateway's own logs keep;
* ``X-Label-Selector``, which is the gateway's to read;
* ``Content-Encoding`` (decision 0219): aiohttp's server decodes a ``gzip`` or ``deflate``
  body (``br`` and ``zstd`` with their libraries) as it is read, so the body the gateway
  sends is the decoded one, its ``Content-Length`` set by the client library. A coding the
  gateway does not decode (:func:`undecoded_coding`) is refused before the body is read.

Towards the caller, a response loses its hop-by-hop headers and ``Set-Cookie`` (a model
server must not set cookies on the gateway's origin, which every tenant shares).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
CREDENTIALS: Final = frozenset(
    {"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"}
)
FORWARDING: Final = frozenset(
    {
        "forwarded",
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
        "x-forwarded-port",
        "x-forwarded-prefix",
        "x-real-ip",
    }
)
GATEWAY_ONLY: Final = frozenset(
    {"host", "content-length", "content-encoding", "expect", "x-label-selector"}
)
DECODED_CODINGS: Final = frozenset({"gzip", "deflate", "br", "zstd"})
"""The request codings aiohttp's server decodes (the one ``Content-Encoding`` header's whole
value, ASCII, any case). Without its library (Brotli, ``backports.zstd``), aiohttp itself
answers ``br`` or ``zstd`` with a 400 before the gateway sees the request."""
ACCEPTED_CODINGS: Final = "gzip, deflate"
"""What a refusal of an undecoded coding says is accepted (``Accept-Encoding``; RFC 9110
§15.5.16): the codings decoded whatever libraries are installed."""
SET_COOKIE: Final = frozenset({"set-cookie", "set-cookie2"})
_API_KEY_MARKS: Final = ("api-key", "api_key", "apikey")

Headers = Iterable[tuple[str, str]]


def request_headers_for_backend(headers: Headers) -> list[tuple[str, str]]:
    """The request headers a model server receives (see the module docstring)."""
    kept = list(headers)
    dropped = HOP_BY_HOP | CREDENTIALS | FORWARDING | GATEWAY_ONLY | _named_by_connection(kept)
    return [
        (name, value)
        for name, value in kept
        if name.lower() not in dropped and not _is_api_key(name.lower())
    ]


def undecoded_coding(values: Iterable[str]) -> str | None:
    """The request's ``Content-Encoding`` (``values``: every such header) when its body
    reaches the gateway still encoded, else None. None: no coding, ``identity``, or one
    coding of :data:`DECODED_CODINGS`. Anything else (``compress``, a list such as
    ``gzip, br``, two headers) aiohttp leaves as it came: sent on without the header, the
    bytes would be taken for plain ones."""
    codings = [value.strip() for value in values]
    if not codings:
        return None
    if len(codings) == 1:
        coding = codings[0]
        if not coding or (coding.isascii() and coding.lower() in {"identity", *DECODED_CODINGS}):
            return None
    return ", ".join(codings)


def response_headers_for_caller(headers: Headers) -> list[tuple[str, str]]:
    """The response headers the caller receives (``Content-Length`` stays)."""
    kept = list(headers)
    dropped = HOP_BY_HOP | SET_COOKIE | _named_by_connection(kept)
    return [(name, value) for name, value in kept if name.lower() not in dropped]


def _named_by_connection(headers: list[tuple[str, str]]) -> frozenset[str]:
    return frozenset(
        token.strip().lower()
        for name, value in headers
        if name.lower() == "connection"
        for token in value.split(",")
        if token.strip()
    )


def _is_api_key(name: str) -> bool:
    return any(mark in name for mark in _API_KEY_MARKS)
